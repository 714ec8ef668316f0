"""Progress reports on the Slurm backend (FakeSlurm, manual clock; docs/progress.md): a job that
stops reporting is flagged no_progress and requeued so a waiting job starts; a job requeued past
protection loses the GPU time since its last reported checkpoint (within a cycle), its restart
reports resumed and its class's recovery shows it."""

from __future__ import annotations

import pytest

from fairshare.service.loop.live_service import LiveService
from fairshare.service.loop.reports import Report
from fairshare.service.storage.roles import Principal

from .slurm_helpers import Rig, rig

PROTECT = "fairshare:protect=5m,checkpoint=10m,resumable"
CYCLE = 15.0


@pytest.fixture
def db(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/fs.db"


def _report(r: Rig, job: int, kind: str, step: int) -> None:
    r.loop.inbox.put(Report(str(job), kind, step, None, "test"))


def test_a_slurm_job_that_stops_reporting_is_requeued_no_progress_for_a_waiting_job(db: str) -> None:
    with rig(db) as r:
        jobs = [r.fake.submit("research", 8, comment=PROTECT, time_limit_s=4 * 3600) for _ in range(4)]
        r.tick(schedule=False)
        r.tick()
        e = r.loop.engine
        assert e is not None and len(e.state.running) == 4
        waiting = r.fake.submit("research", 8, comment=PROTECT)  # same group: no fair-share victim
        hung, steady = jobs[0], jobs[1:]
        step = 0
        for i in range(200):  # 50 minutes of cycles; `hung` reports for 10 minutes only
            step += 10
            for j in steady:
                _report(r, j, "progress", step)
            if i < 40:
                _report(r, hung, "progress", step)
            r.tick(CYCLE)
            if str(waiting) in e.state.running:
                break
        flagged = r.records("no_progress")
        assert [f.job for f in flagged] == [str(hung)]
        assert flagged[0].evidence["last_step"] == 400 and flagged[0].evidence["max_stall_s"] == 1800.0
        preempt = next(p for p in r.records("preempt") if p.job == str(hung))
        assert preempt.evidence["reason"] == "no_progress"
        assert preempt.t - flagged[0].evidence["last_progress_t"] <= 1800.0 + CYCLE
        assert ("requeue", hung) in [(w[0], w[1]) for w in r.fake.writes]
        assert str(waiting) in e.state.running  # the freed GPUs went to the waiting job
        assert all(str(j) in e.state.running for j in steady)


def test_a_requeue_past_protection_loses_the_time_since_the_reported_checkpoint(db: str) -> None:
    with rig(db) as r:
        research = [r.fake.submit("research", 8, comment=PROTECT, time_limit_s=4 * 3600) for _ in range(4)]
        r.tick(schedule=False)
        r.tick()
        e = r.loop.engine
        assert e is not None and len(e.state.running) == 4
        # each run checkpoints once; the last one's checkpoint is the freshest
        for k, j in enumerate(research):
            _report(r, j, "progress", 100)
            r.tick(CYCLE)
            _report(r, j, "checkpoint", 100 + k)
            r.tick(CYCLE)
        ckpt_t: dict[str, float] = {}
        for j in research:
            at = e.state.running[str(j)].ckpt_at
            assert at is not None  # taken at the cycle after the job wrote it (within CYCLE)
            ckpt_t[str(j)] = at
        waiting = r.fake.submit("product", 8, comment=PROTECT)
        for _ in range(40):
            r.tick(CYCLE)
            if str(waiting) in e.state.running:
                break
        (preempt,) = [p for p in r.records("preempt") if p.job in ckpt_t]
        victim = preempt.job
        assert victim == str(research[-1])  # the freshest real checkpoint loses least
        lost_since_ckpt = (preempt.t - ckpt_t[victim]) * 8  # first start: no startup overhead here
        assert preempt.evidence["lost_gpu_s"] == pytest.approx(lost_since_ckpt)
        assert preempt.evidence["checkpoint_at"] == ckpt_t[victim]
        # the requeued job restarts once GPUs free up, and reports what it restored
        r.fake.finish(research[0])
        for _ in range(40):
            r.tick(CYCLE)
            if victim in e.state.running:
                break
        assert victim in e.state.running
        _report(r, int(victim), "resumed", 103)
        r.tick(CYCLE)
        _report(r, int(victim), "progress", 110)
        r.tick(CYCLE)
        rec = e.state.recovery_json()["train"]
        assert (rec["restarts"], rec["resumed"], rec["steps_lost"]) == (1, 1, 0)
        assert rec["restart_to_first_progress_s"] is not None


def _requeued_victim(r: Rig) -> tuple[str, int]:
    """Four research runs that checkpointed, one requeued for a product job: (the victim, a job
    still running whose end frees GPUs for the victim's restart)."""
    research = [r.fake.submit("research", 8, comment=PROTECT, time_limit_s=4 * 3600) for _ in range(4)]
    r.tick(schedule=False)
    r.tick()
    for j in research:
        _report(r, j, "checkpoint", 100)
    r.tick(CYCLE)
    waiting = r.fake.submit("product", 8, comment=PROTECT)
    e = r.loop.engine
    assert e is not None
    for _ in range(40):
        r.tick(CYCLE)
        if str(waiting) in e.state.running:
            break
    (preempt,) = r.records("preempt")
    other = next(j for j in research if str(j) != preempt.job)
    for _ in range(4):  # past Slurm's requeue delay: the victim waits, eligible
        r.tick(CYCLE, schedule=False)
    assert preempt.job in e.state.pending.jobs
    return preempt.job, other


ADMIN = Principal(0, "ops", "admin", None)


@pytest.mark.parametrize(
    "slurm_starts_it",
    [
        pytest.param("before_the_report", id="the_restart_reports_before_the_loop_read_its_start"),
        pytest.param("after_the_loops_read", id="the_report_is_taken_in_the_cycle_that_read_before_it"),
    ],
)
def test_a_restarts_resumed_report_sent_before_the_loop_saw_it_start_is_held_and_counted(
    db: str, slurm_starts_it: str
) -> None:
    with rig(db) as r:
        victim, other = _requeued_victim(r)
        e = r.loop.engine
        assert e is not None
        live = LiveService(r.store, r.loop)
        live.wait_s = 0.0  # the test cycles the loop itself
        r.fake.finish(other)
        if slurm_starts_it == "before_the_report":
            assert int(victim) in r.fake.schedule()  # Slurm restarts it; the loop has not read Slurm since
            r.loop.publish(force=True)
            assert r.loop.view.jobs[victim].state == "pending"
            answer = live.report(ADMIN, victim, "resumed", 100, None)
            assert answer["state"] == "queued"
            r.tick(CYCLE, schedule=False)  # the loop reads the start, then takes the report
        else:  # the report reaches the inbox after this cycle's read: held to the next
            r.loop.publish(force=True)
            live.report(ADMIN, victim, "resumed", 100, None)
            r.tick(CYCLE, schedule=False)
            assert victim not in e.state.running and r.loop.inbox.queue
            _report(r, int(victim), "progress", 101)  # the job's next report stays behind it
            r.tick(CYCLE)  # Slurm restarts it; the loop reads it, then takes both reports
        assert victim in e.state.running and not r.loop.inbox.queue
        rep = e.state.run_reports(victim)
        assert rep is not None and rep.resumed_from == 100
        rec = e.state.recovery_json()["train"]
        assert (rec["restarts"], rec["resumed"], rec["steps_lost"]) == (1, 1, 0)
        assert [x.job for x in r.records("resumed")] == [victim]


def test_a_report_for_a_job_that_stays_pending_is_refused_after_the_loops_next_read(db: str) -> None:
    with rig(db) as r:
        victim, _ = _requeued_victim(r)  # no GPUs free: it stays pending
        r.loop.publish(force=True)
        report = Report(victim, "resumed", 100, None, "test", early=True)
        r.loop.inbox.put(report)
        r.tick(CYCLE)
        assert not report.done.is_set()  # held: it may have come after this cycle's read
        r.tick(CYCLE)
        assert report.done.is_set() and report.error is not None
        assert "not running" in report.error
        assert not r.loop.inbox.queue and not r.records("resumed")
