"""The loop against the scripted fake cluster: observations reported again and again are applied
once, a late observation is applied at the engine's last instant, a refused start is audited and decided
again, the order reaches the cluster with every pass."""

from __future__ import annotations

from fairshare.service.clusters.backend import Drained, Finished, Hung, Submitted
from fairshare.service.clusters.fake import FakeCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.storage import audit, journal
from fairshare.service.storage.store import Store

from .conftest import T0, Clock, tick

SPEC = {"group": "ops", "class": "train", "gpus": 8, "estimate": 3600.0}


def test_observations_reported_again_are_applied_once(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock
) -> None:
    loop, fake, store = fake_loop
    for k in range(3):
        fake.push(Submitted(T0 + 10 + k, f"j{k}", SPEC))
    for _ in range(4):
        tick(loop, clock, 60)
    e = loop.engine
    assert e is not None
    assert set(e.state.running) == {"j0", "j1"} and set(e.state.pending.jobs) == {"j2"}
    assert fake.acted[0][2] == ("j0", "j1") and fake.acted[0][3][:2] == ("j0", "j1")
    with store.read() as tx:
        kinds = [ev.kind for ev in journal.events(tx)]
    assert kinds.count("submit") == 3 and kinds.count("started") == 2
    fake.push(Finished(clock.t + 30, "j0"))
    tick(loop, clock, 60)
    tick(loop, clock, 60)
    assert "j0" not in e.state.running and "j2" in e.state.running
    with store.read() as tx:
        runs = journal.usage_of(tx, "j0")
    assert len(runs) == 1 and runs[0].t_to == clock.t - 90


def test_a_late_observation_is_applied_at_the_loops_instant(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock
) -> None:
    loop, fake, store = fake_loop
    fake.push(Submitted(T0 + 10, "j0", SPEC))
    tick(loop, clock, 60)
    tick(loop, clock, 600)
    e = loop.engine
    assert e is not None and "j0" in e.state.running
    fake.push(Finished(T0 + 100, "j0"), Hung(T0 + 50, "nobody"))  # reported late: it ended long ago
    last = e.t
    tick(loop, clock, 60)
    # the engine cannot go back: the finish counts from the earliest instant it still can (its last)
    assert "j0" not in e.state.running and e.info["j0"].ended == last < clock.t
    with store.read() as tx:
        assert journal.usage_of(tx, "j0")[0].t_to == last


def test_a_refused_start_is_audited_and_decided_again(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock
) -> None:
    loop, fake, store = fake_loop
    fake.refuse.add("j0")
    fake.push(Submitted(T0 + 10, "j0", SPEC))
    tick(loop, clock, 60)
    e = loop.engine
    assert e is not None and "j0" in e.state.pending.jobs
    fake.refuse.clear()
    fake.push(Submitted(clock.t + 1, "j1", SPEC))  # an event, so a pass runs
    tick(loop, clock, 60)
    assert "j0" in e.state.running
    with store.read() as tx:
        kinds = [r.decision for r in audit.query(tx, job="j0", limit=None)]
    assert kinds == ["start", "start_failed", "start"]


def test_a_late_observation_reported_again_much_later_is_not_applied_twice(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock
) -> None:
    loop, fake, store = fake_loop
    tick(loop, clock, 600)
    fake.push(Drained(T0 + 10, (1,), T0 + 7200))  # late: before the engine's last instant
    for _ in range(5):
        tick(loop, clock, 60)
    e = loop.engine
    assert e is not None and 1 in e.state.fleet.draining
    with store.read() as tx:
        assert [ev.kind for ev in journal.events(tx)].count("drain") == 1
