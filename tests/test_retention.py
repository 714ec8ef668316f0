"""Engine retention: a job's per-job state is dropped once it ended (finished, cancelled, cancelled by
a new policy) and kept while it may run again (a preempted job waits again). No decision changes:
the replay's outputs are byte-identical (test_determinism, test_policy_compat)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairshare.core import get_strategy
from fairshare.engine import EngineState, Event
from test_engine import request, setup_two_teams


def _running(e: EngineState, job: str) -> None:
    e.begin(0.0)
    e.submit(request(job, "a", 0, 0.0, 8))
    e.last_hold[job] = "queued"  # as a pass that held it would have
    e.started(job, ((0, 8),), 8.0)


def _finish(e: EngineState, job: str) -> None:
    e.begin(100.0)
    e.finished(job)


def _cancel_running(e: EngineState, job: str) -> None:
    e.begin(100.0)
    e.cancelled(job)


def _preempt(e: EngineState, job: str) -> None:
    e.begin(100.0)
    e.preempted(job, "fair_share", None, 0.0, 50.0)


def _preempt_then_finish(e: EngineState, job: str) -> None:
    _preempt(e, job)
    e.begin(200.0)
    e.started(job, ((0, 8),), 8.0)
    e.begin(300.0)
    e.finished(job)


@pytest.mark.parametrize(
    ("what", "then", "kept"),
    [
        ("finished", _finish, False),
        ("cancelled while running", _cancel_running, False),
        ("preempted: pending again", _preempt, True),
        ("preempted, started again, finished", _preempt_then_finish, False),
    ],
)
def test_per_job_state_dropped_when_the_job_ended(
    what: str, then: Callable[[EngineState, str], None], kept: bool
) -> None:
    e = EngineState(setup_two_teams(), get_strategy("fairshare"))
    _running(e, "a1")
    then(e, "a1")
    assert ("a1" in e.states) is kept, what
    assert "a1" not in e.last_hold and "a1" not in e.hung_since and "a1" not in e.detached
    if kept:
        assert e.states["a1"].preemptions == 1 and e.states["a1"].kept == 50.0
        assert "a1" in e.pending.jobs


def test_a_pending_job_cancelled_leaves_nothing() -> None:
    e = EngineState(setup_two_teams(), get_strategy("fairshare"))
    e.begin(0.0)
    e.submit(request("a1", "a", 0, 0.0, 8, deadline=9000.0))
    e.last_hold["a1"] = "no_capacity"
    assert "a1" in e.deadline_entry
    e.cancelled("a1")
    assert "a1" not in e.states and "a1" not in e.last_hold and "a1" not in e.deadline_entry
    assert not e.deadline_q and "a1" not in e.pending.jobs
    e.cancelled("a1")  # reported again: nothing to do


def test_a_rebuild_from_the_journal_drops_the_same_state() -> None:
    journal: list[Event] = []
    e = EngineState(setup_two_teams(), get_strategy("fairshare"), journal=journal)
    _running(e, "a1")
    _finish(e, "a1")
    again = EngineState.rebuild(setup_two_teams(), get_strategy("fairshare"), journal)
    assert again.states == e.states == {}
