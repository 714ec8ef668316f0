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
import heapq
import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol

from .contract import overhead_of
from .fairness import PassPriorities
from .model import JobRequest
from .placement import Alloc, Shape, Tentative, place
from .snapshot import Hold, HoldReason, Snapshot, Start
from .strategies import Strategy


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
    def strategy(self) -> Strategy: ...
    @property
    def prio(self) -> PassPriorities: ...
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
        # per node, per g: its maximal windows [a, b) of at least g free (a memo, dropped likewise)
        self._windows: dict[int, dict[int, list[tuple[float, float]]]] = {}
        # per (group of nodes, g): the group's nodes ranked by the earliest time each has g free
        # (a lower bound of any start there), kept up to date by `take`; see `best_single`
        self._ranked: dict[tuple[Hashable, int], _Ranked] = {}
        self._ranked_of: dict[int, list[_Ranked]] = {}  # per node, the rankings that hold it
        # per (group, g, D): the group's nodes in a heap by a lower bound of the earliest start of
        # D seconds of g free there; see `best_single`. A bound stays a bound while the cycle only
        # takes GPUs; `_version` counts a node's takes, so a bound is exact only at its version.
        self._bounds: dict[tuple[Hashable, int, float], _Bounds] = {}
        self._version: dict[int, int] = dict.fromkeys(free_now, 0)

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
        # Segments before a (those starting before `start`) are untouched and kept their indices:
        # a first segment with g' free among them is still the first, and a ranking's time for the
        # node (that segment's start) still holds. Only the others are recomputed.
        memo = self._first.get(i)
        if memo:
            for gg in [gg for gg, k in memo.items() if k >= a]:
                del memo[gg]
        self._windows.pop(i, None)
        self._version[i] += 1
        for r in self._ranked_of.get(i, ()):
            if r.lb[i] >= start:
                r.dirty.add(i)  # re-ranked when the ranking is next read

    def _first_segment(self, i: int, g: int) -> int:
        """Index of node i's first segment with at least g free (its segment count if none)."""
        memo = self._first.get(i)
        if memo is None:
            memo = self._first[i] = {}
        k = memo.get(g, -1)
        if k < 0:
            free = self.free[i]
            n, k = len(free), 0
            while k < n and free[k] < g:
                k += 1
            memo[g] = k
        return k

    def _lower_bound(self, i: int, g: int) -> float:
        """The earliest time node i has g GPUs free (no start of g GPUs there is earlier)."""
        k, times = self._first_segment(i, g), self.times[i]
        return times[k] if k < len(times) else math.inf

    def _ranking(self, group: Hashable, nodes: Sequence[int], g: int) -> _Ranked:
        """The ranking of `group` (`nodes`) for g GPUs, brought up to date."""
        r = self._ranked.get((group, g))
        if r is None:
            r = self._ranked[(group, g)] = _Ranked(self, nodes, g)
            for i in nodes:
                self._ranked_of.setdefault(i, []).append(r)
        elif r.dirty:
            ranked, lb = r.ranked, r.lb
            for i in sorted(r.dirty):
                del ranked[bisect.bisect_left(ranked, (lb[i], i))]
                new = lb[i] = self._lower_bound(i, g)
                bisect.insort(ranked, (new, i))
            r.dirty.clear()
        return r

    def _fit(self, i: int, g: int, d: float, limit: float) -> float | None:
        """The earliest start <= limit at which node i has g GPUs free for d seconds."""
        times, free = self.times[i], self.free[i]
        n, k = len(times), self._first_segment(i, g)
        while k < n:
            t0 = times[k]
            if t0 > limit:
                return None
            if free[k] < g:
                k += 1
                continue
            j = k + 1
            end = t0 + d
            while j < n and times[j] < end and free[j] >= g:
                j += 1
            if j >= n or times[j] >= end:
                return t0
            k = j + 1  # segment j is too full: no start at or before it fits
        return None

    def now_run_end(self, i: int, g: int) -> float:
        """Until when node i has at least g GPUs free from now on (now if it has not)."""
        times, free = self.times[i], self.free[i]
        n, j = len(free), 0
        while j < n and free[j] >= g:
            j += 1
        return times[j] if j < n else math.inf

    def best_single(
        self, nodes: Sequence[int], g: int, d: float, latest: float, now: float, group: Hashable = None
    ) -> tuple[float, int, int] | None:
        """(start, GPUs free now, node): of `nodes` in order, the one where g GPUs are free for d
        seconds soonest (by latest at the latest), then the fewest free now, then the lowest index;
        but a node with exactly g free now wins outright, the first such in `nodes`' order.

        `group` names `nodes` (the same name, the same nodes in the same order, within this space's
        life): the nodes are then visited from a heap of lower bounds of their earliest start for
        D seconds, D the largest power of two <= d (so a start of d seconds there is no earlier),
        kept between calls, and the visit stops at the first node that cannot start before the
        best start found. Without it every node is visited. Either way the answer is the same
        (tests/test_shortcuts.py holds it to the plain scan)."""
        if group is None:
            return self._best_single_scan(nodes, g, d, latest, now)
        dur = math.ldexp(0.5, math.frexp(d)[1])  # 2 ** floor(log2 d), exactly: dur <= d
        b = self._bounds.get((group, g, dur))
        if b is None:
            b = self._bounds[(group, g, dur)] = _Bounds(self, group, nodes, g, dur)
        ranked, exact_at, version = b.ranked, b.exact_at, self._version
        best: tuple[float, int, int] | None = None
        perfect: tuple[int, tuple[float, int, int]] | None = None  # (position in nodes, candidate)
        limit = latest  # a later start than the best so far cannot win
        free_of, pos = self.free, b.pos
        p, n = 0, len(ranked)
        while p < n:
            lb, i = ranked[p]
            if lb > limit:
                break  # ranked: every node from here starts only after the best start
            if exact_at.get(i) != version[i]:  # a loose bound: make it exact, then rank it again
                exact_at[i] = version[i]
                t = self._fit(i, g, dur, math.inf)
                if t != lb:
                    del ranked[p]
                    bisect.insort(ranked, (math.inf if t is None else t, i))
                continue
            p += 1
            t = self._fit(i, g, d, limit)
            if t is None:
                continue
            cand = (t, free_of[i][0], i)
            # a perfect fit now: the first in `nodes` wins
            if t <= now and cand[1] == g and (perfect is None or pos[i] < perfect[0]):
                perfect = (pos[i], cand)
            if best is None or cand < best:
                best, limit = cand, t
        return perfect[1] if perfect is not None else best

    def _best_single_scan(
        self, nodes: Sequence[int], g: int, d: float, latest: float, now: float
    ) -> tuple[float, int, int] | None:
        """`best_single` without a group: every node of `nodes` in order."""
        best: tuple[float, int, int] | None = None
        limit = latest
        for i in nodes:
            t = self._fit(i, g, d, limit)
            if t is None:
                continue
            cand = (t, self.free[i][0], i)
            if t <= now and cand[1] == g:  # a perfect fit now: the first in `nodes` wins
                return cand
            if best is None or cand < best:
                best, limit = cand, t
        return best

    def earliest_gang(
        self, nodes: Sequence[int], k: int, g: int, d: float, latest: float, group: Hashable = None
    ) -> tuple[float, list[int]] | None:
        """The earliest T <= latest at which k of `nodes` each have g GPUs free over [T, T + d),
        and every node of `nodes` that has them then.

        A node has them over [T, T + d) when T lies in one of its windows [a, b) (a maximal run of
        segments with at least g free) with T + d <= b; so the earliest such T is a window's start.
        The nodes are added in the order of the earliest time each has g free (`group` as in
        `best_single`), a node before any window start at or after that time. The window starts
        are swept in time order with a heap of the open windows' ends: a window
        leaves it once T + d > b, and a node has at most one window left in it (its windows are
        disjoint and T >= the end of every earlier one), so the heap's size is the count of nodes
        that have the GPUs at T."""
        if group is None:
            ranked: Sequence[tuple[float, int]] = [(-math.inf, i) for i in nodes]
            pos: dict[int, int] = {i: p for p, i in enumerate(nodes)}
        else:
            r = self._ranking(group, nodes, g)
            ranked, pos = r.ranked, r.pos
        windows: dict[int, list[tuple[float, float]]] = {}
        opening: list[tuple[float, float]] = []  # a heap of the added nodes' window starts
        ends: list[float] = []  # a heap of the ends of the windows open at t
        n, x = len(ranked), 0
        while True:
            # add every node that has g free at or before the next window start
            while x < n and (not opening or ranked[x][0] <= opening[0][0]):
                lb, i = ranked[x]
                if lb > latest:
                    x = n
                    break
                mine = [(a, b) for a, b in self.windows(i, g) if a <= latest and a + d <= b]
                windows[i] = mine
                for w in mine:
                    heapq.heappush(opening, w)
                x += 1
            if not opening:
                return None
            t = opening[0][0]
            while opening and opening[0][0] == t:
                heapq.heappush(ends, heapq.heappop(opening)[1])
            while ends and not t + d <= ends[0]:
                heapq.heappop(ends)
            if len(ends) >= k:
                ok = [i for i, w in windows.items() if any(a <= t and t + d <= b for a, b in w)]
                ok.sort(key=pos.__getitem__)
                return t, ok

    def windows(self, i: int, g: int) -> list[tuple[float, float]]:
        """Node i's maximal windows [a, b) of segments with at least g free, in time order."""
        memo = self._windows.get(i)
        if memo is None:
            memo = self._windows[i] = {}
        mine = memo.get(g)
        if mine is None:
            times, free = self.times[i], self.free[i]
            n, j = len(times), 0
            mine = memo[g] = []
            while j < n:
                if free[j] < g:
                    j += 1
                    continue
                a = times[j]
                while j < n and free[j] >= g:
                    j += 1
                mine.append((a, times[j] if j < n else math.inf))
        return mine


class _Ranked:
    """A group of nodes ranked for g GPUs: (earliest time the node has g free, node), ascending;
    `lb` the time per node, `pos` each node's position in the group's order."""

    def __init__(self, space: NodeSpace, nodes: Sequence[int], g: int) -> None:
        lb: dict[int, float] = {}
        times_of, free_of, first = space.times, space.free, space._first
        for i in nodes:
            free = free_of[i]
            if free[0] >= g:
                lb[i] = times_of[i][0]
                first.setdefault(i, {})[g] = 0
            else:
                lb[i] = space._lower_bound(i, g)
        self.lb = lb
        self.ranked = sorted((t, i) for i, t in lb.items())
        self.pos = {i: p for p, i in enumerate(nodes)}
        self.dirty: set[int] = set()  # nodes whose profile changed since they were ranked


class _Bounds:
    """A group of nodes for g GPUs and D seconds (`NodeSpace.best_single`): `ranked`, (a lower
    bound of the earliest start of D seconds of g free on the node, node) ascending, one per node;
    `exact_at` the node's version at which its bound was made exact (the bound is then that start),
    `pos` each node's position in the group's order. It starts from the bounds of the same group
    and g for the longest shorter D, else from the earliest time each node had g free (the
    group's ranking for g, as last brought up to date): GPUs are only taken during a cycle, so a
    start is never earlier than either."""

    def __init__(self, space: NodeSpace, group: Hashable, nodes: Sequence[int], g: int, dur: float) -> None:
        shorter = None
        d = dur / 2
        while d >= 1 and shorter is None:
            shorter = space._bounds.get((group, g, d))
            d /= 2
        self.ranked: list[tuple[float, int]]
        self.pos: dict[int, int]
        if shorter is not None:
            self.ranked, self.pos = list(shorter.ranked), shorter.pos
        else:
            r = space._ranked.get((group, g))
            if r is None:
                r = space._ranking(group, nodes, g)
            self.ranked, self.pos = list(r.ranked), r.pos
        self.exact_at: dict[int, int] = {}


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


def could_start_now(
    space: NodeSpace, free_by_type: dict[int, list[int]], shape: Shape, d: float, every_type: Sequence[int]
) -> bool:
    """Whether a job of `shape` and time limit d could start now in `space` as it is: k nodes of
    one of its types (of `free_by_type`, the nodes per type with GPUs free at the cycle's start)
    with its GPUs free from now for d."""
    end, g, k = space.now + d, shape.per_node, shape.nodes
    for ty in shape.types if shape.types is not None else every_type:
        n = 0
        for i in free_by_type.get(ty, ()):
            if space.now_run_end(i, g) >= end:
                n += 1
                if n >= k:
                    return True
    return False


def backfill(p: BackfillPass) -> None:
    """One backfill cycle: every tested job starts now or reserves its earliest start.

    The cycle ends early, with the same starts, once no job left to test could start now: a job
    starts now only where its GPUs are free from now for its whole time limit, and a cycle only
    takes GPUs, so a job that cannot start now in the current space cannot later in the cycle.
    The reservations of the jobs it would still test shape nothing but later such jobs' plans,
    and the plans are dropped with the cycle (a replay's outputs hold only the starts)."""
    s = p.s
    knobs, index, now = s.knobs, s.index, s.now
    p.backfilled = True
    space = _space(p)
    latest = now + knobs.bf_window
    order = p.strategy.order(s, p.handled, p.prio)
    reserved = 0
    free_total = sum(space.free_now(i) for i in space.nodes())
    by_type: dict[int, list[int]] = {}
    for i in space.nodes():
        by_type.setdefault(index.node_type[i], []).append(i)
    free_by_type = {ty: [i for i in nodes if space.free_now(i) > 0] for ty, nodes in by_type.items()}
    of_types: dict[tuple[int, ...], list[int]] = {}  # the nodes of some types, in that order
    every_type = range(len(index.types))
    # the jobs taken from the order so far: (queue key, job, time limit)
    walked: list[tuple[Any, JobRequest, float]] = []

    tested = y = 0  # y: the first job at or after the next to test that could start now
    while tested < knobs.bf_max_job_test and free_total > 0:
        y = max(y, tested)
        while True:
            if y == len(walked):
                nxt = order.next() if y < knobs.bf_max_job_test else None
                if nxt is None:
                    return  # no job left to test could start now
                qk, jid = nxt
                order.started(qk)  # past it whatever happens
                state = s.states[jid]
                job = s.pending.jobs[jid]
                walked.append((qk, job, limit_left(job, state.starts > 0, state.kept)))
            if could_start_now(space, free_by_type, walked[y][0][2], walked[y][2], every_type):
                break
            y += 1
        qk, job, d = walked[tested]
        tested += 1
        shape = qk[2]
        types = shape.types if shape.types is not None else every_type
        g, k = shape.per_node, shape.nodes
        if k == 1:
            group = tuple(types)
            nodes = of_types.get(group)
            if nodes is None:
                nodes = of_types[group] = [i for ty in types for i in by_type.get(ty, ())]
            best = space.best_single(nodes, g, d, latest, now, group)
            if best is None:
                continue
            t, chosen = best[0], [best[2]]
        else:
            found: tuple[float, list[int]] | None = None  # one GPU type: the earliest over types
            for ty in types:
                f = space.earliest_gang(by_type.get(ty, []), k, g, d, latest, (ty,))
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
