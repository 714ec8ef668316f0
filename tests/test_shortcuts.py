"""The scheduling core's and the engine's shortcuts change nothing: each replay is run again
with every shortcut replaced by the plain computation it stands for, and the event logs, audit
records and metrics must be identical."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import pytest

from fairshare.core import backfill
from fairshare.core.backfill import NodeSpace
from fairshare.core.fairness import PassPriorities, priority
from fairshare.core.model import JobRequest
from fairshare.core.ordering import DebtOrder
from fairshare.core.placement import Shape, Tentative
from fairshare.core.scheduler import _Pass
from fairshare.core.snapshot import RunView, Snapshot
from fairshare.core.strategies import get_strategy
from fairshare.engine.demand import Demand
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.results import ReplayOutput
from fairshare.replay.runner import inputs_from_scenario
from fairshare.replay.sim import Simulator

FAST = ["eight-gpu", "small-burst", "large-training", "maintenance-drain", "normal"]
SLOW = [pytest.param(name, marks=pytest.mark.slow) for name in SCENARIOS if name not in FAST]


class _RankEveryStep(DebtOrder):
    """Plain DebtOrder: at every step of every walk, the live children of a level are ranked from
    scratch on priorities computed afresh (no incremental ranking, no priority cache)."""

    def _pick(self, parent: int, ids: Sequence[int]) -> tuple[int, int | None]:
        s, used, look = self.snap, self.prio.used, self.snap.knobs.lookahead

        def fresh(i: int) -> float:
            return priority(s.debt[i], s.owed[i], used[i], s.entitlement[i], look)

        ranked = sorted((-fresh(i), k, i) for k, i in enumerate(ids) if self.live[i] > 0)
        return ranked[0][2], ranked[1][2] if len(ranked) > 1 else None


def _could_free_always(self: _Pass, shape: Shape, job: JobRequest, runs: list[RunView]) -> bool:
    """No capacity pre-check: every victim search prices every candidate and runs in full."""
    return True


def _most_free_nodes_plain(self: Tentative, shape: Shape) -> tuple[int, ...]:
    """Every available node of each allowed type not held for another job yet, ranked by free GPUs
    in the pass's view (most first, then lowest index); the type whose first k nodes have the most
    free GPUs (first type on ties)."""
    index = self.index
    best: tuple[int, tuple[int, ...]] | None = None
    for ty in shape.types if shape.types is not None else range(len(index.types)):
        nodes = [
            i
            for i in range(len(index.nodes))
            if index.available[i] and index.node_type[i] == ty and i not in self.held
        ]
        if len(nodes) < shape.nodes:
            continue
        picked = sorted(nodes, key=lambda i: (-self.free(i), i))[: shape.nodes]
        total = sum(self.free(i) for i in picked)
        if best is None or total > best[0]:
            best = (total, tuple(sorted(picked)))
    return best[1] if best else ()


def _fragmented_plain(self: Demand) -> float:
    """FORMATS.md's fragmented GPUs from the per-node free counts: idle GPUs of every type that some
    pending job could use (enough free GPUs of its types in all) but cannot be placed on."""
    index = self.index
    free_nodes = [
        [index.free[i] for i in range(len(index.nodes)) if index.available[i] and index.node_type[i] == ty]
        for ty in range(len(index.types))
    ]
    blocked: set[int] = set()
    for types, gpus, k in self.pending_shapes:
        ids = range(len(index.types)) if types is None else [index.type_id[t] for t in types]
        ok = [ty for ty in ids if free_nodes[ty]]
        if gpus > sum(sum(free_nodes[ty]) for ty in ok):
            continue
        per = -(-gpus // k)
        if not any(sum(1 for f in free_nodes[ty] if f >= per) >= k for ty in ok):
            blocked.update(ok)
    return float(sum(sum(free_nodes[ty]) for ty in sorted(blocked)))


def _best_single_plain(
    self: NodeSpace, nodes: Sequence[int], g: int, d: float, latest: float, now: float, group: object = None
) -> tuple[float, int, int] | None:
    """Every node of `nodes` in order, each scanned from its first segment: the earliest start by
    `latest` where g GPUs are free for d seconds, then the fewest free now, then the lowest index;
    a node with exactly g free now ends the search (no ranking of the nodes, no pruning by it)."""
    best: tuple[float, int, int] | None = None
    for i in nodes:
        times, free = self.times[i], self.free[i]
        n, k = len(times), 0
        while k < n and times[k] <= latest:
            if free[k] < g:
                k += 1
                continue
            j = k + 1
            while j < n and times[j] < times[k] + d and free[j] >= g:
                j += 1
            if j >= n or times[j] >= times[k] + d:
                cand = (times[k], free[0], i)
                if best is None or cand < best:
                    best = cand
                break
            k = j + 1
        if best is not None and best[0] <= now and best[1] == g:
            break
    return best


def _earliest_gang_plain(
    self: NodeSpace,
    nodes: Sequence[int],
    k: int,
    g: int,
    d: float,
    latest: float,
    group: object = None,
) -> tuple[float, list[int]] | None:
    """Each window start in time order, every node checked against its windows afresh (no sweep,
    no memo of the windows)."""
    windows: dict[int, list[tuple[float, float]]] = {}
    for i in nodes:
        times, free = self.times[i], self.free[i]
        n, j = len(times), 0
        windows[i] = []
        while j < n:
            if free[j] < g:
                j += 1
                continue
            a = times[j]
            while j < n and free[j] >= g:
                j += 1
            b = times[j] if j < n else math.inf
            if a <= latest and a + d <= b:
                windows[i].append((a, b))
    for t in sorted({a for w in windows.values() for a, _ in w}):
        ok = [i for i in nodes if any(a <= t and t + d <= b for a, b in windows[i])]
        if len(ok) >= k:
            return t, ok
    return None


def _replay(scenario: str, policy: str, plain: bool, monkeypatch: pytest.MonkeyPatch) -> ReplayOutput:
    inputs = inputs_from_scenario(SCENARIOS[scenario](1))
    strategy = get_strategy(policy, inputs.policy.scheduling.preemption)
    if plain:
        monkeypatch.setattr(_Pass, "could_free", _could_free_always)
        monkeypatch.setattr(Tentative, "most_free_nodes", _most_free_nodes_plain)
        monkeypatch.setattr(Demand, "fragmented_gpus", _fragmented_plain)
        monkeypatch.setattr(NodeSpace, "best_single", _best_single_plain)
        monkeypatch.setattr(NodeSpace, "earliest_gang", _earliest_gang_plain)
        # every backfill cycle tests jobs until bf_max_job_test, no free GPU or no job is left
        monkeypatch.setattr(backfill, "could_start_now", lambda *args: True)
        real_init = _Pass.__init__

        def init(self: _Pass, *args: Any) -> None:
            real_init(self, *args)
            self.victims_latest = math.inf  # backoff ends early only by the per-leaf scan

        monkeypatch.setattr(_Pass, "__init__", init)
        if policy == "fairshare":

            def order(snap: Snapshot, skip: set[str], prio: PassPriorities) -> DebtOrder:
                return _RankEveryStep(snap, skip, prio)

            strategy = dataclasses.replace(strategy, order=order)
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, strategy, scenario=scenario)
    out = sim.run()
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("policy", ["fairshare", "priority-labels", "slurm-multifactor"])
@pytest.mark.parametrize("scenario", [*FAST, *SLOW])
def test_shortcuts_give_the_same_replay_as_the_plain_computation(
    scenario: str, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _replay(scenario, policy, False, monkeypatch)
    plain = _replay(scenario, policy, True, monkeypatch)
    assert fast.events == plain.events
    assert fast.decisions == plain.decisions
    assert fast.result.metrics == plain.result.metrics


def test_the_shortcuts_are_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above means something: in one fast scenario the capacity pre-check cuts
    searches short and lets others on, reservations are made, and the fragmentation metric is
    non-zero."""
    seen: list[bool] = []
    real = _Pass.could_free

    def spy(self: _Pass, shape: Shape, job: JobRequest, runs: list[RunView]) -> bool:
        seen.append(real(self, shape, job, runs))
        return seen[-1]

    monkeypatch.setattr(_Pass, "could_free", spy)
    out = _replay("small-burst", "fairshare", False, monkeypatch)
    assert seen.count(False) > 0 and seen.count(True) > 0
    assert any('"decision":"reserve"' in d for d in out.decisions)
    assert out.result.metrics["fragmented_gpu_h"] > 0


def test_the_backfill_shortcuts_are_exercised(monkeypatch: pytest.MonkeyPatch) -> None:
    """slurm-multifactor's comparison above means something: in one fast scenario the ranked visit
    of best_single stops before the last node of the group, and gang sweeps find starts."""
    fits: list[int] = []
    pruned: list[bool] = []
    gangs: list[bool] = []
    real_fit, real_best, real_gang = NodeSpace._fit, NodeSpace.best_single, NodeSpace.earliest_gang

    def fit(self: NodeSpace, *args: Any) -> float | None:
        fits.append(1)
        return real_fit(self, *args)

    def best(self: NodeSpace, nodes: Sequence[int], *args: Any) -> tuple[float, int, int] | None:
        before = len(fits)
        out = real_best(self, nodes, *args)
        pruned.append(len(fits) - before < len(nodes))
        return out

    def gang(self: NodeSpace, *args: Any) -> tuple[float, list[int]] | None:
        out = real_gang(self, *args)
        gangs.append(out is not None)
        return out

    monkeypatch.setattr(NodeSpace, "_fit", fit)
    monkeypatch.setattr(NodeSpace, "best_single", best)
    monkeypatch.setattr(NodeSpace, "earliest_gang", gang)
    _replay("normal", "slurm-multifactor", False, monkeypatch)
    assert pruned.count(True) > 0 and any(gangs)


@pytest.mark.parametrize("scenario", ["normal", "small-burst"])
def test_backfill_cycles_end_early_when_no_job_left_could_start_now(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early end of a backfill cycle, held to the plain replay above, is taken: some cycle
    stops with jobs left to test because none of them could start now, and jobs are still
    backfilled."""
    answers: list[bool] = []
    real = backfill.could_start_now

    def spy(*args: Any) -> bool:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(backfill, "could_start_now", spy)
    out = _replay(scenario, "slurm-multifactor", False, monkeypatch)
    assert answers.count(False) > 0 and answers.count(True) > 0
    assert any('"phase":"backfill"' in d for d in out.decisions)
