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
from fairshare.engine import EngineSetup, EngineState, Event
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
