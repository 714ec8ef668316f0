"""Fair-share comparisons between groups: the one place that orders groups by debt and service.

Priority of a group among its siblings (higher goes first) is its debt relative to its
entitlement, where the entitlement is what the group was owed in the window, both projected a
lookahead L ahead at the current rates:

    P = (D + L · (O − U)) / (E + L · O)

    D  window debt (∫owed − ∫delivered), GPU-equivalent seconds
    E  window entitlement (∫owed over the window), GPU-equivalent seconds
    O  owed rate now, U running charge now (including starts made earlier in the same pass)
    L  lookahead (policy `scheduling.lookahead`, default 1h)

P is the fraction of what the group is owed that it has not received: 1 for a group that got
nothing, 0 on target, negative when over-served. Normalising by what was owed, not by the static
share, keeps a busy group's debt from idle or fragmented capacity (owed to everyone with demand,
usable by nobody) from outranking a small group whose only job has waited for hours. Shares
still decide the split, through owed. The denominator can be 0 (owed nothing in the window and
now): P = +inf if the numerator is > 0, −inf if < 0 (running while owed nothing: all on loan),
else 0.

Service ratio of a side (for preemption): R = U / O. O can be 0: R = +inf when U > 0, else 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from .model import TIME_EPS as EPS


def priority(debt: float, owed_rate: float, used_rate: float, entitlement: float, lookahead: float) -> float:
    num = debt + lookahead * (owed_rate - used_rate)
    den = entitlement + lookahead * owed_rate
    if den <= EPS:
        if num > EPS:
            return math.inf
        return -math.inf if num < -EPS else 0.0
    return num / den


class PassPriorities:
    """`priority` of each tree node with a scheduling pass's usage, computed on first use.

    `used` is the pass's own list (starts and preemptions made in the pass included); when one
    moves a leaf's usage, the pass calls `changed(leaf)`, which drops the values of the leaf and
    its ancestors (no other node's usage moved). The pass and its queue order share one instance.
    """

    def __init__(
        self,
        debt: Sequence[float],
        owed: Sequence[float],
        used: Sequence[float],
        entitlement: Sequence[float],
        lookahead: float,
        leaf_ancestors: Sequence[Sequence[int]],
    ) -> None:
        self.debt, self.owed, self.used, self.entitlement = debt, owed, used, entitlement
        self.lookahead = lookahead
        self.leaf_ancestors = leaf_ancestors
        self.values: dict[int, float] = {}

    def __call__(self, node: int) -> float:
        p = self.values.get(node)
        if p is None:
            p = self.values[node] = priority(
                self.debt[node], self.owed[node], self.used[node], self.entitlement[node], self.lookahead
            )
        return p

    def changed(self, leaf: int) -> None:
        for a in self.leaf_ancestors[leaf]:
            self.values.pop(a, None)


def service_ratio(used_rate: float, owed_rate: float) -> float:
    if owed_rate <= EPS:
        return math.inf if used_rate > EPS else 1.0
    return used_rate / owed_rate


class Side(NamedTuple):
    """One side of a preemption: a sibling subtree under the lowest common ancestor of the
    preemptor's and the victim's leaves, with its priority, running charge and owed rate now."""

    priority: float
    used: float
    owed: float


def may_take_from(taker: Side, victim: Side, taker_charge: float, victim_charge: float) -> bool:
    """Whether the taker's side may preempt `victim_charge` from the victim's side.

        PreemptorNewShare = R(taker.used + taker_charge, taker.owed)
        TargetOldShare    = R(victim.used, victim.owed)          must be > 1 (over-served)
        TargetNewShare    = R(victim.used − victim_charge, victim.owed)

    (Kueue's names; R = service_ratio.) The victim side must have the lower priority and be
    over-served, and after the exchange it must still be served at least as well as the taker
    side: TargetNewShare >= PreemptorNewShare (Kueue's LessThanOrEqualToFinalShare). This is what
    rules out two jobs preempting each other back and forth, since after the exchange the
    inequality points the other way.
    """
    if not victim.priority < taker.priority:
        return False
    if victim.used <= victim.owed + EPS:  # TargetOldShare <= 1: not using anyone else's share
        return False
    target_new_share = service_ratio(victim.used - victim_charge, victim.owed)
    preemptor_new_share = service_ratio(taker.used + taker_charge, taker.owed)
    return target_new_share >= preemptor_new_share


def fair_tree_factors(
    children: Sequence[Sequence[int]], top: Sequence[int], shares: Sequence[float], usage: Sequence[float]
) -> dict[int, float]:
    """Slurm's Fair Tree fair-share factor of every leaf (SchedMD, fair_tree.html).

    At every level, each sibling's Level Fairshare is

        LF = S / U,   S = shares / Σ sibling shares,   U = usage / Σ sibling usage

    U can be 0 (no usage among the siblings, or none by this one): LF = +inf, which is valid and
    sorts first. Siblings are visited depth-first in descending LF (ties keep the policy order);
    leaves are ranked in visiting order, the first getting rank n (n = number of leaves), and
    leaves with equal LF under the same parent share a rank. The factor is rank / n, in (0, 1].
    """
    leaves: list[tuple[int, float, int]] = []  # (leaf, LF, parent marker)

    def visit(ids: Sequence[int], marker: int) -> None:
        total_s = sum(shares[i] for i in ids)
        total_u = sum(usage[i] for i in ids)
        lf: list[tuple[float, int, int]] = []
        for pos, i in enumerate(ids):
            s = shares[i] / total_s if total_s > 0 else 0.0
            u = usage[i] / total_u if total_u > 0 else 0.0
            level = math.inf if u <= 0 else s / u
            lf.append((-level, pos, i))
        lf.sort()
        for neg, _, i in lf:
            if children[i]:
                visit(children[i], i)
            else:
                leaves.append((i, -neg, marker))

    visit(top, -1)
    n = len(leaves)
    out: dict[int, float] = {}
    rank = n
    for k, (leaf, level, marker) in enumerate(leaves):
        if k > 0:
            _, prev_level, prev_marker = leaves[k - 1]
            if not (prev_level == level and prev_marker == marker):
                rank = n - k
        out[leaf] = rank / n if n else 0.0
    return out
