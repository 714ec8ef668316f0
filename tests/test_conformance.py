"""Outputs agree with the independent checker in ../shared/tools (FORMATS.md, 1e-6 relative)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import job, run_checker, tiny_cluster, tiny_policy
from fairshare.core.strategies import STRATEGIES
from fairshare.inputs.scenarios import SCENARIOS, ScenarioData
from fairshare.replay.outputs import write_replay
from fairshare.replay.runner import inputs_from_scenario, run_strategy

POLICIES = sorted(STRATEGIES)


def _check(tmp_path: Path, data: ScenarioData, policy: str) -> None:
    inputs = inputs_from_scenario(data)
    out = run_strategy(inputs, policy)
    folder = tmp_path / policy
    write_replay(folder, inputs.cluster, inputs.policy_text, out)
    res = run_checker(folder, data.policy, data.cluster)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "OK:" in res.stdout


@pytest.mark.parametrize("policy", POLICIES)
def test_eight_gpu_outputs_pass_the_independent_checker(tmp_path: Path, policy: str) -> None:
    _check(tmp_path, SCENARIOS["eight-gpu"](1), policy)


def test_edge_cases_pass_the_checker(tmp_path: Path) -> None:
    # hangs, drains with immediate deadline, deadlines, gangs, cpu-dominant charge, exception expiry
    policy = tiny_policy(exceptions=[{"group": "b", "extra_share": 50, "expires": "6h"}])
    cluster = tiny_cluster(
        nodes=3, per_block=2, maintenance=[{"nodes": ["n-001"], "start": "2h", "deadline": "2h", "end": "5h"}]
    )
    jobs = [
        job(
            f"j{i}",
            300.0 * i,
            "ab"[i % 2],
            ("debug", "train", "eval")[i % 3],
            (1, 2, 4, 8, 16)[i % 5],
            900 + 311 * i,
            **({"stall_after": 400} if i % 7 == 3 else {}),
            **({"cpus": 40} if i % 11 == 5 else {}),
        )
        for i in range(80)
    ]
    _check(tmp_path, ScenarioData("edge", "edge", policy, cluster, jobs), "fairshare")


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "eight-gpu"])
def test_every_scenario_passes_the_independent_checker(tmp_path: Path, scenario: str, policy: str) -> None:
    _check(tmp_path, SCENARIOS[scenario](1), policy)


def test_event_and_decision_lines_are_canonical_compact_json() -> None:
    """Each line is one JSON object; re-encoding what a reader parses gives the same bytes (floats
    in their shortest round-trip form, no spaces), so the same replay is the same file."""
    import json

    import orjson

    out = run_strategy(inputs_from_scenario(SCENARIOS["eight-gpu"](1)), "fairshare")
    assert out.events and out.decisions
    for line in [*out.events, *out.decisions]:
        parsed = json.loads(line)
        assert isinstance(parsed, dict)
        assert line == orjson.dumps(parsed).decode()


# Settings under which an engine timer falls due at the instant that set it (after its pass): the
# replay must still make one pass per instant (FORMATS.md "Order within one instant"); a second
# pass at the same t would put its preemptions after the first pass's starts.
ZERO_DELAYS = {
    "requeue-first-at-once": {"requeue_first_after": "0s"},
    "backlog-at-once": {"requeue_first_when_backlogged": "1s"},
    "requeue-pass-at-once": {"requeue_delay": "0s"},
    "gang-reservation-at-once": {"gang_reserve_after": "0s"},
}


@pytest.mark.slow
@pytest.mark.parametrize("scheduling", list(ZERO_DELAYS.values()), ids=list(ZERO_DELAYS))
@pytest.mark.parametrize("scenario", ["small-burst", "normal", "gang-mix"])
def test_timers_due_at_their_own_instant_keep_one_pass_per_instant(
    tmp_path: Path, scenario: str, scheduling: dict[str, str]
) -> None:
    data = SCENARIOS[scenario](1)
    policy = {**data.policy, "scheduling": {**data.policy.get("scheduling", {}), **scheduling}}
    _check(tmp_path, ScenarioData(data.name, data.description, policy, data.cluster, data.jobs), "fairshare")
