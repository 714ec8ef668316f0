"""Execution contracts: overheads, progress, checkpoints, hangs and lost work of one run.

FORMATS.md "Runs and progress":
  overhead   `startup` on the first start and on every restart of a non-resumable job (it starts
             over from zero); `restore` on every restart of a resumable job.
  progress   max(0, time since start − overhead); a job with `stall_after` stops progressing the
             first time kept + run progress reaches it (and hangs, still charged).
  kept       on preemption a resumable job keeps its run progress up to the last checkpoint
             (multiples of `checkpoint` within the run, never past the work left); others keep 0.
  lost_gpu_s (run length − progress kept in that run) × GPUs allocated.
  protection no preemption before start + protected, except reasons `drain` and `no_progress`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..inputs.workload import Job


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What a run started at t0 will do if left alone."""

    overhead: float
    finish_at: float | None  # None when the job hangs in this run
    stall_at: float | None  # instant progress stops (hang), None if it does not hang
    protected_until: float


def overhead_of(job: Job, restarted: bool) -> float:
    if restarted and job.resumable:
        return job.restore
    return job.startup


def hangs_in_run(job: Job, kept: float, stall_done: bool) -> bool:
    return (
        job.stall_after is not None
        and not stall_done
        and job.stall_after < job.work
        and kept < job.stall_after
    )


def plan_run(job: Job, t0: float, kept: float, restarted: bool, stall_done: bool) -> RunPlan:
    overhead = overhead_of(job, restarted)
    protected_until = t0 + job.protected
    if hangs_in_run(job, kept, stall_done):
        assert job.stall_after is not None
        return RunPlan(overhead, None, t0 + overhead + (job.stall_after - kept), protected_until)
    return RunPlan(overhead, t0 + overhead + (job.work - kept), None, protected_until)


def run_progress(
    job: Job, t0: float, t: float, overhead: float, kept: float, stall_done: bool
) -> tuple[float, bool]:
    """(progress made in this run by t, whether the run has reached its hang point)."""
    progress = max(0.0, (t - t0) - overhead)
    stall = job.stall_after
    if stall is not None and hangs_in_run(job, kept, stall_done) and kept + progress >= stall - 1e-6:
        return max(0.0, stall - kept), True
    return progress, False


def kept_on_preempt(job: Job, progress: float, kept: float) -> float:
    """Progress of this run saved by its last checkpoint (0 for a non-resumable job)."""
    if not job.resumable or job.checkpoint <= 0:
        return 0.0
    saved = math.floor(progress / job.checkpoint + 1e-9) * job.checkpoint
    return min(saved, job.work - kept)


def lost_gpu_s(
    job: Job, t0: float, t: float, overhead: float, kept: float, stall_done: bool, gpus: int
) -> float:
    progress, _ = run_progress(job, t0, t, overhead, kept, stall_done)
    return ((t - t0) - kept_on_preempt(job, progress, kept)) * gpus
