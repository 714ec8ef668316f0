"""Priority, service ratio and the preemption exchange condition (fairshare.core.fairness).

P = (D + L·(O − U)) / (E + L·O); R = U / O; may_take_from per the module docstring and DESIGN.md §2
("Victims are chosen only from groups more over-served than the preemptor's group").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fairshare.core.fairness import Side, may_take_from, priority, service_ratio

L = 3600.0  # lookahead 1 h


# --- priority
PRIORITY_CASES = {
    # D 3600, O 2, U 1, E 7200: (3600 + 3600*(2-1)) / (7200 + 3600*2) = 7200/14400 = 0.5
    "under_served": ((3600.0, 2.0, 1.0, 7200.0, L), 0.5),
    # got nothing: D = E = 7200, U 0: (7200 + 3600*2) / (7200 + 3600*2) = 1
    "got_nothing_is_one": ((7200.0, 2.0, 0.0, 7200.0, L), 1.0),
    # on target: D 0, U = O: 0 / (7200 + 7200) = 0
    "on_target_is_zero": ((0.0, 2.0, 2.0, 7200.0, L), 0.0),
    # over-served: D -3600, O 1, U 2, E 3600: (-3600 + 3600*(1-2)) / (3600 + 3600) = -7200/7200 = -1
    "over_served_is_negative": ((-3600.0, 1.0, 2.0, 3600.0, L), -1.0),
    # no lookahead: D / E = 1800 / 7200 = 0.25 (rates ignored)
    "zero_lookahead": ((1800.0, 5.0, 0.0, 7200.0, 0.0), 0.25),
    # newly demanding group (E 0, D 0), owed 4, using 0: (0 + 3600*4) / (0 + 3600*4) = 1
    "new_demand_only_lookahead": ((0.0, 4.0, 0.0, 0.0, L), 1.0),
    # zero denominator (E 0, O 0): numerator 5 > 0 -> +inf
    "zero_den_positive_num_is_plus_inf": ((5.0, 0.0, 0.0, 0.0, L), math.inf),
    # zero denominator, running while owed nothing: -100 + 3600*(0-2) < 0 -> -inf (all on loan)
    "zero_den_negative_num_is_minus_inf": ((-100.0, 0.0, 2.0, 0.0, L), -math.inf),
    # zero denominator and numerator: 0
    "zero_den_zero_num_is_zero": ((0.0, 0.0, 0.0, 0.0, L), 0.0),
}


@pytest.mark.parametrize(("args", "expected"), PRIORITY_CASES.values(), ids=PRIORITY_CASES.keys())
def test_priority(args: tuple[float, float, float, float, float], expected: float) -> None:
    debt, owed_rate, used_rate, entitlement, lookahead = args
    got = priority(debt, owed_rate, used_rate, entitlement, lookahead)
    if math.isinf(expected):
        assert got == expected
    else:
        assert got == pytest.approx(expected)


# --- service_ratio
@pytest.mark.parametrize(
    ("used", "owed", "expected"),
    [
        (3.0, 2.0, 1.5),  # 3 / 2
        (0.0, 2.0, 0.0),  # 0 / 2
        (2.0, 0.0, math.inf),  # using while owed nothing: all on loan
        (0.0, 0.0, 1.0),  # owed nothing and using nothing: on target
    ],
    ids=["over", "idle", "zero_owed_using", "zero_owed_idle"],
)
def test_service_ratio(used: float, owed: float, expected: float) -> None:
    assert service_ratio(used, owed) == expected


# --- may_take_from
@dataclass(frozen=True)
class Exchange:
    taker_prio: float
    victim_prio: float
    taker_used: float
    taker_owed: float
    taker_charge: float
    victim_used: float
    victim_owed: float
    victim_charge: float

    def allowed(self) -> bool:
        return may_take_from(
            Side(self.taker_prio, self.taker_used, self.taker_owed),
            Side(self.victim_prio, self.victim_used, self.victim_owed),
            self.taker_charge,
            self.victim_charge,
        )

    def reversed_after(self) -> Exchange:
        """The victim side trying to take back right after the exchange, with the same charges and
        (most permissively) the higher priority."""
        return Exchange(
            taker_prio=max(self.taker_prio, self.victim_prio) + 1,
            victim_prio=min(self.taker_prio, self.victim_prio),
            taker_used=self.victim_used - self.victim_charge,
            taker_owed=self.victim_owed,
            taker_charge=self.victim_charge,
            victim_used=self.taker_used + self.taker_charge,
            victim_owed=self.taker_owed,
            victim_charge=self.taker_charge,
        )


EXCHANGES = {
    # victim over-served (10 > 6); after: victim 8/6 = 1.33 >= taker 4/6 = 0.67 -> allowed
    "victim_over_served_stays_better_served": (Exchange(0.5, -0.2, 2, 6, 2, 10, 6, 2), True),
    # equality is allowed: victim (8-3)/6 = 5/6, taker (2+3)/6 = 5/6
    "ratios_equal_after_is_allowed": (Exchange(0.5, -0.2, 2, 6, 3, 8, 6, 3), True),
    # unequal owed: victim (12-4)/4 = 2 >= taker (1+4)/8 = 0.625
    "unequal_owed": (Exchange(0.9, -0.5, 1, 8, 4, 12, 4, 4), True),
    # victim owed nothing, using 4 (all loan): after (4-2)/0 = inf >= taker (0+2)/6
    "victim_owed_nothing": (Exchange(1.0, -math.inf, 0, 6, 2, 4, 0, 2), True),
    # victim uses exactly what it is owed (6 <= 6): not borrowing -> refused
    "victim_not_borrowing": (Exchange(0.5, -0.2, 2, 6, 2, 6, 6, 2), False),
    # victim under its owed (4 < 6) -> refused
    "victim_under_owed": (Exchange(0.5, -0.2, 0, 6, 2, 4, 6, 2), False),
    # victim side is not lower in priority -> refused, whatever the ratios
    "victim_not_more_over_served": (Exchange(-0.2, 0.5, 2, 6, 2, 10, 6, 2), False),
    "equal_priority": (Exchange(0.1, 0.1, 2, 6, 2, 10, 6, 2), False),
    # would invert: victim after (8-4)/6 = 0.67 < taker after (2+4)/6 = 1 -> refused
    "exchange_would_invert_ratios": (Exchange(0.5, -0.2, 2, 6, 4, 8, 6, 4), False),
}


@pytest.mark.parametrize(("ex", "expected"), EXCHANGES.values(), ids=EXCHANGES.keys())
def test_may_take_from(ex: Exchange, expected: bool) -> None:
    assert ex.allowed() is expected


def test_no_ping_pong_after_an_allowed_exchange() -> None:
    # a (used 2, owed 6) takes 2 from b (used 10, owed 6): allowed (8/6 >= 4/6).
    ex = Exchange(0.5, -0.2, 2, 6, 2, 10, 6, 2)
    assert ex.allowed()
    # right after, b (used 8, owed 6) wants its 2 back from a (used 4, owed 6), even with a higher
    # priority: a is not borrowing (4 <= 6), and the ratios would invert: a (4-2)/6 = 0.33 < b (8+2)/6
    back = ex.reversed_after()
    assert (back.taker_used, back.victim_used) == (8, 4)
    assert not back.allowed()


def test_no_ping_pong_even_when_the_taker_ends_up_borrowing() -> None:
    # a (used 6, owed 4) takes 2 from b (used 14, owed 6): b after 12/6 = 2 >= a after 8/4 = 2 -> allowed.
    ex = Exchange(0.3, -0.4, 6, 4, 2, 14, 6, 2)
    assert ex.allowed()
    # now a uses 8 > owed 4 (borrowing), so only the ratio check stops b taking back:
    # a after 6/4 = 1.5 < b after 14/6 = 2.33 -> refused
    back = ex.reversed_after()
    assert back.victim_used > back.victim_owed
    assert not back.allowed()


positive = st.floats(0.5, 100)


@settings(max_examples=300, deadline=None)
@given(
    prios=st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    taker=st.tuples(st.floats(0, 100), positive, positive),
    victim=st.tuples(st.floats(0, 100), positive, positive),
)
def test_no_ping_pong_property(
    prios: tuple[float, float],
    taker: tuple[float, float, float],
    victim: tuple[float, float, float],
) -> None:
    ex = Exchange(prios[0], prios[1], *taker, *victim)
    assume(ex.victim_used >= ex.victim_charge)  # the victim's job is part of its side's usage
    if ex.allowed():
        assert not ex.reversed_after().allowed()
