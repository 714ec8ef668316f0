"""Instants in the service: seconds since 1970-01-01T00:00:00Z (floats), shown as ISO 8601 UTC.

The service's clock is the replay clock with the default epoch (FORMATS.md), so an engine time and a
stored time are the same number. A clock is a callable passed in, never read from a global.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from .._units import to_utc

Clock = Callable[[], float]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def iso(t: float | None) -> str | None:
    """`2026-12-01T06:00:00Z` (fractions of a second kept when present)."""
    if t is None:
        return None
    when = EPOCH + dt.timedelta(seconds=t)
    spec = "seconds" if when.microsecond == 0 else "microseconds"
    return when.isoformat(timespec=spec).replace("+00:00", "Z")


def from_iso(value: object) -> float:
    """Seconds since the epoch of a date or datetime (a bare date is 00:00 UTC, naive means UTC)."""
    return (to_utc(value) - EPOCH).total_seconds()


def today(t: float) -> dt.date:
    return (EPOCH + dt.timedelta(seconds=t)).date()
