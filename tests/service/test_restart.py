"""A restart after users' actions: the loop finishes starting whatever was submitted, cancelled or
changed before it (issue 18's restart bug: an API submission made the demo cluster's start fail
before the journal was caught up, forever). Both databases."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import yaml

from fairshare.service.loop.live_service import LiveService
from fairshare.service.service_errors import Unavailable
from fairshare.service.storage import portfolio
from fairshare.service.storage.roles import Principal
from fairshare.service.storage.store import Store

from .live_helpers import ManualClock, check_invariants, make_loop, rebuild, small_scenario
from .test_loop import run

SPEC = {"group": "ops", "class": "train", "gpus": 8, "estimate": 7200.0, "work": 5400.0}


def _without_class(text: str, cls: str) -> str:
    """The policy text without class `cls`."""
    data = yaml.safe_load(text)
    del data["classes"][cls]
    return str(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize(
    "then",
    ["nothing", "cancelled", "class_removed"],
    ids=["after-a-submission", "after-a-cancellation", "after-its-class-was-removed"],
)
def test_a_restart_after_an_api_submission_starts_and_keeps_the_job(db_url: str, then: str) -> None:
    clock = ManualClock()
    scenario = small_scenario(jobs=6)
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock)
        run(loop, clock, 600)
        backend = loop.backend
        assert backend is not None
        backend.submit("api-1", SPEC, clock.t)
        backend.submit("api-2", {**SPEC, "class": "eval", "gpus": 2}, clock.t)
        run(loop, clock, 120, step=60)
        if then == "cancelled":
            backend.cancel("api-2", clock.t, "me")
        elif then == "class_removed":  # the cluster's truth of api-2 cannot be resolved again
            with store.write() as tx:
                text = portfolio.current_policy(tx)
                assert text is not None
                portfolio.put_policy(tx, _without_class(text.text, "eval"), "test")
        run(loop, clock, 120, step=60)
        before = loop.engine
        assert before is not None and "api-1" in before.info
        loop._reset()  # the process is gone
        clock.t += 300
        again = make_loop(store, scenario, clock)  # raised AssertionError in DemoCluster._load
        assert again.role == "writer"
        run(again, clock, 4 * 3600, step=300)
        e = again.engine
        assert e is not None
        assert e.info["api-1"].state == "done"
        check_invariants(store, e)
        clean = rebuild(store)
        assert np.array_equal(clean.state.ledger.sums, e.state.ledger.sums)
        again._reset()


def test_a_restarted_serve_loop_is_scheduling_within_seconds_after_a_submission(db_url: str) -> None:
    """The loop's own run(): its role is `writer` and it schedules, not `starting` forever."""
    clock = ManualClock()
    scenario = small_scenario(jobs=6)
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock)
        run(loop, clock, 600)
        assert loop.backend is not None
        loop.backend.submit("api-1", SPEC, clock.t)
        run(loop, clock, 60, step=60)
        loop._reset()
        again = make_loop(store, scenario, clock)
        again._reset()  # as a fresh process: run() takes the lock and rebuilds
        stop = threading.Event()
        th = threading.Thread(target=again.run, args=(stop,), daemon=True)
        th.start()
        try:
            end = time.monotonic() + 10
            while time.monotonic() < end and not (again.role == "writer" and again.cycles > 0):
                time.sleep(0.05)
            assert again.role == "writer" and again.error is None, again.error
        finally:
            stop.set()
            again.wake.set()
            th.join(10)


@pytest.mark.parametrize(
    ("role", "error", "says"),
    [
        ("starting", None, "the scheduler loop is starting"),
        ("starting", "AssertionError: boom", "last error: AssertionError: boom"),
        ("reader", None, "another fairshare serve holds the database's writer lock"),
    ],
    ids=["starting", "starting-after-an-error", "reader"],
)
def test_a_job_action_refused_while_not_writing_says_why(
    tmp_path: object, role: str, error: str | None, says: str
) -> None:
    """A serve still starting (or failing to) does not blame another serve's writer lock."""
    clock = ManualClock()
    with Store.open(f"sqlite:///{tmp_path}/x.db", clock) as store:
        loop = make_loop(store, small_scenario(jobs=4), clock)
        loop._reset()
        loop.role, loop.error = role, error
        caller = Principal(1, "t", "admin", None)
        with pytest.raises(Unavailable) as exc:
            LiveService(store, loop).submit(caller, "x-1", SPEC)
        assert says in exc.value.message
