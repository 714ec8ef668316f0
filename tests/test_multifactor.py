"""slurm-multifactor: decayed usage, Fair Tree factors, and the resulting order (hand-computed)."""

from __future__ import annotations

import math

import pytest

from conftest import events_of, job, replay, tiny_cluster, tiny_policy
from fairshare.core.fairness import fair_tree_factors
from fairshare.engine.ledger import DecayLedger

H = 3600.0


def test_decayed_usage_is_recalculated_at_period_boundaries_with_the_half_life() -> None:
    led = DecayLedger(1, half_life=600.0, period=300.0)  # d = 2^-(300/600) = 1/sqrt(2)
    d = 2**-0.5
    led.set_rate([1.0])
    led.advance(150.0)
    assert led.usage[0] == 0.0  # readers see the last boundary, like Slurm between recalculations
    led.advance(300.0)
    assert led.usage[0] == pytest.approx(300.0)  # 0 * d + 300
    led.advance(600.0)
    assert led.usage[0] == pytest.approx(300.0 * d + 300.0)
    led.set_rate([0.0])
    led.advance(600.0 + 3000.0)  # ten idle periods = five half-lives
    assert led.usage[0] == pytest.approx((300.0 * d + 300.0) / 32)


@pytest.mark.parametrize("phase", [100.0, 400.0, -200.0], ids=["within", "past-a-period", "negative"])
def test_the_decay_ticks_fall_on_the_phase(phase: float) -> None:
    # a slurmctld that booted 100 s into a 300 s period ticks at 100, 400, 700, ... (any phase
    # names the same grid modulo the period)
    led = DecayLedger(1, half_life=600.0, period=300.0, phase=phase)
    d = 2**-0.5
    led.set_rate([1.0])
    led.advance(99.0)
    assert led.usage[0] == 0.0
    led.advance(100.0)
    assert led.usage[0] == pytest.approx(100.0)
    led.advance(399.0)
    assert led.usage[0] == pytest.approx(100.0)
    led.advance(400.0 + 3 * 300.0)  # one step, then three in closed form
    want = 100.0
    for _ in range(4):
        want = want * d + 300.0
    assert led.usage[0] == pytest.approx(want)


def test_a_ledger_started_late_keeps_the_phase() -> None:
    # a reconfigure rebuilds the ledger at its time: the next tick is still on the grid
    led = DecayLedger(1, half_life=600.0, period=300.0, start=250.0, phase=100.0)
    led.set_rate([1.0])
    led.advance(399.0)
    assert led.usage[0] == 0.0
    led.advance(400.0)
    assert led.usage[0] == pytest.approx(150.0)


def test_a_long_gap_in_closed_form_equals_stepping_period_by_period() -> None:
    a, b = DecayLedger(2, 7 * 86400.0, 300.0), DecayLedger(2, 7 * 86400.0, 300.0)
    for led in (a, b):
        led.set_rate([2.0, 0.5])
    a.advance(86400.0 + 123.0)
    t = 0.0
    while t < 86400.0 + 123.0:
        t = min(t + 37.0, 86400.0 + 123.0)
        b.advance(t)
    assert a.usage.tolist() == pytest.approx(b.usage.tolist(), rel=1e-9)


def test_fair_tree_ranks_the_less_used_sibling_first() -> None:
    # a and b equal shares; usage 3 vs 1: LF_a = 0.5/0.75 = 0.667, LF_b = 0.5/0.25 = 2
    f = fair_tree_factors([(), ()], (0, 1), (1.0, 1.0), (3.0, 1.0))
    assert f == {1: 1.0, 0: 0.5}


def test_fair_tree_no_usage_is_infinite_level_fairshare_and_ties_share_a_rank() -> None:
    f = fair_tree_factors([(), ()], (0, 1), (1.0, 3.0), (0.0, 0.0))
    assert f == {0: 1.0, 1: 1.0}


def test_fair_tree_all_children_of_a_higher_account_outrank_the_other_accounts_children() -> None:
    # A{a1, a2} and B{b1}; usage a1=1, a2=0, b1=4 (A=1, B=4).
    # Top: LF_A = 0.5/0.2 = 2.5 > LF_B = 0.5/0.8 = 0.625. In A: a2 has no usage (inf) before a1.
    children = [(1, 2), (), (), (4,), ()]
    usage = (1.0, 1.0, 0.0, 4.0, 4.0)
    f = fair_tree_factors(children, (0, 3), (1.0, 1.0, 1.0, 1.0, 1.0), usage)
    assert f[2] == pytest.approx(1.0) and f[1] == pytest.approx(2 / 3) and f[4] == pytest.approx(1 / 3)
    assert not math.isnan(sum(f.values()))


def test_multifactor_prefers_the_group_with_less_decayed_usage_over_an_older_job() -> None:
    # One 4-GPU node. a uses the node for 10 h; then a and b each queue a job (a's first).
    # When the node frees, b's job goes first: its Fair Tree factor is 1.0 vs a's 0.5, worth
    # 5000 priority points, while a's extra minute of age is worth 1000 * 60 / 7 d = 0.1.
    jobs = [
        job("a0", 0, "a", "train", 4, 10 * H),
        job("a1", 100, "a", "train", 4, H),
        job("b1", 160, "b", "train", 4, H),
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1, gpus=4), jobs, "slurm-multifactor"))
    starts = [e["job"] for e in evs if e["type"] == "start"]
    assert starts == ["a0", "b1", "a1"]
    fifo = [
        e["job"]
        for e in events_of(replay(tiny_policy(), tiny_cluster(nodes=1, gpus=4), jobs, "fifo"))
        if e["type"] == "start"
    ]
    assert fifo == ["a0", "a1", "b1"]


def test_multifactor_never_preempts_for_fairness() -> None:
    jobs = [job(f"a{i}", 0, "a", "train", 1, 10 * H) for i in range(8)] + [
        job("b0", 60, "b", "debug", 1, 600)
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs, "slurm-multifactor"))
    assert [e for e in evs if e["type"] == "preempt"] == []
