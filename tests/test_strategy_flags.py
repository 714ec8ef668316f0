"""A strategy's flags say what it does; the phases of its pass follow from them."""

from __future__ import annotations

import dataclasses

import pytest

from fairshare.core.strategies import STRATEGIES, get_strategy
from fairshare.core.victims import NO_VICTIMS, RULES

PHASES = [
    ("fairshare", ("forced", "deadlines", "fast_lane", "ordered")),
    ("fifo", ("forced", "ordered")),
    ("priority-labels", ("forced", "ordered")),
    ("slurm-multifactor", ("forced", "slurm")),
    ("slurm-multifactor-firstfit", ("forced", "ordered")),
]


@pytest.mark.parametrize(("name", "phases"), PHASES, ids=[n for n, _ in PHASES])
def test_a_built_in_strategy_runs_the_phases_its_flags_name(name: str, phases: tuple[str, ...]) -> None:
    assert STRATEGIES[name].phases == phases


FLAGS = [  # (slurm_scheduler, fast_lane, deadline_reservation) set on fifo
    ("slurm scheduler", (True, False, False), ("forced", "slurm")),
    ("fast lane", (False, True, False), ("forced", "fast_lane", "ordered")),
    ("deadlines", (False, False, True), ("forced", "deadlines", "ordered")),
]


@pytest.mark.parametrize(("flags", "phases"), [(f, p) for _, f, p in FLAGS], ids=[i for i, _, _ in FLAGS])
def test_a_changed_flag_changes_the_phases(flags: tuple[bool, bool, bool], phases: tuple[str, ...]) -> None:
    slurm, fast, deadlines = flags
    s = dataclasses.replace(
        STRATEGIES["fifo"], slurm_scheduler=slurm, fast_lane=fast, deadline_reservation=deadlines
    )
    assert s.phases == phases


SWITCH = [
    ("fairshare", "none", NO_VICTIMS),
    ("fairshare", "over_served", RULES["over_served"]),
    ("priority-labels", "none", RULES["lower_label"]),  # no preemption knob: the rule stays
]


@pytest.mark.parametrize(("name", "knob", "rule"), SWITCH, ids=[f"{n}-{k}" for n, k, _ in SWITCH])
def test_the_preemption_knob_turns_off_only_a_strategy_that_has_it(
    name: str, knob: str, rule: object
) -> None:
    assert get_strategy(name, knob).victims is rule
