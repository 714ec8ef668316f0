"""What `SlurmCluster` does to Slurm after the loop has committed a pass (`act`).

1. Priorities: the core's order of pending jobs becomes priorities in fairshare's band, changing as
   few jobs as possible (fairshare.slurm.priority); audited as one `priorities` record per pass
   with the updates (a dry run records the plan once and changes nothing).
2. Requeues: the victims of a preemptor are requeued only after checking again, on a fresh read:
   each still runs the run the engine knows and is past its protected window (by the engine's
   clock and by Slurm's start), and the preemptor still waits, does not fit on the free GPUs
   alone and fits once the victims' GPUs are free. A requeued job gets the band's lowest priority
   until the next pass places it, so the preemptor (first in the order) takes the GPUs.
A systemic failure (controller down, timeout) stops the rest and asks the loop for another pass
next cycle; a job that vanished or was held meanwhile is a result, not an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ...core.contract import checkpointed, protected_until
from ...core.model import TIME_EPS, Node
from ...core.snapshot import Preempt, Start
from ...slurm.mapping import Mapper, NodeView
from ...slurm.model import SlurmJob, SlurmNode
from ...slurm.priority import Band, plan_priorities, priorities_of
from ...slurm.slurm_errors import SlurmError
from ..options import SlurmOptions
from .backend import Failure, Observation, Outcome, Preempted, Record

if TYPE_CHECKING:
    from ...slurm.client import SlurmBackend
    from .backend import EngineView

NOW_RUNNING = frozenset({"RUNNING", "CONFIGURING"})
NOT_ELIGIBLE = frozenset(
    {"JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime"}
)


def eligible(j: SlurmJob) -> bool:
    """A pending job Slurm may start now (not held, not waiting for a dependency or begin time)."""
    return not j.held and j.reason not in NOT_ELIGIBLE


class SlurmRead(Protocol):
    """What acting reads of the reading side (SlurmCluster): the jobs of Slurm's last read (acting
    updates a job's priority there once it set it), how jobs and nodes map, the nodes at start."""

    jobs: dict[int, SlurmJob]

    @property
    def mapper(self) -> Mapper: ...
    def node_views(self, found: Sequence[SlurmNode]) -> dict[str, NodeView]: ...
    def nodes(self) -> tuple[Node, ...]: ...


class SlurmActions:
    """`act` and its checks, beside the reading side (`read`) that SlurmCluster is. It keeps what
    it did for the reading side's notes: the starts the core intended and the order last set."""

    def __init__(
        self,
        client: SlurmBackend,
        read: SlurmRead,
        engine_of: Callable[[], EngineView | None],
        opt: SlurmOptions,
        band: Band,
    ) -> None:
        self.client, self.read, self.engine_of, self.opt, self.band = client, read, engine_of, opt, band
        self.intended: dict[str, tuple[float, tuple[str, ...]]] = {}  # the core's starts
        self.last_order: tuple[str, ...] = ()
        self.last_plan: tuple[tuple[int, int], ...] | None = None  # a dry run's last plan
        self.held_for_policy: set[str] = set()  # jobs held (or seen held) after a policy change

    def act(
        self, preempts: Sequence[Preempt], starts: Sequence[Start], order: Sequence[str], t: float
    ) -> Outcome:
        e = self.engine_of()
        confirmed: list[Observation] = []
        failed: list[Failure] = []
        records: list[Record] = []
        nodes = e.state.nodes if e is not None else self.read.nodes()  # the engine's: nodes may have changed
        for s in starts:
            self.intended[s.job] = (t, tuple(nodes[i].name for i, _ in s.alloc))
        self.last_order = tuple(order)
        retry = False
        try:
            self._priorities(order, records)
        except SlurmError as exc:  # a systemic failure: the next cycle's pass completes the work
            records.append(Record("priorities_failed", None, {"error": str(exc)}))
            retry = True
        if e is not None and e.cancelled_by_policy:
            try:
                self._hold_cancelled(e, records)
            except SlurmError as exc:
                records.append(Record("slurm_hold_failed", None, {"error": str(exc)}))
                retry = True
        if preempts and e is not None:
            retry = self._requeue(e, preempts, t, confirmed, failed, records) or retry
        return Outcome(confirmed, failed, records, retry)

    def forget_gone(self) -> None:
        """Drop what is kept about jobs Slurm no longer lists (a job the core meant to start that was
        cancelled or purged before it ran, a held job since ended): `intended` is otherwise emptied
        only when the start is seen, and a long-running service would keep every such entry. The
        reading side calls it after each read, once the starts seen have been noted."""
        listed = self.read.jobs
        for job in [k for k in self.intended if not (k.isdigit() and int(k) in listed)]:
            del self.intended[job]
        self.held_for_policy = {k for k in self.held_for_policy if k.isdigit() and int(k) in listed}

    def _hold_cancelled(self, e: EngineView, records: list[Record]) -> None:
        """Jobs a policy change cancelled (their group or class left the policy) still wait in
        Slurm, where its own scheduler would start them by their last priority, unseen and
        uncharged by fairshare: hold them (`scontrol hold`; an admin may release them), each
        audited once as `slurm_hold` with the engine's reason. A dry run records the intent."""
        for job, reason in e.cancelled_by_policy.items():
            if job in self.held_for_policy or not job.isdigit():
                continue
            j = self.read.jobs.get(int(job))
            if j is None or not j.pending:
                continue  # gone, or already running (noted by observe as `slurm_unmanaged_run`)
            self.held_for_policy.add(job)
            if j.held:
                continue
            if self.opt.dry_run:
                records.append(Record("slurm_hold", job, {"reason": reason, "dry_run": True}))
                continue
            res = self.client.hold(int(job))
            if res.ok:
                self.read.jobs[int(job)] = dataclasses.replace(j, priority=0)
            evidence: dict[str, Any] = {"reason": reason, "outcome": res.outcome}
            if not res.ok:
                evidence["detail"] = res.detail
            records.append(Record("slurm_hold", job, evidence))

    def _priorities(self, order: Sequence[str], records: list[Record]) -> None:
        current = priorities_of(self.read.jobs.values())
        ids = [int(j) for j in order if j.isdigit() and int(j) in current]
        plan = plan_priorities(ids, current, self.band)
        if not plan.updates:
            return
        evidence: dict[str, Any] = {
            "updates": [list(u) for u in plan.updates],
            "kept": len(plan.kept),
            "skipped": [list(s) for s in plan.skipped],
        }
        if self.opt.dry_run:
            if plan.updates != self.last_plan:  # the same intent is audited once
                self.last_plan = plan.updates
                records.append(Record("priorities", None, {**evidence, "dry_run": True}))
            return
        results = []
        for job, prio in plan.updates:
            res = self.client.set_priority(job, prio)
            results.append(res)
            if res.ok:
                old = self.read.jobs[job]
                self.read.jobs[job] = dataclasses.replace(old, priority=prio)
        evidence["not_applied"] = [[r.job_id, r.outcome, r.detail] for r in results if not r.ok]
        records.append(Record("priorities", None, evidence))

    def _requeue(
        self,
        e: EngineView,
        preempts: Sequence[Preempt],
        t: float,
        confirmed: list[Observation],
        failed: list[Failure],
        records: list[Record],
    ) -> bool:
        """Requeue the victims that may be; True when Slurm failed systemically (retry)."""
        by: dict[str | None, list[Preempt]] = {}
        for p in preempts:
            by.setdefault(p.by, []).append(p)
        try:  # check again, on a fresh read: Slurm may have moved since the cycle began
            nodes = {v.name: v for v in self.read.node_views(self.client.read_nodes()).values()}
            jobs = {j.job_id: j for j in self.client.read_jobs()}
        except SlurmError as exc:
            failed.extend(
                Failure(p.job, "preempt", f"Slurm could not be read again: {exc}") for p in preempts
            )
            return True
        systemic = False
        for preemptor, group in by.items():
            why = self._needless(e, preemptor, group, nodes, jobs, t)
            if why is not None:
                failed.extend(Failure(p.job, "preempt", f"not requeued: {why}") for p in group)
                continue
            for p in group:
                rv = e.state.running[p.job]
                evidence = {"by": p.by, "reason": p.reason, "protected_until": rv.protected_until}
                if self.opt.dry_run:
                    records.append(Record("requeue", p.job, {**evidence, "dry_run": True}))
                    continue
                try:
                    res = self.client.requeue(int(p.job))
                except SlurmError as exc:
                    failed.append(Failure(p.job, "preempt", f"requeue failed: {exc}"))
                    systemic = True
                    continue
                records.append(
                    Record("requeue", p.job, {**evidence, "result": res.outcome, "detail": res.detail})
                )
                if not res.ok:
                    failed.append(Failure(p.job, "preempt", f"requeue: {res.outcome} {res.detail}".strip()))
                    continue
                progress = max(0.0, min(t, rv.hung_since or t) - rv.t0 - rv.overhead)
                kept = rv.kept + checkpointed(rv.job, progress)
                confirmed.append(Preempted(t, p.job, p.reason, p.by, p.lost_gpu_s, kept))
                with contextlib.suppress(SlurmError):  # below every ordered job until the next cycle
                    self.client.set_priority(int(p.job), self.band.low)
        return systemic

    def _needless(
        self,
        e: EngineView,
        preemptor: str | None,
        group: Sequence[Preempt],
        nodes: Mapping[str, NodeView],
        jobs: Mapping[int, SlurmJob],
        t: float,
    ) -> str | None:
        """Why requeueing `group` for `preemptor` must not happen now (None: it may)."""
        for p in group:
            rv = e.state.running.get(p.job)
            j = jobs.get(int(p.job)) if p.job.isdigit() else None
            if rv is None or j is None or j.state not in NOW_RUNNING or j.start_time is None:
                return f"job {p.job} no longer runs"
            slurms = protected_until(j.start_time, rv.job)  # by Slurm's start of the run
            if rv.protected_until > t + TIME_EPS or slurms > t + TIME_EPS:
                until = max(rv.protected_until, slurms)
                return f"job {p.job} is inside its protected window (until {until:.0f})"
        if preemptor is None or group[0].reason in ("drain", "no_progress"):
            return None
        w = jobs.get(int(preemptor)) if preemptor.isdigit() else None
        if w is None or not w.pending or not eligible(w):
            return f"the preemptor {preemptor} no longer waits (or is held)"
        free = {n: v.gpus - v.gpus_used for n, v in nodes.items() if v.schedulable}
        if _fits(w, free, self.read.mapper, nodes):
            return f"the preemptor {preemptor} fits on the free GPUs now"
        for p in group:
            for a in jobs[int(p.job)].alloc:
                if a.node in free:
                    free[a.node] += a.gpus
        if not _fits(w, free, self.read.mapper, nodes):
            return f"the preemptor {preemptor} would not fit even with the victims' GPUs free"
        return None


def _fits(j: SlurmJob, free: Mapping[str, int], mapper: Mapper, nodes: Mapping[str, NodeView]) -> bool:
    n = max(1, j.nodes)
    per = -(-j.gpus // n)
    want = mapper.gpu_type(j.gpu_type) if j.gpu_type is not None else None
    ok = [k for k, f in free.items() if f >= per and (want is None or nodes[k].gpu_type == want)]
    return len(ok) >= n
