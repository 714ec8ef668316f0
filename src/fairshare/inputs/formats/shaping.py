"""Shaping a trace into the jobs a replay takes (`TraceOptions`), shared by every trace reader.

A reader puts its jobs in submit order and hands them over one by one; `shape` takes the window
`first .. end`, places arrivals on the replay clock (t = 0 at the window's first arrival, or at the
file's first with `rebase` off), rounds GPUs and clips run times, and counts what it changed.
`repeat` copies the window back to back; `summary` says in words what was changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._units import fmt_duration
from ...errors import InputError
from .. import limits
from .registry import TraceOptions, clip, round_gpus, window

Record = tuple[int, dict[str, Any]]  # (line in the trace, job values for the workload builder)


@dataclass
class Shaped:
    """The window's jobs, in submit order, and what shaping changed."""

    records: list[Record]
    first: int
    end: int
    rounded: int = 0
    clipped: int = 0


def shape(
    n: int,
    submit_of: Callable[[int], float],
    job_of: Callable[[int], Record],
    options: TraceOptions,
    where: str,
) -> Shaped:
    """Jobs `first .. end` of `n` in submit order. `submit_of(k)` is the k-th job's arrival in the
    trace's seconds; `job_of(k)` its line and a fresh dict of values with `gpus` and `work`; its
    `submit` is set here."""
    first, end = window(n, options, where)
    t0 = submit_of(first if options.rebase else 0)
    out = Shaped([], first, end)
    bounds = options.clip
    do_clip = bounds != (None, None)
    for k in range(first, end):
        line, values = job_of(k)
        values["submit"] = submit_of(k) - t0
        if options.round_gpus:
            g = round_gpus(values["gpus"])
            if g != values["gpus"]:
                out.rounded += 1
                values["gpus"] = g
        if do_clip:
            w = clip(values["work"], bounds)
            if w != values["work"]:
                out.clipped += 1
                values["work"] = w
        out.records.append((line, values))
    return out


def repeat(records: list[Record], times: int, where: str) -> list[Record]:
    """The window `times` times back to back: copy k arrives k periods later, a period being the
    window's span plus one mean gap between arrivals (the arrival rate stays the same); copies' job
    ids end in `-r<k>`."""
    if times <= 1:
        return records
    total = len(records) * times
    if total > limits.MAX_JOBS:
        raise InputError(
            "--repeat",
            str(times),
            f"{len(records):,} jobs x {times} = {total:,} jobs, more than the limit of "
            f"{limits.MAX_JOBS:,} jobs in one replay ({where})",
        )
    span = records[-1][1]["submit"] - records[0][1]["submit"] if records else 0.0
    period = span * len(records) / max(1, len(records) - 1) if len(records) > 1 else 1.0
    last = (records[-1][1]["submit"] if records else 0.0) + (times - 1) * period
    if last > limits.MAX_TIME:
        raise InputError(
            "--repeat",
            str(times),
            f"the last copy would arrive {last / limits.YEAR:.3g} years after t = 0, more than the "
            f"limit of {limits.fmt_limit(limits.MAX_TIME)} ({where})",
        )
    out = list(records)
    for k in range(1, times):
        for line, values in records:
            copy = dict(values)
            copy["job_id"] = f"{values['job_id']}-r{k}"
            copy["submit"] = values["submit"] + k * period
            out.append((line, copy))
    return out


def summary(shaped: Shaped, options: TraceOptions, noun: str) -> list[str]:
    """What rounding and clipping changed, one line each (for the load summary)."""
    lines = []
    if options.round_gpus:
        lines.append(f"{shaped.rounded:,} {noun}' GPUs rounded up to 1, 2, 4, 8 or a multiple of 8")
    lo, hi = options.clip
    if (lo, hi) != (None, None):
        lines.append(f"{shaped.clipped:,} run times clipped to [{_bound(lo)}, {_bound(hi)}]")
    return lines


def _bound(x: float | None) -> str:
    return "-" if x is None else fmt_duration(x)
