"""The jobs' own progress reports, from the simulator's truth (`Simulator(report_progress=True)`).

What a well-behaved training job would tell fairshare live (docs/progress.md), made from what only
the simulator knows, so that a replay finds hangs and prices preemptions with the same engine code
as the live service (engine/progress.py) instead of the driver's `hung` report:

  progress    every max_stall / 2 of the run's own work, and a last time when it hangs (the
              step it reached); none after the hang
  checkpoint  at each checkpoint of a resumable job (multiples of `checkpoint` within the run)
  resumed     on a restart of a resumable job that kept progress, before any other report

A step is a millisecond of the job's work (kept + this run's progress), so the counter only grows.
"""

from __future__ import annotations

import math

from ..engine.state import EngineState
from ..inputs.workload import Job
from .truth import hangs_in_run

_EPS = 1e-9


def step_of(work_s: float) -> int:
    """The job's counter after `work_s` seconds of its work."""
    return round(work_s * 1000.0)


def next_report(job: Job, kept: float, stall_done: bool, after: float) -> tuple[float, bool] | None:
    """The run's next report after `after` seconds of its own work: (work, whether a checkpoint),
    or None when the run finishes or hangs first."""
    req = job.request
    cands: list[float] = []
    if req.max_stall > 0:
        cands.append((math.floor(after / (req.max_stall / 2) + _EPS) + 1) * (req.max_stall / 2))
    every = req.checkpoint if req.resumable else 0.0
    ckpt = (math.floor(after / every + _EPS) + 1) * every if every > 0 else math.inf
    cands.append(ckpt)
    hang = (
        job.stall_after - kept
        if job.stall_after is not None and hangs_in_run(job, kept, stall_done)
        else None
    )
    if hang is not None and hang > after + _EPS:
        cands.append(hang)
    at = min(cands)
    if (hang is not None and at > hang + _EPS) or at >= job.work - kept - _EPS:
        return None
    return at, abs(at - ckpt) <= _EPS


def report(
    engine: EngineState, job: Job, kept: float, stall_done: bool, at: float, ckpt: bool, t: float
) -> tuple[float, bool] | None:
    """The run reports `at` seconds of its work at t; returns its next report (next_report)."""
    step = step_of(kept + at)
    if ckpt:
        engine.checkpoint(job.request.id, step, t, None)
    else:
        engine.progress(job.request.id, step, t)
    return next_report(job, kept, stall_done, at)


def first_report(
    engine: EngineState, job: Job, kept: float, stall_done: bool, restarted: bool, t: float
) -> tuple[float, bool] | None:
    """A run began at t: a resumable restart reports what it restored; returns its first report."""
    if restarted and job.request.resumable and kept > 0:
        engine.resumed(job.request.id, step_of(kept), t)
    return next_report(job, kept, stall_done, 0.0)
