"""Capacity bookkeeping: free GPUs per node (the core's FreeIndex), C(t) with drains, allocated and
idle GPUs, per GPU type, all kept incrementally (no per-event scan of the nodes).

FORMATS.md: C(t) = Σ over nodes of rate × (all its GPUs if not drained, else its allocated GPUs);
a drained node takes no new job and its idle GPUs are not available. A node removed from the
cluster (`retired`, fairshare.engine.nodes) counts as drained for good: no drain deadline, no
undrain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.placement import FreeIndex


@dataclass
class Fleet:
    """Capacity bookkeeping kept incrementally (no per-event scan of the nodes)."""

    index: FreeIndex
    rates: list[float]
    capacity: float = 0.0
    allocated: int = 0
    idle_available: int = 0
    draining: dict[int, float] = field(default_factory=dict)  # node -> drain deadline
    retired: set[int] = field(default_factory=set)  # nodes removed from the cluster
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
        if i in self.draining or (self.retired and i in self.retired):
            self.capacity -= self.rates[i] * delta
            self.cap_t[ty] -= self.rates[i] * delta
        else:
            self.idle_available += delta
            self.idle_t[ty] += delta

    def drain(self, i: int, deadline: float) -> None:
        if i in self.retired:  # removed from the cluster: out of service already, no deadline
            return
        if i not in self.draining:
            self._off(i)
        self.draining[i] = deadline

    def retire(self, i: int) -> None:
        """The node left the cluster: out of service from now, for good (a drain without deadline;
        its runs keep running and are counted in C(t) until they end)."""
        if i not in self.retired:
            if self.draining.pop(i, None) is None:
                self._off(i)
            self.retired.add(i)

    def _off(self, i: int) -> None:
        ty, free = self.index.node_type[i], self.index.free[i]
        self.capacity -= self.rates[i] * free
        self.cap_t[ty] -= self.rates[i] * free
        self.idle_available -= free
        self.idle_t[ty] -= free
        self.index.set_available(i, False)

    def undrain(self, i: int) -> None:
        if self.draining.pop(i, None) is not None:
            ty, free = self.index.node_type[i], self.index.free[i]
            self.capacity += self.rates[i] * free
            self.cap_t[ty] += self.rates[i] * free
            self.idle_available += free
            self.idle_t[ty] += free
            self.index.set_available(i, True)

    def rerate(self, rates: list[float]) -> None:
        """New GPU rates per node from now (a reconfigure): C(t) and its per-type parts again."""
        self.rates = rates
        cap = [0.0] * len(self.cap_t)
        for i, n in enumerate(self.index.nodes):
            off = i in self.draining or i in self.retired
            counted = n.gpus - self.index.free[i] if off else n.gpus
            cap[self.index.node_type[i]] += rates[i] * counted
        self.cap_t, self.capacity = cap, sum(cap)
