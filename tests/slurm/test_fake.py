"""The fake Slurm's own controls: faults as typed errors/results, scheduling by priority."""

from __future__ import annotations

import pytest

from fairshare.slurm.fake_client import FakeSlurm
from fairshare.slurm.priority import Band, apply_priorities, plan_priorities, priorities_of
from fairshare.slurm.slurm_errors import SlurmCommandError, SlurmTimeout, SlurmUnavailable


class Clock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock: Clock) -> FakeSlurm:
    return FakeSlurm.dev(clock)


def test_a_stopped_controller_fails_every_call_then_recovers(fake: FakeSlurm) -> None:
    job = fake.submit("product", 1)
    fake.down = True
    for call in (
        fake.read_jobs,
        fake.read_nodes,
        lambda: fake.set_priority(job, 5),
        lambda: fake.requeue(job),
    ):
        with pytest.raises(SlurmUnavailable) as info:
            call()
        assert "Unable to contact slurm controller" in info.value.stderr
    fake.down = False
    assert [j.job_id for j in fake.read_jobs()] == [job]
    assert fake.set_priority(job, 5).ok


def test_injected_failures_and_timeouts_hit_the_next_call_only(fake: FakeSlurm) -> None:
    fake.fail_next("read_jobs", SlurmTimeout(("squeue", "--json"), 30))
    fake.fail_next("read_jobs", SlurmCommandError(("squeue", "--json"), 1, "boom"))
    with pytest.raises(SlurmTimeout):
        fake.read_jobs()
    with pytest.raises(SlurmCommandError, match="boom"):
        fake.read_jobs()
    assert fake.read_jobs() == []


def test_a_job_vanishing_between_read_and_write_is_a_result(fake: FakeSlurm) -> None:
    job = fake.submit("product", 1)
    fake.start(job)
    assert fake.read_jobs()[0].running
    fake.before_write(lambda: fake.forget(job))
    r = fake.requeue(job)
    assert (r.outcome, r.job_id, r.action) == ("vanished", job, "requeue")
    assert fake.read_jobs() == []


def test_requeue_closes_the_run_counts_a_restart_and_resets_submit(fake: FakeSlurm, clock: Clock) -> None:
    job = fake.submit("research", 8, 2)
    fake.start(job)
    clock.t += 600
    assert fake.requeue(job).ok
    j = fake.read_jobs()[0]
    assert (j.state, j.restarts, j.submit_time, j.alloc, j.reason) == ("PENDING", 1, clock.t, (), "BeginTime")
    (run,) = fake.read_runs(0, clock.t)
    assert (run.start, run.end, run.state, run.nodes) == (clock.t - 600, clock.t, "REQUEUED", ("n1", "n2"))
    assert fake.read_runs(clock.t + 1, clock.t + 2) == []


def test_a_repeated_cycle_after_a_crash_changes_nothing_twice(fake: FakeSlurm) -> None:
    """What a restarted service would redo: the same plan finds nothing to change, and a second
    requeue of the same run finds the job already pending."""
    band = Band(1_000_000, 1_000_000_000)
    jobs = [fake.submit("product", 8) for _ in range(3)]
    apply_priorities(fake, plan_priorities(jobs, priorities_of(fake.read_jobs()), band))
    assert plan_priorities(jobs, priorities_of(fake.read_jobs()), band).updates == ()
    fake.start(jobs[0])
    assert fake.requeue(jobs[0]).ok
    assert fake.requeue(jobs[0]).outcome == "not_running"
    assert fake.read_jobs()[0].restarts == 1


def test_schedule_follows_priority_with_and_without_backfill(fake: FakeSlurm) -> None:
    big = fake.submit("product", 32, 4)
    small = fake.submit("research", 1)
    fake.set_priority(big, 2_000_000)
    fake.set_priority(small, 1_000_000)
    fake.start(fake.submit("platform", 1))  # one GPU busy: the 32-GPU gang cannot start
    assert fake.schedule(backfill=False) == []  # strict order: the small job waits behind
    assert fake.schedule() == [small]  # backfill lets it through


def test_drained_nodes_take_no_new_jobs(fake: FakeSlurm) -> None:
    for n in ("n1", "n2", "n3"):
        fake.drain(n)
    a, b = fake.submit("product", 8), fake.submit("product", 8)
    assert fake.schedule() == [a]
    assert fake.read_jobs()[0].alloc[0].node == "n4"
    assert [n.name for n in fake.read_nodes() if n.drain] == ["n1", "n2", "n3"]
    assert fake.fit(b) is None


def test_nodes_report_gpus_in_use(fake: FakeSlurm) -> None:
    fake.start(fake.submit("product", 8, 2))
    states = {n.name: (n.state, n.gpus_used) for n in fake.read_nodes()}
    assert states == {"n1": ("mixed", 4), "n2": ("mixed", 4), "n3": ("idle", 0), "n4": ("idle", 0)}
    fake.start(fake.submit("product", 4), ["n1"])
    assert next(n for n in fake.read_nodes() if n.name == "n1").state == "allocated"


def test_signals_are_recorded_for_running_jobs(fake: FakeSlurm) -> None:
    job = fake.submit("product", 1)
    assert fake.signal(job, "USR1").outcome == "not_running"
    fake.start(job)
    assert fake.signal(job, "sigusr1").ok
    assert fake.signals_of(job) == ["USR1"]
    assert fake.writes[-1] == ("signal", job, "USR1")
