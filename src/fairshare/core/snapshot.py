"""The scheduler's input: an immutable-by-contract snapshot of the cluster, queues and ledger.

A driver (simulator, service, Slurm driver) builds a Snapshot and calls `scheduler.decide` on it.
Large collections are read-only views of the driver's own structures, valid for the duration of
the call: the scheduler never mutates them (a test checks it) and never reads a clock or does I/O.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .model import LABEL_RANK, JobRequest, Knobs
from .placement import Alloc, FreeIndex, Shape, type_ids
from .tree import TreeIndex

PreemptReason = Literal["fair_share", "label", "drain", "deadline", "no_progress"]
HoldReason = Literal["no_capacity", "fragmented", "reserved", "no_victims"]


@dataclass(frozen=True, slots=True)
class RunView:
    """One running job as the scheduler sees it."""

    job: JobRequest
    t0: float
    alloc: Alloc
    charge: float
    overhead: float
    kept: float  # progress kept before this run
    protected_until: float
    hung_since: float | None = None  # reported to have stopped progressing then (None: not hung)
    ckpt_at: float | None = None  # when the run reported its last checkpoint (None: none reported)

    def __deepcopy__(self, memo: dict[int, Any]) -> RunView:
        return self  # immutable: copies of an engine state share it


@dataclass(slots=True)
class JobState:
    """Mutable per-job record owned by the driver."""

    kept: float = 0.0
    starts: int = 0
    stall_done: bool = False
    pending_since: float = 0.0
    preempted_by: str | None = None  # the job that last preempted this one
    preempt_retry_at: float = 0.0  # after finding no victims, fair-share preemption waits until then
    preempt_failed_at: float = -math.inf  # when it last found no victims
    preemptions: int = 0  # times its runs were preempted (any reason): the preemption budget
    attained: float = 0.0  # GPU-seconds of its runs so far (least attained service)
    requeue_boost: bool = False  # requeued and waiting knobs.requeue_first_after: first in its leaf


QueueKey = tuple[int, int, Shape]  # (leaf, label rank, shape)


def _key_order(k: QueueKey) -> tuple[int, int, int, tuple[int, ...]]:
    return (k[1], k[2].per_node, k[2].nodes, k[2].types or ())


SortKey = Any  # a job's place in its queue: its submit seq, or a tuple ending in it (leaf_order)


@dataclass
class PendingQueues:
    """Pending jobs in sorted queues keyed by (leaf, label rank, shape); each sorted by the job's
    sort key: its submit seq (requeued jobs go back to their submit position), or under fairshare's
    `leaf_order` (attained service, seq) or (remaining estimate, seq). Owned by the engine.
    """

    queues: dict[QueueKey, list[tuple[SortKey, str]]] = field(default_factory=dict)
    # per leaf: its queue keys in a fixed order (label rank, then shape), kept sorted on change
    by_leaf: dict[int, list[QueueKey]] = field(default_factory=dict)
    jobs: dict[str, JobRequest] = field(default_factory=dict)
    shape_of: dict[str, QueueKey] = field(default_factory=dict)
    key_of: dict[str, SortKey] = field(default_factory=dict)  # only keys other than the seq
    # per leaf: its pending jobs that never started, by (submit, seq), oldest first: how long the
    # leaf's backlog has waited, whatever its labels or leaf order (requeue_first_when_backlogged)
    fresh: dict[int, list[tuple[float, int, str]]] = field(default_factory=dict)

    def add(
        self, job: JobRequest, index: FreeIndex, sort_key: SortKey = None, *, never_started: bool
    ) -> None:
        key = (
            job.leaf,
            LABEL_RANK[job.label],
            Shape(type_ids(index, job.gpu_types) if job.gpu_types else None, job.per_node, job.nodes),
        )
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = []
            bisect.insort(self.by_leaf.setdefault(job.leaf, []), key, key=_key_order)
        if sort_key is None:
            bisect.insort(q, (job.seq, job.id))
        else:
            bisect.insort(q, (sort_key, job.id))
            self.key_of[job.id] = sort_key
        self.jobs[job.id] = job
        self.shape_of[job.id] = key
        if never_started:
            bisect.insort(self.fresh.setdefault(job.leaf, []), (job.submit, job.seq, job.id))

    def remove(self, job: JobRequest) -> None:
        key = self.shape_of.pop(job.id)
        del self.jobs[job.id]
        q = self.queues[key]
        i = bisect.bisect_left(q, (self.key_of.pop(job.id, job.seq), job.id))
        del q[i]
        if not q:
            del self.queues[key]
            leaf_keys = self.by_leaf[job.leaf]
            leaf_keys.remove(key)
            if not leaf_keys:
                del self.by_leaf[job.leaf]
        fresh = self.fresh.get(job.leaf)
        if fresh is not None:
            entry = (job.submit, job.seq, job.id)
            i = bisect.bisect_left(fresh, entry)
            if i < len(fresh) and fresh[i] == entry:
                del fresh[i]
                if not fresh:
                    del self.fresh[job.leaf]

    def oldest_fresh(self, leaf: int) -> float | None:
        """Submit time of the leaf's oldest pending job that never started (None: none)."""
        fresh = self.fresh.get(leaf)
        return fresh[0][0] if fresh else None

    def __len__(self) -> int:
        return len(self.jobs)


@dataclass(frozen=True)
class Snapshot:
    now: float
    knobs: Knobs
    tree: TreeIndex
    rates: Mapping[str, float]
    index: FreeIndex
    drain_due: frozenset[int]  # draining nodes whose drain deadline has come
    running: Mapping[str, RunView]  # in start order
    running_by_leaf: Mapping[int, Mapping[str, RunView]]
    pending: PendingQueues
    states: Mapping[str, JobState]
    debt: Sequence[float]  # window debt per tree node, GPU-equivalent seconds
    owed: Sequence[float]  # owed rate per tree node now
    used: Sequence[float]  # running charge per tree node now
    entitlement: Sequence[float]  # ∫owed over the window per tree node (GPU-equivalent seconds)
    hung: Sequence[str] = ()  # running jobs reported to have stopped making progress
    deadline_queue: Sequence[tuple[float, int, str]] = ()  # pending deadline jobs by latest start
    decayed_usage: Sequence[float] = ()  # half-life decayed usage per tree node (slurm-multifactor)
    # per tree node (leaves): the latest time one of its runs left its protected window while it
    # could be a victim; a job in preemption backoff whose group may take from that leaf, and that
    # found no victims before then, may look again at once (empty: no such times)
    victims_at: Sequence[float] = ()
    # the flip guard: (taker side, victim side) -> when the taker's side last took a run of the
    # victim's side by fair-share preemption (sides: the children of the two leaves' lowest common
    # ancestor); the pairs a pass may not reverse within knobs.flip_guard
    took_from: Mapping[tuple[int, int], float] = field(default_factory=dict)
    fast_queue: Sequence[tuple[int, str]] = ()  # pending jobs of knobs.fast_classes, by (seq, job)
    prev_reservation: tuple[str, tuple[int, ...]] | None = None  # the last pass's first reservation
    backfill_due: bool = True  # slurm-multifactor: bf_interval has passed since the last backfill


@dataclass(frozen=True, slots=True)
class Start:
    job: str
    alloc: Alloc
    charge: float
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Preempt:
    job: str
    reason: PreemptReason
    by: str | None
    lost_gpu_s: float
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Hold:
    job: str
    reason: HoldReason
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Decisions:
    """Preemptions take effect before starts (FORMATS.md, order within one instant)."""

    preempts: tuple[Preempt, ...]
    starts: tuple[Start, ...]
    holds: tuple[Hold, ...]
    reservation: tuple[str, tuple[int, ...]] | None = None  # (job, nodes held for it)
    # when asked for (decide(..., explain=True)): every job pending at the snapshot in the
    # strategy's order, and why each one that does not start waits
    order: tuple[str, ...] = ()
    why_pending: Mapping[str, HoldReason] = field(default_factory=dict)
    backfilled: bool = False  # the pass ran a backfill cycle (slurm-multifactor)


def leaf_sort_key(job: JobRequest, st: JobState, leaf_order: str) -> SortKey:
    """A job's place in its leaf's queues when keyed (knobs.leaf_order, fairshare only): (GPU-
    seconds run so far, seq) for las; (estimate left, seq) for shortest."""
    if st.requeue_boost:  # requeued and waiting requeue_first_after: first, by preemption
        return (-1.0, st.pending_since, job.seq)
    if leaf_order == "las":
        return (st.attained, job.seq)
    return (max(0.0, job.estimate - st.kept), job.seq)
