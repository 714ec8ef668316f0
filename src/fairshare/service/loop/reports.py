"""Jobs' progress reports in the live loop (docs/progress.md).

The API hands a report (`progress`, `checkpoint` or `resumed` of one job) to the loop's `Inbox`
and waits for its answer; the loop takes the inbox at `now`, in arrival order, as engine calls
(journaled like every other), and answers each: accepted (whether it changed anything) or refused
with the engine's reason (a regressing counter, a job not running). Accepted reports that change
something are audited (`progress`, `checkpoint`, `resumed`), and so is a run the stall rule flags
(`no_progress`, with the evidence: the last step, when it was reported, the class's max_stall).

A report can come before the loop saw its run start: on Slurm a job starts on Slurm's own schedule
and the loop learns of it at its next read, but a restarted job reports `resumed` at once. Such an
`early` report (the job still pending in the loop's view) is held until the loop has read the
cluster after it arrived: one cycle more if the engine does not have the run yet when it is taken
(the report may have come after that cycle's read); then it is accepted or refused as any other.
The job's later reports stay behind it.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ...engine.progress import ProgressError
from ..storage.audit import AuditRecord
from .live_engine import LiveEngine

KINDS = ("progress", "checkpoint", "resumed")


@dataclass
class Report:
    """One report waiting for the loop, and its answer once taken."""

    job: str
    kind: str  # progress | checkpoint | resumed
    step: int
    path: str | None = None
    by: str = ""
    early: bool = False  # the job was pending in the loop's view: held for the loop's next read
    done: threading.Event = field(default_factory=threading.Event)
    changed: bool = False
    error: str | None = None


class Inbox:
    """Reports from the API's threads to the loop's (thread-safe)."""

    def __init__(self) -> None:
        self.queue: deque[Report] = deque()
        self.flagged: set[str] = set()  # runs audited as no_progress: "job#run"

    def put(self, report: Report) -> None:
        self.queue.append(report)

    def take(self, e: LiveEngine, audits: list[AuditRecord]) -> None:
        """At the engine's current instant: the reports waiting, then the runs newly stalled."""
        t = e.t
        held: list[Report] = []
        while self.queue:
            r = self.queue.popleft()
            if r.early and r.job not in e.state.running and r.job in e.state.pending.jobs:
                r.early = False  # held once: at the next take the loop has read the cluster since
                held.append(r)
                continue
            if any(h.job == r.job for h in held):
                held.append(r)  # behind the job's held report
                continue
            try:
                if r.kind == "checkpoint":
                    r.changed = e.state.checkpoint(r.job, r.step, t, r.path)
                elif r.kind == "resumed":
                    r.changed = e.state.resumed(r.job, r.step, t)
                else:
                    r.changed = e.state.progress(r.job, r.step, t)
            except ProgressError as exc:
                r.error = str(exc)
            if r.changed:
                job = e.state.running[r.job].job
                evidence: dict[str, Any] = {
                    "step": r.step,
                    "class": job.cls,
                    "resumable": job.resumable,
                    "by": r.by,
                }
                if r.path is not None:
                    evidence["path"] = r.path
                audits.append(AuditRecord(t, r.kind, r.job, evidence, e.policy_sha))
            r.done.set()
        self.queue.extendleft(reversed(held))  # first at the next take, in their order
        self.flag(e, audits)

    def flag(self, e: LiveEngine, audits: list[AuditRecord]) -> None:
        """Audit each run the stall rule flagged since the last look (once per run)."""
        for job in sorted(e.state.hung_since):
            rep = e.state.reports.get(job)
            if rep is None or not rep.stalled or f"{job}#{rep.run}" in self.flagged:
                continue
            self.flagged.add(f"{job}#{rep.run}")
            evidence = {
                "last_step": rep.step,
                "last_progress_t": rep.step_t,
                "no_progress_since": e.state.hung_since[job],
                "max_stall_s": e.state.running[job].job.max_stall,
                "progress_required": e.state.running[job].job.progress_required,
            }
            audits.append(AuditRecord(e.t, "no_progress", job, evidence, e.policy_sha))
        self.flagged = {k for k in self.flagged if k.rpartition("#")[0] in e.state.running}  # ended runs
