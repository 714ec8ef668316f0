"""The service's clocks: the wall clock, or an accelerated one for the demo (`--speed`).

An accelerated clock runs `speed` times faster than the wall clock from a base instant:
`now = sim_base + (wall() - wall_base) * speed`. Its base is stored in the database, so a restart
continues where the clock is (time goes on while the process is down, as it does on a cluster);
a restart with another speed rebases at the current instant, so the clock never goes back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select

from . import schema
from .db import Tx


@dataclass(frozen=True)
class ScaledClock:
    sim_base: float
    wall_base: float
    speed: float
    wall: Callable[[], float] = time.time

    def __call__(self) -> float:
        return self.sim_base + (self.wall() - self.wall_base) * self.speed


def get_state(tx: Tx, key: str) -> dict[str, object] | None:
    s = schema.service_state.c
    raw = tx.conn.execute(select(s.value).where(s.key == key)).scalar_one_or_none()
    return None if raw is None else dict(json.loads(raw))


def put_state(tx: Tx, key: str, value: dict[str, object]) -> None:
    s = schema.service_state
    text = json.dumps(value, sort_keys=True)
    if tx.conn.execute(select(s.c.key).where(s.c.key == key)).first() is None:
        tx.conn.execute(s.insert().values(key=key, value=text))
    else:
        tx.conn.execute(s.update().where(s.c.key == key).values(value=text))


def scaled_clock(tx: Tx, start: float, speed: float, wall: Callable[[], float] = time.time) -> ScaledClock:
    """The demo clock of this database: continue the stored one (rebased when the speed changed),
    or start one at `start`."""
    now_wall = wall()
    stored = get_state(tx, "clock")
    if stored is None:
        clock = ScaledClock(start, now_wall, speed, wall)
    else:
        old = ScaledClock(
            float(stored["sim_base"]),  # type: ignore[arg-type]
            float(stored["wall_base"]),  # type: ignore[arg-type]
            float(stored["speed"]),  # type: ignore[arg-type]
            wall,
        )
        if old.speed == speed:
            return old
        clock = ScaledClock(old(), now_wall, speed, wall)
    put_state(tx, "clock", {"sim_base": clock.sim_base, "wall_base": clock.wall_base, "speed": speed})
    return clock
