"""fairshare's reservations by estimates (issue 20), at the core: when a reservation expects the
runs on its GPUs to leave, which decides whether a short job may backfill them. Each case builds a
small engine state by hand (no replay), calls the core's `decide` once at t=2000 and states whether
the candidate C (1 GPU, team c, last in the fair-share order) starts on the held GPU.

Two 8-GPU nodes. R (team a, 8 GPUs, waiting since 0) cannot start; node 1 runs a's a1 (8 GPUs,
protected for days), so R's reservation holds node 0, where one GPU is free. The preemption
backoff's grid is 300 s: a job whose search finds no victims at 2000 searches next at 2400."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fairshare.core import decide, get_strategy
from fairshare.core.snapshot import Decisions
from fairshare.engine import EngineState
from hand_engine import hand_engine, run, submit

H = 3600.0
NOW = 2000.0
NEXT_SEARCH = 2400.0  # (floor(2000 / 300) + 2) x 300
RUNS_FROM = 1700.0


@dataclass(frozen=True)
class Case:
    shares: tuple[float, float, float]  # a, b, c
    c_protected: float  # the protected window of c's run(s) on node 0, from RUNS_FROM
    candidate_ends: float  # C's estimated end if it starts now
    b_run: bool = False  # node 0: c1 (4 GPUs) + b's run ending at 2100 (3) instead of c1 + c2
    searched_at_1800: bool = False  # a pass at 1800 found R no victims: in backoff at 2000


def _engine(shares: tuple[float, float, float]) -> EngineState:
    return hand_engine(dict(zip("abc", shares, strict=True)))


def _state(case: Case) -> EngineState:
    e = _engine(case.shares)
    e.begin(0.0)
    submit(e, "R", "a", 8, H, 600.0)
    e.settle()
    e.begin(RUNS_FROM)
    run(e, "a1", "a", 8, 100 * H, 100 * H, 1)
    run(e, "c1", "c", 4, 10 * H, case.c_protected, 0)
    if case.b_run:
        run(e, "b1", "b", 3, 400.0, 600.0, 0)
    else:
        run(e, "c2", "c", 3, 10 * H, case.c_protected, 0)
    e.settle()
    if case.searched_at_1800:
        e.begin(1800.0)
        e.settle()
        assert e.pass_due()
        actions = e.apply(decide(e.snapshot(), e.strategy))
        assert not actions.starts and not actions.preempts
        assert e.states["R"].preempt_retry_at == NEXT_SEARCH  # R found no victims: backoff
    e.begin(1950.0)
    submit(e, "C", "c", 1, case.candidate_ends - NOW, 600.0)
    e.settle()
    e.begin(NOW)
    if not case.b_run:  # b's demand: a 2-node gang, just submitted (no reservation of its own)
        submit(e, "bP", "b", 16, H, 600.0)
    e.settle()
    return e


def _pass(case: Case) -> Decisions:
    d = decide(_state(case).snapshot(), get_strategy("fairshare"))
    assert not d.preempts
    assert d.reservation == ("R", (0,))  # node 0 is expected to be ready first
    return d


def _candidate_starts(d: Decisions) -> bool:
    started = {s.job: s.alloc for s in d.starts}
    assert set(started) <= {"C"}
    if "C" in started:
        assert started["C"] == ((0, 1),)  # the held GPU: nothing else is free
    return "C" in started


# Over-served rule: node 0 runs c1 (4 GPUs) and c2 (3), team c's, over-served, protected until
# 2300 and estimated to end at 1700 + 10 h = 37,700. b waits (bP, 16 GPUs) so that the capacity is
# split over three teams: owed 16 x share / 100 each (demands 16, 16 and 8 are all above it).
# a runs 8 GPUs (a1). When a is over-served, R's reservation expects c's runs to leave at their
# estimated ends only (37,700); otherwise R could take them once their protection ends (2300).
C_ESTIMATED_END = RUNS_FROM + 10 * H
OVER_SERVED = [
    pytest.param(
        (40.0, 30.0, 30.0), C_ESTIMATED_END, True, id="over-served-candidate-ends-at-the-expected-start"
    ),
    pytest.param(
        (40.0, 30.0, 30.0), C_ESTIMATED_END + 1, False, id="over-served-candidate-ends-a-second-after"
    ),
    pytest.param((40.0, 30.0, 30.0), NOW + H, True, id="over-served-owed-6.4-candidate-ends-in-an-hour"),
    pytest.param(
        (49.0, 25.5, 25.5), NOW + H, True, id="just-over-its-share-owed-7.84-candidate-ends-in-an-hour"
    ),
    pytest.param((50.0, 25.0, 25.0), NOW + H, False, id="exactly-at-its-share-victims-counted-no-start"),
    pytest.param(
        (50.0, 25.0, 25.0), 2300.0, True, id="exactly-at-its-share-candidate-ends-at-the-protection-end"
    ),
    pytest.param((60.0, 20.0, 20.0), NOW + H, False, id="under-its-share-victims-counted-no-start"),
]


@pytest.mark.parametrize(("shares", "candidate_ends", "starts"), OVER_SERVED)
def test_a_reservation_of_an_over_served_leaf_expects_the_runs_estimated_ends_only(
    shares: tuple[float, float, float], candidate_ends: float, starts: bool
) -> None:
    d = _pass(Case(shares, c_protected=600.0, candidate_ends=candidate_ends))
    assert _candidate_starts(d) is starts


# Next-search rule: a under its share (owed 9.75 of 16, runs 8); node 0 runs c1 (4 GPUs, team c,
# over-served) and b1 (3 GPUs, b's, at its share: no victim, estimated to end at 2100). Taking c1
# alone frees 5 GPUs of the 8 R needs, so R's search at 2000 finds nothing. c1 past its protection
# leaves no earlier than R's next search (2400); a protection that ends before then (2300) ends R's
# backoff early (the protection end is a pass and a new victim), so c1 may leave at 2300; one that
# ends after it (2700), at its end. Without a search in this pass (R backs off since 1800) the
# rule does not apply: c1, past its protection, may leave at once, and node 0 at b1's end (2100).
NEXT = [
    pytest.param(100.0, NEXT_SEARCH, False, True, id="past-protection-candidate-ends-at-the-next-search"),
    pytest.param(100.0, NEXT_SEARCH + 1, False, False, id="past-protection-candidate-ends-a-second-after"),
    pytest.param(
        100.0, 2200.0, False, True, id="past-protection-candidate-ends-after-b1-before-the-next-search"
    ),
    pytest.param(
        600.0, 2300.0, False, True, id="protection-ends-before-the-next-search-candidate-ends-with-it"
    ),
    pytest.param(
        600.0, 2350.0, False, False, id="protection-ends-before-the-next-search-candidate-ends-after-it"
    ),
    pytest.param(
        1000.0, 2700.0, False, True, id="protection-ends-after-the-next-search-candidate-ends-with-it"
    ),
    pytest.param(
        1000.0, 2701.0, False, False, id="protection-ends-after-the-next-search-candidate-ends-after-it"
    ),
    pytest.param(50.0, 2100.0, True, True, id="no-search-this-pass-candidate-ends-with-b1"),
    pytest.param(50.0, 2200.0, True, False, id="no-search-this-pass-candidate-ends-after-b1"),
]


@pytest.mark.parametrize(("c_protected", "candidate_ends", "searched_at_1800", "starts"), NEXT)
def test_a_reservation_whose_search_found_nothing_expects_no_victim_before_the_next_search(
    c_protected: float, candidate_ends: float, searched_at_1800: bool, starts: bool
) -> None:
    case = Case(
        (60.0, 20.0, 20.0),
        c_protected=c_protected,
        candidate_ends=candidate_ends,
        b_run=True,
        searched_at_1800=searched_at_1800,
    )
    assert _candidate_starts(_pass(case)) is starts


def test_a_job_backfilled_until_the_expected_start_does_not_delay_the_reservations_job() -> None:
    # Owed: a 11 (its demand), c 5 (b has no demand). Node 1 runs a1 (a, 8 GPUs); node 0 runs c's
    # c1 (2 GPUs, protected until 2300) and c2 (5 GPUs, protected for days); one GPU is free.
    # R (a, 3 GPUs, waiting since 0) finds no victims at 2000 (C's arrival) and backs off to 2400,
    # but c1's protection end at 2300 is a pass that ends the backoff, and R takes c1 then (both
    # sides end at their share: 5 of 5, 11 of 11).
    # C (c, 1 GPU, ending at 2350) must not take the free GPU at 2000: that would make R's
    # preemption at 2300 futile and R would wait for its next grid point (2700).
    e = _engine((75.0, 25.0, 25.0))
    e.begin(0.0)
    submit(e, "R", "a", 3, H, 600.0)  # waiting since 0: reserved for once it fails
    e.settle()
    e.begin(RUNS_FROM)
    run(e, "a1", "a", 8, 100 * H, 100 * H, 1)
    run(e, "c1", "c", 2, 10 * H, 600.0, 0)
    run(e, "c2", "c", 5, 10 * H, 100 * H, 0)
    e.settle()
    ends: dict[str, float] = {}
    starts: dict[str, float] = {}
    for t in (NOW, 2300.0, 2350.0, 2400.0, 2700.0):  # C would end at 2350
        e.begin(t)
        for jid in [j for j, end in ends.items() if end == t]:
            e.finished(jid)
        if t == NOW:
            submit(e, "C", "c", 1, 350.0, 600.0)
        if not e.settle():
            continue
        actions = e.apply(decide(e.snapshot(), e.strategy))
        for p in actions.preempts:
            e.preempted(p.job, p.reason, p.by, p.lost_gpu_s, kept=0.0)
        for st in actions.starts:
            e.started(st.job, st.alloc, st.charge)
            ends[st.job] = t + e.running[st.job].job.estimate
            starts[st.job] = t
    assert starts.get("R") == 2300.0
    assert "C" not in starts or starts["C"] >= 2300.0


@pytest.mark.parametrize(
    ("r_gpus", "starts"),
    [(2, True), (8, False)],
    ids=["2-gpu-job-expects-the-3-and-4-gpu-runs-at-their-estimated-ends", "8-gpu-job-may-take-them-at-2300"],
)
def test_a_reservation_expects_no_run_larger_than_its_job_to_be_taken(r_gpus: int, starts: bool) -> None:
    # The over-served rule's setting under its share (a 60, b 20, c 20; b waits with a 16-GPU gang):
    # node 0 runs c1 (4 GPUs) and c2 (3), over-served, protected until 2300; one GPU is free. R
    # (a, waiting since 0) holds node 0. An 8-GPU R could take both at 2300, so C (ending in an
    # hour) may not use the held GPU; a 2-GPU R may take neither (no larger victim), so they
    # leave at their estimated ends (37,700) and C may.
    e = _engine((60.0, 20.0, 20.0))
    e.begin(0.0)
    submit(e, "R", "a", r_gpus, H, 600.0)
    e.settle()
    e.begin(RUNS_FROM)
    run(e, "a1", "a", 8, 100 * H, 100 * H, 1)
    run(e, "c1", "c", 4, 10 * H, 600.0, 0)
    run(e, "c2", "c", 3, 10 * H, 600.0, 0)
    e.settle()
    e.begin(1950.0)
    submit(e, "C", "c", 1, H, 600.0)
    e.settle()
    e.begin(NOW)
    submit(e, "bP", "b", 16, H, 600.0)
    e.settle()
    d = decide(e.snapshot(), get_strategy("fairshare"))
    assert not d.preempts and d.reservation == ("R", (0,))
    assert _candidate_starts(d) is starts
