"""Request vs truth: the declared estimate (FORMATS `estimate`) is what the scheduler plans with;
--overstate makes it wrong the way users do (their time limits are 2-10x the real run time)."""

from __future__ import annotations

import json
import math

import pytest

from conftest import make_inputs, tiny_cluster, tiny_policy
from fairshare.errors import InputError
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_scenario, overstate_estimates, run_strategy


def test_overstated_estimates_are_per_job_in_range_and_leave_the_truth() -> None:
    inputs = inputs_from_scenario(SCENARIOS["normal"](1))
    over = overstate_estimates(inputs, 2.0, 10.0, seed=3)
    factors = [o.request.estimate / j.work for j, o in zip(inputs.jobs, over.jobs, strict=True)]
    assert all(2.0 - 1e-9 <= f <= 10.0 + 1e-9 for f in factors)
    # log-uniform: about half the factors below sqrt(2 * 10) = 4.47
    below = sum(1 for f in factors if f < math.sqrt(20.0)) / len(factors)
    assert 0.45 < below < 0.55
    assert [j.work for j in over.jobs] == [j.work for j in inputs.jobs]
    assert [j.stall_after for j in over.jobs] == [j.stall_after for j in inputs.jobs]
    # a job's factor depends on the seed and its id only
    again = overstate_estimates(inputs_from_scenario(SCENARIOS["normal"](1)), 2.0, 10.0, seed=3)
    assert [j.request.estimate for j in again.jobs] == [j.request.estimate for j in over.jobs]
    other = overstate_estimates(inputs, 2.0, 10.0, seed=4)
    assert [j.request.estimate for j in other.jobs] != [j.request.estimate for j in over.jobs]


@pytest.mark.parametrize("bounds", [(0.0, 2.0), (3.0, 2.0), (1.0, math.inf)], ids=["zero", "reversed", "inf"])
def test_overstate_bounds_are_checked(bounds: tuple[float, float]) -> None:
    with pytest.raises(InputError, match="--overstate"):
        overstate_estimates(inputs_from_scenario(SCENARIOS["eight-gpu"](1)), *bounds)


def test_fifo_never_reads_the_estimate() -> None:
    inputs = inputs_from_scenario(SCENARIOS["eight-gpu"](1))
    plain = run_strategy(inputs, "fifo")
    over = run_strategy(overstate_estimates(inputs, 2.0, 10.0), "fifo")

    def without_estimate(lines: list[str]) -> list[dict[str, object]]:
        return [{k: v for k, v in json.loads(x).items() if k != "estimate"} for x in lines]

    assert without_estimate(over.events) == without_estimate(plain.events)
    # the same metrics; integrals may differ in the last bits, since the engine still wakes at a
    # deadline job's latest start (from its estimate) under every strategy, splitting them there
    assert _rounded(over.result.metrics) == _rounded(plain.result.metrics)


def _rounded(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_a_deadline_job_is_planned_on_its_estimate() -> None:
    """A deadline job whose declared run time cannot fit before its deadline is not urgent for
    the deadline phase (it is judged infeasible), although its true run would fit."""
    policy = tiny_policy()
    jobs = [
        {"job_id": "fill", "submit": 0, "group": "a", "class": "train", "gpus": 8, "work": 7200},
        # eval: deadline 2h after submit (class default); true work 30 min, declared 3 h
        {"job_id": "ev", "submit": 60, "group": "b", "class": "eval", "gpus": 8, "work": 1800},
    ]
    true = run_strategy(make_inputs(policy, tiny_cluster(nodes=1, gpus=8), jobs), "fairshare")
    jobs[1]["estimate"] = 3 * 3600
    told = run_strategy(make_inputs(policy, tiny_cluster(nodes=1, gpus=8), jobs), "fairshare")

    def reasons(out: object) -> list[str]:
        return [json.loads(e)["reason"] for e in out.events if '"type":"preempt"' in e]  # type: ignore[attr-defined]

    assert reasons(true) == ["deadline"]  # preempts fill past its protection to make the deadline
    assert reasons(told) == []  # believes it cannot make it: waits in the ordinary order
    assert true.result.metrics["deadlines"]["met"] == 1 and told.result.metrics["deadlines"]["met"] == 0
