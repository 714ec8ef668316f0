"""Nodes that change while the engine serves (ServingState.set_nodes; the rules:
fairshare.engine.nodes): added, removed, back, changed, of a new GPU type; rebuilt from the journal."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from fairshare.core import Knobs, Node, TreeIndex, decide, get_strategy
from fairshare.engine import EngineSetup, Event, ServingState
from test_engine import Group, _canonical, _internals, request


def node(name: str, gpus: int = 8, gpu_type: str = "H100", block: str = "b0") -> Node:
    return Node(name, "n", gpus, gpu_type, 8.0 * gpus, 64.0 * gpus, block)


N0, N1, N2 = node("n0"), node("n1"), node("n2")
A100 = node("g0", 4, "A100")


def engine(nodes: tuple[Node, ...], journal: list[Event] | None = None, **rates: float) -> ServingState:
    tree = TreeIndex.build([Group("a", 50), Group("b", 50)])
    setup = EngineSetup(tree, Knobs(), rates or {"H100": 1.0, "A100": 0.5}, nodes, 7 * 86400.0)
    return ServingState(setup, get_strategy("fairshare"), journal=journal)


def run_pass(e: ServingState) -> list[tuple[str, str, tuple[int, ...]]]:
    """One pass at the engine's instant, carried out at once: (decision, job, node indexes)."""
    e.settle()
    if not e.pass_due():
        return []
    actions = e.apply(decide(e.snapshot(), e.strategy))
    did: list[tuple[str, str, tuple[int, ...]]] = []
    for p in actions.preempts:
        e.preempted(p.job, p.reason, p.by, p.lost_gpu_s, 0.0)
        did.append(("preempt", p.job, ()))
    for s in actions.starts:
        e.started(s.job, s.alloc, s.charge)
        did.append(("start", s.job, tuple(i for i, _ in s.alloc)))
    return did


def at(
    e: ServingState, t: float, *calls: Callable[[ServingState], Any]
) -> list[tuple[str, str, tuple[int, ...]]]:
    e.begin(t)
    for call in calls:
        call(e)
    return run_pass(e)


def submit(job_id: str, gpus: int, t: float, **over: Any) -> Callable[[ServingState], Any]:
    return lambda e: e.submit(request(job_id, "a", 0, t, gpus, **over))


def cluster(*nodes: Node) -> Callable[[ServingState], Any]:
    return lambda e: e.set_nodes(nodes)


@dataclass
class Case:
    """Nodes at build, jobs started then (job, GPUs, node index), a node change at 100 and jobs
    submitted with it; what the pass at 100 does, the capacity after it, the nodes out of service."""

    nodes: tuple[Node, ...]
    running: tuple[tuple[str, int, int], ...]
    change: tuple[Node, ...]
    submits: tuple[tuple[str, int, dict[str, Any]], ...]
    did: list[tuple[str, str, tuple[int, ...]]]
    capacity: float
    retired: set[int] = field(default_factory=set)
    names: tuple[str, ...] = ()


CASES = [
    pytest.param(
        Case(
            (N0,),
            (("a1", 8, 0),),
            (N0, N1),
            (("a2", 8, {}),),
            [("start", "a2", (1,))],
            16.0,
            names=("n0", "n1"),
        ),
        id="add: a waiting job that needed it starts at the next pass",
    ),
    pytest.param(
        Case((N0, N1), (("a1", 8, 0), ("a3", 4, 1)), (N0,), (("a2", 4, {}),), [], 12.0, {1}),
        id="remove: no start on its free GPUs, its run not preempted, C(t) keeps its allocated GPUs",
    ),
    pytest.param(
        Case(
            (N0,),
            (("a1", 8, 0),),
            (A100, N0),
            (("a2", 4, {"gpu_types": ("A100",)}),),
            [("start", "a2", (1,))],
            10.0,
        ),
        id="new GPU type: rated from the policy, a job asking for it starts",
    ),
    pytest.param(
        Case(
            (N0, N1),
            (("a1", 8, 0),),
            (N0, node("n1", 4)),
            (("a2", 8, {}),),
            [],
            12.0,
            {1},
            ("n0", "n1", "n1"),
        ),
        id="changed hardware: the old index leaves service, a new index under the same name",
    ),
    pytest.param(
        Case((N0, N1), (("a1", 8, 0),), (N1, N0), (("a2", 8, {}),), [("start", "a2", (1,))], 16.0),
        id="the same nodes in another order: nothing changes",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_a_node_change_applies_from_the_next_pass(case: Case) -> None:
    journal: list[Event] = []
    e = engine(case.nodes, journal)
    e.begin(0.0)
    for job_id, gpus, i in case.running:
        e.submit(request(job_id, "a", 0, 0.0, gpus))
        e.started(job_id, ((i, gpus),), float(gpus))
    did = at(
        e,
        100.0,
        *(submit(j, g, 100.0, **over) for j, g, over in case.submits),
        cluster(*case.change),
    )
    assert did == case.did
    assert e.fleet.capacity == case.capacity
    assert e.fleet.retired == case.retired
    assert not e.drain_due()
    if case.names:
        assert tuple(n.name for n in e.nodes) == case.names
    assert e.setup.nodes == e.nodes
    _rebuilt_equals(e, journal, case.nodes)


def test_a_removed_node_s_run_ends_as_the_cluster_reports_and_its_gpus_leave_capacity() -> None:
    e = engine((N0, N1))
    e.begin(0.0)
    e.submit(request("a1", "a", 0, 0.0, 8))
    e.started("a1", ((1, 8),), 8.0)
    assert at(e, 10.0, cluster(N0)) == []
    assert "a1" in e.running and e.fleet.capacity == 16.0
    e.drain((1,), 20.0)  # drains and undrains of a removed node change nothing
    assert e.undrain((1,)) == [] and 1 not in e.fleet.draining
    assert at(e, 30.0, lambda e: e.finished("a1"), submit("a2", 8, 30.0)) == [("start", "a2", (0,))]
    assert e.fleet.capacity == 8.0 and e.fleet.idle_available == 0
    assert at(e, 40.0, submit("a3", 8, 40.0)) == []
    # back with the same hardware: at its old index, in service
    assert at(e, 50.0, cluster(N0, N1)) == [("start", "a3", (1,))]
    assert e.fleet.retired == set() and len(e.nodes) == 2 and e.fleet.capacity == 16.0


def test_a_draining_node_removed_keeps_its_runs_past_the_drain_deadline() -> None:
    e = engine((N0, N1))
    e.begin(0.0)
    e.submit(request("a1", "a", 0, 0.0, 8))
    e.started("a1", ((1, 8),), 8.0)
    e.drain((1,), 50.0)
    e.set_nodes((N0,))
    assert e.fleet.draining == {} and e.fleet.retired == {1}
    assert at(e, 60.0, submit("a2", 8, 60.0)) == [("start", "a2", (0,))]
    assert "a1" in e.running


@pytest.mark.parametrize(
    ("nodes", "error"),
    [
        pytest.param((N0, node("v0", 8, "V100")), "GPU type 'V100' has no rate", id="unrated type"),
        pytest.param((N0, node("n1", 0)), "'n1' has no GPUs", id="no GPUs"),
        pytest.param((N0, N0), "'n0' is listed twice", id="twice"),
    ],
)
def test_a_node_change_that_cannot_be_taken_is_refused_whole(nodes: tuple[Node, ...], error: str) -> None:
    journal: list[Event] = []
    e = engine((N0,), journal)
    e.begin(0.0)
    before = _canonical(copy.deepcopy(e).snapshot())
    with pytest.raises(ValueError, match=error):
        e.set_nodes(nodes)
    assert [ev.kind for ev in journal] == ["begin"]
    assert _canonical(copy.deepcopy(e).snapshot()) == before


def test_a_known_type_without_a_rate_may_have_more_nodes() -> None:
    e = engine((node("v0", 8, "V100"),), H100=1.0)  # built without a rate: rated 1.0
    change = e.set_nodes((node("v0", 8, "V100"), node("v1", 8, "V100")))
    assert change.added == (1,) and e.fleet.capacity == 16.0


def test_no_change_is_not_journaled() -> None:
    journal: list[Event] = []
    e = engine((N0, N1), journal)
    assert not e.set_nodes((N1, N0))
    assert journal == []


def test_pending_charges_follow_a_new_cheaper_type() -> None:
    e = engine((N0,))
    e.begin(0.0)
    e.submit(request("a1", "a", 0, 0.0, 8))
    e.started("a1", ((0, 8),), 8.0)
    e.submit(request("a2", "a", 0, 0.0, 4))
    assert e.pending.jobs["a2"].charge == 4.0
    e.set_nodes((N0, A100))
    assert e.pending.jobs["a2"].charge == 2.0  # its cheapest: 4 A100 at 0.5
    assert e.fleet.index.types == ("A100", "H100") and e.fleet.index.node_type == (1, 0)


def test_state_rebuilt_from_a_journal_with_node_changes_equals_the_live_one() -> None:
    journal: list[Event] = []
    e = engine((N0, N1), journal)
    e.begin(0.0)
    for job_id, gpus, i in (("a1", 8, 0), ("a3", 8, 1)):
        e.submit(request(job_id, "a", 0, 0.0, gpus))
        e.started(job_id, ((i, gpus),), float(gpus))
    e.drain((0,), 500.0)
    at(e, 100.0, submit("a2", 4, 100.0, gpu_types=("A100",)), submit("a4", 8, 100.0), cluster(N0, A100))
    at(e, 200.0, cluster(N0, A100, N2))
    at(e, 300.0, lambda e: e.finished("a3"), cluster(A100, N2))
    at(e, 400.0, lambda e: e.undrain((0,)), submit("a5", 8, 400.0), cluster(A100, N2, N1))
    assert {k for k, _, _ in at(e, 500.0, submit("a6", 8, 500.0))} <= {"start", "preempt"}
    assert [ev.kind for ev in journal].count("set_nodes") == 4
    _rebuilt_equals(e, journal, (N0, N1))


def _rebuilt_equals(e: ServingState, journal: list[Event], nodes: tuple[Node, ...]) -> None:
    stored = [json.loads(json.dumps(ev.as_json())) for ev in journal]
    again = [Event.from_json(x) for x in stored]
    first = engine(nodes)
    rebuilt = ServingState.rebuild(first.setup, first.strategy, again)
    assert rebuilt.nodes == e.nodes and rebuilt.setup == e.setup
    assert _fleet(rebuilt) == _fleet(e)
    assert _internals(rebuilt) == _internals(e)
    assert _canonical(rebuilt.snapshot()) == _canonical(copy.deepcopy(e).snapshot())


def _fleet(e: ServingState) -> dict[str, Any]:
    f, ix = e.fleet, e.fleet.index
    keep = (
        "rates",
        "capacity",
        "allocated",
        "idle_available",
        "draining",
        "retired",
        "cap_t",
        "alloc_t",
        "idle_t",
    )
    return {k: getattr(f, k) for k in keep} | {
        "index": (
            ix.nodes,
            ix.types,
            ix.node_type,
            ix.free,
            ix.available,
            ix.node_block,
            ix.buckets,
            ix.free_t,
        )
    }


def test_an_undrain_of_several_nodes_rebuilds_from_the_journal() -> None:
    journal: list[Event] = []
    e = engine((N0, N1), journal)
    e.begin(0.0)
    e.drain((0, 1), 50.0)
    assert e.undrain((0, 1)) == [0, 1]
    _rebuilt_equals(e, journal, (N0, N1))
    # journals written before the fix held the indexes as the arguments themselves
    assert Event.from_json({"kind": "undrain", "args": [0, 1]}).args == ((0, 1),)


def test_a_policy_change_after_a_node_change_keeps_the_nodes_and_rerates_them() -> None:
    journal: list[Event] = []
    e = engine((N0, N1), journal)
    e.begin(0.0)
    e.submit(request("a1", "a", 0, 0.0, 4))
    e.started("a1", ((1, 4),), 4.0)
    e.set_nodes((N0, A100))  # n1 out (its run counts: 4 GPUs), g0 in
    assert e.fleet.capacity == 8.0 + 4.0 + 2.0
    e.reconfigure(dataclasses.replace(e.setup, gpu_rates={"H100": 2.0, "A100": 1.0}))
    assert e.fleet.capacity == 16.0 + 8.0 + 4.0 and e.setup.nodes == e.nodes
    e.begin(10.0)
    e.finished("a1")
    assert e.fleet.capacity == 16.0 + 4.0
    _rebuilt_equals(e, journal, (N0, N1))
