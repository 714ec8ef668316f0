"""Reservation backfill past the ordered walk's failures (fairshare, issue 20).

The ordered walk (scheduler._Pass.ordered) drops a queue, and every larger shape, at its first job
that cannot start, so a shorter job behind a long one never reached GPUs held for a later start.
After the walk, `run` looks at the jobs not tried yet: leaves by the fair-share walk's priorities
(top level first), each leaf's jobs in its order with its label queues merged (labels do not change
what is looked at), at most BACKFILL_SCAN jobs per leaf and BACKFILL_TESTS placements per pass. A
job starts where it fits when its estimated end comes by the expected start of the held GPUs it
would use (Tentative.avail: Slurm's backfill rule; the estimate only, never the run time).
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Protocol

from .fairness import PassPriorities
from .model import TIME_EPS, JobRequest
from .placement import Alloc, Shape, Tentative, place
from .snapshot import Snapshot


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class BackfillPass(Protocol):
    """What the step reads and does of the scheduling pass it runs in (scheduler._Pass)."""

    s: Snapshot
    view: Tentative
    prio: PassPriorities
    handled: set[str]

    @property
    def strategy(self) -> _Named: ...
    def shape_of(self, job: JobRequest) -> Shape: ...
    def wait(self, job: JobRequest) -> float: ...
    def estimated_end(self, job: JobRequest) -> float | None: ...
    def start(self, job: JobRequest, alloc: Alloc, evidence: dict[str, Any]) -> None: ...


BACKFILL_SCAN = 64  # jobs of one leaf looked at per pass
BACKFILL_TESTS = 256  # placements tried per pass


def run(p: BackfillPass) -> None:
    """Start the jobs the walk did not reach on held GPUs they give back in time (see above)."""
    s, view, index = p.s, p.view, p.s.index
    idle = [i for i in view.held if index.available[i] and view.free(i) > 0]
    if not idle:
        return
    latest = max(view.held_until.get(i, math.inf) for i in idle)
    most = max(view.free(i) for i in idle)
    anc, prio = s.tree.leaf_ancestors, p.prio
    leaves = sorted(s.pending.by_leaf, key=lambda leaf: ([-prio(a) for a in reversed(anc[leaf])], leaf))
    tests = 0
    for leaf in leaves:
        queues = [s.pending.queues[qk] for qk in s.pending.by_leaf.get(leaf, ())]
        for _, jid in itertools.islice(heapq.merge(*queues), BACKFILL_SCAN):
            if jid in p.handled:
                continue
            job = s.pending.jobs[jid]
            shape = p.shape_of(job)
            if shape.per_node > most:
                continue
            until = p.estimated_end(job)
            if until is None or until > latest + TIME_EPS:
                continue
            tests += 1
            view.until = until
            alloc = place(view, jid, shape)
            view.until = None
            if alloc is not None:
                ev: dict[str, Any] = {
                    "phase": "reservation_backfill",
                    "order": p.strategy.name,
                    "waited_s": p.wait(job),
                }
                p.start(job, alloc, ev)
                idle = [i for i in idle if view.free(i) > 0]
                if not idle:
                    return
                most = max(view.free(i) for i in idle)
            if tests >= BACKFILL_TESTS:
                return
