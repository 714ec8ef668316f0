"""Observed progress: what a running job reports of itself (docs/progress.md).

Three journaled engine calls, made by a driver when a job reports (the service's HTTP API and CLI,
or the simulator's truth model with `report_progress`):

    progress job step t            the job's own counter (steps, samples, tokens) reached `step`
    checkpoint job step t path     a checkpoint of `step` was written and can be restored
    resumed job from_step t        the run restored a checkpoint of `from_step`

Each is about the job's current run. They are idempotent (the same report again changes nothing)
and ordered by the job's counter: within a run, a step below the last one reported is refused
(`ProgressError`), and so is a report for a job that is not running. A checkpoint is progress too.

What the engine does with them:

  stall       a run whose last progress is older than its class's `max_stall` is hung since that
              progress (the same `hung_since` as a driver's `hung` report), so the core's
              watchdog preempts it (`no_progress`) exactly as the replay's. A run of a class with
              `progress: required` that never reports is hung since its start (after overhead).
              One `stall` timer per reporting run; a report after a stall clears it.
  lost work   a run that reported a checkpoint at c saves its progress up to c
              (`RunView.ckpt_at`, core.contract.run_saved): lost work on preemption is the GPU
              time since c plus the run's overhead; victims are priced with it.
  recovery    per class, over the restarts of runs that reported before they were preempted: how
              many reported `resumed`, the steps lost (the last step before the preemption less
              the step restored, or all of it for a run that started over), and the time from
              the restart to the first progress.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.model import STALL_EPS
from .events import Event

if TYPE_CHECKING:
    from ..core.snapshot import JobState, RunView


class ProgressError(ValueError):
    """A report the engine refuses (regressing counter, job not running, bad value)."""


@dataclass(slots=True)
class RunReports:
    """What the current run of one job reported."""

    run: int  # the job's start count when this run began
    t0: float
    step: int | None = None  # last progress step
    step_t: float | None = None  # when it was reported
    ckpt_step: int | None = None
    ckpt_t: float | None = None
    ckpt_path: str | None = None
    resumed_from: int | None = None
    resumed_t: float | None = None
    first_progress_t: float | None = None
    stalled: bool = False  # hung by the stall rule (cleared by a later report)
    timer: bool = False  # a stall timer is pending for this run

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "step_t": self.step_t,
            "checkpoint_step": self.ckpt_step,
            "checkpoint_t": self.ckpt_t,
            "checkpoint_path": self.ckpt_path,
            "resumed_from": self.resumed_from,
            "resumed_t": self.resumed_t,
            "first_progress_t": self.first_progress_t,
            "stalled": self.stalled,
        }


RESUMED_MIN = 0.9  # a class declared resumable whose requeued runs resume less often is flagged


def not_borne_out(declared_resumable: bool, restarts: int, resumed: int) -> bool:
    """A class declares `resumable: true` but fewer than RESUMED_MIN of its requeued (reporting)
    runs reported `resumed` (fairshare review and the dashboard flag it)."""
    return declared_resumable and restarts > 0 and resumed < RESUMED_MIN * restarts


@dataclass(slots=True)
class Recovery:
    """One class's recovery record (restarts of reporting runs after a preemption)."""

    declared_resumable: bool = False
    restarts: int = 0
    resumed: int = 0
    steps_lost: int = 0
    to_first_progress_s: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        waits = sorted(self.to_first_progress_s)
        return {
            "declared_resumable": self.declared_resumable,
            "not_borne_out": not_borne_out(self.declared_resumable, self.restarts, self.resumed),
            "restarts": self.restarts,
            "resumed": self.resumed,
            "resumed_share": self.resumed / self.restarts if self.restarts else None,
            "steps_lost": self.steps_lost,
            "restart_to_first_progress_s": waits[len(waits) // 2] if waits else None,
        }


@dataclass(slots=True)
class _Restart:
    """A preempted reporting run's last step, waiting for the job's next run."""

    last_step: int
    counted: bool = False  # steps lost already counted for the current run


class ProgressCalls:
    """EngineState's progress, checkpoint and resumed calls and the stall rule (a mixin: the state
    file stays readable). The attributes it reads are EngineState's."""

    if TYPE_CHECKING:
        journal: list[Event] | None
        t: float
        seq: int
        timers: list[tuple[float, int, str, Any]]
        running: dict[str, RunView]
        by_leaf: dict[int, dict[str, RunView]]
        detached: dict[str, int]
        hung_since: dict[str, float]
        states: dict[str, JobState]
        need_pass: bool

    reports: dict[str, RunReports]
    restarts: dict[str, _Restart]
    recovery: dict[str, Recovery]

    def _init_progress(self) -> None:
        self.reports = {}
        self.restarts = {}
        self.recovery = {}

    # ------------------------------------------------------------------ the calls
    def progress(self, job_id: str, step: int, t: float) -> bool:
        """The job's counter reached `step` at t. Returns whether it advanced (False: the same
        report again). Raises ProgressError for a job not running or a regressing counter."""
        rep = self._report_of(job_id, step, "progress")
        if rep.step is not None and step < rep.step:
            raise ProgressError(
                f"job {job_id}: progress step {step} is below the step {rep.step} already reported "
                "for this run (the counter must not go back; report `resumed` on a restart)"
            )
        if self.journal is not None:
            self.journal.append(Event("progress", (job_id, step, t)))
        return self._advanced(job_id, rep, step, t)

    def checkpoint(self, job_id: str, step: int, t: float, path: str | None = None) -> bool:
        """A checkpoint of `step` was written at t (and counts as progress to `step`). Returns
        whether it was new. Raises ProgressError for a job not running or a regressing step."""
        rep = self._report_of(job_id, step, "checkpoint")
        if rep.ckpt_step is not None and step < rep.ckpt_step:
            raise ProgressError(
                f"job {job_id}: checkpoint step {step} is below the checkpoint step {rep.ckpt_step} "
                "already reported for this run"
            )
        if self.journal is not None:
            self.journal.append(Event("checkpoint", (job_id, step, t, path)))
        if rep.ckpt_step == step:
            return False
        view = self.running[job_id]
        at = max(t, view.t0 + view.overhead)
        rep.ckpt_step, rep.ckpt_t, rep.ckpt_path = step, at, path
        self._set_view(job_id, dataclasses.replace(view, ckpt_at=at))
        if rep.step is None or step > rep.step:
            self._advanced(job_id, rep, step, t)
        return True

    def resumed(self, job_id: str, from_step: int, t: float) -> bool:
        """The current run restored a checkpoint of `from_step`. Returns whether it was new.
        Raises ProgressError for a job not running, a second different report, or one after the
        run already reported progress."""
        rep = self._report_of(job_id, from_step, "resumed")
        if rep.resumed_from is not None and rep.resumed_from != from_step:
            raise ProgressError(
                f"job {job_id}: this run already reported resumed from step {rep.resumed_from}"
            )
        if rep.resumed_from is None and rep.step is not None:
            raise ProgressError(
                f"job {job_id}: report resumed before the run's first progress "
                f"(it already reported step {rep.step})"
            )
        if self.journal is not None:
            self.journal.append(Event("resumed", (job_id, from_step, t)))
        if rep.resumed_from is not None:
            return False
        rep.resumed_from, rep.resumed_t = from_step, t
        prev = self.restarts.get(job_id)
        if prev is not None and not prev.counted:
            rec = self.recovery.setdefault(self.running[job_id].job.cls, Recovery())
            rec.resumed += 1
            rec.steps_lost += max(0, prev.last_step - from_step)
            prev.counted = True
        return True

    def run_reports(self, job_id: str) -> RunReports | None:
        """What the job's current run reported (None: not running or nothing reported)."""
        rep = self.reports.get(job_id)
        return rep if rep is not None and job_id in self.running else None

    def recovery_json(self) -> dict[str, dict[str, Any]]:
        """Each class's recovery record, by class name."""
        return {cls: self.recovery[cls].as_json() for cls in sorted(self.recovery)}

    # ------------------------------------------------------------------ rules
    def _report_of(self, job_id: str, step: int, what: str) -> RunReports:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ProgressError(f"job {job_id}: {what} step must be a whole number >= 0, got {step!r}")
        view = self.running.get(job_id)
        if view is None:
            raise ProgressError(f"job {job_id}: not running, so it cannot report {what}")
        run = self.states[job_id].starts
        rep = self.reports.get(job_id)
        if rep is None or rep.run != run:
            rep = self.reports[job_id] = RunReports(run, view.t0)
        return rep

    def _advanced(self, job_id: str, rep: RunReports, step: int, t: float) -> bool:
        if rep.step is not None and step <= rep.step:
            return False
        view = self.running[job_id]
        if rep.first_progress_t is None:
            rep.first_progress_t = t
            prev = self.restarts.get(job_id)
            if prev is not None:
                rec = self.recovery.setdefault(view.job.cls, Recovery())
                rec.to_first_progress_s.append(max(0.0, t - view.t0))
                if not prev.counted:  # it started over: every step of the last run is lost
                    rec.steps_lost += prev.last_step
                    prev.counted = True
        rep.step, rep.step_t = step, t
        if rep.stalled:  # it moves again: no longer hung
            rep.stalled = False
            self.hung_since.pop(job_id, None)
            self._set_view(job_id, dataclasses.replace(self.running[job_id], hung_since=None))
        if not rep.timer:
            self._stall_timer(job_id, rep, t + view.job.max_stall)
        return True

    def _stall_timer(self, job_id: str, rep: RunReports, at: float) -> None:
        rep.timer = True
        heapq.heappush(self.timers, (at, self.seq, "stall", (job_id, rep.run)))
        self.seq += 1

    def _progress_started(self, view: RunView) -> None:
        """A run began (EngineState.started): a class that requires reports is watched from now."""
        job_id = view.job.id
        run = self.states[job_id].starts
        rep = self.reports[job_id] = RunReports(run, view.t0)
        prev = self.restarts.get(job_id)
        if prev is not None:
            prev.counted = False
            rec = self.recovery.setdefault(view.job.cls, Recovery())
            rec.restarts += 1
            rec.declared_resumable = view.job.resumable
        if view.job.progress_required:
            self._stall_timer(job_id, rep, view.t0 + view.overhead + view.job.max_stall)

    def _progress_preempted(self, job_id: str) -> None:
        """A run is preempted (before EngineState._stop drops its reports): if it reported, it is
        remembered for the recovery record of its restart."""
        rep = self.reports.get(job_id)
        if rep is not None and (rep.step is not None or rep.ckpt_step is not None):
            self.restarts[job_id] = _Restart(max(rep.step or 0, rep.ckpt_step or 0))

    def _stall_due(self, payload: tuple[str, int]) -> None:
        """A stall timer fired (EngineState.begin): hung since the last progress if it is older
        than max_stall, else the timer moves to when it will be."""
        job_id, run = payload
        rep = self.reports.get(job_id)
        view = self.running.get(job_id)
        if rep is None or view is None or rep.run != run:
            return
        rep.timer = False
        since = rep.step_t if rep.step_t is not None else view.t0 + view.overhead
        due = since + view.job.max_stall
        if due > self.t + STALL_EPS:
            self._stall_timer(job_id, rep, due)
            return
        if job_id in self.hung_since:
            return  # already hung (a driver's report)
        rep.stalled = True
        self.hung_since[job_id] = since
        self._set_view(job_id, dataclasses.replace(view, hung_since=since))
        self.need_pass = True

    def _set_view(self, job_id: str, view: RunView) -> None:
        self.running[job_id] = view
        if job_id not in self.detached:
            self.by_leaf[view.job.leaf][job_id] = view
