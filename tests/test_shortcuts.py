"""The scheduling core's shortcuts change no decision: each replay is run again with the plain
computation a shortcut replaces, and the event logs and audit records must be identical."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from fairshare.ordering import DebtOrder
from fairshare.placement import Shape
from fairshare.runner import inputs_from_scenario
from fairshare.scenarios import SCENARIOS
from fairshare.scheduler import _Pass
from fairshare.sim import ReplayOutput, Simulator
from fairshare.snapshot import RunView, Snapshot
from fairshare.strategies import get_strategy

FAST = ["eight-gpu", "small-burst", "large-training", "maintenance-drain"]
SLOW = [pytest.param(name, marks=pytest.mark.slow) for name in SCENARIOS if name not in FAST]


class _RankEveryStep(DebtOrder):
    """Reference for DebtOrder's incremental ranking: the live children of a level are ranked
    from scratch (priority descending, policy-file order on ties) at every step of every walk."""

    def _pick(self, parent: int, ids: Sequence[int]) -> tuple[int, int | None]:
        ranked = sorted((-self.prio(i), k, i) for k, i in enumerate(ids) if self.live[i] > 0)
        return ranked[0][2], ranked[1][2] if len(ranked) > 1 else None


def _replay(scenario: str, policy: str, reference: bool, monkeypatch: pytest.MonkeyPatch) -> ReplayOutput:
    inputs = inputs_from_scenario(SCENARIOS[scenario](1))
    strategy = get_strategy(policy, inputs.policy.scheduling.preemption)
    if reference:
        # no capacity pre-check: every victim search computes lost work and runs in full
        def always(self: _Pass, shape: Shape, job: str, runs: list[RunView]) -> bool:
            return True

        monkeypatch.setattr(_Pass, "_could_free", always)
        if policy == "fairshare":

            def order(snap: Snapshot, skip: set[str], used: list[float]) -> DebtOrder:
                return _RankEveryStep(snap, skip, used)

            strategy = dataclasses.replace(strategy, order=order)
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, strategy, scenario=scenario)
    return sim.run()


@pytest.mark.parametrize("policy", ["fairshare", "priority-labels"])
@pytest.mark.parametrize("scenario", [*FAST, *SLOW])
def test_shortcuts_give_the_same_replay_as_the_plain_computation(
    scenario: str, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _replay(scenario, policy, False, monkeypatch)
    plain = _replay(scenario, policy, True, monkeypatch)
    assert fast.events == plain.events
    assert fast.decisions == plain.decisions


def test_the_capacity_pre_check_rejects_searches_that_could_not_free_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The comparison above means something: the pre-check does cut searches short, and lets others on."""
    seen: list[bool] = []
    real = _Pass._could_free

    def spy(self: _Pass, shape: Shape, job: str, runs: list[RunView]) -> bool:
        seen.append(real(self, shape, job, runs))
        return seen[-1]

    monkeypatch.setattr(_Pass, "_could_free", spy)
    _replay("small-burst", "fairshare", False, monkeypatch)
    assert seen.count(False) > 0 and seen.count(True) > 0
