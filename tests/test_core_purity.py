"""The scheduling core is a pure function of its snapshot: no mutation, no clock, no I/O."""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

import fairshare.replay.sim as sim_module
from fairshare.core.scheduler import decide as scheduler_decide
from fairshare.core.snapshot import Decisions, Snapshot
from fairshare.core.strategies import Strategy
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_scenario, run_strategy


def _state(s: Snapshot) -> Any:
    return (
        list(s.index.free),
        [sorted(b) for t in s.index.buckets for b in t],
        list(s.index.available),
        {k: list(v) for k, v in s.pending.queues.items()},
        sorted(s.pending.jobs),
        {k: copy.copy(v) for k, v in s.states.items()},
        list(s.running),
        list(s.debt),
        list(s.used),
        list(s.deadline_queue),
    )


@pytest.mark.parametrize("policy", ["fairshare", "fifo", "priority-labels"])
def test_decide_never_mutates_its_snapshot_nor_reads_the_clock(
    monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    real = scheduler_decide
    calls = [0]

    def checked(snap: Snapshot, strategy: Strategy, explain: bool = False) -> Decisions:
        before = _state(snap)

        def no_clock() -> float:
            raise AssertionError("the core read the wall clock")

        with monkeypatch.context() as m:
            m.setattr(time, "time", no_clock)
            m.setattr(time, "monotonic", no_clock)
            m.setattr(time, "perf_counter", no_clock)
            m.setattr("builtins.open", lambda *a, **k: (_ for _ in ()).throw(AssertionError("core did I/O")))
            d = real(snap, strategy, explain)
        assert _state(snap) == before
        calls[0] += 1
        return d

    monkeypatch.setattr(sim_module, "decide", checked)
    out = run_strategy(inputs_from_scenario(SCENARIOS["eight-gpu"](1)), policy)
    assert calls[0] > 100
    assert out.result.metrics["jobs"]["finished"] > 0


def test_same_snapshot_gives_same_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    real = scheduler_decide
    mismatches = []

    def twice(snap: Snapshot, strategy: Strategy, explain: bool = False) -> Decisions:
        a, b = real(snap, strategy, explain), real(snap, strategy, explain)
        if a != b:
            mismatches.append(snap.now)
        return a

    monkeypatch.setattr(sim_module, "decide", twice)
    run_strategy(inputs_from_scenario(SCENARIOS["eight-gpu"](1)), "fairshare")
    assert mismatches == []
