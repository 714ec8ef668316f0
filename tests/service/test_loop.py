"""The scheduler loop: write-ahead cycles against the demo cluster, rebuild from the journal,
crash points, a reader that follows and takes over, policy and exception changes; both backends."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fairshare.service.clusters.demo import DemoCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.options import LoopOptions
from fairshare.service.loop.requests import CrashPoints
from fairshare.service.service_errors import Conflict
from fairshare.service.storage import audit, portfolio
from fairshare.service.storage.store import Store

from .live_helpers import EPOCH, ManualClock, check_invariants, make_loop, rebuild, small_scenario, view_of


def run(loop: SchedulerLoop, clock: ManualClock, seconds: float, step: float = 300.0) -> None:
    end = clock.t + seconds
    while clock.t < end:
        clock.t = min(end, clock.t + step)
        loop.cycle()


def test_the_loop_schedules_the_demo_cluster_and_a_rebuild_equals_it(db_url: str) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock)
        run(loop, clock, 20 * 3600)
        e = loop.engine
        assert e is not None
        assert loop.passes > 20
        assert sum(1 for r in e.info.values() if r.state == "done") > 20
        assert e.state.running or e.state.pending.jobs
        counts = check_invariants(store, e)
        assert counts["runs"] > 20
        again = rebuild(store)
        assert again.t == e.t
        assert np.array_equal(again.state.ledger.sums, e.state.ledger.sums)
        assert np.array_equal(again.unallocated.ledger.sums, e.unallocated.ledger.sums)
        assert set(again.state.pending.jobs) == set(e.state.pending.jobs) and set(again.state.running) == set(
            e.state.running
        )
        assert again.state.timers == e.state.timers and again.state.last_hold == e.state.last_hold
        assert {k: v.state for k, v in again.info.items()} == {k: v.state for k, v in e.info.items()}
        # the hung job was preempted by the watchdog (the cluster's truth reached the engine as a hang)
        with store.read() as tx:
            preempts = audit.query(tx, decision="preempt", limit=None)
        assert any(r.evidence.get("reason") == "no_progress" for r in preempts)
        loop._reset()


class Boom(Exception):
    pass


class RaisingCrash(CrashPoints):
    """In-process stand-in for SIGKILL: `error` raised the nth time the loop reaches the point (the
    loop object is then dropped). A BaseException gets past the loop's own `except Exception`s."""

    def __init__(self, point: str, nth: int, error: type[BaseException] = Boom) -> None:
        super().__init__(None)
        self.point, self.left, self.error = point, nth, error

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.left -= 1
            if self.left == 0:
                raise self.error(point)


@pytest.mark.parametrize("point", ["mid_commit", "after_commit", "after_act"])
def test_a_crash_at_each_point_loses_nothing_and_starts_nothing_twice(db_url: str, point: str) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        for round_ in range(6):
            loop = make_loop(store, scenario, clock, crash=RaisingCrash(point, 2 + round_))
            with pytest.raises(Boom):
                run(loop, clock, 12 * 3600, step=600)
            loop._reset()  # the process is gone: its lock with it
        loop = make_loop(store, scenario, clock)
        run(loop, clock, 3600, step=600)
        assert loop.engine is not None
        counts = check_invariants(store, loop.engine)
        assert counts["runs"] > 10
        again = rebuild(store)
        assert np.array_equal(again.state.ledger.sums, loop.engine.state.ledger.sums)
        loop._reset()


def test_the_cluster_refuses_to_start_a_running_job_again(tmp_path: object, clock: object) -> None:
    c = ManualClock()
    scenario = small_scenario()
    with Store.open(f"sqlite:///{tmp_path}/x.db", c) as store:
        loop = make_loop(store, scenario, c)
        run(loop, c, 3 * 3600)
        backend = loop.backend
        assert isinstance(backend, DemoCluster) and loop.engine is not None
        jid, view = next(iter(loop.engine.state.running.items()))
        from fairshare.core.snapshot import Start

        out = backend.act((), (Start(jid, view.alloc, view.charge, {}),), (), c.t)
        assert out.confirmed == [] and "already running" in out.failed[0].reason
        loop._reset()


def test_a_second_loop_follows_the_journal_and_takes_over(tmp_path: object) -> None:
    c = ManualClock()
    scenario = small_scenario()
    url = f"sqlite:///{tmp_path}/x.db"
    with Store.open(url, c) as store, Store.open(url, c) as store2:
        writer = make_loop(store, scenario, c)
        run(writer, c, 6 * 3600)
        reader = SchedulerLoop(
            store2, lambda: DemoCluster(store2, scenario, reader.resolve_submission), c, LoopOptions(speed=0)
        )
        assert not reader.take_lock() and "holds the writer lock" in (reader.holder or "")
        assert reader.catch_up()
        reader.role = "reader"
        reader.publish(force=True)
        assert writer.engine is not None and reader.engine is not None
        assert reader.engine.t == writer.engine.t
        assert np.array_equal(reader.engine.state.ledger.sums, writer.engine.state.ledger.sums)
        assert reader.view.role == "reader"
        run(writer, c, 3600)
        reader.catch_up()
        assert set(reader.engine.state.running) == set(writer.engine.state.running)
        writer._reset()  # the writer stops: the reader takes the lock and schedules on
        assert reader.take_lock()
        reader.become_writer()
        run(reader, c, 3 * 3600)
        check_invariants(store2, reader.engine)
        reader._reset()


def test_policy_changes_apply_from_the_next_pass_a_new_tree_included_and_are_audited(db_url: str) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock)
        run(loop, clock, 3600)
        assert loop.engine is not None
        text = scenario.policy_text.replace("share: 40", "share: 80")
        with store.write() as tx:
            v, _, changed = portfolio.put_policy(tx, text, "test", "ops doubles")
        assert changed
        run(loop, clock, 600)
        e = loop.engine
        assert e.policy_sha == v.sha256
        ops = e.state.tree.index()["ops"]
        assert e.state.tree.share[ops] == 80
        run(loop, clock, 5 * 3600)
        # a new tree (ops renamed infra): applied from the next pass, whatever waits or runs in ops
        pending_ops = {j for j, job in e.state.pending.jobs.items() if job.group == "ops"}
        running_ops = {j for j, r in e.state.running.items() if r.job.group == "ops"}
        assert pending_ops or running_ops
        vision = e.state.tree.index()["ml/vision"]
        with store.write() as tx:
            v2, _, _ = portfolio.put_policy(tx, text.replace("name: ops", "name: infra"), "test", "rename")
        clock.t += 1.0
        loop.cycle()
        assert e.policy_sha == v2.sha256 and loop.policy_note is None
        assert "infra" in e.state.tree.index() and "ops" not in e.state.tree.index()
        assert e.state.tree.index()["ml/vision"] == vision
        assert not pending_ops & set(e.state.pending.jobs)  # cancelled, with the reason
        assert running_ops <= set(e.state.running) | {j for j, r in e.info.items() if r.state == "done"}
        with store.read() as tx:
            records = audit.query(tx, limit=None)
        applied = [r for r in records if r.decision == "policy_applied" and r.evidence["sha256"] == v2.sha256]
        assert len(applied) == 1 and "the tree changes" in applied[0].evidence["changes"][0]
        cancelled = {r.job: r.evidence["reason"] for r in records if r.decision == "policy_cancelled"}
        assert cancelled == dict.fromkeys(pending_ops, "leaf_removed")
        recharged = {r.job: r.evidence["charged_to"] for r in records if r.decision == "policy_recharged"}
        assert recharged == dict.fromkeys(running_ops)  # ops was top-level: no ancestor survives
        assert "policy_not_applied" not in {r.decision for r in records}
        run(loop, clock, 3 * 3600)  # the loop goes on: ops's runs end, infra is scheduled
        assert not e.state.detached
        again = rebuild(store)
        assert again.policy_sha == v2.sha256 and again.state.tree == e.state.tree
        assert np.array_equal(again.state.ledger.sums, e.state.ledger.sums)
        assert np.array_equal(again.unallocated.ledger.sums, e.unallocated.ledger.sums)
        assert again.state.timers == e.state.timers and set(again.state.pending.jobs) == set(
            e.state.pending.jobs
        )
        assert {k: v.state for k, v in again.info.items()} == {k: v.state for k, v in e.info.items()}
        loop._reset()


def test_an_exception_applies_at_once_and_stops_at_its_expiry(db_url: str) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock)
        run(loop, clock, 3600)
        with store.write() as tx:
            ex = portfolio.create_exception(tx, "ml/nlp", 50.0, clock.t + 7200, "cto", "launch", "admin")
        run(loop, clock, 300)
        e = loop.engine
        assert e is not None
        nlp = e.state.tree.index()["ml/nlp"]
        assert e.state.shares[nlp] == 50 + 50
        v = view_of(e, clock.t)
        nlp_row, vision_row = v.node("ml/nlp"), v.node("ml/vision")
        assert nlp_row is not None and vision_row is not None
        assert nlp_row.effective_share > vision_row.effective_share
        run(loop, clock, 3 * 3600)
        assert e.state.shares[nlp] == 50
        with store.read() as tx:
            recs = {r.decision: r for r in audit.query(tx, limit=None)}
        assert recs["exception_applied"].evidence["id"] == f"api:{ex.id}"
        assert recs["exception_expired"].t == pytest.approx(ex.expires_t)
        loop._reset()


def test_submissions_and_cancellations_through_the_cluster(tmp_path: object) -> None:
    c = ManualClock()
    scenario = small_scenario(jobs=4)
    with Store.open(f"sqlite:///{tmp_path}/x.db", c) as store:
        loop = make_loop(store, scenario, c)
        run(loop, c, 600)
        backend = loop.backend
        assert isinstance(backend, DemoCluster) and loop.engine is not None
        spec = {"group": "ops", "class": "train", "gpus": 8, "estimate": 7200.0, "work": 7200.0}
        backend.submit("big-1", spec, c.t)
        backend.submit("big-2", spec, c.t)
        backend.submit("big-3", spec, c.t)
        with pytest.raises(Conflict):
            backend.submit("big-1", spec, c.t)
        run(loop, c, 60, step=60)
        e = loop.engine
        assert "big-1" in e.state.running and "big-3" in e.state.pending.jobs
        backend.cancel("big-3", c.t, "me")
        backend.cancel("big-1", c.t, "me")
        run(loop, c, 60, step=60)
        assert e.info["big-3"].state == "cancelled" and "big-3" not in e.state.pending.jobs
        assert e.info["big-1"].state == "cancelled" and "big-1" not in e.state.running
        bad = {"group": "nowhere", "class": "train", "gpus": 1, "estimate": 60.0}
        backend.build_job = lambda *a: None  # type: ignore[assignment]  # the cluster takes anything
        backend.submit("bad-1", bad, c.t)
        run(loop, c, 60, step=60)
        assert "bad-1" in e.rejected and "no group 'nowhere'" in e.rejected["bad-1"]
        check_invariants(store, e)
        again = rebuild(store)
        assert again.info["big-3"].state == "cancelled" and "bad-1" in again.rejected
        loop._reset()


def test_the_clock_continues_from_the_database_and_rebases_on_a_new_speed(tmp_path: object) -> None:
    from fairshare.service.storage.clock_state import scaled_clock

    wall = [1000.0]
    with Store.open(f"sqlite:///{tmp_path}/x.db", lambda: 0.0) as store:
        with store.write() as tx:
            c1 = scaled_clock(tx, EPOCH, 600.0, lambda: wall[0])
        wall[0] += 10
        assert c1() == EPOCH + 6000
        with store.write() as tx:
            c2 = scaled_clock(tx, 0.0, 600.0, lambda: wall[0])
        assert c2() == EPOCH + 6000
        with store.write() as tx:
            c3 = scaled_clock(tx, 0.0, 60.0, lambda: wall[0])
        wall[0] += 1
        assert math.isclose(c3(), EPOCH + 6060)


@pytest.mark.parametrize(
    ("stale", "builds"),
    [
        pytest.param(False, 1, id="resolved-once-when-the-policy-is-the-same"),
        pytest.param(True, 2, id="resolved-again-when-the-policy-changed-since"),
    ],
)
def test_an_api_submission_is_resolved_once_and_the_loop_takes_its_request(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, stale: bool, builds: int
) -> None:
    import dataclasses

    from fairshare.service.loop.requests import Requests

    built: list[str] = []
    real = Requests.build

    def counting(self: Requests, *args: object, **kw: object) -> object:
        built.append(str(args[1]))
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Requests, "build", counting)
    c = ManualClock()
    with Store.open(f"sqlite:///{tmp_path}/x.db", c) as store:
        loop = make_loop(store, small_scenario(jobs=4), c)
        run(loop, c, 600)
        backend, e = loop.backend, loop.engine
        assert isinstance(backend, DemoCluster) and e is not None
        spec = {"group": "ops", "class": "train", "gpus": 8, "estimate": 7200.0, "work": 7200.0}
        backend.submit("api-1", spec, c.t)
        resolved = backend.api_resolved["api-1"]
        if stale:  # as if a new policy version had come in between
            backend.api_resolved["api-1"] = dataclasses.replace(resolved, policy_sha="0" * 64)
        run(loop, c, 60, step=60)
        assert built.count("api-1") == builds
        got = e.info["api-1"].request
        assert got == dataclasses.replace(resolved.job.request, submit=got.submit, seq=got.seq)
        loop._reset()
