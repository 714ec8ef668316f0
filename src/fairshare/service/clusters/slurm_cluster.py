"""`SlurmCluster`: the service's backend interface on a real Slurm (DESIGN §5 "Slurm").

Slurm places jobs (`places_jobs` is False); the core decides the order and which runs past their
protected window to requeue. Each cycle the loop calls

    observe(since, until)   read sinfo, squeue and sacct (runs since `since`) and turn the
                            difference between Slurm and the engine state into observations:
                            submissions (a mapped, eligible job the engine does not know), starts
                            with Slurm's real allocation, finishes, cancellations, requeues by
                            others, node drains, nodes added to or removed from the cluster;
                            notes for the audit (accounts no leaf charges, how a job's comment was
                            read, where Slurm placed a job other than the core would have)
    act(preempts, starts, order, t)
                            set priorities so that Slurm's scheduler and backfill follow `order`
                            (fewest updates: slurm.priority), then requeue the chosen victims,
                            each checked again first: still running the same run, past its
                            protected window, and its preemptor still waiting, not placeable on
                            the free GPUs alone and placeable once the victims' GPUs are free

Every observation is keyed by what Slurm reports (a run by its job and start, `start:<job>:<t>`),
so a restarted service that reads the same Slurm again applies nothing twice; accounting (sacct)
is the record of runs, so a run that started and ended while the service was down is charged.

Quirks handled (docs/slurm.md): a requeue resets Slurm's submit time (the first instant seen is
kept); squeue without a controller is an error, not an empty queue (the cycle is skipped:
`ClusterUnavailable`, the loop retries with backoff); a job missing from squeue whose end
accounting has not recorded yet counts as ended only after `grace_s`; held jobs and jobs waiting
on a dependency or a begin time are submitted to the engine once eligible; `--dry-run` changes
nothing in Slurm and audits what it would have done.

Nodes: the engine's node indexes are the reference (a node keeps its index for the engine's life:
fairshare.engine.nodes). A GPU node in scope that sinfo lists and the engine does not have in
service (new, back, or with other hardware) and one the engine has that sinfo no longer lists make
a `NodesChanged` observation with every node sinfo lists, at the engine's instant (so it comes
before the starts on a new node); a node merely down or drained is still listed and drained as
before. A new node of a GPU type the policy has no rate for is left out (noted once:
`node_refused`) until the policy rates it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...core.contract import lost_gpu_s, run_saved
from ...core.model import TIME_EPS, Node
from ...core.snapshot import Preempt, RunView, Start
from ...engine.nodes import NodeChange, plan_nodes
from ...inputs.policy import Policy
from ...slurm.mapping import Mapper, NodeView, SlurmRequest, UnmappedJob
from ...slurm.model import SlurmJob, SlurmNode, SlurmRun
from ...slurm.priority import Band
from ...slurm.slurm_errors import SlurmError
from ..options import SlurmOptions
from ..service_errors import ClusterUnavailable, ServiceError
from .backend import (
    Cancelled,
    Drained,
    Finished,
    NodesChanged,
    Noted,
    Observation,
    Outcome,
    Preempted,
    Started,
    Submitted,
    Undrained,
    in_order,
)
from .slurm_actions import NOW_RUNNING, SlurmActions, eligible

if TYPE_CHECKING:
    from ...slurm.client import SlurmBackend
    from .backend import EngineView

REQUEUED_STATES = frozenset({"REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "PREEMPTED", "NODE_FAIL"})
FAR = 10 * 365 * 86400.0  # a Slurm drain has no deadline: running jobs finish


class SlurmCluster:
    """The backend interface on a Slurm client (fairshare.slurm.client.SlurmBackend): it reads
    Slurm (`observe`) and hands acting (`act`) to its SlurmActions, which reads it back."""

    name = "slurm"
    places_jobs = False
    accepts_submissions = False

    def __init__(
        self,
        client: SlurmBackend,
        policy: Policy,
        engine: Callable[[], EngineView | None],
        options: SlurmOptions | None = None,
        *,
        parents: Mapping[str, str] | None = None,
        count_memory: bool = False,
        clock: Callable[[], float] = time.time,
        policy_of: Callable[[str], Policy] | None = None,
    ) -> None:
        self.client, self.engine_of, self.clock = client, engine, clock
        self.opt = options or SlurmOptions()
        self.parents, self.count_memory, self.policy_of = parents, count_memory, policy_of
        self.sha: str | None = None
        self.mapper = Mapper(policy, parents, count_memory)
        s = self.mapper.section
        self.default_estimate = policy.window
        try:
            found = client.read_nodes()
        except SlurmError as exc:
            raise ClusterUnavailable(f"cannot read Slurm's nodes: {exc}") from None
        views = self.node_views(found)
        if not views:
            raise ServiceError("Slurm reports no nodes with GPUs in the policy's partitions")
        # the nodes at start (a new journal's); from then on the engine's nodes are the reference
        self._nodes = tuple(_node_of(v) for v in views.values())
        self.index = {n.name: i for i, n in enumerate(self._nodes)}  # name -> the engine's index
        self.views = views
        self.jobs: dict[int, SlurmJob] = {}  # the last squeue read
        self.first_submit: dict[str, float] = {}
        self.missing: dict[str, float] = {}  # job -> when first seen gone without an end
        self.node_change: dict[int, float] = {}  # node -> when its drain (or return) was seen
        self.noted: dict[str, str | None] = {}  # key of a note made -> its job (None: a node's)
        band = Band(s.priority_min, s.priority_max, s.priority_step)
        self.actions = SlurmActions(client, self, engine, self.opt, band)
        self.resumed = 0.0

    # ------------------------------------------------------------------ the interface
    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def next_time(self) -> float | None:
        return None

    def not_startable(self) -> frozenset[str]:
        """Jobs Slurm holds back (held, a dependency, a begin time: a requeued job waits one),
        as of the last read: a pass's start of one would be audited and never happen."""
        return frozenset(str(k) for k, j in self.jobs.items() if j.pending and not eligible(j))

    def resume(self, t: float) -> None:
        self.resumed = t

    def submit(self, job: str, spec: Mapping[str, Any], t: float, by: str = "api") -> float:
        raise ServiceError("submit to Slurm with sbatch: fairshare orders the jobs Slurm has")

    def act(
        self, preempts: Sequence[Preempt], starts: Sequence[Start], order: Sequence[str], t: float
    ) -> Outcome:
        return self.actions.act(preempts, starts, order, t)

    def cancel(self, job: str, t: float, by: str) -> None:
        raise ServiceError("cancel with scancel: fairshare orders the jobs Slurm has")

    # ------------------------------------------------------------------ reading Slurm
    def node_views(self, found: Sequence[SlurmNode]) -> dict[str, NodeView]:
        out = {}
        for n in sorted(found, key=lambda n: n.name):
            if n.gpus and self.mapper.in_scope(n.partitions):
                out[n.name] = self.mapper.node(n)[0]
        return out

    def _read(self, since: float, until: float) -> tuple[list[SlurmNode], list[SlurmJob], list[SlurmRun]]:
        first = not (
            since > 0 and math.isfinite(since)
        )  # a first start: what runs now (and within the lookback)
        lo = until - self.opt.lookback_s if first else since - self.opt.margin_s
        try:
            return self.client.read_nodes(), self.client.read_jobs(), self.client.read_runs(lo, until)
        except SlurmError as exc:
            raise ClusterUnavailable(str(exc)) from None

    def observe(self, since: float, until: float) -> list[Observation]:
        e = self.engine_of()
        if e is None:
            return []
        if self.policy_of is not None and e.policy_sha != self.sha:  # a new version maps jobs from now
            self.sha = e.policy_sha
            self.mapper = Mapper(self.policy_of(e.policy_sha), self.parents, self.count_memory)
        found, jobs, runs = self._read(since, until)
        current = self.node_views(found)
        self.views.update(current)  # a removed node's view stays: runs there are still charged
        self.jobs = {j.job_id: j for j in jobs if self.mapper.in_scope(j.partition.split(","))}
        out: list[Observation] = []
        self._nodes_changed(e, current, until, out)
        by_job: dict[str, list[SlurmRun]] = {}
        for r in runs:
            if self.mapper.section.partitions and r.partition and not self.mapper.in_scope([r.partition]):
                continue
            by_job.setdefault(str(r.job_id), []).append(r)
        for j in self.jobs.values():  # a start accounting has not recorded yet
            if j.state in NOW_RUNNING and j.start_time is not None:
                rs = by_job.setdefault(str(j.job_id), [])
                if all(r.start != j.start_time for r in rs):
                    rs.append(_run_of(j))
        ids = set(by_job) | {str(k) for k in self.jobs}
        news = set()
        for job in sorted(ids, key=int):
            if self._job(e, job, sorted(by_job.get(job, ()), key=lambda r: r.start), until, out):
                news.add(job)
        self._gone(e, news, until, out)
        self.actions.forget_gone()
        self._forget(ids)
        return in_order(out)

    def _forget(self, seen: set[str]) -> None:
        """Drop what this side keeps per job (the notes made, the first submit seen) for jobs the
        read no longer shows: a service runs for months, and a job Slurm and accounting no longer
        list is not read again (a later run of it is a new run, noted anew)."""
        self.noted = {k: j for k, j in self.noted.items() if j is None or j in seen}
        self.first_submit = {j: t for j, t in self.first_submit.items() if j in seen}

    def _note(
        self, out: list[Observation], key: str, t: float, kind: str, job: str | None, **ev: Any
    ) -> None:
        if key not in self.noted:
            self.noted[key] = job
            out.append(Noted(t, kind, job, ev))

    def _nodes_changed(
        self, e: EngineView, current: Mapping[str, NodeView], now: float, out: list[Observation]
    ) -> None:
        """Nodes added or removed (NodesChanged), then drains and returns of the nodes in service
        (by the indexes the engine has once the change is in)."""
        typed = {n.gpu_type for n in e.state.nodes}
        cluster = []
        for v in current.values():
            n = _node_of(v)
            if n.gpu_type in e.state.rates or n.gpu_type in typed:
                cluster.append(n)
            else:
                self._note(
                    out, f"unrated:{n.name}:{n.gpu_type}", now, "node_refused", None, node=n.name,
                    gpu_type=n.gpu_type, reason="its GPU type has no rate in the policy's gpu_rates",
                )  # fmt: skip
        try:
            change = plan_nodes(e.state.nodes, e.state.fleet.retired, cluster, e.state.rates)
        except ValueError as exc:  # not expected: sinfo lists a name once, nodes with GPUs
            self._note(out, f"nodes:{exc}", now, "nodes_refused", None, reason=str(exc))
            change = NodeChange(e.state.nodes)
        if change:
            out.append(NodesChanged(e.t, tuple(cluster)))
        gone = (e.state.fleet.retired | set(change.removed)) - set(change.returned)
        self.index = {n.name: i for i, n in enumerate(change.nodes)}  # a name's latest index
        for name, i in self.index.items():
            now_v = current.get(name)
            if i in gone or now_v is None:
                self.node_change.pop(i, None)
                continue
            off = not now_v.schedulable
            if off == (i in e.state.fleet.draining):
                self.node_change.pop(i, None)
                continue
            t = self.node_change.setdefault(i, now)
            if off:
                out.append(Drained(t, (i,), t + FAR))
            else:
                out.append(Undrained(t, (i,)))

    def _request(self, j: SlurmJob) -> SlurmRequest | UnmappedJob:
        if j.gpus <= 0:
            return UnmappedJob(
                j.job_id, j.account, j.user, j.state, "asks for no GPUs: not ordered or charged"
            )
        return self.mapper.request(j)

    def _job(self, e: EngineView, job: str, rs: list[SlurmRun], now: float, out: list[Observation]) -> bool:
        """Observations of one job; True when it has news (a run the engine has not seen end)."""
        j = self.jobs.get(int(job))
        if job in e.rejected:
            return False
        if job in e.cancelled_by_policy:  # held in Slurm by act; a run of it fairshare did not start
            if j is not None and j.running:
                self._note(
                    out, f"unmanaged:{job}:{j.start_time}", now, "slurm_unmanaged_run", job,
                    reason=e.cancelled_by_policy[job], nodes=[a.node for a in j.alloc],
                )  # fmt: skip
            return False
        known = job in e.info
        if not known:  # runs that ended before the engine's instant can no longer be charged
            rs = [r for r in rs if r.end is None or r.end > e.t]
        if j is None and not rs:
            return False
        req = self._request(j if j is not None else _job_of(rs[-1]))
        if isinstance(req, UnmappedJob) and not known:
            self._note(
                out, f"unmapped:{job}", now, "slurm_unmapped", job, account=req.account, reason=req.reason
            )
            return False
        if not known:
            if j is not None and j.pending and not rs and not eligible(j):
                return False
            assert isinstance(req, SlurmRequest)
            t = min([self.first_submit.get(job, math.inf), req.submit, *(float(r.start) for r in rs)])
            self.first_submit[job] = t
            out.append(Submitted(t, job, self._spec(req, j, now)))
            if req.notes:
                self._note(out, f"notes:{job}", t, "slurm_mapping", job, notes=list(req.notes))
        rv = e.state.running.get(job)
        info = e.info.get(job)
        matched = None
        if rv is not None:
            cands = [r for r in rs if r.start <= rv.t0 + TIME_EPS]
            matched = cands[-1] if cands else None
        floor = (
            float(matched.start)
            if matched is not None
            else (info.last_start if info is not None and info.last_start is not None else -math.inf)
        )
        news = False
        for k, r in enumerate(rs):
            new = r.start > floor + TIME_EPS
            news = news or new or (r is matched and r.end is not None)
            if new or r is not matched:
                started = Started(float(r.start), job, self._alloc(r, j), self._charge(r, j))
                out.append(started)
                if new and rv is None:
                    self._placed(job, r, started.t, out)
            if r.end is None or not (new or r is matched):
                continue
            later = k + 1 < len(rs) or (j is not None and not (j.running and j.start_time == r.start))
            end = float(r.end)
            if r.state in REQUEUED_STATES or (later and j is not None):
                lost, kept = self._lost(rv if r is matched else None, r, end)
                out.append(Preempted(end, job, "requeued_by_slurm", None, lost, kept))
            elif r.state.startswith("CANCELLED"):
                out.append(Cancelled(end, job, "slurm"))
            else:
                out.append(Finished(end, job))
        return news

    def _gone(self, e: EngineView, news: set[str], now: float, out: list[Observation]) -> None:
        """Jobs the engine has that Slurm no longer shows, with no end in accounting yet."""
        waiting = [
            j for j in e.state.pending.jobs if j.isdigit() and int(j) not in self.jobs and j not in news
        ]
        stuck = []
        for job, rv in e.state.running.items():
            j = self.jobs.get(int(job)) if job.isdigit() else None
            if job in news or (j is not None and j.running and (j.start_time or 0) <= rv.t0 + TIME_EPS):
                continue
            stuck.append(job)
        for job in [*waiting, *stuck]:
            t = self.missing.setdefault(job, now)
            if now - t < self.opt.grace_s:
                continue
            j = self.jobs.get(int(job))
            if job in e.state.running and j is not None and j.pending:
                rv = e.state.running[job]
                lost = lost_gpu_s(rv.job, rv.t0, t, rv.overhead, rv.hung_since, rv.ckpt_at)
                out.append(Preempted(t, job, "requeued_by_slurm", None, lost, rv.kept))
            elif job in e.state.running:
                out.append(Finished(t, job))
            else:
                out.append(Cancelled(t, job, "slurm"))
        for job in [k for k in self.missing if k not in waiting and k not in stuck]:
            del self.missing[job]

    def _spec(self, req: SlurmRequest, j: SlurmJob | None, now: float) -> dict[str, Any]:
        """The job as a workload row (FORMATS.md): the loop resolves it with the replay's rules
        (the class's deadline among them: only the job's own deadline is passed on)."""
        deadline = req.asked_deadline if j is not None else None
        spec: dict[str, Any] = {
            "group": req.leaf,
            "class": req.cls,
            "gpus": req.gpus,
            "nodes": req.nodes,
            "gpu_type": "|".join(req.gpu_types) if req.gpu_types else None,
            "estimate": req.estimate if req.estimate else self.default_estimate,
            "deadline": deadline if deadline is not None and deadline > now else None,
            "protected": req.protected,
            "resumable": req.resumable,
            "checkpoint": req.checkpoint if req.resumable else None,
            "user": req.user or None,
        }
        return {k: v for k, v in spec.items() if v is not None}

    def _alloc(self, r: SlurmRun, j: SlurmJob | None) -> tuple[tuple[int, int], ...]:
        if j is not None and j.start_time == r.start and j.alloc:
            pairs = [(a.node, a.gpus) for a in j.alloc]
        else:
            k = max(1, len(r.nodes))
            pairs = [(n, r.gpus // k + (1 if i < r.gpus % k else 0)) for i, n in enumerate(r.nodes)]
        return tuple((self.index[n], g) for n, g in pairs if n in self.index and g > 0)

    def _charge(self, r: SlurmRun, j: SlurmJob | None) -> float:
        if j is not None and j.start_time == r.start and j.alloc:
            req = self.mapper.request(j)
            if isinstance(req, SlurmRequest):
                return self.mapper.running(j, req, self.views).charge
        usage, _ = self.mapper.usage([r], self.views)
        return usage[0].charge if usage else float(r.gpus)

    def _lost(self, rv: RunView | None, r: SlurmRun, end: float) -> tuple[float, float]:
        """(lost GPU-seconds, progress kept) of a run requeued by someone else: since its last
        reported checkpoint when it reported one, else by the contract."""
        if rv is None:
            return (end - r.start) * r.gpus, 0.0
        saved = run_saved(rv.job, rv.t0, end, rv.overhead, rv.hung_since, rv.ckpt_at)
        return lost_gpu_s(rv.job, rv.t0, end, rv.overhead, rv.hung_since, rv.ckpt_at), rv.kept + saved

    def _placed(self, job: str, r: SlurmRun, t: float, out: list[Observation]) -> None:
        """Audit where Slurm's start differs from the core's: other nodes than the core chose, or
        a job started while jobs ahead of it in the order still wait (backfill)."""
        slurm = sorted(r.nodes)
        intended = self.actions.intended.pop(job, None)
        if intended is not None and sorted(intended[1]) != slurm:
            self._note(
                out, f"placed:{job}:{t!r}", t, "placement_differs", job,
                core=sorted(intended[1]), slurm=slurm, decided_t=intended[0],
            )  # fmt: skip
        if job in self.actions.last_order:
            ahead = [
                k
                for k in self.actions.last_order[: self.actions.last_order.index(job)]
                if k.isdigit() and (a := self.jobs.get(int(k))) is not None and a.pending and eligible(a)
            ]
            if ahead:
                self._note(
                    out, f"order:{job}:{t!r}", t, "order_differs", job,
                    slurm=slurm, position=self.actions.last_order.index(job), ahead=ahead[:5],
                    waiting_ahead=len(ahead),
                )  # fmt: skip


def _node_of(v: NodeView) -> Node:
    return Node(v.name, "slurm", v.gpus, v.gpu_type or v.slurm_gpu_type or "gpu", float(v.cpus), v.mem_gb, "")


def _run_of(j: SlurmJob) -> SlurmRun:
    return SlurmRun(
        j.job_id,
        j.account,
        j.user,
        j.partition,
        j.qos,
        j.state,
        int(j.start_time or 0),
        None,
        tuple(a.node for a in j.alloc),
        j.gpus,
        j.cpus,
        j.memory_mb,
        j.submit_time,
        j.time_limit_s,
        j.comment,
    )


def _job_of(r: SlurmRun) -> SlurmJob:
    """A job known only from accounting (it started and ended while nobody looked)."""
    return SlurmJob(
        job_id=r.job_id,
        name="",
        user=r.user,
        account=r.account,
        partition=r.partition,
        qos=r.qos,
        state=r.state,
        reason="None",
        priority=0,
        submit_time=r.submit if r.submit is not None else r.start,
        start_time=None,
        time_limit_s=r.time_limit_s,
        comment=r.comment,
        nodes=max(1, len(r.nodes)),
        gpus=r.gpus,
        gpu_type=None,
        cpus=r.cpus,
        memory_mb=r.memory_mb,
        alloc=(),
        restarts=0,
        requeue=True,
        deadline=None,
        array_job_id=None,
        array_task_id=None,
        het_job_id=None,
    )
