"""Owed by hierarchical water-filling, effective shares and the rolling-window ledger
(fairshare.engine.ledger).

Expected values are computed by hand (DESIGN.md §2, FORMATS.md "Definitions: owed"); the arithmetic
is written next to each expectation.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.core.fairness import priority
from fairshare.core.model import LEDGER_EPS as EPS
from fairshare.core.model import ResolvedException
from fairshare.core.tree import TreeIndex
from fairshare.engine.ledger import Ledger
from fairshare.engine.owed import effective_shares, water_fill
from fairshare.inputs.policy import GroupNode

DAY = 86400.0
HOUR = 3600.0
WEEK = 7 * DAY


# --- helpers
def g(name: str, share: float, *children: GroupNode) -> GroupNode:
    return GroupNode(name=name, share=share, children=children)


def tree_of(*top: GroupNode) -> TreeIndex:
    return TreeIndex.build(top)


def demand_of(tree: TreeIndex, leaf_demand: Mapping[str, float]) -> list[float]:
    """Per-node demand: each leaf's demand added to the leaf and all its ancestors (as the sim does)."""
    idx = tree.index()
    demand = [0.0] * len(tree.paths)
    for path, d in leaf_demand.items():
        for a in tree.leaf_ancestors[idx[path]]:
            demand[a] += d
    return demand


def owed_by_path(tree: TreeIndex, owed: Sequence[float]) -> dict[str, float]:
    return {p: owed[i] for i, p in enumerate(tree.paths)}


def exception(tree: TreeIndex, group: str, extra: float, expires_t: float) -> ResolvedException:
    return ResolvedException(tree.index()[group], group, extra, expires_t, "approver@x", "test")


FLAT3 = tree_of(g("a", 1), g("b", 1), g("c", 1))
FLAT4 = tree_of(g("a", 1), g("b", 1), g("c", 1), g("d", 1))
AB_3_1 = tree_of(g("a", 3), g("b", 1))
NESTED = tree_of(g("x", 3, g("x1", 1), g("x2", 1)), g("y", 1, g("y1", 1)))


# --- water_fill
@dataclass(frozen=True)
class FillCase:
    tree: TreeIndex
    capacity: float
    leaf_demand: dict[str, float]
    expected: dict[str, float]


FILL_CASES = {
    # 9 / 3 equal shares = 3 each; every demand (10) is above 3.
    "equal_shares_ample_demand": FillCase(FLAT3, 9, {"a": 10, "b": 10, "c": 10}, {"a": 3, "b": 3, "c": 3}),
    # shares 3:1 of 8 -> a = 8*3/4 = 6, b = 8*1/4 = 2.
    "shares_proportional": FillCase(AB_3_1, 8, {"a": 10, "b": 10}, {"a": 6, "b": 2}),
    # a's portion 9/3 = 3 >= its demand 1 -> capped at 1; the leftover (9-1) = 8 goes to b, c: 4 each.
    "capped_sibling_leftover_redistributed": FillCase(
        FLAT3, 9, {"a": 1, "b": 10, "c": 10}, {"a": 1, "b": 4, "c": 4}
    ),
    # cascade: level 24/3 = 8 caps a (2); then (24-2)/2 = 11 caps b (6); c gets 24-2-6 = 16.
    "capping_cascades_over_rounds": FillCase(FLAT3, 24, {"a": 2, "b": 6, "c": 30}, {"a": 2, "b": 6, "c": 16}),
    # two capped in one round: level 20/4 = 5 caps a (1) and b (4); c, d split 20-1-4 = 15: 7.5 each.
    "two_capped_in_one_round": FillCase(
        FLAT4, 20, {"a": 1, "b": 4, "c": 10, "d": 10}, {"a": 1, "b": 4, "c": 7.5, "d": 7.5}
    ),
    # a has no demand: owed 0; b and c split all 9: 4.5 each.
    "idle_sibling_gets_zero_and_share_redistributed": FillCase(
        FLAT3, 9, {"a": 0, "b": 10, "c": 10}, {"a": 0, "b": 4.5, "c": 4.5}
    ),
    # x:y = 3:1 of 16 -> x 12, y 4; x's 12 split x1:x2 = 1:1 -> 6, 6; y1 takes all of y's 4.
    "nested_parent_split_among_children": FillCase(
        NESTED, 16, {"x/x1": 10, "x/x2": 10, "y/y1": 10}, {"x": 12, "x/x1": 6, "x/x2": 6, "y": 4, "y/y1": 4}
    ),
    # x demands 2+10 = 12, its portion 20*3/4 = 15 -> capped at 12; y gets 20-12 = 8 (of demand 10).
    # inside x: x1's portion 12/2 = 6 >= 2 -> capped at 2; x2 gets 12-2 = 10.
    "nested_capped_child": FillCase(
        NESTED, 20, {"x/x1": 2, "x/x2": 10, "y/y1": 10}, {"x": 12, "x/x1": 2, "x/x2": 10, "y": 8, "y/y1": 8}
    ),
    # y idle: x gets all 16 (< its demand 20); x1, x2 split 16: 8 each.
    "nested_idle_subtree_redistributed": FillCase(
        NESTED, 16, {"x/x1": 10, "x/x2": 10, "y/y1": 0}, {"x": 16, "x/x1": 8, "x/x2": 8, "y": 0, "y/y1": 0}
    ),
    # capacity 0: nobody is owed anything.
    "zero_capacity": FillCase(FLAT3, 0, {"a": 10, "b": 10, "c": 10}, {"a": 0, "b": 0, "c": 0}),
    # total demand 2+3+0 = 5 < 10: everyone gets exactly its demand.
    "total_demand_below_capacity": FillCase(FLAT3, 10, {"a": 2, "b": 3, "c": 0}, {"a": 2, "b": 3, "c": 0}),
    # no demand at all: nothing owed.
    "no_demand": FillCase(NESTED, 16, {}, {"x": 0, "x/x1": 0, "x/x2": 0, "y": 0, "y/y1": 0}),
}


@pytest.mark.parametrize("case", FILL_CASES.values(), ids=FILL_CASES.keys())
def test_water_fill(case: FillCase) -> None:
    tree = case.tree
    owed = water_fill(tree, case.capacity, demand_of(tree, case.leaf_demand), tree.share)
    got = owed_by_path(tree, owed)
    for path, want in case.expected.items():
        assert got[path] == pytest.approx(want, abs=1e-9), path


def test_water_fill_uses_effective_shares_with_an_exception() -> None:
    # a and b have base share 1 each; an exception gives a +2 -> effective 3:1 of 8 = 6 : 2.
    tree = tree_of(g("a", 1), g("b", 1))
    shares = effective_shares(tree, [exception(tree, "a", 2, expires_t=1000)], t=0)
    assert shares == [3.0, 1.0]  # 1 + 2, 1
    owed = water_fill(tree, 8, demand_of(tree, {"a": 10, "b": 10}), shares)
    assert owed == pytest.approx([6.0, 2.0])  # 8*3/4, 8*1/4
    # with base shares (static, no exception): 4 : 4
    assert water_fill(tree, 8, demand_of(tree, {"a": 10, "b": 10}), tree.share) == pytest.approx([4.0, 4.0])


def test_water_fill_children_sum_to_parent() -> None:
    # r (share 1) > {p (2) > {p1 (1), p2 (3)}, q (1) > {q1 (1)}}, plus top-level s (1).
    # top: r:s = 1:1 of 40 -> r 20, s 20 (s demands 30).
    # r's 20: p:q = 2:1 -> p 13.33.., q 6.66..; q demands 5 -> capped, p gets 20-5 = 15.
    # p's 15: p1:p2 = 1:3 -> 3.75 and 11.25 (both below demand 100).
    tree = tree_of(g("r", 1, g("p", 2, g("p1", 1), g("p2", 3)), g("q", 1, g("q1", 1))), g("s", 1))
    demand = demand_of(tree, {"r/p/p1": 100, "r/p/p2": 100, "r/q/q1": 5, "s": 30})
    owed = owed_by_path(tree, water_fill(tree, 40, demand, tree.share))
    assert owed["r"] == pytest.approx(20) and owed["s"] == pytest.approx(20)
    assert owed["r/q"] == pytest.approx(5) and owed["r/q/q1"] == pytest.approx(5)
    assert owed["r/p"] == pytest.approx(15)
    assert owed["r/p/p1"] == pytest.approx(3.75)  # 15 * 1/4
    assert owed["r/p/p2"] == pytest.approx(11.25)  # 15 * 3/4
    assert owed["r/p"] + owed["r/q"] == pytest.approx(owed["r"])
    assert owed["r/p/p1"] + owed["r/p/p2"] == pytest.approx(owed["r/p"])
    assert owed["r"] + owed["s"] == pytest.approx(40)


@st.composite
def trees_with_demand(draw: st.DrawFn) -> tuple[TreeIndex, list[float], float]:
    names = itertools.count()

    def node(depth: int) -> GroupNode:
        n_children = draw(st.integers(0, 3)) if depth < 2 else 0
        children = tuple(node(depth + 1) for _ in range(n_children))
        return GroupNode(name=f"g{next(names)}", share=draw(st.floats(0.1, 10)), children=children)

    tree = TreeIndex.build(tuple(node(0) for _ in range(draw(st.integers(1, 4)))))
    some_demand = st.one_of(st.just(0.0), st.floats(0.01, 100))
    leaf_demand = {tree.paths[leaf]: draw(some_demand) for leaf in tree.leaves}
    capacity = draw(st.one_of(st.just(0.0), st.floats(0.01, 400)))
    return tree, demand_of(tree, leaf_demand), capacity


@settings(max_examples=150, deadline=None)
@given(trees_with_demand())
def test_water_fill_properties(case: tuple[TreeIndex, list[float], float]) -> None:
    tree, demand, capacity = case
    owed = water_fill(tree, capacity, demand, tree.share)
    tol = 1e-5 * (1 + capacity)
    groups: list[tuple[tuple[int, ...], float]] = [(tree.top, capacity)]
    groups += [(tree.children[i], owed[i]) for i in range(len(tree.paths)) if tree.children[i]]
    for i in range(len(tree.paths)):
        assert -tol <= owed[i] <= demand[i] + tol  # never more than demanded
    for siblings, parent_owed in groups:
        total_demand = sum(demand[i] for i in siblings)
        # work-conserving and bounded: the siblings share exactly min(parent owed, their demand)
        assert sum(owed[i] for i in siblings) == pytest.approx(min(parent_owed, total_demand), abs=tol)
        # each demanding node gets at least min(demand, its proportional part of the parent's owed)
        demanding = [i for i in siblings if demand[i] > EPS]
        share_total = sum(tree.share[i] for i in demanding)
        for i in demanding:
            floor = min(demand[i], parent_owed * tree.share[i] / share_total)
            assert owed[i] >= floor - tol


# --- effective_shares
@pytest.mark.parametrize(
    ("t", "expected_a"),
    [
        (0.0, 3.0),  # before expiry: 1 + 2
        (999.0, 3.0),  # still before expiry: 1 + 2
        (1000.0, 1.0),  # at expiry: expiry is exclusive -> base share only
        (5000.0, 1.0),  # after expiry: base share only
    ],
    ids=["well_before", "just_before", "at_expiry_excluded", "after"],
)
def test_effective_shares_exception_until_expiry_exclusive(t: float, expected_a: float) -> None:
    tree = tree_of(g("a", 1), g("b", 1))
    shares = effective_shares(tree, [exception(tree, "a", 2, expires_t=1000)], t)
    assert shares == [expected_a, 1.0]
    assert list(tree.share) == [1.0, 1.0]  # the static shares are untouched


def test_effective_shares_several_exceptions_add_up() -> None:
    tree = tree_of(g("a", 1), g("b", 1))
    exs = [exception(tree, "a", 2, 1000), exception(tree, "a", 0.5, 2000), exception(tree, "b", 4, 500)]
    assert effective_shares(tree, exs, 100) == [3.5, 5.0]  # a 1+2+0.5, b 1+4
    assert effective_shares(tree, exs, 500) == [3.5, 1.0]  # b's expired at 500
    assert effective_shares(tree, exs, 1500) == [1.5, 1.0]  # a keeps only the 0.5 (until 2000)


# --- Ledger mechanics
def test_ledger_integrates_rates_into_buckets() -> None:
    # window 100 in 10 buckets of width 10; owed 2 on [0, 15), then 1 on [15, 35); delivered 1 then 0.
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([2.0], [1.0])
    led.advance(15)
    led.set_rates([1.0], [0.0])
    led.advance(35)
    # owed: bucket0 [0,10) 2*10 = 20; bucket1 2*5 + 1*5 = 15; bucket2 1*10 = 10; bucket3 1*5 = 5
    assert led.owed_ring[:4, 0].tolist() == pytest.approx([20, 15, 10, 5])
    assert led.owed_in_window()[0] == pytest.approx(50)  # 20 + 15 + 10 + 5 = 2*15 + 1*20
    # delivered: 1*10 in bucket0, 1*5 in bucket1, nothing after
    assert led.deliv_ring[:4, 0].tolist() == pytest.approx([10, 5, 0, 0])
    assert led.delivered_in_window()[0] == pytest.approx(15)
    assert led.debt()[0] == pytest.approx(35)  # 50 - 15


def test_ledger_advance_backwards_or_same_time_is_a_no_op() -> None:
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([1.0], [0.0])
    led.advance(20)
    led.advance(20)
    led.advance(5)
    assert led.owed_sum[0] == pytest.approx(20)  # 1 * 20, once


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (30.0, 30.0),  # nothing forgotten yet: 1 * 30
        (100.0, 20.0),  # window = buckets 1..9 + empty partial 10: forgets bucket0 -> 30 - 10
        (105.0, 20.0),  # buckets 1..10: [10, 30) = 20
        (115.0, 10.0),  # buckets 2..11: [20, 30) = 10
        (125.0, 0.0),  # buckets 3..12: all usage (< 30) forgotten
    ],
)
def test_ledger_window_forgets_old_usage(t: float, expected: float) -> None:
    # owed 1 on [0, 30), then 0; window 100 in buckets of 10 (the window read is between 90 and 100).
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([1.0], [1.0])
    led.advance(30)
    led.set_rates([0.0], [0.0])
    led.advance(t)
    assert led.owed_sum[0] == pytest.approx(expected)
    assert led.deliv_sum[0] == pytest.approx(expected)


def test_ledger_debt_is_owed_minus_delivered_per_node() -> None:
    led = Ledger(3, window=WEEK)
    led.set_rates([4.0, 2.0, 0.0], [1.0, 3.0, 2.0])
    led.advance(HOUR)
    # per node: (owed - delivered) * 3600
    assert led.debt().tolist() == pytest.approx([3 * HOUR, -1 * HOUR, -2 * HOUR])
    assert led.owed_in_window().tolist() == pytest.approx([4 * HOUR, 2 * HOUR, 0.0])
    assert led.delivered_in_window().tolist() == pytest.approx([1 * HOUR, 3 * HOUR, 2 * HOUR])


def test_ledger_gap_across_several_buckets_spreads_usage_over_them() -> None:
    # owed 1 on [0, 55) in ONE advance, then 0 until 115. The gap's usage must land in buckets 0..5,
    # so that at 115 (window = buckets 2..11) only [20, 55) = 35 remains.
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([1.0], [0.0])
    led.advance(55)
    assert led.owed_ring[:, 0].tolist() == pytest.approx([10, 10, 10, 10, 10, 5, 0, 0, 0, 0])
    led.set_rates([0.0], [0.0])
    led.advance(115)
    assert led.owed_sum[0] == pytest.approx(35)  # 55 - 20 forgotten (buckets 0 and 1)


def test_ledger_gap_longer_than_window_resets_sums() -> None:
    # owed 1, delivered 3 on [0, 50); then a gap to 1000 at owed 0: everything is forgotten.
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([1.0], [3.0])
    led.advance(50)
    assert led.debt()[0] == pytest.approx(-100)  # 50 - 150
    led.set_rates([0.0], [0.0])
    led.advance(1000)
    assert led.owed_sum[0] == 0.0 and led.deliv_sum[0] == 0.0
    assert not led.owed_ring.any() and not led.deliv_ring.any()
    # new usage after the reset counts from zero: 5 s at owed 2
    led.set_rates([2.0], [0.0])
    led.advance(1005)
    assert led.owed_sum[0] == pytest.approx(10)  # 2 * 5


def test_ledger_gap_longer_than_window_at_constant_rate_keeps_only_the_window() -> None:
    # owed 1 from 0 straight to 1005 in one advance; window at 1005 = buckets 91..100 = [910, 1005): 95.
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([1.0], [0.0])
    led.advance(1005)
    assert led.owed_sum[0] == pytest.approx(95)  # 9 whole buckets * 10 + 5 in the current one
    assert led.owed_ring[:, 0].sum() == pytest.approx(led.owed_sum[0])


@pytest.mark.parametrize(
    "steps",
    [
        [1005.0],
        [3.0, 1005.0],
        [55.0, 115.0, 1005.0],
        [float(t) for t in range(7, 1006, 7)] + [1005.0],
    ],
    ids=["one_jump", "short_then_jump", "a_few_steps", "many_small_steps"],
)
def test_ledger_result_does_not_depend_on_how_time_is_stepped(steps: list[float]) -> None:
    # owed 1 on [0, 1005): however the driver advances, the window holds 95 (see above).
    led = Ledger(1, window=100, buckets=10)
    led.set_rates([1.0], [0.5])
    for t in steps:
        led.advance(t)
    assert led.owed_sum[0] == pytest.approx(95)
    assert led.deliv_sum[0] == pytest.approx(47.5)  # 0.5 * 95


def test_ledger_rejects_bad_window() -> None:
    with pytest.raises(ValueError):
        Ledger(1, window=0)
    with pytest.raises(ValueError):
        Ledger(1, window=100, buckets=1)


# --- scenarios
CAP = 8.0  # an 8-GPU H100 cluster: capacity 8 GPU-equivalents
LOOKAHEAD = HOUR
AB = tree_of(g("a", 1), g("b", 1))  # node 0 = a, node 1 = b


class Driver:
    """A minimal replay of the ledger: rates are set at each event and integrated up to the next."""

    def __init__(self, tree: TreeIndex, exceptions: Sequence[ResolvedException] = ()) -> None:
        self.tree = tree
        self.exceptions = list(exceptions)
        self.ledger = Ledger(len(tree.paths), window=WEEK)  # 168 buckets of 1 h
        self.owed: list[float] = [0.0] * len(tree.paths)
        self.used: list[float] = [0.0] * len(tree.paths)

    def at(self, t: float, demand: Mapping[str, float], used: Mapping[str, float]) -> None:
        self.ledger.advance(t)
        shares = effective_shares(self.tree, self.exceptions, t)
        self.owed = water_fill(self.tree, CAP, demand_of(self.tree, demand), shares)
        self.used = demand_of(self.tree, used)
        self.ledger.set_rates(self.owed, self.used)

    def prio(self, node: int) -> float:
        led = self.ledger
        return priority(
            float(led.debt()[node]), self.owed[node], self.used[node], float(led.owed_sum[node]), LOOKAHEAD
        )


def test_scenario_group_idle_for_a_day_accrues_no_debt() -> None:
    # a runs 8 GPUs and has 8 more pending (demand 16) for a day; b has no demand at all.
    drv = Driver(AB)
    for h in range(24):
        drv.at(h * HOUR, {"a": 16, "b": 0}, {"a": 8, "b": 0})
        assert drv.owed == pytest.approx([8.0, 0.0])  # a is owed the whole capacity, b nothing
    drv.ledger.advance(DAY)
    owed_sum, deliv_sum, debt = drv.ledger.owed_sum, drv.ledger.deliv_sum, drv.ledger.debt()
    assert owed_sum[1] == 0.0 and deliv_sum[1] == 0.0 and debt[1] == 0.0  # idleness creates no debt
    assert owed_sum[0] == pytest.approx(8 * DAY)  # 8 * 86400 = 691200
    assert deliv_sum[0] == pytest.approx(8 * DAY)
    assert debt[0] == pytest.approx(0.0)  # a used exactly what it was owed


def test_scenario_yielding_then_returning_recovers_priority() -> None:
    drv = Driver(AB)
    drv.at(0.0, {"a": 16, "b": 0}, {"a": 8, "b": 0})  # a alone for a day
    # b returns at t = 1 day with 8 GPUs pending; a still runs 8 (demand 16).
    drv.at(DAY, {"a": 16, "b": 8}, {"a": 8, "b": 0})
    assert drv.owed == pytest.approx([4.0, 4.0])  # 8 split 1:1, both demand >= 4
    assert drv.ledger.debt().tolist() == pytest.approx([0.0, 0.0])  # b yielded; nobody owes anything yet
    # a: D = 0, O = 4, U = 8, E = 8*86400 = 691200 -> (0 + 3600*(4-8)) / (691200 + 3600*4) = -14400/705600
    # b: D = 0, O = 4, U = 0, E = 0 -> (0 + 3600*4) / (0 + 3600*4) = 1
    prio_a, prio_b = drv.prio(0), drv.prio(1)
    assert prio_a == pytest.approx(-14400 / 705600)  # = -1/49, over-served as soon as b is owed
    assert prio_b == pytest.approx(1.0)
    assert prio_b > prio_a and prio_a < 0
    # an hour later with nothing changed: a debt (4-8)*3600 = -14400, b (4-0)*3600 = 14400
    drv.ledger.advance(DAY + HOUR)
    assert drv.ledger.debt().tolist() == pytest.approx([-14400.0, 14400.0])
    # a: (-14400 - 14400) / (705600 + 14400) = -28800/720000 = -0.04; b: (14400 + 14400)/(14400 + 14400) = 1
    assert drv.prio(0) == pytest.approx(-0.04)
    assert drv.prio(1) == pytest.approx(1.0)


def test_scenario_exception_adds_share_until_expiry_and_not_after() -> None:
    # capacity 12; a and b (base shares 1:1) both demand 12 all day; a has +2 until 12 h.
    tree = AB
    capacity = 12.0
    drv = Driver(tree, [exception(tree, "a", 2, expires_t=12 * HOUR)])

    def owed_at(t: float) -> list[float]:
        return water_fill(
            tree, capacity, demand_of(tree, {"a": 12, "b": 12}), effective_shares(tree, drv.exceptions, t)
        )

    assert owed_at(0) == pytest.approx([9.0, 3.0])  # 3:1 of 12 -> 9, 3
    assert owed_at(12 * HOUR - 1) == pytest.approx([9.0, 3.0])  # still before the expiry
    assert owed_at(12 * HOUR) == pytest.approx([6.0, 6.0])  # expiry exclusive: 1:1 of 12 -> 6, 6
    assert owed_at(DAY) == pytest.approx([6.0, 6.0])

    # over the day, both run 6 GPUs throughout; the ledger is fed the owed rates at each event.
    for t in (0.0, 12 * HOUR):
        drv.ledger.advance(t)
        drv.ledger.set_rates(owed_at(t), demand_of(tree, {"a": 6, "b": 6}))
    drv.ledger.advance(DAY)
    # owed a = 9*43200 + 6*43200 = 648000; b = 3*43200 + 6*43200 = 388800; delivered 6*86400 = 518400 each
    assert drv.ledger.owed_sum.tolist() == pytest.approx([648000.0, 388800.0])
    assert drv.ledger.deliv_sum.tolist() == pytest.approx([518400.0, 518400.0])
    assert drv.ledger.debt().tolist() == pytest.approx([129600.0, -129600.0])  # 648000-518400, 388800-518400
