"""Demand: the pending and running charge of every leaf and tree node, which the water-filling
splits the capacity over (DESIGN.md §2 "Demand": a leaf demands the charge rate of its running
plus pending jobs); per GPU type when the fleet has several (per-type owed in the metrics); and
the shapes of the pending jobs (FORMATS.md fragmented capacity). Kept incrementally: a change
re-adds the changed leaf's ancestors from their children, so no float residue accumulates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from ..core.model import JobRequest, Node
from ..core.placement import FreeIndex
from ..core.tree import TreeIndex
from .ledger import Vec


class Demand:
    def __init__(
        self, tree: TreeIndex, index: FreeIndex, nodes: Sequence[Node], rates: Mapping[str, float]
    ) -> None:
        self.tree, self.index, self.nodes, self.rates = tree, index, nodes, rates
        n = len(tree.paths)
        self.leaf_pending = [0.0] * n
        self.leaf_used = [0.0] * n
        self.leaf_pending_n = [0] * n
        self.node_pending = [0.0] * n  # per tree node: its leaves' pending charge
        self.node_used = [0.0] * n  # per tree node: its leaves' running charge
        k = len(index.types)
        self.multi_type = k > 1
        self.type_rep = [index.node_type.index(ty) for ty in range(k)]  # a node of each type
        self.leaf_pending_t: Vec = np.zeros((k, n))
        self.leaf_pending_n_t = np.zeros((k, n), dtype=np.int64)
        self.leaf_used_t: Vec = np.zeros((k, n))
        self.leaf_runs_t = np.zeros((k, n), dtype=np.int64)
        self.up: Vec = np.zeros((n, n))  # up[leaf, a] = 1 when a is the leaf or one of its ancestors
        for leaf in tree.leaves:
            for a in tree.leaf_ancestors[leaf]:
                self.up[leaf, a] = 1.0
        self.pending_shapes: Counter[tuple[tuple[str, ...] | None, int, int]] = Counter()
        # runs charged straight to a tree node, a leaf or not: a reconfigure removed their leaf
        # (fairshare.engine.reconfigure); their charge and count per node
        self.direct_used = [0.0] * n
        self.direct_n = [0] * n
        self.directs = 0

    def _leaf_changed(self, leaf: int) -> None:
        """Re-add the leaf's ancestors from their children (exact: no running float residue)."""
        if self.directs:
            self._node_changed(leaf)
            return
        pending, used, children = self.node_pending, self.node_used, self.tree.children
        pending[leaf], used[leaf] = self.leaf_pending[leaf], self.leaf_used[leaf]
        for a in self.tree.leaf_ancestors[leaf][1:]:
            pending[a] = sum(pending[c] for c in children[a])
            used[a] = sum(used[c] for c in children[a])

    def _node_changed(self, node: int) -> None:
        """Re-add the node and its ancestors, each with its direct charge."""
        pending, used, children = self.node_pending, self.node_used, self.tree.children
        direct = self.direct_used
        for a in self.tree.leaf_ancestors[node]:
            kids = children[a]
            if kids:
                pending[a] = sum(pending[c] for c in kids)
                used[a] = sum(used[c] for c in kids) + direct[a]
            else:
                pending[a], used[a] = self.leaf_pending[a], self.leaf_used[a] + direct[a]

    def add_direct(self, node: int, charge: float) -> None:
        """A run charged straight to `node` (its own leaf is gone); node -1: charged to no node."""
        if node >= 0:
            self.direct_used[node] += charge
            self.direct_n[node] += 1
            self.directs += 1
            self._node_changed(node)

    def remove_direct(self, node: int, charge: float) -> None:
        if node >= 0:
            self.direct_n[node] -= 1
            self.directs -= 1
            self.direct_used[node] = self.direct_used[node] - charge if self.direct_n[node] else 0.0
            self._node_changed(node)

    def type_charges(self, job: JobRequest) -> list[tuple[int, float]]:
        """(type id, charge on a node of that type) for every GPU type the job may use."""
        index = self.index
        ids = range(len(index.types)) if job.gpu_types is None else [index.type_id[t] for t in job.gpu_types]
        return [(ty, job.charge_on(self.nodes[self.type_rep[ty]], self.rates)) for ty in ids]

    def add_pending(self, job: JobRequest) -> None:
        self.leaf_pending[job.leaf] += job.charge
        self.leaf_pending_n[job.leaf] += 1
        self._leaf_changed(job.leaf)
        if self.multi_type:
            for ty, c in self.type_charges(job):
                self.leaf_pending_t[ty, job.leaf] += c
                self.leaf_pending_n_t[ty, job.leaf] += 1
        self.pending_shapes[(job.gpu_types, job.gpus, job.nodes)] += 1

    def remove_pending(self, job: JobRequest) -> None:
        if self.multi_type:
            for ty, c in self.type_charges(job):
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

    def add_run(self, leaf: int, ty: int, charge: float) -> None:
        self.leaf_used[leaf] += charge
        self.leaf_used_t[ty, leaf] += charge
        self.leaf_runs_t[ty, leaf] += 1
        self._leaf_changed(leaf)

    def remove_run(self, leaf: int, ty: int, charge: float, leaf_still_runs: bool) -> None:
        """A run of `leaf` on type `ty` stopped; `leaf_still_runs`: the leaf has other runs (else
        its running charge is reset to an exact zero)."""
        self.leaf_runs_t[ty, leaf] -= 1
        left = self.leaf_runs_t[ty, leaf]
        self.leaf_used_t[ty, leaf] = self.leaf_used_t[ty, leaf] - charge if left else 0.0
        self.leaf_used[leaf] = self.leaf_used[leaf] - charge if leaf_still_runs else 0.0
        self._leaf_changed(leaf)

    def fragmented_gpus(self) -> float:
        """Idle GPUs of types that some pending job could use but not be placed on (FORMATS.md)."""
        if not self.pending_shapes:
            return 0.0
        index = self.index
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

    def waiting_and_idle_fit(self) -> tuple[bool, float]:
        """(some GPU job waits, the idle GPUs a waiting single-node job fits on): per GPU type, the
        idle GPUs on nodes taking work with at least as many idle GPUs as the smallest waiting
        single-node GPU job that may use the type asks for, capped at the GPUs those waiting jobs
        ask for in total; summed over the types (docs/formats.md "Overload")."""
        if not self.pending_shapes:
            return False, 0.0
        index = self.index
        k = len(index.types)
        smallest: list[int | None] = [None] * k
        asked = [0] * k
        waiting = False
        for (types, gpus, nodes), count in self.pending_shapes.items():
            if gpus <= 0:
                continue
            waiting = True
            if nodes != 1:
                continue
            for ty in range(k) if types is None else [index.type_id[t] for t in types]:
                m = smallest[ty]
                if m is None or gpus < m:
                    smallest[ty] = gpus
                asked[ty] += gpus * count
        total = 0
        for ty in range(k):
            m = smallest[ty]
            if m is None:
                continue
            buckets = index.buckets[ty]
            idle = sum(x * len(buckets[x]) for x in range(m, len(buckets)))
            total += min(idle, asked[ty])
        return waiting, float(total)
