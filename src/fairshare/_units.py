"""Durations (`1d2h`, `30m`, `90`) and instants (dates, datetimes) on the replay clock."""

from __future__ import annotations

import datetime as dt
import math
import re

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(?:\s*(\d+(?:\.\d+)?)\s*([smhdw]))+\s*$")
_NEGATIVE = re.compile(r"^\s*-\s*(?:\s*(\d+(?:\.\d+)?)\s*([smhdw]))+\s*$")
_EXPECTED = "expected a duration such as 30m or 1d2h (units s m h d w) or a number of seconds"
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def is_duration_text(value: object) -> bool:
    return isinstance(value, str) and _DURATION.match(value) is not None


def parse_duration(value: object) -> float:
    """Seconds from a number or a duration string such as `1d2h`, `15m`, `30s`.

    Raises ValueError with a readable message for anything else (negative or non-finite numbers too).
    """
    if isinstance(value, bool):
        raise ValueError(f"{_EXPECTED}, got {value!r}")
    if isinstance(value, int | float):
        return _non_negative(float(value), value)
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return _non_negative(number, value)
        if _DURATION.match(text):
            return sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
        if _NEGATIVE.match(text):
            raise ValueError(f"a duration cannot be negative, got {value!r}")
    raise ValueError(f"{_EXPECTED}, got {value!r}")


def _non_negative(number: float, value: object) -> float:
    if not math.isfinite(number):
        raise ValueError(f"a duration must be a finite number of seconds, got {value!r}")
    if number < 0:
        raise ValueError(f"a duration cannot be negative, got {value!r}")
    return number


def to_utc(value: object) -> dt.datetime:
    """A date or datetime (YAML may already have parsed it); naive means UTC, a bare date 00:00 UTC."""
    if isinstance(value, dt.datetime):
        d = value
    elif isinstance(value, dt.date):
        d = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            d = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"expected a date (2026-12-15) or datetime, got {value!r}") from exc
    else:
        raise ValueError(f"expected a date (2026-12-15) or datetime, got {value!r}")
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.UTC)
    return d.astimezone(dt.UTC)


def instant(value: object, epoch: dt.datetime) -> float:
    """Replay-clock seconds of a duration (relative to t=0) or an absolute date/datetime."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return parse_duration(value)
    if is_duration_text(value) or _is_number_text(value):
        return parse_duration(value)
    try:
        when = to_utc(value)
    except ValueError:
        raise ValueError(
            f"expected a duration from t = 0 (such as 2d8h) or a date/datetime "
            f"(such as 2026-12-15 or 2026-12-15T06:00:00Z), got {value!r}"
        ) from None
    return (when - epoch).total_seconds()


def _is_number_text(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def format_epoch(epoch: dt.datetime) -> str:
    return epoch.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_UNIT_SIZES = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


def fmt_duration(seconds: float) -> str:
    """Every unit, to the second, for messages and evidence: 90 -> 1m30s, 7200 -> 2h."""
    s = round(seconds)
    if s == 0:
        return "0s"
    if s < 0:
        return "-" + fmt_duration(-s)
    out = []
    for size, unit in _UNIT_SIZES:
        if s >= size:
            out.append(f"{s // size}{unit}")
            s %= size
    return "".join(out)


def fmt_duration_rounded(seconds: float) -> str:
    """The two most significant units, rounded, for tables: 250 -> 4m10s, 7379 -> 2h3m,
    93784 -> 1d2h."""
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    for i, (size, unit) in enumerate(_UNIT_SIZES):
        minor_size, minor_unit = _UNIT_SIZES[min(i + 1, len(_UNIT_SIZES) - 1)]
        rounded = round(s / minor_size) * minor_size
        if rounded >= size:
            major, minor = divmod(rounded, size)
            text = f"{major}{unit}"
            if minor and minor_size != size:
                text += f"{minor // minor_size}{minor_unit}"
            return sign + text
    return "0s"
