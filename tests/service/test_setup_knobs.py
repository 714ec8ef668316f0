"""The service's engine is built with the knobs the replay's engine gets from the same policy."""

from __future__ import annotations

import pytest

from fairshare.core.model import Node
from fairshare.inputs._validation import validate
from fairshare.inputs.policy import Policy
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.service.loop.live_engine import setup_of

NODES = (Node("n0", "p", 8, "H100", 64.0, 512.0, "b0"),)


@pytest.mark.parametrize(
    ("window", "scheduling"),
    [
        ("7d", {}),
        ("3d", {}),
        ("3d", {"flip_guard": "1d"}),
        ("2d", {"fast_classes": []}),
    ],
    ids=["default-window", "short-window", "explicit-guard", "no-fast-lane"],
)
def test_service_knobs_equal_the_replays_for_the_same_policy(
    window: str, scheduling: dict[str, object]
) -> None:
    raw = dict(SCENARIOS["normal"](1).policy)
    raw["window"] = window
    raw["scheduling"] = {**raw.get("scheduling", {}), **scheduling}
    policy = validate(Policy, raw, "policy.yaml")
    knobs = setup_of(policy, NODES).knobs
    assert knobs == policy.knobs()
    if "flip_guard" not in scheduling:
        assert knobs.flip_guard == policy.window  # the guard's default is the policy's window
