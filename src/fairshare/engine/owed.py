"""Owed rates: the cluster's capacity split over the groups with demand (DESIGN.md §2).

    owed_g(t)   C(t) split over tree nodes with demand: at each level, siblings with demand get
                capacity in proportion to their (effective) shares, capped by their demand; what a
                capped sibling leaves goes to the others (work-conserving). No demand -> owed 0, so
                idleness never creates debt.
    effective share = base share + every exception that has not expired (expiry is exclusive).

Pure Python: the engine computes owed at every state change, the replay's metrics per GPU type.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import LEDGER_EPS as EPS
from ..core.model import ResolvedException
from ..core.tree import TreeIndex


def water_fill(
    tree: TreeIndex, capacity: float, demand: Sequence[float], share: Sequence[float]
) -> list[float]:
    """Owed rate of every tree node (list indexed by node id).

    `demand[i]` is node i's demand (its leaves' pending + running charge), `share[i]` its effective
    share (base share plus unexpired exceptions). Edge cases: capacity 0 gives all zeros; a node
    with demand <= EPS gets nothing; when total demand is below capacity every node gets its demand.
    Among siblings the solution is owed_i = min(demand_i, λ · share_i) with the owed summing to
    min(parent's owed, their demand): visiting siblings in ascending demand/share, each is capped
    at its demand while its proportional portion of what remains reaches it (λ only grows as
    siblings are capped); the first one that is not capped fixes λ for all the rest.
    """
    if sum(demand[i] for i in tree.top) <= capacity - EPS:
        # Unsaturated: every node is owed exactly its demand (its leaves' demand sums to it, and a
        # parent owed its demand can give each child its own). Nodes at or below EPS get 0.
        return [d if d > EPS else 0.0 for d in demand]
    owed = [0.0] * len(tree.paths)

    def split(ids: Sequence[int], cap: float) -> None:
        active = sorted((demand[i] / share[i], i) for i in ids if demand[i] > EPS)
        remaining = min(cap, sum(demand[i] for i in ids))
        total = sum(share[i] for _, i in active)
        for k, (_, i) in enumerate(active):
            if remaining <= EPS:
                break
            if remaining * share[i] / total >= demand[i] - EPS:
                owed[i] = demand[i]
                remaining -= demand[i]
                total -= share[i]
                continue
            for _, j in active[k:]:
                owed[j] = remaining * share[j] / total
            break
        for i in ids:
            if tree.children[i]:
                split(tree.children[i], owed[i])

    split(tree.top, capacity)
    return owed


def effective_shares(tree: TreeIndex, exceptions: Sequence[ResolvedException], t: float) -> list[float]:
    """Base share plus every exception that has not expired at t (expiry is exclusive)."""
    share = list(tree.share)
    for ex in exceptions:
        if t < ex.expires_t - EPS:
            share[ex.node] += ex.extra_share
    return share
