"""Slurm's main scheduler and backfill: the `slurm` phase of the faithful `slurm-multifactor`.

Slurm (sched/backfill; slurm.conf(5) SchedulerParameters) schedules in two loops:

  main scheduler  on every event, jobs in strict priority order; once a job of a partition is
                  left pending, no lower-priority job of that partition starts ("to avoid taking
                  resources from the higher-priority pending job", sched_config.html);
  backfill        every `bf_interval` (30 s), and only after a change, up to `bf_max_job_test`
                  (500) jobs in priority order: each gets the earliest start at which its GPUs are
                  free for its whole time limit, given the running jobs' ends (start + time limit)
                  and the reservations of the jobs tested before it; it starts now if that start
                  is now, otherwise the GPUs are reserved for it from then when the start is within
                  `bf_window` (1 d). With `bf_job_part_count_reserve` 0 (the default) every tested
                  job reserves, so a lower-priority job starts only if it delays none of them
                  (conservative backfill).

The time limit is the job's declared estimate plus its start overhead, less the progress it kept
(the core never sees the true run time). A run past its limit is not killed in a replay (FORMATS),
so it is planned to end `bf_resolution` (60 s) from now, as Slurm's plan keeps it until the kill.
A gang's nodes are of one GPU type. Standard library only, like the rest of the core.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from .contract import overhead_of
from .model import JobRequest
from .placement import Alloc, Shape, Tentative, place
from .snapshot import Hold, HoldReason, Snapshot, Start


class BackfillPass(Protocol):
    """What the slurm phase reads of, and does to, the scheduling pass (scheduler._Pass)."""

    s: Snapshot
    view: Tentative
    handled: set[str]
    gone: set[str]
    starts: list[Start]
    holds: list[Hold]
    backfilled: bool

    @property
    def strategy(self) -> Any: ...
    @property
    def prio(self) -> Any: ...
    def start(self, job: JobRequest, alloc: Alloc, evidence: dict[str, Any]) -> None: ...
    def shape_of(self, job: JobRequest) -> Shape: ...
    def wait(self, job: JobRequest) -> float: ...
    def hold_reason(self, job: JobRequest, shape: Shape, tried_preempting: bool) -> HoldReason: ...


class NodeSpace:
    """The free-GPU profile of every node over time: per node, breakpoints `times` and the free
    GPUs `free[k]` on [times[k], times[k+1]) (the last segment lasts forever)."""

    def __init__(self, now: float, free_now: dict[int, int]) -> None:
        self.now = now
        self.times: dict[int, list[float]] = {i: [now] for i in free_now}
        self.free: dict[int, list[int]] = {i: [f] for i, f in free_now.items()}
        self._pending: dict[int, list[tuple[float, int]]] = {}
        # per node, per GPU count g: the first segment with at least g free (a memo, dropped when
        # the node's profile changes)
        self._first: dict[int, dict[int, int]] = {}

    def release(self, i: int, t: float, g: int) -> None:
        """g GPUs of node i come free at t (collected, then folded in by `seal`)."""
        if i in self.times:
            self._pending.setdefault(i, []).append((max(t, self.now), g))

    def seal(self) -> None:
        for i, rel in self._pending.items():
            rel.sort()
            times, free = self.times[i], self.free[i]
            f = free[0]
            for t, g in rel:
                f += g
                if t <= times[-1]:
                    free[-1] = f
                else:
                    times.append(t)
                    free.append(f)
        self._pending = {}

    def free_now(self, i: int) -> int:
        return self.free[i][0]

    def nodes(self) -> Iterable[int]:
        return self.times.keys()

    def _split(self, i: int, t: float) -> int:
        """Index of the segment starting at t (a breakpoint is inserted if needed)."""
        times, free = self.times[i], self.free[i]
        k = bisect.bisect_right(times, t) - 1
        if times[k] == t:
            return k
        times.insert(k + 1, t)
        free.insert(k + 1, free[k])
        return k + 1

    def take(self, i: int, start: float, end: float, g: int) -> None:
        """Occupy g GPUs of node i over [start, end)."""
        a = self._split(i, start)
        b = self._split(i, end)
        free = self.free[i]
        for k in range(a, b):
            free[k] -= g
        self._first.pop(i, None)

    def best_single(
        self, nodes: Iterable[int], g: int, d: float, latest: float, now: float
    ) -> tuple[float, int, int] | None:
        """(start, GPUs free now, node): of `nodes` in order, the one where g GPUs are free for d
        seconds soonest (by latest at the latest), then the fewest free now, then the first; a
        node with exactly g free now ends the search."""
        best: tuple[float, int, int] | None = None
        limit = latest  # a later start than the best so far cannot win
        first, times_of, free_of = self._first, self.times, self.free
        for i in nodes:
            times, free = times_of[i], free_of[i]
            n = len(times)
            memo = first.get(i)
            if memo is None:
                memo = first[i] = {}
            k = memo.get(g, -1)
            if k < 0:  # no start can come before the first segment with g free
                k = 0
                while k < n and free[k] < g:
                    k += 1
                memo[g] = k
            while k < n:
                t0 = times[k]
                if t0 > limit:
                    break
                if free[k] < g:
                    k += 1
                    continue
                j = k + 1
                end = t0 + d
                while j < n and times[j] < end and free[j] >= g:
                    j += 1
                if j >= n or times[j] >= end:
                    cand = (t0, free[0], i)
                    if best is None or cand < best:
                        best, limit = cand, t0
                    break
                k = j + 1  # segment j is too full: no start at or before it fits
            if best is not None and best[0] <= now and best[1] == g:
                break  # a perfect fit now: nothing is better
        return best

    def earliest_gang(
        self, nodes: Sequence[int], k: int, g: int, d: float, latest: float
    ) -> tuple[float, list[int]] | None:
        """The earliest T <= latest at which k of `nodes` each have g GPUs free over [T, T + d),
        and every node of `nodes` that has them then.

        A node has them over [T, T + d) when T lies in one of its windows [a, b) (a maximal run of
        segments with at least g free) with T + d <= b; so the earliest such T is a window's start."""
        windows: dict[int, list[tuple[float, float]]] = {}
        starts: set[float] = set()
        for i in nodes:
            times, free = self.times[i], self.free[i]
            n, j = len(times), 0
            mine: list[tuple[float, float]] = []
            while j < n:
                if free[j] < g:
                    j += 1
                    continue
                a = times[j]
                while j < n and free[j] >= g:
                    j += 1
                b = times[j] if j < n else math.inf
                if a <= latest and a + d <= b:
                    mine.append((a, b))
                    starts.add(a)
            windows[i] = mine
        for t in sorted(starts):
            ok = [i for i in nodes if any(a <= t and t + d <= b for a, b in windows[i])]
            if len(ok) >= k:
                return t, ok
        return None


def limit_left(job: JobRequest, restarted: bool, kept: float) -> float:
    """A run's time limit as the scheduler plans with it: overhead + estimate − kept (≥ 1 s)."""
    return max(1.0, overhead_of(job, restarted) + max(0.0, job.estimate - kept))


def slurm(p: BackfillPass) -> None:
    """The main scheduler, then (when due) a backfill cycle."""
    s = p.s
    if p.view.total_avail() <= 0:
        return
    order = p.strategy.order(s, p.handled, p.prio)
    blocked: JobRequest | None = None
    while p.view.total_avail() > 0:
        nxt = order.next()
        if nxt is None:
            break
        qk, jid = nxt
        job = s.pending.jobs[jid]
        alloc = place(p.view, jid, qk[2])
        if alloc is None:
            blocked = job  # the partition is blocked behind this job for the main scheduler
            break
        p.start(job, alloc, {"phase": "main", "order": p.strategy.name, "waited_s": p.wait(job)})
        order.started(qk)
    if blocked is None:
        return
    p.holds.append(Hold(blocked.id, p.hold_reason(blocked, p.shape_of(blocked), False), {}))
    if s.backfill_due:
        backfill(p)


def _space(p: BackfillPass) -> NodeSpace:
    """Free GPUs now (the main scheduler's starts taken) and when the runs' time limits end."""
    s = p.s
    now, index, view, knobs = s.now, s.index, p.view, s.knobs
    space = NodeSpace(now, {i: view.free(i) for i in range(len(index.nodes)) if index.available[i]})
    for r in s.running.values():
        if r.job.id in p.gone:
            continue
        end = r.t0 + r.overhead + max(0.0, r.job.estimate - r.kept)
        if end <= now:
            end = now + knobs.bf_resolution
        for i, g in r.alloc:
            space.release(i, end, g)
    for st in p.starts:  # started by the main scheduler in this pass
        job, state = s.pending.jobs[st.job], s.states[st.job]
        end = now + limit_left(job, state.starts > 0, state.kept)
        for i, g in st.alloc:
            space.release(i, end, g)
    space.seal()
    return space


def backfill(p: BackfillPass) -> None:
    """One backfill cycle: every tested job starts now or reserves its earliest start."""
    s = p.s
    knobs, index, now = s.knobs, s.index, s.now
    p.backfilled = True
    space = _space(p)
    latest = now + knobs.bf_window
    order = p.strategy.order(s, p.handled, p.prio)
    tested = reserved = 0
    free_total = sum(space.free_now(i) for i in space.nodes())
    by_type: dict[int, list[int]] = {}
    for i in space.nodes():
        by_type.setdefault(index.node_type[i], []).append(i)
    while tested < knobs.bf_max_job_test and free_total > 0:
        nxt = order.next()
        if nxt is None:
            break
        qk, jid = nxt
        order.started(qk)  # past it whatever happens
        job = s.pending.jobs[jid]
        tested += 1
        shape, state = qk[2], s.states[jid]
        d = limit_left(job, state.starts > 0, state.kept)
        types = shape.types if shape.types is not None else range(len(index.types))
        g, k = shape.per_node, shape.nodes
        if k == 1:
            nodes = (
                by_type.get(types[0], [])
                if len(types) == 1
                else [i for ty in types for i in by_type.get(ty, ())]
            )
            best = space.best_single(nodes, g, d, latest, now)
            if best is None:
                continue
            t, chosen = best[0], [best[2]]
        else:
            found: tuple[float, list[int]] | None = None  # one GPU type: the earliest over types
            for ty in types:
                f = space.earliest_gang(by_type.get(ty, []), k, g, d, latest)
                if f is not None and (found is None or f[0] < found[0]):
                    found = f
            if found is None:
                continue
            t, ok = found
            ok.sort(key=lambda i: (space.free_now(i), i))
            chosen = sorted(ok[:k])
        for i in chosen:
            space.take(i, t, t + d, g)
        if t <= now:
            free_total -= g * k
            evidence = {
                "phase": "backfill",
                "order": p.strategy.name,
                "waited_s": p.wait(job),
                "backfill": {"tested": tested, "reservations": reserved, "planned_end": now + d},
            }
            p.start(job, tuple((i, g) for i in chosen), evidence)
        else:
            reserved += 1


__all__ = ["NodeSpace", "backfill", "limit_left", "slurm"]
