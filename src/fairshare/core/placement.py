"""Placement: free-GPU index per GPU type, best-fit single nodes, gangs packed into few blocks.

`FreeIndex` is owned and updated by a driver (simulator, service); the scheduler only reads it
through `Tentative`, an overlay that records the pass's own starts, preemptions and reservations
without touching the index.

Rules:
  single node  best fit: the node whose available GPUs exceed the request the least (ties: lowest
               node index), over the allowed types; leftover capacity stays in as few nodes as possible.
  gang (k>1)   k nodes of one GPU type, each with gpus/k available; if one block can hold it, the
               tightest such block; otherwise the blocks with the most candidates first, so the gang
               spans as few blocks as possible. Within a block, best fit.
  drained      a drained node takes no new job (it is not in the index).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from .model import Node

Alloc = tuple[tuple[int, int], ...]  # ((node index, gpus), ...) in node order


class FreeIndex:
    """Free GPUs per node, bucketed by (GPU type, free count) over nodes that take work."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)
        self.types: tuple[str, ...] = tuple(sorted({n.gpu_type for n in nodes}))
        self.type_id = {t: i for i, t in enumerate(self.types)}
        self.node_type = tuple(self.type_id[n.gpu_type] for n in nodes)
        self.max_gpus = max(n.gpus for n in nodes)
        self.free = [n.gpus for n in nodes]
        self.available = [True] * len(nodes)
        self.block_id: dict[str, int] = {}
        for n in nodes:
            self.block_id.setdefault(n.block, len(self.block_id))
        self.node_block = tuple(self.block_id[n.block] for n in nodes)
        self.buckets: list[list[set[int]]] = [[set() for _ in range(self.max_gpus + 1)] for _ in self.types]
        for i, n in enumerate(nodes):
            self.buckets[self.node_type[i]][n.gpus].add(i)
        self.free_t = [0] * len(self.types)  # free GPUs per type on nodes that take work
        for i, n in enumerate(nodes):
            self.free_t[self.node_type[i]] += n.gpus

    def set_free(self, i: int, value: int) -> None:
        if self.available[i]:
            ty = self.node_type[i]
            self.buckets[ty][self.free[i]].discard(i)
            self.buckets[ty][value].add(i)
            self.free_t[ty] += value - self.free[i]
        self.free[i] = value

    def take(self, i: int, gpus: int) -> None:
        self.set_free(i, self.free[i] - gpus)

    def give(self, i: int, gpus: int) -> None:
        self.set_free(i, self.free[i] + gpus)

    def set_available(self, i: int, available: bool) -> None:
        if available == self.available[i]:
            return
        ty = self.node_type[i]
        if available:
            self.buckets[ty][self.free[i]].add(i)
            self.free_t[ty] += self.free[i]
        else:
            self.buckets[ty][self.free[i]].discard(i)
            self.free_t[ty] -= self.free[i]
        self.available[i] = available

    def count_at_least(self, ty: int, gpus: float) -> int:
        lo = max(0, int(-(-gpus // 1)))
        return sum(len(b) for b in self.buckets[ty][lo:])

    def free_of_type(self, ty: int) -> int:
        return self.free_t[ty]

    def total_free(self) -> int:
        return sum(self.free_t)


class Shape(NamedTuple):
    """What placement needs of a job: allowed type ids (None = any), GPUs per node, nodes.

    A named tuple, not a dataclass: shapes key the pending queues, and a tuple hashes in C."""

    types: tuple[int, ...] | None
    per_node: int
    nodes: int

    def dominates(self, other: Shape) -> bool:
        """Self is at least as large as `other` (same types): if `other` cannot be placed, neither
        can self."""
        return self.types == other.types and self.per_node >= other.per_node and self.nodes >= other.nodes


class Tentative:
    """A pass's view of free capacity: the index plus changes made during the pass.

    `held` maps node -> GPUs reserved for one waiting job, `holder` node -> that job (a pass may
    reserve for several jobs, each on its own nodes); other jobs see held GPUs as taken, except
    (reservation backfill) a job whose estimated end `until` comes by the node's `held_until`, the
    time the reservation's job is expected to start by the running jobs' estimates: it gives the
    GPUs back before they are needed.
    """

    def __init__(self, index: FreeIndex) -> None:
        self.index = index
        self.overlay: dict[int, int] = {}
        self.held: dict[int, int] = {}
        self.holder: dict[int, str] = {}
        self.held_until: dict[int, float] = {}
        self.until: float | None = None  # the estimated end of the job being placed (backfill)

    def most_free_nodes(self, shape: Shape) -> tuple[int, ...]:
        """The k nodes of one allowed type, not held for another job yet, with the most free GPUs
        in this view (the pass's starts and preemptions included; ties: lowest index); of the
        types, the one whose k nodes have the most free GPUs in total (ties: the first type).
        A reservation's nodes without reservation backfill (scheduler._Pass.reserve)."""
        index, held = self.index, self.held
        excluded = self.overlay.keys() | held.keys()
        best: tuple[int, tuple[int, ...]] | None = None
        for ty in shape.types if shape.types is not None else range(len(index.types)):
            # nodes the pass changed, plus enough of the others from the fullest buckets down
            changed = [
                i for i in self.overlay if index.available[i] and index.node_type[i] == ty and i not in held
            ]
            ranked = [(-self.free(i), i) for i in changed]
            need = shape.nodes + len(changed)
            for bucket in reversed(index.buckets[ty]):
                if need <= 0:
                    break
                if not bucket:
                    continue
                fresh = heapq.nsmallest(need, bucket - excluded)
                ranked.extend((-self.free(i), i) for i in fresh)
                need -= len(fresh)
            if len(ranked) < shape.nodes:
                continue
            picked = sorted(ranked)[: shape.nodes]
            total = -sum(f for f, _ in picked)
            if best is None or total > best[0]:
                best = (total, tuple(sorted(i for _, i in picked)))
        return best[1] if best else ()

    def copy(self) -> Tentative:
        t = Tentative(self.index)
        t.overlay = dict(self.overlay)
        t.held = dict(self.held)
        t.holder = dict(self.holder)
        t.held_until = dict(self.held_until)
        t.until = self.until
        return t

    def hold(self, nodes: Iterable[int], gpus: int, job: str, until: float | None = None) -> None:
        """Reserve `gpus` on each of `nodes` for `job`; with `until`, jobs that end by then may
        use them (reservation backfill)."""
        for i in nodes:
            self.held[i] = gpus
            self.holder[i] = job
            if until is not None:
                self.held_until[i] = until

    def release(self) -> None:
        """Drop every reservation."""
        self.held, self.holder, self.held_until = {}, {}, {}

    def holds_for_others(self, job: str | None) -> bool:
        """Whether some GPUs are reserved for a job other than `job`."""
        return any(h != job for h in self.holder.values())

    def free(self, i: int) -> int:
        return self.overlay.get(i, self.index.free[i])

    def avail(self, i: int, job: str | None) -> int:
        f = self.free(i)
        if i in self.held and job != self.holder[i]:
            until = self.until
            if until is None or until > self.held_until.get(i, -math.inf):
                f -= self.held[i]
        return max(0, f)

    def take(self, alloc: Alloc) -> None:
        for i, g in alloc:
            self.overlay[i] = self.free(i) - g

    def give(self, alloc: Iterable[tuple[int, int]]) -> None:
        for i, g in alloc:
            self.overlay[i] = self.free(i) + g

    def free_of_types(self, types: Iterable[int] | None = None) -> int:
        """Free GPUs on nodes taking work, of these type ids (None: all), reservations ignored."""
        index = self.index
        ids = range(len(index.types)) if types is None else types
        wanted = set(ids)
        total = sum(index.free_of_type(t) for t in wanted)
        for i, f in self.overlay.items():
            if index.available[i] and index.node_type[i] in wanted:
                total += f - index.free[i]
        return total

    def total_avail(self, job: str | None = None) -> int:
        total = self.free_of_types()
        if self.held:
            holder, available = self.holder, self.index.available
            total -= sum(
                min(g, self.free(i)) for i, g in self.held.items() if available[i] and holder[i] != job
            )
        return total

    def candidates(self, ty: int, per_node: int, job: str | None) -> list[tuple[int, int]]:
        """(node, available GPUs) of type ty with at least per_node available, node order."""
        special = self.overlay.keys() | self.held.keys()
        out: list[tuple[int, int]] = []
        for x, bucket in enumerate(self.index.buckets[ty]):
            if x < per_node:
                continue
            out.extend((i, x) for i in bucket if i not in special)
        for i in special:
            if self.index.available[i] and self.index.node_type[i] == ty:
                a = self.avail(i, job)
                if a >= per_node:
                    out.append((i, a))
        out.sort()
        return out

    def best_single(self, ty: int, gpus: int, job: str | None) -> tuple[int, int] | None:
        """Best-fit node of type ty: (node, available) with the least leftover; None if none fits."""
        special = self.overlay.keys() | self.held.keys()
        best: tuple[int, int] | None = None
        for i in special:
            if self.index.available[i] and self.index.node_type[i] == ty:
                a = self.avail(i, job)
                if a >= gpus and (best is None or (a, i) < (best[1], best[0])):
                    best = (i, a)
        buckets = self.index.buckets[ty]
        for x in range(gpus, len(buckets)):
            if best is not None and x > best[1]:
                break
            pool = buckets[x] - special if special else buckets[x]
            if pool:
                i = min(pool)
                if best is None or (x, i) < (best[1], best[0]):
                    best = (i, x)
                break
        return best


def type_ids(index: FreeIndex, allowed: tuple[str, ...] | None) -> tuple[int, ...]:
    if allowed is None:
        return tuple(range(len(index.types)))
    return tuple(index.type_id[t] for t in allowed if t in index.type_id)


def place(view: Tentative, job_id: str | None, shape: Shape) -> Alloc | None:
    """Choose nodes for a job, or None when it cannot be placed on the view."""
    allowed = shape.types if shape.types is not None else tuple(range(len(view.index.types)))
    if shape.nodes == 1:
        best: tuple[int, int] | None = None
        for ty in allowed:
            cand = view.best_single(ty, shape.per_node, job_id)
            if cand is not None and (best is None or (cand[1], cand[0]) < (best[1], best[0])):
                best = cand
        return None if best is None else ((best[0], shape.per_node),)
    choice: tuple[tuple[int, int, int], Alloc] | None = None
    for ty in allowed:
        cands = view.candidates(ty, shape.per_node, job_id)
        if len(cands) < shape.nodes:
            continue
        picked = _pack(view.index, cands, shape.nodes)
        blocks = len({view.index.node_block[i] for i, _ in picked})
        leftover = sum(a - shape.per_node for _, a in picked)
        key = (blocks, leftover, ty)
        if choice is None or key < choice[0]:
            choice = (key, tuple(sorted((i, shape.per_node) for i, _ in picked)))
    return None if choice is None else choice[1]


def _pack(index: FreeIndex, cands: list[tuple[int, int]], k: int) -> list[tuple[int, int]]:
    by_block: dict[int, list[tuple[int, int]]] = {}
    for i, a in cands:
        by_block.setdefault(index.node_block[i], []).append((i, a))
    for members in by_block.values():
        members.sort(key=lambda x: (x[1], x[0]))
    fitting = [(len(m), b) for b, m in by_block.items() if len(m) >= k]
    if fitting:
        _, b = min(fitting)
        return by_block[b][:k]
    picked: list[tuple[int, int]] = []
    for b in sorted(by_block, key=lambda b: (-len(by_block[b]), b)):
        picked.extend(by_block[b][: k - len(picked)])
        if len(picked) == k:
            break
    return picked


def fits_with(view: Tentative, job_id: str | None, shape: Shape, freed: Mapping[int, int]) -> Alloc | None:
    """Placement after hypothetically freeing `freed` GPUs per node (for victim selection)."""
    trial = view.copy()
    trial.give(freed.items())
    return place(trial, job_id, shape)
