"""Discrete-event replay driving the scheduling core (DESIGN.md §1, FORMATS.md replay semantics).

The event heap is keyed by (t, rank, sequence): equal times resolve in FORMATS.md's order
(finishes, drains/undrains, submits, then one scheduling pass) and equal ranks in push order, so the
same inputs always give the same event log. The simulator owns time and I/O; the core only sees a
Snapshot. Internal wake-ups (protection ends, hangs, deadline latest starts, gang waits, exception
expiries) never appear in events.jsonl; they only make a pass happen at that instant.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from .._units import format_epoch
from ..core.contract import kept_on_preempt, overhead_of, plan_run, run_progress
from ..core.placement import FreeIndex
from ..core.scheduler import deadline_due, decide, may_be_victim
from ..core.snapshot import Decisions, JobState, PendingQueues, RunView, Snapshot
from ..core.strategies import Strategy, get_strategy
from ..engine.ledger import DecayLedger, Ledger, effective_fractions, effective_shares, water_fill
from ..inputs.cluster import Cluster
from ..inputs.policy import Policy, ResolvedException, TreeIndex, resolve_exceptions
from ..inputs.workload import Job
from .metrics import IntervalState, MetricsRecorder
from .results import ReplayResult

FINISH, DRAIN, SUBMIT, WAKE = 0, 1, 2, 3
# events and decisions are written with orjson (about ten times json.dumps's speed on these lines)
_ORJSON_OPTS = orjson.OPT_SERIALIZE_NUMPY


@dataclass
class ReplayOutput:
    events: list[str]
    decisions: list[str]
    result: ReplayResult


@dataclass
class _Fleet:
    """Capacity bookkeeping kept incrementally (no per-event scan of the nodes)."""

    index: FreeIndex
    rates: list[float]
    capacity: float = 0.0
    allocated: int = 0
    idle_available: int = 0
    draining: dict[int, float] = field(default_factory=dict)  # node -> drain deadline
    cap_t: list[float] = field(default_factory=list)  # per GPU type (FreeIndex type ids)
    alloc_t: list[int] = field(default_factory=list)
    idle_t: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        k = len(self.index.types)
        self.cap_t, self.alloc_t, self.idle_t = [0.0] * k, [0] * k, [0] * k
        for i, n in enumerate(self.index.nodes):
            ty = self.index.node_type[i]
            self.cap_t[ty] += self.rates[i] * n.gpus
            self.idle_t[ty] += n.gpus
        self.capacity = sum(self.cap_t)
        self.idle_available = sum(self.idle_t)

    def change_free(self, i: int, delta: int) -> None:
        ty = self.index.node_type[i]
        self.index.set_free(i, self.index.free[i] + delta)
        self.allocated -= delta
        self.alloc_t[ty] -= delta
        if i in self.draining:
            self.capacity -= self.rates[i] * delta
            self.cap_t[ty] -= self.rates[i] * delta
        else:
            self.idle_available += delta
            self.idle_t[ty] += delta

    def drain(self, i: int, deadline: float) -> None:
        if i not in self.draining:
            ty, free = self.index.node_type[i], self.index.free[i]
            self.capacity -= self.rates[i] * free
            self.cap_t[ty] -= self.rates[i] * free
            self.idle_available -= free
            self.idle_t[ty] -= free
            self.index.set_available(i, False)
        self.draining[i] = deadline

    def undrain(self, i: int) -> None:
        if self.draining.pop(i, None) is not None:
            ty, free = self.index.node_type[i], self.index.free[i]
            self.capacity += self.rates[i] * free
            self.cap_t[ty] += self.rates[i] * free
            self.idle_available += free
            self.idle_t[ty] += free
            self.index.set_available(i, True)


class Simulator:
    """One replay of one policy over one workload. Each instance owns all of its state."""

    def __init__(
        self,
        policy: Policy,
        tree: TreeIndex,
        cluster: Cluster,
        jobs: Sequence[Job],
        strategy: Strategy | str,
        scenario: str = "workload",
        where: str = "policy",
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.policy, self.tree, self.cluster, self.jobs = policy, tree, cluster, list(jobs)
        self.strategy = (
            get_strategy(strategy, policy.scheduling.preemption) if isinstance(strategy, str) else strategy
        )
        self.scenario = scenario
        self.progress = progress
        self.rates = dict(policy.gpu_rates)
        self.exceptions: tuple[ResolvedException, ...] = resolve_exceptions(
            policy, tree, cluster.epoch, where, strict=True
        )
        index = FreeIndex(cluster.nodes)
        self.fleet = _Fleet(index, [self.rates.get(n.gpu_type, 1.0) for n in cluster.nodes])
        self.heap: list[tuple[float, int, int, str, Any]] = []
        self.seq = 0
        self.t = 0.0
        self.states: dict[str, JobState] = {}
        self.pending = PendingQueues()
        self.running: dict[str, RunView] = {}
        self.by_leaf: dict[int, dict[str, RunView]] = {}
        self.run_token: dict[str, int] = {}
        self.hung: dict[str, float] = {}
        self.deadline_q: list[tuple[float, int, str]] = []
        self.deadline_entry: dict[str, tuple[float, int, str]] = {}
        n = len(tree.paths)
        self.leaf_pending = [0.0] * n
        self.leaf_used = [0.0] * n
        self.leaf_pending_n = [0] * n
        self.node_pending = [0.0] * n
        k = len(self.fleet.index.types)
        self.multi_type = k > 1
        self.type_rep = [index.node_type.index(ty) for ty in range(k)]  # a node of each type
        self.leaf_pending_t = np.zeros((k, n))
        self.leaf_pending_n_t = np.zeros((k, n), dtype=np.int64)
        self.leaf_used_t = np.zeros((k, n))
        self.leaf_runs_t = np.zeros((k, n), dtype=np.int64)
        self.up = np.zeros((n, n))  # up[leaf, a] = 1 when a is the leaf or one of its ancestors
        for leaf in tree.leaves:
            for a in tree.leaf_ancestors[leaf]:
                self.up[leaf, a] = 1.0
        self.node_used = [0.0] * n
        self.static = tree.static_frac
        self.static_vec = np.asarray(tree.static_frac)
        self.pending_shapes: Counter[tuple[tuple[str, ...] | None, int, int]] = Counter()
        self.shares = effective_shares(tree, self.exceptions, 0.0)
        self.fraction = effective_fractions(tree, self.shares)
        self.ledger = Ledger(n, policy.window)
        sched = policy.scheduling
        self.decay = (
            DecayLedger(n, sched.decay_half_life, sched.decay_period)
            if self.strategy.usage_model == "decay"
            else None
        )
        gpus_of_type = [0] * len(index.types)
        for i, node in enumerate(cluster.nodes):
            gpus_of_type[index.node_type[i]] += node.gpus
        self.metrics = MetricsRecorder(tree, policy.window, index.types, tuple(gpus_of_type))
        self.events: list[str] = []
        self.decisions: list[str] = []
        self.last_hold: dict[str, str] = {}
        self.retry_wakes: set[float] = set()
        self.last_reservation: tuple[str, tuple[int, ...]] | None = None
        self.finished = 0
        self.dirty = True
        self.need_pass = False  # an event since the last pass may change its outcome
        self.victims_at = [-math.inf] * n  # per leaf: its latest protection end that made a victim
        self.protect_ended: list[tuple[str, int]] = []  # (job, run token) at the current instant
        self.rates_state: IntervalState | None = None
        self.flushed = 0.0  # ledger and metrics are integrated up to here
        self.used_vec: np.ndarray[Any, np.dtype[np.float64]] = np.zeros(n)
        self.owed_vec: np.ndarray[Any, np.dtype[np.float64]] = np.zeros(n)
        self.owed_list: list[float] = [0.0] * n
        self.used_list: list[float] = [0.0] * n
        self._owed_key: tuple[list[float], float, Sequence[float]] | None = None  # water_fill memo
        self._owed: list[float] = []

    # ------------------------------------------------------------------ heap
    def push(self, t: float, rank: int, kind: str, payload: Any) -> None:
        heapq.heappush(self.heap, (t, rank, self.seq, kind, payload))
        self.seq += 1

    def emit(self, obj: dict[str, Any]) -> None:
        """One line of events.jsonl: compact JSON, floats in their shortest round-trip form."""
        self.events.append(orjson.dumps(obj, option=_ORJSON_OPTS).decode())

    # ------------------------------------------------------------------ rates and integration
    def _leaf_changed(self, leaf: int) -> None:
        """Re-add the leaf's ancestors from their children (exact: no running float residue)."""
        pending, used, children = self.node_pending, self.node_used, self.tree.children
        pending[leaf], used[leaf] = self.leaf_pending[leaf], self.leaf_used[leaf]
        for a in self.tree.leaf_ancestors[leaf][1:]:
            pending[a] = sum(pending[c] for c in children[a])
            used[a] = sum(used[c] for c in children[a])

    def _type_charges(self, job: Job) -> list[tuple[int, float]]:
        """(type id, charge on a node of that type) for every GPU type the job may use."""
        index = self.fleet.index
        ids = range(len(index.types)) if job.gpu_types is None else [index.type_id[t] for t in job.gpu_types]
        return [(ty, job.charge_on(self.cluster.nodes[self.type_rep[ty]], self.rates)) for ty in ids]

    def _owed_used(self) -> tuple[list[float], list[float]]:
        """Owed rate (water-filling) and running charge of every tree node, now."""
        used = list(self.node_used)
        demand = [p + u for p, u in zip(self.node_pending, used, strict=True)]
        # owed depends on demand, capacity and shares only: a start or a preemption moves charge
        # between pending and running and leaves it as it was
        key = (demand, self.fleet.capacity, self.shares)
        if key != self._owed_key:
            self._owed_key = key
            self._owed = water_fill(self.tree, self.fleet.capacity, demand, self.shares)
        return self._owed, used

    def _rates_now(self) -> tuple[list[float], list[float]]:
        """Owed and used rates after the events handled so far at this instant (the last
        recomputed ones when nothing changed since)."""
        if self.dirty or self.rates_state is None:
            return self._owed_used()
        return self.owed_list, self.used_list

    def _recompute(self) -> IntervalState:
        owed, used = self._owed_used()
        self.owed_list, self.used_list = owed, used
        cap = self.fleet.capacity
        fleet = self.fleet
        k = len(fleet.cap_t)
        rates = np.empty((3 + 2 * k, len(owed)))
        rates[0] = owed
        rates[1] = used
        np.maximum(rates[1] - self.static_vec * cap, 0.0, out=rates[2])
        if k == 1:  # one GPU type: everything is delivered and owed on it
            rates[3] = rates[1]
            rates[4] = rates[0]
        else:
            # per GPU type: delivered on it, and its capacity water-filled over the groups that
            # have demand for it (runs on it, pending jobs that may use it)
            np.matmul(self.leaf_used_t, self.up, out=rates[3 : 3 + k])
            demand_t = (self.leaf_pending_t + self.leaf_used_t) @ self.up
            for ty in range(k):
                rates[3 + k + ty] = water_fill(self.tree, fleet.cap_t[ty], demand_t[ty].tolist(), self.shares)
        self.owed_vec = rates[0]
        self.used_vec = rates[1]
        self.ledger.set_rates(self.owed_vec, self.used_vec)
        if self.decay is not None:
            self.decay.set_rate(self.used_vec)
        return IntervalState(
            rates,
            self.fleet.capacity,
            self.fleet.allocated,
            self.fleet.idle_available,
            self._fragmented(),
            np.array([fleet.alloc_t, fleet.idle_t], dtype=np.float64),
        )

    def _fragmented(self) -> float:
        """Idle GPUs of types that some pending job could use but not be placed on (FORMATS.md)."""
        if not self.pending_shapes:
            return 0.0
        index = self.fleet.index
        # per type: nodes taking work with at least x free GPUs (suffix sums), and free GPUs in total
        at_least: list[list[int]] = []
        free = index.free_t
        for buckets in index.buckets:
            suffix = [len(b) for b in buckets]
            for x in range(len(suffix) - 2, -1, -1):
                suffix[x] += suffix[x + 1]
            at_least.append(suffix)
        blocked: set[int] = set()
        all_types = range(len(index.types))
        for types, gpus, k in self.pending_shapes:
            ids = all_types if types is None else [index.type_id[t] for t in types]
            ok = [ty for ty in ids if at_least[ty][0] > 0]
            if gpus > sum(free[ty] for ty in ok):
                continue
            per = -(-gpus // k)
            if not any(per < len(at_least[ty]) and at_least[ty][per] >= k for ty in ok):
                blocked.update(ok)
        return float(sum(free[ty] for ty in sorted(blocked)))

    def advance(self, t: float) -> None:
        """Move the clock to t. Rates are constant between state changes, so integration into the
        ledger and the metrics is deferred until the state changes or someone reads them."""
        if self.dirty or self.rates_state is None:
            self._flush()
            self.rates_state = self._recompute()
            self.dirty = False
        self.t = max(self.t, t)

    def _flush(self) -> None:
        """Integrate the current rates over [last flush, now] into the ledger and the metrics."""
        if self.t > self.flushed and self.rates_state is not None:
            self.ledger.advance(self.t)
            if self.decay is not None:
                self.decay.advance(self.t)
            self.metrics.interval(self.flushed, self.t, self.rates_state)
        self.flushed = self.t

    # ------------------------------------------------------------------ events
    def _submit(self, job: Job) -> None:
        self.states[job.id] = JobState(pending_since=job.submit)
        self.metrics.job_submitted(job)
        self.emit(job.submit_event())
        self._to_pending(job)

    def _to_pending(self, job: Job) -> None:
        self.pending.add(job, self.fleet.index)
        self.leaf_pending[job.leaf] += job.charge
        self.leaf_pending_n[job.leaf] += 1
        self._leaf_changed(job.leaf)
        if self.multi_type:
            for ty, c in self._type_charges(job):
                self.leaf_pending_t[ty, job.leaf] += c
                self.leaf_pending_n_t[ty, job.leaf] += 1
        self.pending_shapes[(job.gpu_types, job.gpus, job.nodes)] += 1
        if job.deadline is not None:
            st = self.states[job.id]
            latest = job.deadline - (overhead_of(job, st.starts > 0) + job.work - st.kept)
            entry = (latest, job.seq, job.id)
            self.deadline_entry[job.id] = entry
            bisect.insort(self.deadline_q, entry)
            wake = latest - self.policy.scheduling.deadline_slack
            if wake > self.t:
                self.push(wake, WAKE, "wake", None)
        if self.strategy.gang_reservation and job.nodes > 1:
            self.push(self.t + self.policy.scheduling.gang_reserve_after, WAKE, "wake", None)
        self.dirty = True

    def _from_pending(self, job: Job) -> None:
        self.pending.remove(job)
        if self.multi_type:
            for ty, c in self._type_charges(job):
                self.leaf_pending_n_t[ty, job.leaf] -= 1
                left = self.leaf_pending_n_t[ty, job.leaf]
                self.leaf_pending_t[ty, job.leaf] = self.leaf_pending_t[ty, job.leaf] - c if left else 0.0
        self.leaf_pending_n[job.leaf] -= 1
        # reset to an exact zero when empty, so float residue never reads as demand
        self.leaf_pending[job.leaf] = (
            self.leaf_pending[job.leaf] - job.charge if self.leaf_pending_n[job.leaf] else 0.0
        )
        self._leaf_changed(job.leaf)
        key = (job.gpu_types, job.gpus, job.nodes)
        self.pending_shapes[key] -= 1
        if not self.pending_shapes[key]:
            del self.pending_shapes[key]
        entry = self.deadline_entry.pop(job.id, None)
        if entry is not None:
            del self.deadline_q[bisect.bisect_left(self.deadline_q, entry)]
        self.dirty = True

    def _start(self, job: Job, alloc: tuple[tuple[int, int], ...], charge: float) -> None:
        t = self.t
        st = self.states[job.id]
        self._from_pending(job)
        for i, g in alloc:
            self.fleet.change_free(i, -g)
        plan = plan_run(job, t, st.kept, st.starts > 0, st.stall_done)
        view = RunView(
            job, t, alloc, charge, plan.overhead, st.kept, st.stall_done, plan.protected_until, plan.stall_at
        )
        st.starts += 1
        self.running[job.id] = view
        self.by_leaf.setdefault(job.leaf, {})[job.id] = view
        self.leaf_used[job.leaf] += charge
        ty = self.fleet.index.node_type[alloc[0][0]]
        self.leaf_used_t[ty, job.leaf] += charge
        self.leaf_runs_t[ty, job.leaf] += 1
        self._leaf_changed(job.leaf)
        token = self.run_token.get(job.id, 0) + 1
        self.run_token[job.id] = token
        if plan.finish_at is not None:
            self.push(plan.finish_at, FINISH, "finish", (job.id, token))
        if plan.stall_at is not None:
            self.push(plan.stall_at, WAKE, "stall", (job.id, token))
            self.push(plan.stall_at + job.max_stall, WAKE, "wake", None)
        if (self.strategy.victims != "none" or self.strategy.deadline_reservation) and job.protected > 0:
            self.push(plan.protected_until, WAKE, "protect", (job.id, token))
        self.metrics.job_started(job.id, t)
        nodes = self.cluster.nodes
        self.emit(
            {
                "t": t,
                "type": "start",
                "job": job.id,
                "alloc": {nodes[i].name: g for i, g in alloc},
                "charge": charge,
            }
        )
        self.dirty = True

    def _stop(self, job_id: str) -> RunView:
        view = self.running.pop(job_id)
        del self.by_leaf[view.job.leaf][job_id]
        if not self.by_leaf[view.job.leaf]:
            del self.by_leaf[view.job.leaf]
        self.hung.pop(job_id, None)
        for i, g in view.alloc:
            self.fleet.change_free(i, g)
        ty = self.fleet.index.node_type[view.alloc[0][0]]
        self.leaf_runs_t[ty, view.job.leaf] -= 1
        self.leaf_used_t[ty, view.job.leaf] = (
            self.leaf_used_t[ty, view.job.leaf] - view.charge if self.leaf_runs_t[ty, view.job.leaf] else 0.0
        )
        self.leaf_used[view.job.leaf] = (
            self.leaf_used[view.job.leaf] - view.charge if view.job.leaf in self.by_leaf else 0.0
        )
        self._leaf_changed(view.job.leaf)
        self.run_token[job_id] = self.run_token.get(job_id, 0) + 1
        self.dirty = True
        return view

    def _finish(self, job_id: str) -> None:
        self._stop(job_id)
        self.finished += 1
        self.metrics.job_finished(job_id, self.t)
        self.emit({"t": self.t, "type": "finish", "job": job_id})

    def _preempt(self, job_id: str, reason: str, by: str | None, lost: float) -> None:
        view = self._stop(job_id)
        job, st = view.job, self.states[job_id]
        progress, reached = run_progress(job, view.t0, self.t, view.overhead, view.kept, view.stall_done)
        kept = kept_on_preempt(job, progress, view.kept)
        st.kept = view.kept + kept if job.resumable else 0.0
        if reached or (view.stall_at is not None and self.t >= view.stall_at):
            st.stall_done = True
        st.preempted_by = by
        st.pending_since = self.t
        self.metrics.job_preempted(job_id, self.t, lost)
        self.emit(
            {"t": self.t, "type": "preempt", "job": job_id, "reason": reason, "by": by, "lost_gpu_s": lost}
        )
        self._to_pending(job)
        self.push(self.t + self.policy.scheduling.requeue_delay, WAKE, "wake", None)

    def _drain(self, nodes: tuple[int, ...], deadline: float) -> None:
        for i in nodes:
            self.fleet.drain(i, deadline)
            self.emit(
                {"t": self.t, "type": "drain", "node": self.cluster.nodes[i].name, "deadline": deadline}
            )
        self.dirty = True

    def _undrain(self, nodes: tuple[int, ...]) -> None:
        for i in nodes:
            if i in self.fleet.draining:
                self.fleet.undrain(i)
                self.emit({"t": self.t, "type": "undrain", "node": self.cluster.nodes[i].name})
        self.dirty = True

    def _protections_ended(self, ended: list[tuple[str, int]]) -> None:
        """Runs whose protected window ended at this instant, judged after all of the instant's
        other events (a finish, submit or expiry at the same t may change who is over-served).

        A run that could not be a victim with the rates as they are now (scheduler.may_be_victim)
        gets no pass: rates only change at events, and every event gets a pass of its own, so the
        run is considered at the pass of the event that makes it a possible victim."""
        owed, used = self._rates_now()
        q = self.deadline_q
        urgent = bool(q) and deadline_due(q[0][0], self.policy.scheduling.deadline_slack, self.t)
        for job_id, token in ended:
            if self.run_token.get(job_id) == token and job_id in self.running:
                view = self.running[job_id]
                ancestors = self.tree.leaf_ancestors[view.job.leaf]
                if may_be_victim(self.strategy, ancestors, used, owed, urgent):
                    self.need_pass = True
                    self.victims_at[view.job.leaf] = self.t

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "protect":
            self.protect_ended.append(payload)
            return
        self.need_pass = True
        if kind == "finish":
            job_id, token = payload
            if self.run_token.get(job_id) == token and job_id in self.running:
                self._finish(job_id)
        elif kind == "submit":
            self._submit(payload)
        elif kind == "drain":
            self._drain(*payload)
        elif kind == "undrain":
            self._undrain(payload)
        elif kind == "stall":
            job_id, token = payload
            if self.run_token.get(job_id) == token and job_id in self.running:
                self.hung[job_id] = self.t
        elif kind == "expiry":
            self.shares = effective_shares(self.tree, self.exceptions, self.t)
            self.fraction = effective_fractions(self.tree, self.shares)
            self.dirty = True

    # ------------------------------------------------------------------ the pass
    def _pass(self) -> None:
        due = frozenset(i for i, d in self.fleet.draining.items() if self.t >= d - 1e-9)
        if not len(self.pending) and not due and not self.hung:
            return
        # the full interval state (metrics, fragmentation) waits for the next advance; the core
        # only needs owed and used rates as they are now
        owed, used = self._rates_now()
        self._flush()  # the ledger's debt must be current
        snap = Snapshot(
            now=self.t,
            policy=self.policy,
            tree=self.tree,
            rates=self.rates,
            index=self.fleet.index,
            drain_due=due,
            running=self.running,
            running_by_leaf=self.by_leaf,
            pending=self.pending,
            states=self.states,
            debt=self.ledger.debt().tolist(),
            owed=owed,
            used=used,
            entitlement=self.ledger.owed_sum.tolist(),
            fraction=self.fraction,
            hung=tuple(self.hung),
            deadline_queue=self.deadline_q,
            decayed_usage=self.decay.usage.tolist() if self.decay is not None else (),
            victims_at=self.victims_at,  # read-only during the pass
        )
        d = decide(snap, self.strategy)
        self._apply(d)

    def _apply(self, d: Decisions) -> None:
        for p in d.preempts:
            self._preempt(p.job, p.reason, p.by, p.lost_gpu_s)
            self._audit(
                "preempt", p.job, {"reason": p.reason, "by": p.by, "lost_gpu_s": p.lost_gpu_s, **p.evidence}
            )
        for s in d.starts:
            job = self.pending.jobs[s.job]
            self._start(job, s.alloc, s.charge)
            self.last_hold.pop(s.job, None)
            self._audit(
                "start", s.job, {"nodes": [self.cluster.nodes[i].name for i, _ in s.alloc], **s.evidence}
            )
        if d.reservation != self.last_reservation:
            self.last_reservation = d.reservation
            if d.reservation is not None:
                job_id, nodes = d.reservation
                self._audit("reserve", job_id, {"nodes": [self.cluster.nodes[i].name for i in nodes]})
        backoff = self.policy.scheduling.preempt_backoff
        for h in d.holds:
            if h.reason == "no_victims":
                # retries fall on a grid of `backoff`, so one pass serves every job due then
                retry = (math.floor(self.t / backoff) + 2) * backoff if backoff > 0 else self.t
                st = self.states[h.job]
                st.preempt_retry_at, st.preempt_failed_at = retry, self.t
                if retry not in self.retry_wakes:
                    self.retry_wakes.add(retry)
                    self.push(retry, WAKE, "wake", None)
            if self.last_hold.get(h.job) != h.reason:
                self.last_hold[h.job] = h.reason
                self._audit("hold", h.job, {"reason": h.reason, **h.evidence})

    def _audit(self, kind: str, job: str, evidence: dict[str, Any]) -> None:
        line = orjson.dumps({"t": self.t, "decision": kind, "job": job, **evidence}, option=_ORJSON_OPTS)
        self.decisions.append(line.decode())

    # ------------------------------------------------------------------ run
    def run(self) -> ReplayOutput:
        horizon = self.cluster.horizon
        for job in self.jobs:
            self.push(job.submit, SUBMIT, "submit", job)
        for m in self.cluster.maintenance:
            self.push(m.start, DRAIN, "drain", (m.nodes, m.deadline))
            if m.deadline > m.start:
                self.push(m.deadline, WAKE, "wake", None)
            if m.end is not None:
                self.push(m.end, DRAIN, "undrain", m.nodes)
        for ex in self.exceptions:
            self.push(ex.expires_t, DRAIN, "expiry", None)
        total = len(self.jobs)
        end: float | None = 0.0 if total == 0 else None  # every job has finished: vacuously at t = 0
        processed = 0
        while self.heap and end is None:
            t = self.heap[0][0]
            if horizon is not None and t > horizon:
                break
            self.advance(t)
            self.need_pass = False
            while self.heap and self.heap[0][0] == t:
                _, _, _, kind, payload = heapq.heappop(self.heap)
                self._handle(kind, payload)
            if self.protect_ended:
                self._protections_ended(self.protect_ended)
                self.protect_ended = []
            if self.need_pass:
                self._pass()
            if self.progress is not None and self.finished - processed >= 1000:
                self.progress(self.finished - processed)
                processed = self.finished
            if self.finished == total:
                end = t
                break
        if end is None:
            end = horizon if horizon is not None else self.t
        self.advance(end)
        self._flush()
        self.emit({"t": end, "type": "end"})
        if self.progress is not None:
            self.progress(self.finished - processed)
        metrics = self.metrics.finalize(
            end,
            self.strategy.name,
            self.scenario,
            format_epoch(self.cluster.epoch),
            self.policy.gates,
            self.exceptions,
        )
        waits = {c: tuple(v) for c, v in self.metrics.waits(end).items()}
        result = ReplayResult(
            self.strategy.name,
            self.scenario,
            metrics,
            self.metrics.series(),
            waits,
            {g: s / 3600 for g, s in self.metrics.lost_by_top.items()},
        )
        return ReplayOutput(self.events, self.decisions, result)
