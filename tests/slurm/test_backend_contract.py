"""The backend's behaviour, the same cases on the fake (fast) and on a real Slurm 22.05 (slow).

What a driver can rely on: reads in Slurm's terms; per-job outcomes (applied, vanished, held,
not_running, refused) for every write, never an exception for a job that went away.
"""

from __future__ import annotations

import pytest

from fairshare.slurm.fake_client import COMPUTED_PRIORITY

from .harness import NEVER_A_JOB, Harness, wait_for

BAND_PRIORITY = 500_000_000


def test_nodes_are_four_with_eight_a100_each(slurm: Harness) -> None:
    nodes = slurm.backend.read_nodes()
    assert [n.name for n in nodes] == ["n1", "n2", "n3", "n4"]
    assert all(n.gpus == 8 and n.gpu_types == ("a100",) and n.partitions == ("gpu",) for n in nodes)
    assert not any(n.drain or n.down for n in nodes)


def test_a_running_gang_reports_its_allocation_per_node(slurm: Harness) -> None:
    job = slurm.running("research", 4, nodes=2, comment="fairshare:protect=30m", qos="train")
    j = slurm.job(job)
    assert j is not None and j.state == "RUNNING" and j.start_time is not None
    assert (j.account, j.qos, j.comment, j.gpus, j.nodes) == (
        "research",
        "train",
        "fairshare:protect=30m",
        8,
        2,
    )
    assert len(j.alloc) == 2 and [a.gpus for a in j.alloc] == [4, 4]
    assert all(a.gpu_type == "a100" for a in j.alloc)
    nodes = {n.name: n for n in slurm.backend.read_nodes()}
    assert all(nodes[a.node].gpus_used >= 4 for a in j.alloc)


def test_a_pending_job_takes_a_priority_and_keeps_it(slurm: Harness) -> None:
    job = slurm.pending("platform")
    r = slurm.backend.set_priority(job, BAND_PRIORITY)
    assert (r.outcome, r.action, r.job_id) == ("applied", "priority", job)
    j = slurm.job(job)
    assert j is not None and j.priority == BAND_PRIORITY and j.pending and not j.held


def test_a_held_job_refuses_a_priority_and_release_resets_it_to_the_computed_value(slurm: Harness) -> None:
    job = slurm.pending("platform")
    assert slurm.backend.set_priority(job, BAND_PRIORITY).ok
    assert slurm.backend.hold(job).ok
    j = slurm.job(job)
    assert j is not None and j.held and j.priority == 0
    r = slurm.backend.set_priority(job, BAND_PRIORITY + 1)
    assert r.outcome == "held" and "held state" in r.detail
    assert slurm.backend.release(job).ok
    j = slurm.job(job)
    assert j is not None and not j.held and 0 < j.priority < BAND_PRIORITY
    if slurm.name == "fake":
        assert j.priority == COMPUTED_PRIORITY


def test_a_user_held_job_is_held_from_submission(slurm: Harness) -> None:
    job = slurm.held("product")
    assert slurm.backend.set_priority(job, BAND_PRIORITY).outcome == "held"


def test_requeue_of_a_running_job_makes_it_pending_again_with_its_priority_and_a_closed_run(
    slurm: Harness,
) -> None:
    job = slurm.running("product")
    assert slurm.backend.set_priority(job, BAND_PRIORITY).ok  # an admin priority survives requeue
    r = slurm.backend.requeue(job)
    assert r.outcome == "applied"

    def requeued() -> bool:
        j = slurm.job(job)
        return j is not None and j.state == "PENDING" and j.restarts == 1

    wait_for(f"job {job} requeued", requeued, timeout=20)
    j = slurm.job(job)
    assert j is not None and j.priority == BAND_PRIORITY and j.alloc == ()
    slurm.wait_runs(job, 1)
    (run,) = [x for x in slurm.backend.read_runs(0, 4e9) if x.job_id == job]
    assert run.end is not None and run.end >= run.start and run.state == "REQUEUED" and run.gpus == 1


def test_requeue_and_signal_need_a_running_job(slurm: Harness) -> None:
    job = slurm.pending("product")
    assert slurm.backend.requeue(job).outcome == "not_running"
    assert slurm.backend.signal(job, "USR1").outcome == "not_running"
    j = slurm.job(job)
    assert j is not None and j.pending and j.restarts == 0


def test_a_job_submitted_with_no_requeue_refuses_requeue(slurm: Harness) -> None:
    job = slurm.running("product", requeue=False)
    r = slurm.backend.requeue(job)
    assert r.outcome == "refused"
    j = slurm.job(job)
    assert j is not None and j.state == "RUNNING"


def test_signal_reaches_a_running_job(slurm: Harness) -> None:
    job = slurm.running("product")
    assert slurm.backend.signal(job, "USR2", batch_only=True).ok


@pytest.mark.parametrize("action", ["priority", "hold", "release", "requeue", "signal"])
def test_a_job_slurm_never_knew_vanished(slurm: Harness, action: str) -> None:
    b = slurm.backend
    calls = {
        "priority": lambda: b.set_priority(NEVER_A_JOB, BAND_PRIORITY),
        "hold": lambda: b.hold(NEVER_A_JOB),
        "release": lambda: b.release(NEVER_A_JOB),
        "requeue": lambda: b.requeue(NEVER_A_JOB),
        "signal": lambda: b.signal(NEVER_A_JOB, "USR1"),
    }
    r = calls[action]()
    assert (r.outcome, r.job_id) == ("vanished", NEVER_A_JOB)


def test_a_job_that_ended_between_read_and_write(slurm: Harness) -> None:
    job = slurm.running("product")
    seen = slurm.job(job)
    assert seen is not None and seen.running  # the read
    slurm_end(slurm, job)  # ... it ends before the writes
    assert slurm.backend.requeue(job).outcome == "vanished"  # and is not run again
    assert slurm.backend.hold(job).outcome == "vanished"
    assert slurm.backend.signal(job, "USR1").outcome in ("vanished", "not_running")
    assert slurm.backend.set_priority(job, BAND_PRIORITY).outcome == "vanished"  # ESLURM_JOB_FINISHED
    assert slurm.job(job) is None


def slurm_end(slurm: Harness, job: int) -> None:
    if slurm.name == "fake":
        slurm.fake.finish(job, "CANCELLED")  # type: ignore[attr-defined]
    else:
        slurm.sh("scancel", str(job))  # type: ignore[attr-defined]
        wait_for(f"job {job} to end", lambda: slurm.job(job) is None)
