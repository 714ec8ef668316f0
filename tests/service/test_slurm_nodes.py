"""The loop on SlurmCluster over FakeSlurm when sinfo's nodes change while serving: a node added
takes a waiting job, a node removed leaves service without preempting its run, a node of an unrated
GPU type is left out, the same observation twice changes nothing, a restart rebuilds the same
engine (ServingState.set_nodes; the rules: fairshare.engine.nodes)."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from fairshare.service.clusters.backend import NodesChanged
from fairshare.service.loop.live_engine import LiveEngine
from fairshare.service.storage import journal
from test_engine import _canonical

from .slurm_helpers import Rig, rig

SQLITE = "sqlite:///{}"


@pytest.fixture
def db(tmp_path: object) -> str:
    return SQLITE.format(f"{tmp_path}/fs.db")


def _engine(r: Rig) -> LiveEngine:
    e = r.loop.engine
    assert e is not None
    return e


def _full(r: Rig) -> tuple[list[int], int]:
    """Four 8-GPU jobs fill the four nodes; a fifth waits."""
    jobs = [r.fake.submit(a, 8) for a in ("research", "research", "product", "product")]
    r.tick(schedule=False)
    r.tick()
    waiting = r.fake.submit("platform", 8)
    r.tick()
    e = _engine(r)
    assert len(e.state.running) == 4 and str(waiting) in e.state.pending.jobs
    return jobs, waiting


def _journal_kinds(r: Rig) -> list[str]:
    with r.store.read() as tx:
        return [ev.kind for ev in journal.events(tx)]


def test_a_node_added_mid_run_takes_the_waiting_job(db: str) -> None:
    with rig(db) as r:
        _, waiting = _full(r)
        e = _engine(r)
        assert e.state.fleet.capacity == 32.0
        r.fake.add_node("n5")
        r.tick()  # Slurm starts the waiting job on n5 before the loop first sees n5: one cycle
        assert [n.name for n in e.state.nodes] == ["n1", "n2", "n3", "n4", "n5"]
        assert e.state.running[str(waiting)].alloc == ((4, 8),)
        assert e.state.fleet.capacity == 40.0 and not e.state.pending.jobs
        (added,) = r.records("node_added")
        assert added.evidence == {"node": "n5", "index": 4, "gpus": 8, "gpu_type": "A100"}
        assert _journal_kinds(r).count("set_nodes") == 1
        r.tick()
        r.tick()
        assert _journal_kinds(r).count("set_nodes") == 1 and len(r.records("node_added")) == 1


def test_a_node_removed_leaves_service_and_its_run_is_not_preempted(db: str) -> None:
    with rig(db) as r:
        _, waiting = _full(r)
        e = _engine(r)
        (on_n4,) = [j for j, v in e.state.running.items() if v.alloc[0][0] == 3]
        r.fake.remove_node("n4")
        r.tick()
        (removed,) = r.records("node_removed")
        assert removed.evidence == {"node": "n4", "index": 3, "running": [on_n4]}
        assert e.state.fleet.retired == {3} and not e.state.fleet.draining and on_n4 in e.state.running
        assert not [w for w in r.fake.writes if w[0] == "requeue"]
        assert e.state.fleet.capacity == 32.0  # its run still counts until it ends
        r.fake.finish(int(on_n4))
        r.tick()
        assert on_n4 not in e.state.running and e.state.fleet.capacity == 24.0
        assert str(waiting) in e.state.pending.jobs  # nowhere to go: n4 is gone
        # it comes back: at its old index, and the waiting job lands there
        r.fake.add_node("n4")
        r.tick(schedule=False)
        r.tick()
        assert e.state.fleet.retired == set() and len(e.state.nodes) == 4
        assert e.state.running[str(waiting)].alloc == ((3, 8),)
        assert [x.evidence["node"] for x in r.records("node_returned")] == ["n4"]


def test_a_node_of_an_unrated_gpu_type_is_left_out_and_noted_once(db: str) -> None:
    with rig(db) as r:
        r.tick()
        r.fake.add_node("h1", gpu_type="h100")
        r.tick()
        r.tick()
        e = _engine(r)
        assert [n.name for n in e.state.nodes] == ["n1", "n2", "n3", "n4"]
        (note,) = r.records("node_refused")
        assert note.evidence["node"] == "h1" and "no rate" in note.evidence["reason"]
        assert "set_nodes" not in _journal_kinds(r)


def test_a_drained_node_stays_drained_not_removed(db: str) -> None:
    with rig(db) as r:
        r.tick()
        r.fake.drain("n2")
        r.tick()
        e = _engine(r)
        assert set(e.state.fleet.draining) == {1} and not e.state.fleet.retired
        assert "set_nodes" not in _journal_kinds(r)


def test_a_new_node_that_is_drained_comes_in_drained(db: str) -> None:
    with rig(db) as r:
        r.tick()
        r.fake.add_node("n5")
        r.fake.drain("n5")
        r.tick()
        e = _engine(r)
        assert len(e.state.nodes) == 5 and set(e.state.fleet.draining) == {4}
        assert e.state.fleet.capacity == 32.0


def test_the_same_node_change_ingested_twice_changes_nothing(db: str) -> None:
    with rig(db) as r:
        r.tick()
        r.fake.add_node("n5")
        backend = r.loop.backend
        assert backend is not None
        e = _engine(r)
        (change,) = [o for o in backend.observe(r.loop.since, r.clock.t) if isinstance(o, NodesChanged)]
        r.tick()
        assert len(e.state.nodes) == 5
        kinds = _journal_kinds(r)
        audits, usage = [], []  # type: ignore[var-annotated]
        buf = len(r.loop.buf)
        r.loop._ingest(change, usage, audits)  # the loop skips a journaled key; the engine too
        assert audits == [] and len(r.loop.buf) == buf and len(e.state.nodes) == 5
        assert not [o for o in backend.observe(r.loop.since, r.clock.t) if isinstance(o, NodesChanged)]
        r.tick()
        assert _journal_kinds(r)[: len(kinds)] == kinds and "set_nodes" not in _journal_kinds(r)[len(kinds) :]


def test_a_restart_rebuilds_the_engine_with_its_node_changes(db: str) -> None:
    with rig(db) as r:
        _, waiting = _full(r)
        r.fake.add_node("n5")
        r.tick()
        r.fake.remove_node("n2")
        r.tick()
        live = _engine(r)
        assert len(live.state.nodes) == 5 and live.state.fleet.retired == {1}
        again = _engine_after_restart(r)
        assert again is not live
        assert again.state.nodes == live.state.nodes and again.state.fleet.retired == live.state.fleet.retired
        assert again.state.fleet.capacity == live.state.fleet.capacity
        assert _canonical(copy.deepcopy(again).state.snapshot()) == _canonical(
            copy.deepcopy(live).state.snapshot()
        )
        # and the restarted loop sees no change to make: sinfo still matches
        r.tick()
        assert _journal_kinds(r).count("set_nodes") == 2 and str(waiting) in again.state.running


def _engine_after_restart(r: Rig) -> LiveEngine:
    r.loop._reset()
    r.new_loop()
    return _engine(r)


def test_a_node_change_the_engine_refuses_is_audited_and_changes_nothing(db: str) -> None:
    with rig(db) as r:
        r.tick()
        e = _engine(r)
        buf = len(r.loop.buf)
        odd = dataclasses.replace(e.state.nodes[0], name="v1", gpu_type="V100")
        ((kind, evidence),) = e.change_nodes((*e.state.nodes, odd))
        assert kind == "nodes_refused" and "'V100' has no rate" in evidence["reason"]
        assert len(e.state.nodes) == 4 and len(r.loop.buf) == buf
