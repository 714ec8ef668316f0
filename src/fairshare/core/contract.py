"""Execution contracts as the scheduler can know them: overheads, protection, lost work, deadlines.

FORMATS.md "Runs and progress", from the request alone (the simulator's truth — the real run time
and hang point — is in fairshare.replay.truth):

  protection  the window asked (or the class's default), cut to the class's cap; a run is
              protected from preemption for ordering until start + that window.
  overhead    `startup` on the first start and on every restart of a non-resumable job (it starts
              over from zero); `restore` on every restart of a resumable job.
  progress    max(0, time since start − overhead); a run reported hung stops progressing then.
  saved       a resumable job keeps its run progress up to the last checkpoint (multiples of
              `checkpoint` within the run); a non-resumable job keeps nothing. When the run
              reported a checkpoint (docs/progress.md), the progress up to that report is saved
              instead, whatever the declared contract says.
  lost_gpu_s  (run length − progress saved) × GPUs allocated: with a reported checkpoint at c,
              the GPU time since c plus the run's overhead (the restore paid again).
  remaining   overhead + estimate − progress kept before: how long the job needs once started.
  latest      deadline − remaining: the latest start that still meets the deadline.
"""

from __future__ import annotations

import math
from typing import Protocol

from .model import JobRequest


class _Protects(Protocol):
    @property
    def protected(self) -> float: ...


def protection(asked: float | None, default: float, cap: float) -> tuple[float, bool]:
    """A job's protected window from what it asked (None: its class's default) and its class's cap:
    (the window, whether the cap cut it)."""
    window = default if asked is None else asked
    return min(window, cap), window > cap


def protected_until(start: float, job: _Protects) -> float:
    """The end of the protected window of a run started at `start`."""
    return start + job.protected


def overhead_of(job: JobRequest, restarted: bool) -> float:
    if restarted and job.resumable:
        return job.restore
    return job.startup


def checkpointed(job: JobRequest, progress: float) -> float:
    """Progress of a run saved by its last checkpoint (0 for a non-resumable job)."""
    if not job.resumable or job.checkpoint <= 0:
        return 0.0
    # a run exactly at a checkpoint (up to float error) has saved it
    return math.floor(progress / job.checkpoint + 1e-9) * job.checkpoint


def run_saved(
    job: JobRequest,
    t0: float,
    t: float,
    overhead: float,
    hung_since: float | None,
    ckpt_at: float | None = None,
) -> float:
    """Progress of a run started at t0 that its last checkpoint saved by t: the last reported
    checkpoint (at `ckpt_at`) when the run reported one, else the declared interval's estimate. A
    run reported hung at `hung_since` made no progress after it."""
    if ckpt_at is not None:
        return max(0.0, min(ckpt_at, t) - t0 - overhead)
    end = t if hung_since is None else min(t, hung_since)
    return checkpointed(job, max(0.0, (end - t0) - overhead))


def lost_gpu_s(
    job: JobRequest,
    t0: float,
    t: float,
    overhead: float,
    hung_since: float | None,
    ckpt_at: float | None = None,
) -> float:
    """GPU-seconds a run started at t0 loses if preempted at t: its length less the progress its
    last checkpoint saved (run_saved)."""
    return ((t - t0) - run_saved(job, t0, t, overhead, hung_since, ckpt_at)) * job.gpus


def remaining(job: JobRequest, restarted: bool, kept: float) -> float:
    """Seconds the job needs from a start until it is done, by its estimate."""
    return overhead_of(job, restarted) + job.estimate - kept


def latest_start(job: JobRequest, restarted: bool, kept: float) -> float:
    """The latest start that meets the job's deadline by its estimate (the job has a deadline)."""
    assert job.deadline is not None
    return job.deadline - remaining(job, restarted, kept)
