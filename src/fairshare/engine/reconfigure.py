"""A new policy applied to a running engine from its current instant (`ServingState.reconfigure`).

A live driver changes the policy while jobs wait and run; the replay never does. The new setup's
tree, knobs, GPU rates, window and exceptions apply from the engine's instant t on; the nodes are
the cluster's and must be the same. The rules, the edge cases with each:

Tree. Nodes are matched by path (a rename is a removal plus an addition).
  - A path in both trees keeps its usage history: its window ledger columns (owed and delivered,
    bucket by bucket), its decayed usage and its protection-end record. A new path starts with no
    usage. A removed path's usage is dropped from the state (it stays in the journal and the audit).
  - The flip guard's pairs carry over when both sides' paths survive (a pair that is no longer a
    pair of sides in the new tree is never looked up again); others are dropped.
  - A pending job whose leaf is gone (removed, or now an inner node) is cancelled with reason
    `leaf_removed`; one of a class the new policy does not have (`setup.classes`, when the driver
    gives them) with `class_removed`. The driver gets them back (`Reconfigured.rejected`) to audit.
  - A running job whose leaf is gone keeps running: the change itself never preempts. From now it
    is charged to the nearest ancestor of its leaf whose path survives (a charge straight on that
    node, leaf or not: its usage, demand, owed and debt include it; no other group pays for it).
    When no ancestor survives (its whole top-level group was removed), it is charged to no node.
    Either way it is no victim of fair-share or deadline preemption any more (its group is not in
    the policy), while drains and the hang watchdog still act on it, and it is reported back
    (`Reconfigured.detached`). A running job of a removed class keeps its leaf and its charge: its
    class's terms were resolved when it was submitted.
GPU rates. Usage already integrated keeps the GPU-equivalents of the rates it was charged at.
  From now, C(t) uses the new rates, a running job is charged at its node's new rate and a
  pending job's demand is its cheapest charge over the GPU types it may use at the new rates.
Window. The ledger's window is the new one from now: its ring keeps its number of buckets, of the
  new width. History still inside the new window is re-bucketed (a bucket's sums spread evenly
  over its span, as the ledger integrates constant rates); older history is dropped. When the
  window grows, the ledger holds what the old window had kept and fills up to the new length.
Knobs. Everything derived from them is rebuilt: the fast lane's classes and queue, the leaf sort
  keys (every pending job re-keyed: leaf_order "submit", "las" or "shortest"), the strategy's
  preemption switch (fairshare's `preemption: none`), the backfill flag, the decayed usage's
  half-life and period (usage and the current period's charge carried; the new period's grid from
  now), the deadline jobs' wake-ups at their latest start minus the new slack. Timers already set
  (requeue, backoff grid, gang reservation waits) keep their instants: each only asks for a pass;
  a requeued job's backlog check reads the new knobs (engine/requeue.py). The per-leaf index of
  never-started pending jobs (the backlog's measure) is rebuilt with the queues.
Exceptions: those of the new setup (placed on its tree) are in force from now.

How: `plan_policy` computes the new state from the state's public reads (a typed `PolicyState`,
fairshare.engine.changes) and `EngineState.adopt_policy` takes it in; nothing here assigns the
state's members.

Deterministic: the result depends on the state and the setup only, so a journal with the
`reconfigure` record rebuilds the same state (EngineState.rebuild).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..core.model import JobRequest
from ..core.snapshot import PendingQueues, RunView, leaf_sort_key
from ..core.strategies import STRATEGIES, get_strategy
from .changes import PolicyState, Reconfigured
from .demand import Demand
from .ledger import DecayLedger, Ledger
from .owed import effective_shares
from .setup import EngineSetup
from .state import EngineState

LEAF_REMOVED = "leaf_removed"
CLASS_REMOVED = "class_removed"

__all__ = ["CLASS_REMOVED", "LEAF_REMOVED", "Reconfigured", "plan_policy", "remap_ledger"]


def plan_policy(e: EngineState, setup: EngineSetup) -> PolicyState:
    """The state `setup` gives `e` from its instant (the rules: the module's docstring), from the
    state's public reads; `e` is not changed (EngineState.adopt_policy takes the result in). The
    state's rates must be integrated up to now first (its ledger is carried over as it is)."""
    if tuple(setup.nodes) != tuple(e.nodes):
        raise ValueError("a reconfigure keeps the cluster's nodes")
    old, new, t = e.tree, setup.tree, e.t
    where = new.index()
    remap = [where.get(p, -1) for p in old.paths]  # old node -> new node, -1: gone
    new_leaves = set(new.leaves)
    rates = dict(setup.gpu_rates)
    rates_changed = rates != e.rates
    slack = setup.knobs.deadline_slack if setup.knobs.deadline_slack != e.knobs.deadline_slack else None
    strategy = e.strategy
    if strategy.name in STRATEGIES:  # the preemption switch is a knob
        strategy = get_strategy(strategy.name, setup.knobs.preemption)
    demand = Demand(new, e.fleet.index, e.nodes, rates)

    def surviving(node: int) -> int:
        """The new id of the nearest of node and its ancestors (old ids) whose path survives."""
        return next((remap[a] for a in old.leaf_ancestors[node] if remap[a] >= 0), -1)

    queues = _pending(
        e, setup, strategy.fast_lane, strategy.leaf_order, demand, remap, new_leaves, rates_changed, slack
    )
    runs = _running(e, setup, rates, demand, remap, new_leaves, rates_changed, surviving)

    n = len(new.paths)
    decay = None
    if e.decay is not None:
        decay = DecayLedger(
            n, setup.knobs.decay_half_life, setup.knobs.decay_period, e.decay.t, setup.knobs.decay_phase
        )
        decay.usage, decay.accum = _columns(e.decay.usage, remap, n), _columns(e.decay.accum, remap, n)
    victims_at = [-math.inf] * n
    for i, j in enumerate(remap):
        if j >= 0:
            victims_at[j] = e.victims_at[i]
    took_from = {
        (remap[a], remap[b]): when for (a, b), when in e.took_from.items() if remap[a] >= 0 and remap[b] >= 0
    }
    expiries = tuple((ex.expires_t, "expiry") for ex in setup.exceptions if ex.expires_t > t)
    return PolicyState(
        setup=setup,
        strategy=strategy,
        rates=rates,
        node_rates=[rates.get(nd.gpu_type, 1.0) for nd in e.nodes] if rates_changed else None,
        demand=demand,
        pending=queues.pending,
        fast_q=queues.fast_q,
        deadline_q=queues.deadline_q,
        deadline_entry=queues.deadline_entry,
        running=runs.running,
        by_leaf=runs.by_leaf,
        detached=runs.detached,
        ledger=remap_ledger(e.ledger, remap, n, setup.window),
        decay=decay,
        victims_at=victims_at,
        took_from=took_from,
        shares=effective_shares(new, setup.exceptions, t),
        wakes=queues.wakes + expiries,
        forget=tuple(job_id for job_id, _ in queues.rejected),
        outcome=Reconfigured(queues.rejected, runs.out),
    )


@dataclasses.dataclass
class _Queues:
    pending: PendingQueues
    fast_q: list[tuple[int, str]]
    deadline_q: list[tuple[float, int, str]]
    deadline_entry: dict[str, tuple[float, int, str]]
    wakes: tuple[tuple[float, str], ...]
    rejected: tuple[tuple[str, str], ...]


def _pending(
    e: EngineState,
    setup: EngineSetup,
    fast_lane: bool,
    leaf_order: bool,
    demand: Demand,
    remap: Sequence[int],
    leaves: set[int],
    rates_changed: bool,
    slack: float | None,
) -> _Queues:
    """Queues rebuilt on the new leaves with the new sort keys; the jobs that cannot stay, out.
    `slack`: the new deadline slack when it changed (deadline jobs wake at latest start - slack)."""
    knobs = setup.knobs
    fast = frozenset(knobs.fast_classes) if fast_lane else frozenset()
    keyed = leaf_order and knobs.leaf_order != "submit"
    pending, fast_q = PendingQueues(), list[tuple[int, str]]()
    deadline_q, deadline_entry = list(e.deadline_q), dict(e.deadline_entry)
    rejected: list[tuple[str, str]] = []
    wakes: list[tuple[float, str]] = []
    for was in e.pending.jobs.values():
        leaf = remap[was.leaf]
        if leaf not in leaves:
            rejected.append((was.id, LEAF_REMOVED))
        elif setup.classes is not None and was.cls not in setup.classes:
            rejected.append((was.id, CLASS_REMOVED))
        else:
            job = _moved(was, leaf)
            if rates_changed:
                job = dataclasses.replace(job, charge=min(c for _, c in demand.type_charges(job)))
            st = e.states[job.id]
            key = leaf_sort_key(job, st, knobs.leaf_order) if keyed else None
            pending.add(job, e.fleet.index, key, never_started=st.starts == 0)
            demand.add_pending(job)
            if job.cls in fast:
                bisect.insort(fast_q, (job.seq, job.id))
            entry = deadline_entry.get(job.id)
            if slack is not None and entry is not None and entry[0] - slack > e.t:
                wakes.append((entry[0] - slack, "wake"))
            continue
        entry = deadline_entry.pop(was.id, None)
        if entry is not None:
            del deadline_q[bisect.bisect_left(deadline_q, entry)]
    return _Queues(pending, fast_q, deadline_q, deadline_entry, tuple(wakes), tuple(rejected))


@dataclasses.dataclass
class _Runs:
    running: dict[str, RunView]
    by_leaf: dict[int, dict[str, RunView]]
    detached: dict[str, int]
    out: tuple[tuple[str, str | None], ...]


def _running(
    e: EngineState,
    setup: EngineSetup,
    rates: Mapping[str, float],
    demand: Demand,
    remap: Sequence[int],
    leaves: set[int],
    rates_changed: bool,
    surviving: Callable[[int], int],
) -> _Runs:
    """Runs on their new leaves (or charged straight to a node: their leaf is gone), in start order."""
    old_detached, detached = e.detached, {}
    running: dict[str, RunView] = {}
    by_leaf: dict[int, dict[str, RunView]] = {}
    out: list[tuple[str, str | None]] = []
    for job_id, before in e.running.items():
        job, node_i = before.job, before.alloc[0][0]
        charge = job.charge_on(e.nodes[node_i], rates) if rates_changed else before.charge
        leaf = remap[job.leaf]
        if job_id in old_detached or leaf not in leaves:
            was = old_detached.get(job_id, job.leaf)
            node = surviving(was) if was >= 0 else -1
            if node < 0:  # charged to no node; leaf 0 only indexes it for a pass's bookkeeping
                node, leaf, charge = -1, 0, 0.0
            else:
                leaf = node
            detached[job_id] = node
            demand.add_direct(node, charge)
            if job_id not in old_detached:
                out.append((job_id, setup.tree.paths[node] if node >= 0 else None))
        view = dataclasses.replace(before, job=_moved(job, leaf), charge=charge)
        running[job_id] = view
        if job_id not in detached:
            by_leaf.setdefault(leaf, {})[job_id] = view
            demand.add_run(leaf, e.fleet.index.node_type[node_i], charge)
    return _Runs(running, by_leaf, detached, tuple(out))


def _moved(job: JobRequest, leaf: int) -> JobRequest:
    return job if job.leaf == leaf else dataclasses.replace(job, leaf=leaf)


def _columns(values: np.ndarray, remap: Sequence[int], n: int) -> np.ndarray:
    """Per-node values (last axis: old node ids) on the new tree's ids; new nodes get zeros."""
    src = [i for i, j in enumerate(remap) if j >= 0]
    out = np.zeros((*values.shape[:-1], n))
    out[..., [remap[i] for i in src]] = values[..., src]
    return out


def remap_ledger(old: Ledger, remap: Sequence[int], n: int, window: float) -> Ledger:
    """`old`'s history on the new tree's nodes and window, from its instant (the module's rules)."""
    new = Ledger(n, window, old.n_buckets, start=old.t)
    new.rate = _columns(old.rate, remap, n)
    if new.width == old.width:
        new.ring, new.sums = _columns(old.ring, remap, n), _columns(old.sums, remap, n)
        return new
    moved = _columns(old.ring, remap, n)
    B, w0, w1 = old.n_buckets, old.width, new.width
    lo = max(0.0, (new.bucket - B + 1) * w1)  # where the new window starts: older history dropped
    for b in range(max(0, old.bucket - B + 1), old.bucket + 1):
        start, end = b * w0, min((b + 1) * w0, old.t)
        if end <= start or end <= lo:
            continue
        part = moved[b % B]
        k = int(max(start, lo) // w1)
        while k <= new.bucket and k * w1 < end:
            overlap = min(end, (k + 1) * w1) - max(start, lo, k * w1)
            if overlap > 0:
                new.ring[k % B] += part * (overlap / (end - start))
            k += 1
    new.sums = new.ring.sum(axis=0)
    return new
