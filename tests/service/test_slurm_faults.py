"""Faults of a Slurm cycle, on FakeSlurm: slurmctld down or restarting mid-cycle, a command failing
or timing out, a job vanishing between the read and the write, the service killed at each point of
its cycle and restarted. After each: no double charge, no lost usage, no requeue inside a protected
window, no crash loop (the loop keeps its state and lock and retries with backoff)."""

from __future__ import annotations

import math
import threading
import time

import pytest

from fairshare.service.loop.options import LoopOptions
from fairshare.service.service_errors import ClusterUnavailable
from fairshare.service.storage import audit, journal
from fairshare.slurm.slurm_errors import SlurmTimeout, SlurmUnavailable

from .live_helpers import view_of
from .slurm_helpers import Rig, rig
from .test_loop import Boom, RaisingCrash

PROTECT = "fairshare:protect=5m"
DOWN = SlurmUnavailable(("scontrol",), 1, "Unable to contact slurm controller (connect failure)")


@pytest.fixture
def db(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/fs.db"


def journal_kinds(r: Rig) -> list[str]:
    with r.store.read() as tx:
        return [ev.kind for ev in journal.events(tx)]


def saturate(r: Rig) -> list[int]:
    """research fills the 32 GPUs (protected 5 minutes), then product waits for 8."""
    jobs = [r.fake.submit("research", 8, comment=PROTECT) for _ in range(4)]
    r.tick(schedule=False)
    r.tick()
    r.clock.advance(30)
    jobs.append(r.fake.submit("product", 8, comment=PROTECT))
    return jobs


def check_usage(r: Rig) -> None:
    """Every Slurm run is charged once, from its start to its end (within one interval), and
    no run was requeued inside its protected window."""
    usage = r.usage()
    keys = [(iv.job, iv.t_from) for iv in usage]
    assert len(keys) == len(set(keys))
    runs = r.fake.read_runs(0, r.clock.t)
    assert len(usage) == len(runs)
    for run in runs:
        mine = [
            iv for iv in usage if iv.job == str(run.job_id) and run.start <= iv.t_from <= run.start + 15.5
        ]
        assert len(mine) == 1, (run, usage)
        if run.end is not None:
            assert mine[0].t_to is not None and abs(mine[0].t_to - run.end) <= 15.5
        if run.state == "REQUEUED":
            assert run.end is not None and run.end - run.start >= 300
    started = journal_kinds(r).count("started")
    assert started == len(runs)


def test_slurmctld_down_while_reading_skips_the_cycle_and_changes_nothing(db: str) -> None:
    with rig(db) as r:
        saturate(r)
        before = journal_kinds(r)
        r.fake.down = True
        r.clock.advance(15)
        with pytest.raises(ClusterUnavailable):
            r.loop.cycle()
        assert journal_kinds(r) == before
        r.fake.down = False  # restarted: the state (and admin priorities) kept
        for _ in range(30):
            r.tick()
        check_usage(r)
        check_ledger(r)
        assert [w for w in r.fake.writes if w[0] == "requeue"]


def test_slurmctld_down_while_writing_priorities_is_retried_next_cycle(db: str) -> None:
    with rig(db) as r:
        r.tick()
        r.fake.submit("product", 8)
        r.fake.submit("research", 8)
        r.fake.fail_next("set_priority", DOWN)
        r.tick(schedule=False)
        assert r.records("priorities_failed")
        assert any(j.priority < 1_000_000 for j in r.fake.read_jobs())
        r.tick(schedule=False)  # no new event: the loop passes again because the last was not taken
        assert all(j.priority >= 1_000_000 for j in r.fake.read_jobs())


def test_a_command_timing_out_skips_the_cycle(db: str) -> None:
    with rig(db) as r:
        saturate(r)
        r.fake.fail_next("read_runs", SlurmTimeout(("sacct",), 120.0))
        r.clock.advance(15)
        with pytest.raises(ClusterUnavailable, match="timed out"):
            r.loop.cycle()
        for _ in range(30):
            r.tick()
        check_usage(r)


def test_a_requeue_failing_is_audited_and_the_next_pass_tries_again(db: str) -> None:
    with rig(db) as r:
        saturate(r)
        for _ in range(16):  # protection ends at 5 minutes
            r.tick()
        r.fake.fail_next("requeue", DOWN)
        for _ in range(6):
            r.tick()
        assert "preempt_failed" in r.kinds()
        for _ in range(6):
            r.tick()
        e = r.loop.engine
        assert e is not None and str(5) in e.state.running
        check_usage(r)


def test_a_victim_vanishing_between_read_and_requeue(db: str) -> None:
    with rig(db) as r:
        saturate(r)
        for _ in range(16):  # protection ends at 5 minutes
            r.tick()

        def vanish() -> None:  # the victim is cancelled and purged after the pass chose it
            victim = next(j for j in r.fake.jobs if r.fake.jobs[j].job.running)
            r.fake.forget(victim)

        r.fake.before_write(vanish)
        for _ in range(10):
            r.tick()
        e = r.loop.engine
        assert e is not None
        assert str(5) in e.state.running  # the freed GPUs went to the waiting job
        (requeue,) = r.records("requeue")
        assert requeue.evidence["result"] == "vanished"
        assert "preempt_failed" in r.kinds(requeue.job)
        assert journal_kinds(r).count("cancelled") == 1 and journal_kinds(r).count("preempted") == 0
        check_usage(r)


@pytest.mark.parametrize("point", ["mid_commit", "after_commit", "after_act"])
def test_killed_at_each_point_and_restarted_charges_nothing_twice(db: str, point: str) -> None:
    with rig(db) as r:
        jobs = saturate(r)
        for nth in range(1, 5):
            r.loop._reset()  # the process dies (with it the lock); a new one starts
            r.new_loop(crash=RaisingCrash(point, nth))
            with pytest.raises(Boom):
                for _ in range(40):
                    r.tick()
            # more work arrives while it is down
            r.fake.submit("platform", 4, comment=PROTECT)
            r.clock.advance(60)
            r.fake.schedule()
            for j in jobs[:1]:
                if r.fake.jobs[j].job.running:
                    r.fake.finish(j)
        r.loop._reset()
        r.new_loop()
        for _ in range(40):
            r.tick()
        check_usage(r)
        e = r.loop.engine
        assert e is not None
        check_ledger(r)


def check_ledger(r: Rig) -> None:
    """The chain verifies, and the ledger's delivered usage equals the stored intervals."""
    e = r.loop.engine
    assert e is not None
    with r.store.read(snapshot=True) as tx:
        assert audit.verify(tx).ok
    ledger = view_of(e, e.t)
    leaf_of = {row.path: i for i, row in enumerate(ledger.tree)}
    charged = [0.0] * len(ledger.tree)
    for iv in r.usage():
        for anc in e.state.tree.leaf_ancestors[leaf_of[iv.leaf]]:
            charged[anc] += iv.charged(-math.inf, e.t)
    for row, c in zip(ledger.tree, charged, strict=True):
        assert math.isclose(row.delivered_s, c, rel_tol=1e-9, abs_tol=1e-6), (row.path, row.delivered_s, c)


def test_an_unreachable_slurm_does_not_crash_loop_the_service(db: str) -> None:
    with rig(db) as r:
        saturate(r)
        loop = r.loop
        loop.opt = LoopOptions(speed=0, forecast_s=3600.0, publish_s=3600.0, poll_s=0.05, retry_max_s=0.2)
        r.fake.down = True
        stop = threading.Event()
        th = threading.Thread(target=loop.run, args=(stop,))
        th.start()
        try:
            time.sleep(1.5)
            assert loop.role == "writer" and loop.lock is not None and loop.engine is not None
            assert loop.unavailable >= 3 and "unavailable" in (loop.error or "")
            r.fake.down = False
            time.sleep(0.5)
            assert loop.unavailable == 0 and loop.error is None
        finally:
            stop.set()
            th.join()
