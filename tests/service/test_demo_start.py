"""`serve --demo` starts on a moment of its scenario where jobs wait (issue 18, must-have 8): the
warm-up runs the scenario's first hours on a stepped clock until jobs wait, the same instant on
every run, and the view the service opens with shows them waiting and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairshare.service import server
from fairshare.service.loop.demo_start import SteppedClock, WarmUp, warm_up
from fairshare.service.options import ServeOptions
from fairshare.service.storage.store import Store

from .live_helpers import EPOCH, make_loop, small_scenario


def _warm(folder: Path, how: WarmUp) -> tuple[float, int, list[str]]:
    clock = SteppedClock(EPOCH)
    with Store.open(f"sqlite:///{folder / 'w.db'}", clock) as store:
        loop = make_loop(store, small_scenario(jobs=80), clock)
        try:
            at = warm_up(loop, clock, EPOCH, how)
            assert loop.engine is not None
            waiting = sorted(loop.engine.state.pending.jobs)
            loop.publish(force=True)
            view_waiting = [r.id for r in loop.view.jobs.values() if r.state == "pending"]
            return at, len(waiting), sorted(view_waiting)
        finally:
            loop._reset()


@pytest.mark.parametrize(
    "how",
    [WarmUp(min_waiting=1, min_history_s=3600.0), WarmUp(min_waiting=3, min_history_s=2 * 3600.0)],
    ids=["one-waiting-after-1h", "three-waiting-after-2h"],
)
def test_the_warm_up_stops_at_the_first_pass_where_jobs_wait_and_the_same_one_each_time(
    tmp_path: Path, how: WarmUp
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    at, waiting, shown = _warm(tmp_path / "a", how)
    assert waiting >= how.min_waiting and len(shown) == waiting
    assert how.min_history_s <= at - EPOCH < how.max_s
    assert (at - EPOCH) % how.step_s == 0  # a pass of the stepped clock
    assert _warm(tmp_path / "b", how) == (at, waiting, shown)  # deterministic


@pytest.mark.slow
def test_serve_demo_opens_on_a_view_where_jobs_wait_and_say_why() -> None:
    prepared = server.prepare(ServeOptions(None, None, None, None, demo=True))
    try:
        view = prepared.live.loop.view
        waiting = [r for r in view.jobs.values() if r.state == "pending"]
        assert len(waiting) >= WarmUp().min_waiting
        # the first ones held say why (no capacity, ...); the rest wait behind them ("queued")
        assert any(r.why for r in waiting), [(r.id, r.why) for r in waiting]
        assert any("h into the normal scenario" in n for n in prepared.notes), prepared.notes
        assert prepared.clock() >= view.now  # the accelerated clock goes on from the warm-up's instant
    finally:
        server._close(prepared)
