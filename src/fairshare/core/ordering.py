"""Queue orderings, one small class per named strategy: the order in which a pass tries jobs.

Each yields (queue key, job id) one at a time; the pass reports back `started` (advance that queue)
or `failed` (drop that queue for this pass: with free capacity only shrinking within a pass, a job
that cannot be placed means no later job of the same shape can be either).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat

from .fairness import PassPriorities, fair_tree_factors, priority
from .model import TIME_EPS
from .snapshot import PendingQueues, QueueKey, Snapshot


class QueueCursor:
    """Per-pass positions in the pending queues, skipping jobs already handled in the pass."""

    def __init__(self, pending: PendingQueues, skip: set[str]) -> None:
        self.pending = pending
        self.pos: dict[QueueKey, int] = {}
        self.skip = skip

    def head(self, key: QueueKey) -> tuple[int, str] | None:
        q = self.pending.queues[key]
        i = self.pos.get(key, 0)
        while i < len(q) and q[i][1] in self.skip:
            i += 1
        self.pos[key] = i
        return q[i] if i < len(q) else None

    def advance(self, key: QueueKey) -> None:
        self.pos[key] = self.pos.get(key, 0) + 1


class MergedOrder:
    """A global order over all queues by a sort key of the head job (fifo, priority-labels)."""

    def __init__(
        self, snap: Snapshot, skip: set[str], key: Callable[[QueueKey, int, str], tuple[float, ...]]
    ) -> None:
        self.cursor = QueueCursor(snap.pending, skip)
        self.key = key
        self.heap: list[tuple[tuple[float, ...], QueueKey, str]] = []
        for qk in snap.pending.queues:
            self._push(qk)

    def _push(self, qk: QueueKey) -> None:
        h = self.cursor.head(qk)
        if h is not None:
            heapq.heappush(self.heap, (self.key(qk, h[0], h[1]), qk, h[1]))

    def next(self) -> tuple[QueueKey, str] | None:
        while self.heap:
            _, qk, jid = self.heap[0]
            h = self.cursor.head(qk)
            if h is None or h[1] != jid:  # head moved (skipped job); re-key
                heapq.heappop(self.heap)
                self._push(qk)
                continue
            return qk, jid
        return None

    def started(self, qk: QueueKey) -> None:
        heapq.heappop(self.heap)
        self.cursor.advance(qk)
        self._push(qk)

    def failed(self, qk: QueueKey) -> None:
        heapq.heappop(self.heap)

    def used_changed(self, leaf: int) -> None:
        return None


def submit_order(snap: Snapshot, skip: set[str]) -> MergedOrder:
    """fifo: submit order (requeued jobs keep their place)."""
    return MergedOrder(snap, skip, lambda qk, seq, jid: (seq,))


def label_order(snap: Snapshot, skip: set[str]) -> MergedOrder:
    """priority-labels: high, medium, low; submit order within a label."""
    return MergedOrder(snap, skip, lambda qk, seq, jid: (qk[1], seq))


def _remove(ranked: list[tuple[float, int, int]], entry: tuple[float, int, int]) -> None:
    """Delete `entry` from a sorted ranking (entries are unique: each ends with its node id)."""
    k = bisect.bisect_left(ranked, entry)
    assert k < len(ranked) and ranked[k] == entry, f"node {entry[2]} is not ranked as {entry}"
    del ranked[k]


class DebtOrder:
    """fairshare: walk the tree from the top, at each level into the child with the highest
    priority (fairness.priority) that still has jobs to try; ties go to the earlier node in the
    policy file. Within a leaf, submit order over its queues (labels are ignored).

    Each level's live children (those with jobs left to try in the pass) are ranked once per pass
    (priority descending, policy-file order on ties); a child leaves its ranking when its last job
    is tried, and moves within it only when a start or preemption changes the usage below it."""

    def __init__(self, snap: Snapshot, skip: set[str], prio: PassPriorities) -> None:
        self.snap, self.tree, self.prio = snap, snap.tree, prio
        self.cursor = QueueCursor(snap.pending, skip)
        self.live_keys: dict[int, list[QueueKey]] = {
            leaf: list(keys) for leaf, keys in snap.pending.by_leaf.items()
        }
        self.live: list[int] = [0] * len(self.tree.paths)
        for leaf in self.live_keys:
            for a in self.tree.leaf_ancestors[leaf]:
                self.live[a] += 1
        # parent (-1: the top level) -> its live children as (-priority, position, node), sorted
        self.ranked: dict[int, list[tuple[float, int, int]]] = {}
        self.entry: dict[int, tuple[float, int, int]] = {}  # node -> its entry in its level's ranking
        self.current: tuple[QueueKey, str] | None = None
        self.walk: list[tuple[int, int | None]] = []  # (chosen, runner-up) per level, for evidence

    @property
    def chosen_path(self) -> list[tuple[str, float, str | None, float | None]]:
        paths = self.tree.paths
        return [
            (
                paths[n],
                self.prio(n),
                paths[r] if r is not None else None,
                self.prio(r) if r is not None else None,
            )
            for n, r in self.walk
        ]

    def used_changed(self, leaf: int) -> None:
        """The leaf's usage changed in the pass (and the pass told `prio`): its and its ancestors'
        entries move to their new places in their levels' rankings (the others keep theirs)."""
        parent, entry = self.tree.parent, self.entry
        for a in self.tree.leaf_ancestors[leaf]:
            ranked = self.ranked.get(parent[a])
            if ranked is not None and self.live[a] > 0:
                old = entry[a]
                _remove(ranked, old)
                new = entry[a] = (-self.prio(a), old[1], a)
                bisect.insort(ranked, new)

    def _pick(self, parent: int, ids: Sequence[int]) -> tuple[int, int | None]:
        """The live child with the highest priority and the runner-up (None when it is alone)."""
        ranked = self.ranked.get(parent)
        if ranked is None:
            prio, entry, live = self.prio, self.entry, self.live
            for k, i in enumerate(ids):
                if live[i] > 0:
                    entry[i] = (-prio(i), k, i)
            ranked = self.ranked[parent] = sorted(entry[i] for i in ids if live[i] > 0)
        assert ranked, "the walk only descends into a node with live children"
        return ranked[0][2], ranked[1][2] if len(ranked) > 1 else None

    def next(self) -> tuple[QueueKey, str] | None:
        children = self.tree.children
        while True:
            if not self.live_keys:
                return None
            ids: Sequence[int] = self.tree.top
            parent = -1
            self.walk = []
            while True:
                node, runner = self._pick(parent, ids)
                self.walk.append((node, runner))
                if not children[node]:
                    break
                parent, ids = node, children[node]
            best: tuple[int, QueueKey, str] | None = None
            head = self.cursor.head
            for qk in self.live_keys[node]:
                h = head(qk)
                if h is not None and (best is None or h[0] < best[0]):
                    best = (h[0], qk, h[1])
            if best is None:
                self._kill_leaf(node)
                continue
            self.current = (best[1], best[2])
            return self.current

    def _kill_leaf(self, leaf: int) -> None:
        if self.live_keys.pop(leaf, None) is not None:
            parent = self.tree.parent
            for a in self.tree.leaf_ancestors[leaf]:
                self.live[a] -= 1
                ranked = self.ranked.get(parent[a])
                if not self.live[a] and ranked is not None:
                    _remove(ranked, self.entry[a])

    def started(self, qk: QueueKey) -> None:
        self.cursor.advance(qk)

    def failed(self, qk: QueueKey) -> None:
        keys = self.live_keys.get(qk[0])
        if keys is not None:
            keys.remove(qk)
            if not keys:
                self._kill_leaf(qk[0])


def multifactor_key(snap: Snapshot) -> Callable[[QueueKey, int, str], tuple[float, ...]]:
    """slurm-multifactor's sort key of a job (lower first); see multifactor_order."""
    sched = snap.knobs
    factors = fair_tree_factors(snap.tree.children, snap.tree.top, snap.tree.share, snap.decayed_usage)
    jobs = snap.pending.jobs

    def key(qk: QueueKey, seq: int, jid: str) -> tuple[float, ...]:
        age = min(1.0, max(0.0, snap.now - jobs[jid].submit) / sched.priority_max_age)
        return (-(sched.weight_fairshare * factors.get(qk[0], 0.0) + sched.weight_age * age), float(seq))

    return key


def multifactor_order(snap: Snapshot, skip: set[str]) -> MergedOrder:
    """slurm-multifactor: Slurm's priority/multifactor with Fair Tree over decayed usage.

        priority = weight_fairshare · FairTree(leaf) + weight_age · min(1, age / priority_max_age)

    age = now − submit. Higher priority first; ties in submit order. Within one queue (one leaf,
    one shape) the oldest job has the highest priority, so merging queue heads gives the order.
    """
    return MergedOrder(snap, skip, multifactor_key(snap))


# ---------------------------------------------------------------------- whole-queue rankings
# The whole pending queue in a strategy's order as if each job started in turn (decide's
# explain): the order a pass with room for every job would start them in.


def _ranked(snap: Snapshot, key: Callable[[QueueKey, int, str], tuple[float, ...]]) -> list[str]:
    """A static order (fifo, priority-labels, slurm-multifactor): every queued job by its key."""
    entries = [(key(qk, seq, jid), jid) for qk, q in snap.pending.queues.items() for seq, jid in q]
    entries.sort()
    return [jid for _, jid in entries]


def rank_submit(snap: Snapshot) -> list[str]:
    return _ranked(snap, lambda qk, seq, jid: (seq,))


def rank_labels(snap: Snapshot) -> list[str]:
    return _ranked(snap, lambda qk, seq, jid: (qk[1], seq))


def rank_multifactor(snap: Snapshot) -> list[str]:
    return _ranked(snap, multifactor_key(snap))


def rank_debt(snap: Snapshot) -> list[str]:
    """DebtOrder's walk as if every job started in turn, computed as a merge.

    A group's priority only falls as its usage grows (P is decreasing in U; fairness.py), so the
    walk's greedy choice at each level — the live child with the highest priority now, policy
    order on ties — interleaves the children's own orders exactly as a sort of all their jobs by
    (−priority of the child just before that job, child's position, job's place in the child's
    order) does. Leaves order their jobs by submit; each level sorts its children's jobs."""
    tree, look = snap.tree, snap.knobs.lookahead
    debt, owed, used, entitlement = snap.debt, snap.owed, snap.used, snap.entitlement
    jobs = snap.pending.jobs
    queues = snap.pending.queues
    by_leaf = snap.pending.by_leaf

    def stream(node: int) -> list[tuple[str, float]]:
        children = tree.children[node] if node >= 0 else tree.top
        if node >= 0 and not children:
            mine = sorted(e for qk in by_leaf.get(node, ()) for e in queues[qk])
            return [(jid, jobs[jid].charge) for _, jid in mine]
        merged: list[tuple[float, int, int, tuple[str, float]]] = []
        for pos, child in enumerate(children):
            sub = stream(child)
            if not sub:
                continue
            # the child's usage before each of its jobs, summed in the order the walk adds them
            before = list(accumulate((c for _, c in sub[:-1]), initial=used[child]))
            d, o, e = debt[child], owed[child], entitlement[child]
            den = e + look * o
            if den > TIME_EPS:  # priority() inlined (the same operations, so the same floats)
                keys = [-((d + look * (o - u)) / den) for u in before]
            else:
                keys = [-priority(d, o, u, e, look) for u in before]
            merged.extend(zip(keys, repeat(pos), range(len(sub)), sub, strict=False))
        merged.sort()
        return [m[3] for m in merged]

    return [jid for jid, _ in stream(-1)]
