"""Numbers the API takes, checked where they enter against the limits table of the files
(`fairshare.inputs.limits`): a value out of range is an InputError (422) naming the field and the
range, so nothing out of range is stored or reaches the scheduler loop."""

from __future__ import annotations

import math

from ..._units import parse_duration
from ...errors import InputError
from ...inputs import limits
from ...inputs.limits import fmt_limit

#: Instants a query or a request may name: the limits' years (1970-01-01 .. 2199-12-31).
MIN_INSTANT = 0.0
MAX_INSTANT = 7_258_118_399.0  # 2199-12-31T23:59:59Z


def within(where: str, field: str, value: float, lo: float, hi: float) -> float:
    """`value` if lo <= value <= hi (and finite), else an InputError naming field and range."""
    if isinstance(value, bool) or not math.isfinite(value) or not lo <= value <= hi:
        raise InputError(
            where, field, f"must be between {fmt_limit(lo)} and {fmt_limit(hi)} (the limits), got {value:g}"
        )
    return value


def duration(
    where: str, field: str, value: object, lo: float = 0.0, hi: float = limits.MAX_DURATION
) -> float:
    """A duration (seconds, or text such as 7d) within [lo, hi] seconds."""
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise InputError(where, field, str(exc)) from None
    return within(where, field, seconds, lo, hi)


def instant(where: str, field: str, t: float) -> float:
    """An instant within the limits' years."""
    if not math.isfinite(t) or not MIN_INSTANT <= t <= MAX_INSTANT:
        raise InputError(
            where, field, f"must be between 1970-01-01 and 2199-12-31 ({MIN_INSTANT:g} .. {MAX_INSTANT:g} s)"
        )
    return t


def share(where: str, field: str, value: float) -> float:
    """A share or an extra share: MIN_SHARE .. MAX_SHARE."""
    return within(where, field, value, limits.MIN_SHARE, limits.MAX_SHARE)
