"""Where `serve --demo` starts: a moment of its scenario where jobs wait, so the dashboard's first
screen shows a queue and why its jobs wait (issue 18).

A fresh demo database's clock would start at the scenario's t = 0, an empty cluster (the `normal`
scenario's queue first holds a job 36 hours in). Instead the loop runs the scenario's first hours on
a stepped clock before the service opens, a cycle every `step_s` simulated seconds (the live loop
cycles at every event; passes every 15 minutes keep the warm-up to a few seconds), until at least
`min_waiting` jobs wait after a pass and `min_history_s` have passed; then the accelerated clock
starts from that instant. The stepping depends only on the scenario and its seed,
so the start instant is the same on every run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..storage.clock_state import ScaledClock, put_state
from ..storage.store import Store
from .cycle import SchedulerLoop


@dataclass(frozen=True)
class WarmUp:
    min_waiting: int = 5  # jobs waiting after a pass
    min_history_s: float = 6 * 3600.0  # usage to show in the chart
    max_s: float = 3 * 86400.0  # give up looking (start there anyway)
    step_s: float = 900.0  # simulated seconds between the warm-up's cycles


class SteppedClock:
    """A clock the warm-up moves by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def warm_up(loop: SchedulerLoop, stepped: SteppedClock, start: float, how: WarmUp = WarmUp()) -> float:
    """Run `loop` (its clock reads `stepped`) from `start` until jobs wait (see the module's
    docstring); returns the instant reached. Takes the writer lock unless it holds it (a --demo
    database is its own; another process holding it: no warm-up)."""
    if loop.role != "writer":
        if not loop.take_lock():
            return stepped.t
        loop.become_writer()
    e = loop.engine
    assert e is not None
    stepped.t = max(stepped.t, e.t)
    while True:
        loop.cycle()
        waiting = len(e.state.pending.jobs)
        t = stepped.t
        if t - start >= how.max_s or (waiting >= how.min_waiting and t - start >= how.min_history_s):
            return t
        stepped.t = t + how.step_s


def start_clock(store: Store, at: float, speed: float, wall: Callable[[], float]) -> ScaledClock:
    """The demo's accelerated clock from `at` on, stored so a restart continues it."""
    clock = ScaledClock(at, wall(), speed, wall)
    with store.write() as tx:
        put_state(tx, "clock", {"sim_base": clock.sim_base, "wall_base": clock.wall_base, "speed": speed})
    return clock
