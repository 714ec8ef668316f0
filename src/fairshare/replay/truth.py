"""The jobs' truth, known only to the simulator: how long a run really takes, when it hangs, and
what progress it really keeps (FORMATS.md "Runs and progress", "Hangs").

  finish     a run finishes once kept progress plus its own progress reaches `work`
  hang       a job with `stall_after` stops progressing the first time kept + run progress reaches
             it (still holding and charged for its GPUs); later runs do not hang again
  kept       on preemption a resumable job keeps its run progress up to the last checkpoint
             (never past the work left); others keep 0

The scheduler's side of the same contract (overheads, protection, what it believes a preemption
loses) is fairshare.core.contract; it sees the declared estimate, never `work` or `stall_after`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.contract import checkpointed, overhead_of, protected_until
from ..core.model import STALL_EPS
from ..inputs.workload import Job


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What a run started at t0 will do if left alone."""

    overhead: float
    finish_at: float | None  # None when the job hangs in this run
    stall_at: float | None  # instant progress stops (hang), None if it does not hang
    protected_until: float


def hangs_in_run(job: Job, kept: float, stall_done: bool) -> bool:
    return (
        job.stall_after is not None
        and not stall_done
        and job.stall_after < job.work
        and kept < job.stall_after
    )


def plan_run(job: Job, t0: float, kept: float, restarted: bool, stall_done: bool) -> RunPlan:
    req = job.request
    overhead = overhead_of(req, restarted)
    until = protected_until(t0, req)
    if hangs_in_run(job, kept, stall_done):
        assert job.stall_after is not None
        return RunPlan(overhead, None, t0 + overhead + (job.stall_after - kept), until)
    return RunPlan(overhead, t0 + overhead + (job.work - kept), None, until)


def run_progress(
    job: Job, t0: float, t: float, overhead: float, kept: float, stall_done: bool
) -> tuple[float, bool]:
    """(progress made in this run by t, whether the run has reached its hang point)."""
    progress = max(0.0, (t - t0) - overhead)
    stall = job.stall_after
    if stall is not None and hangs_in_run(job, kept, stall_done) and kept + progress >= stall - STALL_EPS:
        return max(0.0, stall - kept), True
    return progress, False


def kept_on_preempt(job: Job, progress: float, kept: float) -> float:
    """Progress of this run saved by its last checkpoint (0 for a non-resumable job)."""
    return min(checkpointed(job.request, progress), job.work - kept)


def lost_gpu_s(job: Job, t0: float, t: float, overhead: float, kept: float, stall_done: bool) -> float:
    """GPU-seconds a preemption at t really loses: (run length − progress kept) × GPUs."""
    progress, _ = run_progress(job, t0, t, overhead, kept, stall_done)
    return ((t - t0) - kept_on_preempt(job, progress, kept)) * job.request.gpus
