"""The loop on SlurmCluster over FakeSlurm: the cycle (submissions, starts with Slurm's allocation,
finishes, usage), priorities that Slurm follows, requeues only past protection and only when they
let the chosen job start, placement differences, unmapped accounts, dry run."""

from __future__ import annotations

import pytest

from fairshare.service.clusters.slurm_cluster import SlurmCluster
from fairshare.service.storage import journal

from .slurm_helpers import rig

SQLITE = "sqlite:///{}"
PROTECT = "fairshare:protect=5m"


@pytest.fixture
def db(tmp_path: object) -> str:
    return SQLITE.format(f"{tmp_path}/fs.db")


def test_submissions_starts_and_finishes_become_engine_events_with_usage(db: str) -> None:
    with rig(db) as r:
        a = r.fake.submit("product", 8, comment=PROTECT)
        b = r.fake.submit("research", 8, comment=PROTECT)
        r.tick(schedule=False)
        e = r.loop.engine
        assert e is not None and set(e.state.pending.jobs) == {str(a), str(b)}
        # the order reached Slurm as priorities in the band
        prios = {j.job_id: j.priority for j in r.fake.read_jobs()}
        assert all(p >= 1_000_000 for p in prios.values())
        order = [int(j) for j in r.loop.order]
        assert sorted(prios, key=lambda j: -prios[j]) == order
        r.tick()  # Slurm starts both
        assert set(e.state.running) == {str(a), str(b)}
        start = r.fake.read_runs(0, r.clock.t)[0].start
        assert e.state.running[str(a)].t0 == start + 0 or e.state.running[str(a)].t0 >= start
        r.clock.advance(100)
        r.fake.finish(a)
        r.tick()
        assert str(a) not in e.state.running and e.info[str(a)].state == "done"
        runs = [iv for iv in r.usage() if iv.job == str(a)]
        assert len(runs) == 1 and runs[0].t_to == r.clock.t - 15 and runs[0].charge_rate == 8.0
        # the same reads again change nothing
        with r.store.read() as tx:
            before = len(list(journal.events(tx)))
        r.tick()
        r.tick()
        with r.store.read() as tx:
            kinds = [ev.kind for ev in journal.events(tx)][before:]
        assert "started" not in kinds and "finished" not in kinds and "submit" not in kinds


def test_a_run_that_started_and_ended_between_two_looks_is_charged(db: str) -> None:
    with rig(db) as r:
        r.tick()
        j = r.fake.submit("platform", 4)
        r.clock.advance(5)
        r.fake.start(j)
        r.clock.advance(40)
        r.fake.finish(j)
        r.tick(schedule=False)
        runs = [iv for iv in r.usage() if iv.job == str(j)]
        assert len(runs) == 1 and runs[0].t_to is not None
        assert runs[0].t_to - runs[0].t_from == pytest.approx(40)


def test_unknown_accounts_are_reported_not_charged(db: str) -> None:
    with rig(db) as r:
        j = r.fake.submit("root", 2)
        r.tick()
        e = r.loop.engine
        assert e is not None and str(j) not in e.info
        notes = r.records("slurm_unmapped")
        assert len(notes) == 1 and "maps to no leaf" in notes[0].evidence["reason"]
        r.tick()
        assert len(r.records("slurm_unmapped")) == 1
        assert all(iv.job != str(j) for iv in r.usage())


def test_held_jobs_wait_outside_the_engine_until_released(db: str) -> None:
    with rig(db) as r:
        j = r.fake.submit("product", 8, hold=True)
        r.tick()
        e = r.loop.engine
        assert e is not None and str(j) not in e.info
        r.fake.release(j)
        r.tick(schedule=False)
        assert str(j) in e.state.pending.jobs


def test_a_requeue_waits_for_protection_and_lets_the_chosen_job_start(db: str) -> None:
    with rig(db) as r:
        research = [r.fake.submit("research", 8, comment=PROTECT) for _ in range(4)]
        r.tick(schedule=False)
        r.tick()  # research fills the 32 GPUs
        e = r.loop.engine
        assert e is not None and len(e.state.running) == 4
        r.clock.advance(30)
        waiting = r.fake.submit("product", 8, comment=PROTECT)
        for _ in range(8):  # 2 minutes: every run is still protected
            r.tick()
        assert not [w for w in r.fake.writes if w[0] == "requeue"]
        assert str(waiting) in e.state.pending.jobs
        for _ in range(20):  # 5 more minutes
            r.tick()
        requeues = [w for w in r.fake.writes if w[0] == "requeue"]
        assert len(requeues) == 1
        victim = requeues[0][1]
        assert victim in research
        # the requeue happened after the victim's protected window
        run = next(x for x in r.fake.read_runs(0, r.clock.t) if x.job_id == victim and x.state == "REQUEUED")
        assert run.end is not None and run.end - run.start >= 300
        assert str(waiting) in e.state.running  # Slurm started the chosen job on the freed GPUs
        kinds = r.kinds(str(victim))
        assert "preempt" in kinds and "requeue" in kinds
        assert e.info[str(victim)].preemptions == 1


def test_dry_run_changes_nothing_in_slurm_and_audits_what_it_would_do(db: str) -> None:
    with rig(db, dry_run=True) as r:
        for _ in range(4):
            r.fake.submit("research", 8, comment=PROTECT)
        r.tick(schedule=False)
        for j in list(r.fake.jobs):
            r.fake.start(j)
        r.tick()
        r.clock.advance(30)
        r.fake.submit("product", 8, comment=PROTECT)
        for _ in range(30):
            r.tick()
        assert r.fake.writes == []  # no scontrol update, no requeue
        pr = r.records("priorities")
        assert pr and all(x.evidence["dry_run"] for x in pr)
        rq = r.records("requeue")
        assert rq and all(x.evidence["dry_run"] for x in rq)
        e = r.loop.engine
        assert e is not None and len(e.state.running) == 4


def test_a_placement_other_than_the_cores_is_recorded(db: str) -> None:
    with rig(db) as r:
        j = r.fake.submit("product", 8)
        r.tick(schedule=False)  # the core chose n1
        r.clock.advance(5)
        r.fake.start(j, ["n3"])
        r.tick(schedule=False)
        diff = r.records("placement_differs")
        assert len(diff) == 1 and diff[0].evidence["slurm"] == ["n3"] and diff[0].evidence["core"] == ["n1"]


def test_what_the_actions_keep_about_a_job_ends_with_the_job(db: str) -> None:
    # the core decides starts that Slurm never makes (the jobs are cancelled and purged first):
    # what the actions side keeps for the placement notes goes with them, cycle after cycle
    with rig(db) as r:
        for _ in range(5):
            jobs = [r.fake.submit("product", 8) for _ in range(2)]
            r.tick(schedule=False)  # the core chose their nodes
            backend = r.loop.backend
            assert isinstance(backend, SlurmCluster)
            assert {str(j) for j in jobs} <= set(backend.actions.intended)
            for j in jobs:
                r.fake.forget(j)
            # the engine keeps them for the grace accounting may need, then cancels them
            for _ in range(int(r.options.grace_s // 15) + 2):
                r.tick(schedule=False)
            assert not set(backend.actions.intended) & {str(j) for j in jobs}
        last = r.loop.backend
        assert isinstance(last, SlurmCluster) and last.actions.intended == {}


def test_what_the_cluster_side_notes_about_a_job_ends_with_the_job(db: str) -> None:
    # unmapped jobs are noted once while Slurm lists them; once purged, the note's key and the
    # first submit seen go with them, cycle after cycle, and a job still listed is not noted again
    with rig(db) as r:
        kept = r.fake.submit("root", 1)
        for cycle in range(1, 6):
            jobs = [r.fake.submit("root", 2), r.fake.submit("product", 1)]
            r.tick(schedule=False)
            backend = r.loop.backend
            assert isinstance(backend, SlurmCluster)
            assert f"unmapped:{jobs[0]}" in backend.noted and str(jobs[1]) in backend.first_submit
            for j in jobs:
                r.fake.forget(j)
            for _ in range(int(r.options.grace_s // 15) + 2):
                r.tick(schedule=False)
            gone = {str(j) for j in jobs}
            assert not gone & set(backend.noted.values()) and not gone & set(backend.first_submit)
            assert f"unmapped:{kept}" in backend.noted
            assert len(r.records("slurm_unmapped")) == cycle + 1  # each job once, `kept` once


@pytest.mark.parametrize(
    "held_cycles",
    [pytest.param(1, id="held_for_one_cycle"), pytest.param(4, id="held_for_several_cycles")],
)
def test_a_requeued_job_held_by_its_begin_time_is_decided_to_start_once_it_may_run(
    db: str, held_cycles: int
) -> None:
    with rig(db) as r:
        r.fake.requeue_delay_s = 5.0 * held_cycles + 3.0  # Slurm's begin time after a requeue
        research = [r.fake.submit("research", 8, comment=PROTECT) for _ in range(4)]
        r.tick(schedule=False)
        r.tick()
        e = r.loop.engine
        assert e is not None and len(e.state.running) == 4
        r.clock.advance(30)
        r.fake.submit("product", 8, comment=PROTECT)
        for _ in range(40):
            r.tick()
            if [w for w in r.fake.writes if w[0] == "requeue"]:
                break
        victim = next(w[1] for w in r.fake.writes if w[0] == "requeue")
        starts_before = [x for x in r.records("start") if x.job == str(victim)]
        r.fake.finish(next(j for j in research if j != victim))  # GPUs free for the victim
        for _ in range(held_cycles):  # Slurm holds the victim back; a pass every cycle
            r.loop.retry = True
            r.tick(5.0, schedule=False)
            (held,) = [j for j in r.fake.read_jobs() if j.job_id == victim]
            assert (held.state, held.reason) == ("PENDING", "BeginTime")
        r.tick(5.0, schedule=False)  # past its begin time: the loop's pass decides its start
        assert [j.reason for j in r.fake.read_jobs() if j.job_id == victim] == ["Priority"]
        r.tick(5.0)  # Slurm starts it
        assert str(victim) in e.state.running
        starts = [x for x in r.records("start") if x.job == str(victim)][len(starts_before) :]
        assert len(starts) == 1  # one decision for the one restart
        assert starts[0].t >= r.fake.runs[-1].start - 5.0  # decided once Slurm let it run
        assert e.info[str(victim)].runs == 2
        with r.store.read() as tx:
            restarts = [
                ev
                for ev in journal.events(tx)
                if ev.kind == "started" and ev.payload["args"][0] == str(victim)
            ]
        assert len(restarts) == 2
