"""The engine state every driver shares (DESIGN.md §4): driven directly by a fake driver, rebuilt
from its own journal, and the layering it stands on (core: standard library only; request vs truth)."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import a_request
from fairshare.core import JobRequest, Knobs, Node, TreeIndex, decide, get_strategy
from fairshare.core.snapshot import Snapshot
from fairshare.engine import EngineSetup, EngineState, Event, ServingState
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_scenario
from fairshare.replay.sim import Simulator

SRC = Path(__file__).resolve().parent.parent / "src" / "fairshare"


@dataclass(frozen=True)
class Group:
    name: str
    share: float
    children: tuple[Group, ...] = ()


def request(job_id: str, group: str, leaf: int, submit: float, gpus: int, **over: Any) -> JobRequest:
    return a_request(
        id=job_id,
        group=group,
        leaf=leaf,
        submit=submit,
        gpus=gpus,
        charge=float(gpus),
        seq=int(job_id[-1]),
        **over,
    )


def setup_two_teams() -> EngineSetup:
    tree = TreeIndex.build([Group("a", 50), Group("b", 50)])
    node = Node("n-000", "n", 8, "H100", 64.0, 512.0, "n-b0")
    return EngineSetup(tree, Knobs(), {"H100": 1.0}, (node,), 7 * 86400.0)


class TwoJobDriver:
    """A driver of its own (no simulator): it reports what it is told happened and carries out
    every start and preemption at once, remembering what it did."""

    def __init__(self) -> None:
        self.engine = EngineState(setup_two_teams(), get_strategy("fairshare"))
        self.did: list[tuple[float, str, str]] = []
        self.audit: list[dict[str, Any]] = []

    def instant(self, t: float, *events: tuple[str, Any]) -> None:
        e = self.engine
        e.begin(t)
        for kind, arg in events:
            if kind == "submit":
                e.submit(arg)
            elif kind == "finished":
                e.finished(arg)
        e.settle()
        if e.pass_due():
            actions = e.apply(decide(e.snapshot(), e.strategy))
            self.audit.extend(actions.audit)
            for p in actions.preempts:
                self.did.append((t, "preempt", p.job))
                e.preempted(p.job, p.reason, p.by, p.lost_gpu_s, kept=300.0)
            for s in actions.starts:
                self.did.append((t, "start", s.job))
                e.started(s.job, s.alloc, s.charge)


def test_a_two_job_fake_driver_gets_starts_holds_and_a_preemption_at_the_protection_end() -> None:
    d = TwoJobDriver()
    a1, a2 = request("a1", "a", 0, 0.0, 4), request("a2", "a", 0, 0.0, 4)
    b = request("b3", "b", 1, 100.0, 4)
    d.instant(0.0, ("submit", a1), ("submit", a2))
    assert d.did == [(0.0, "start", "a1"), (0.0, "start", "a2")]
    # the runs' protection ends are the engine's own timers
    assert d.engine.next_time() == 600.0
    # b arrives at 100: the cluster is full and a's runs are protected: held, no victims
    d.instant(100.0, ("submit", b))
    assert d.did[2:] == []
    assert [(r["decision"], r["job"], r["reason"]) for r in d.audit if r["decision"] == "hold"] == [
        ("hold", "b3", "no_victims")
    ]
    assert d.engine.states["b3"].preempt_retry_at == 600.0  # the backoff grid: (floor(100/300) + 2) x 300
    assert d.engine.next_time() == 600.0
    # at 600 the protection ends: a holds 8 GPUs while owed 4 (b has demand): a run of a is taken
    d.instant(600.0)
    assert d.did[2:] == [(600.0, "preempt", "a1"), (600.0, "start", "b3")]
    preempt = next(r for r in d.audit if r["decision"] == "preempt")
    assert (preempt["reason"], preempt["by"], preempt["victim_group"]) == ("fair_share", "b3", "a")
    # the preempted job waits again from now, with what it kept, and a pass is due after the requeue delay
    st = d.engine.states["a1"]
    assert (st.pending_since, st.kept, st.preempted_by) == (600.0, 300.0, "b3")
    assert "a1" in d.engine.pending.jobs and set(d.engine.running) == {"a2", "b3"}
    assert d.engine.next_time() == 610.0
    # a2 finishes: a1 restarts on its GPUs
    d.instant(610.0)
    d.instant(1000.0, ("finished", "a2"))
    assert d.did[4:] == [(1000.0, "start", "a1")]
    assert d.engine.running["a1"].overhead == 30.0  # a resumable restart pays its restore


def test_a_cancelled_job_leaves_the_queue_or_frees_its_gpus() -> None:
    d = TwoJobDriver()
    a1, b = request("a1", "a", 0, 0.0, 8), request("b3", "b", 1, 5.0, 8)
    d.instant(0.0, ("submit", a1))
    d.instant(5.0, ("submit", b))
    e = d.engine
    assert set(e.running) == {"a1"} and set(e.pending.jobs) == {"b3"}
    e.begin(6.0)
    e.cancelled("b3")  # pending: it leaves its queue and its group's demand
    assert not e.pending.jobs and e.demand.node_pending[1] == 0.0
    e.cancelled("a1")  # running: its GPUs are free again
    assert not e.running and e.fleet.index.free == [8]
    assert e.pass_due() is False  # nothing left to look at


# ---------------------------------------------------------------------- rebuilt from the journal
def _canonical(s: Snapshot) -> dict[str, Any]:
    """Everything the core may read from a snapshot, as plain comparable values."""
    return {
        "now": s.now,
        "knobs": s.knobs,
        "free": list(s.index.free),
        "available": list(s.index.available),
        "buckets": [sorted(b) for t in s.index.buckets for b in t],
        "drain_due": sorted(s.drain_due),
        "running": list(s.running.items()),
        "by_leaf": {k: list(v.items()) for k, v in sorted(s.running_by_leaf.items())},
        "queues": {k: list(v) for k, v in s.pending.queues.items()},
        "by_leaf_keys": dict(s.pending.by_leaf),
        "states": dict(s.states),
        "debt": list(s.debt),
        "owed": list(s.owed),
        "used": list(s.used),
        "entitlement": list(s.entitlement),
        "hung": list(s.hung),
        "deadline_queue": list(s.deadline_queue),
        "decayed": list(s.decayed_usage),
        "victims_at": list(s.victims_at),
        "took_from": dict(s.took_from),
        "fast_queue": list(s.fast_queue),
        "prev_reservation": s.prev_reservation,
        "backfill_due": s.backfill_due,
    }


def _internals(e: EngineState) -> dict[str, Any]:
    return {
        "timers": sorted(e.timers),
        "last_hold": dict(e.last_hold),
        "retry_wakes": sorted(e.retry_wakes),
        "reservation": e.last_reservation,
        "ring": e.ledger.ring.tolist(),
        "shares": list(e.shares),
        "need_pass": e.need_pass,
        "fragmented": e.fragmented_gpus(),
        "backfill": (e.last_backfill, e.backfill_wake),
    }


@pytest.mark.parametrize(
    ("scenario", "strategy", "fraction"),
    [
        ("small-burst", "fairshare", 0.3),
        ("maintenance-drain", "fairshare", 0.5),
        ("normal", "fairshare", 0.6),
        ("large-training", "priority-labels", 0.5),
        ("idle-return", "slurm-multifactor", 0.7),
        ("normal", "slurm-multifactor", 0.4),
    ],
    ids=str,
)
def test_state_rebuilt_from_its_journal_gives_the_same_snapshot_and_decisions(
    scenario: str, strategy: str, fraction: float
) -> None:
    inputs = inputs_from_scenario(SCENARIOS[scenario](1))
    journal: list[Event] = []
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, strategy, journal=journal)
    stop = fraction * max(j.submit for j in inputs.jobs)
    assert sim.run(until=stop) is None  # stopped mid-replay
    assert sim.engine.running and len(sim.engine.pending) + len(sim.engine.running) > 1
    # through JSON, as the service stores it
    stored = [json.loads(json.dumps(ev.as_json())) for ev in journal]
    rebuilt = EngineState.rebuild(sim.setup, sim.strategy, [Event.from_json(x) for x in stored])
    assert _internals(rebuilt) == _internals(sim.engine)
    # a snapshot integrates the ledger up to now: take it on a copy, so the replay goes on untouched
    live = copy.deepcopy(sim.engine)
    mine, theirs = live.snapshot(), rebuilt.snapshot()
    assert _canonical(theirs) == _canonical(mine)
    assert decide(theirs, rebuilt.strategy) == decide(mine, sim.strategy)
    # and the running replay goes on to the same end as a replay that never stopped
    out = sim.run()
    plain = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, strategy).run()
    assert out.events == plain.events and out.decisions == plain.decisions


# ---------------------------------------------------------------------- layers
def test_the_core_imports_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import fairshare.core, fairshare.core.scheduler, fairshare.core.ordering, fairshare.core.placement\n"
        "import fairshare.core.contract, fairshare.core.fairness, fairshare.core.strategies\n"
        "std = sys.stdlib_module_names\n"
        "new = sorted(set(sys.modules) - before)\n"
        "print([m for m in new if m.split('.')[0] not in std and not m.startswith('fairshare')])\n"
        "print(sorted(m for m in sys.modules if m.startswith('fairshare')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    third_party, ours = out.stdout.splitlines()
    assert third_party == "[]"
    assert all(m == "fairshare" or m.startswith("fairshare.core") for m in json.loads(ours.replace("'", '"')))


def test_the_core_and_the_engine_never_read_a_jobs_truth() -> None:
    """`work` and `stall_after` are the simulator's: a scheduler knows the request and the estimate."""
    fields = {f.name for f in dataclasses.fields(JobRequest)}
    assert "estimate" in fields and not fields & {"work", "stall_after"}
    readers = []
    for folder in ("core", "engine"):
        for path in sorted((SRC / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("work", "stall_after"):
                    readers.append(f"{path.name}:{node.lineno}")
    assert readers == []


def test_the_engine_is_given_requests_only(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[type] = []
    real = EngineState.submit

    def spy(self: EngineState, job: JobRequest) -> None:
        seen.append(type(job))
        real(self, job)

    monkeypatch.setattr(EngineState, "submit", spy)
    inputs = inputs_from_scenario(SCENARIOS["eight-gpu"](1))
    Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, "fairshare").run()
    assert seen and set(seen) == {JobRequest}


def test_no_module_is_over_the_size_cap() -> None:
    sizes = {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")
    }
    assert {p: n for p, n in sizes.items() if n > 600} == {}
    assert sizes["replay/sim.py"] < 400  # the simulator is a driver: loop, truth, outputs


def test_journal_events_round_trip_through_json() -> None:
    req = request("j1", "a", 0, 5.0, 4, gpu_types=("H100",), deadline=99.0)
    events = [
        Event("begin", (5.0,)),
        Event("submit", (req,)),
        Event("started", ("j1", ((0, 4),), 4.0)),
        Event("preempted", ("j1", "fair_share", "j2", 12.5, 300.0)),
        Event("drain", ((0, 1), 50.0)),
        Event("cancelled", ("j1",)),
        Event("applied", ((("j1", "no_victims"),), ("j1", (0,)))),
        Event("applied", ((), None)),
        Event("applied", ((), None, True)),
    ]
    again = [Event.from_json(json.loads(json.dumps(e.as_json()))) for e in events]
    assert again == events
    assert math.isfinite(again[1].args[0].estimate)


# ---------------------------------------------------------------------- a new policy from now (reconfigure)
def _tree(*spec: tuple[str, float] | tuple[str, float, tuple[Group, ...]]) -> TreeIndex:
    return TreeIndex.build([Group(*s) for s in spec])


def _node(i: int = 0) -> Node:
    return Node(f"n-{i:03d}", "n", 8, "H100", 64.0, 512.0, "n-b0")


def _setup(tree: TreeIndex, **over: Any) -> EngineSetup:
    base = EngineSetup(tree, Knobs(), {"H100": 1.0}, (_node(0), _node(1)), 168 * 100.0)
    return dataclasses.replace(base, **over)


def _busy_engine(journal: list[Event] | None = None) -> ServingState:
    """a and b each run a 4-GPU job and an 8-GPU one from 0 (both nodes full); at 1000 a2 and b2
    wait; the ledger holds 1000 s of usage."""
    e = ServingState(_setup(_tree(("a", 50), ("b", 50))), get_strategy("fairshare"), journal=journal)
    e.begin(0.0)
    for jid, group, leaf, gpus, node in (("a1", "a", 0, 4, 0), ("b1", "b", 1, 4, 0), ("a3", "a", 0, 8, 1)):
        e.submit(request(jid, group, leaf, 0.0, gpus))
        e.started(jid, ((node, gpus),), float(gpus))
    e.begin(1000.0)
    e.submit(request("a2", "a", 0, 1000.0, 4))
    e.submit(request("b2", "b", 1, 1000.0, 4, cls="eval"))
    return e


def _by_path(e: ServingState) -> dict[str, list[float]]:
    e._flush()
    return {p: e.ledger.sums[:, i].tolist() for i, p in enumerate(e.tree.paths)}


@pytest.mark.parametrize(
    ("tree", "rejected", "detached"),
    [
        pytest.param(_tree(("a", 50), ("b", 50), ("c", 20)), {}, {}, id="add"),
        pytest.param(_tree(("a", 50)), {"b2": "leaf_removed"}, {"b1": None}, id="remove"),
        pytest.param(_tree(("a", 50), ("c", 50)), {"b2": "leaf_removed"}, {"b1": None}, id="rename"),
        pytest.param(_tree(("b", 50), ("a", 50)), {}, {}, id="reorder"),
        pytest.param(
            _tree(("a", 50, (Group("x", 1), Group("y", 1))), ("b", 50)),
            {"a2": "leaf_removed"},
            {"a1": "a", "a3": "a"},
            id="leaf-becomes-inner",
        ),
        pytest.param(
            _tree(("ml", 50, (Group("a", 1),)), ("b", 50)),
            {"a2": "leaf_removed"},
            {"a1": None, "a3": None},
            id="move",
        ),
    ],
)
def test_a_new_tree_carries_usage_by_path_cancels_waiting_jobs_of_gone_leaves_and_keeps_their_runs(
    tree: TreeIndex, rejected: dict[str, str], detached: dict[str, str | None]
) -> None:
    e = _busy_engine()
    before = _by_path(e)
    done = e.reconfigure(_setup(tree))
    assert dict(done.rejected) == rejected and dict(done.detached) == detached
    after = _by_path(e)
    for path, sums in after.items():
        assert sums == before.get(path, [0.0, 0.0]), path  # a surviving path keeps its usage, a new one none
    # every run goes on (the change never preempts), on its new leaf or charged to the node named
    assert set(e.running) == {"a1", "b1", "a3"} and set(e.pending.jobs) == {"a2", "b2"} - set(rejected)
    where = tree.index()
    for jid, charged_to in detached.items():
        assert e.detached[jid] == (where[charged_to] if charged_to else -1)
        assert jid not in e.by_leaf.get(e.running[jid].job.leaf, {})  # no victim
    for jid, view in e.running.items():
        if jid not in detached:
            assert e.by_leaf[view.job.leaf][jid] == view and tree.paths[view.job.leaf] == view.job.group
    used = e.rates_now()[1]
    for i, p in enumerate(tree.paths):
        # a node's running charge: the runs on it or below it (a run charged to no node counts 0)
        charged = sum(r.charge for r in e.running.values() if i in tree.leaf_ancestors[r.job.leaf])
        assert used[i] == charged, p
    # the next pass preempts none of the runs whose leaf is gone, and they end normally
    e.begin(2000.0)
    e.settle()
    d = decide(e.snapshot(), e.strategy)
    assert not {p.job for p in d.preempts} & set(detached)
    for jid in detached:
        e.finished(jid)
    assert not e.detached and e.demand.directs == 0
    assert all(u == 0.0 for u in e.demand.direct_used)


def test_a_pending_job_of_a_class_the_policy_no_longer_has_is_cancelled_with_the_reason() -> None:
    e = _busy_engine()
    done = e.reconfigure(_setup(e.tree, classes=frozenset({"train"})))
    assert done.rejected == (("b2", "class_removed"),) and set(e.pending.jobs) == {"a2"}
    assert e.demand.node_pending[1] == 0.0


@pytest.mark.parametrize(
    ("order", "first"),
    [("submit", "a4"), ("shortest", "a5"), ("las", "a4")],
    ids=str,
)
def test_a_knob_change_rekeys_every_pending_job(order: str, first: str) -> None:
    e = ServingState(_setup(_tree(("a", 50), ("b", 50))), get_strategy("fairshare"))
    e.begin(0.0)
    for i in (0, 1):
        e.submit(request(f"b{i}", "b", 1, 0.0, 8))
        e.started(f"b{i}", ((i, 8),), 8.0)
    e.submit(request("a4", "a", 0, 1.0, 8, estimate=7200.0))
    e.submit(request("a5", "a", 0, 2.0, 8, estimate=600.0))
    e.states["a5"].attained = 100.0  # a5 ran before: last under las
    e.reconfigure(_setup(e.tree, knobs=Knobs(leaf_order=order)))
    assert e.keyed == (order != "submit")
    (queue,) = [q for (leaf, _, _), q in e.pending.queues.items() if leaf == 0]
    assert queue[0][1] == first
    e.begin(10.0)
    assert decide(e.snapshot(), e.strategy, explain=True).order[0] == first


def test_knob_changes_rebuild_the_derived_state() -> None:
    e = _busy_engine()
    assert e.fast == {"debug"} and e.strategy.victims.preempts
    knobs = Knobs(fast_classes=("eval",), preemption="none", decay_half_life=3600.0)
    e.reconfigure(_setup(e.tree, knobs=knobs))
    assert e.fast == {"eval"} and e.fast_q == [(2, "b2")]
    assert not e.strategy.victims.preempts  # fairshare's preemption switch
    assert e.knobs is knobs and e.setup.knobs is knobs


def test_new_gpu_rates_apply_from_now_only() -> None:
    e = _busy_engine()
    a = e.tree.index()["a"]
    assert _by_path(e)["a"][1] == 12 * 1000.0
    e.reconfigure(_setup(e.tree, gpu_rates={"H100": 2.0}))
    assert e.fleet.capacity == 32.0 and e.running["a1"].charge == 8.0 and e.pending.jobs["a2"].charge == 8.0
    e.begin(1500.0)
    e._flush()
    assert e.ledger.deliv_sum[a] == 12 * 1000.0 + 24 * 500.0


@pytest.mark.parametrize(
    ("window", "kept"),
    [
        pytest.param(168 * 100.0, 12 * 1000.0, id="same"),
        pytest.param(168 * 200.0, 12 * 1000.0, id="longer: keeps what the old window had"),
        pytest.param(168 * 5.0, 12 * 835.0, id="shorter: only the new window's history"),
    ],
)
def test_a_new_window_applies_from_now(window: float, kept: float) -> None:
    e = _busy_engine()
    e.reconfigure(_setup(e.tree, window=window))
    a = e.tree.index()["a"]
    assert e.ledger.width == window / 168
    assert e.ledger.deliv_sum[a] == pytest.approx(kept)
    e.begin(1100.0)  # and it integrates on the new grid
    e._flush()
    assert e.ledger.deliv_sum[a] == pytest.approx(kept + 12 * 100.0 if window > 1000 else 12 * 835.0)


def test_state_rebuilt_from_a_journal_with_a_reconfigure_equals_the_live_one() -> None:
    journal: list[Event] = []
    e = _busy_engine(journal)
    new = _setup(
        _tree(("a", 30, (Group("x", 1), Group("y", 2))), ("c", 70)),
        knobs=Knobs(leaf_order="shortest", deadline_slack=60.0),
        gpu_rates={"H100": 1.5},
        window=168 * 50.0,
        classes=frozenset({"train", "eval"}),
    )
    e.reconfigure(new)
    e.begin(1200.0)
    e.submit(request("c6", "c", 3, 1200.0, 8))
    e.settle()
    actions = e.apply(decide(e.snapshot(), e.strategy))
    for s in actions.starts:
        e.started(s.job, s.alloc, s.charge)
    e.begin(1300.0)
    e.finished("a1")
    stored = [json.loads(json.dumps(ev.as_json())) for ev in journal]
    again = [Event.from_json(x) for x in stored]
    assert next(ev for ev in again if ev.kind == "reconfigure").args[0] == new
    rebuilt = ServingState.rebuild(_setup(_tree(("a", 50), ("b", 50))), get_strategy("fairshare"), again)
    assert _internals(rebuilt) == _internals(e)
    assert rebuilt.detached == e.detached and rebuilt.tree == e.tree
    live = copy.deepcopy(e)
    assert _canonical(rebuilt.snapshot()) == _canonical(live.snapshot())
