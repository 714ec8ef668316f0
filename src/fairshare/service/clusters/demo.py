"""The demo cluster: a built-in scenario's nodes and arrivals with the simulator's truth model,
on the service's (accelerated) clock, driven through the same loop and storage as production.

It knows what only a cluster knows — each job's real run time (`work`) and hang point
(`stall_after`) — and reports finishes and hangs when they happen (fairshare.replay.truth, the
replay's own rules), submissions at their arrival times, and the scenario's maintenance drains. It
places jobs where the core says. Its own state (runs it started and how they ended, jobs submitted
through the API, cancellations) lives in tables of its own (`demo_*`), written in its own
transactions, as a real cluster keeps its own memory: a scheduler killed mid-pass finds on restart
what the cluster actually did. A start is refused when the job already runs (never started twice).

The scenario repeats: round k >= 1 is the same arrivals shifted by k x the scenario's horizon, with
job ids suffixed `~k`, so a long demo keeps moving.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from ...core.model import JobRequest, Node
from ...core.snapshot import Preempt, Start
from ...errors import InputError
from ...inputs.cluster import Cluster
from ...inputs.policy import Policy
from ...inputs.scenarios import SCENARIOS, ScenarioData
from ...inputs.workload import Job
from ...replay.runner import inputs_from_scenario
from ...replay.truth import kept_on_preempt, plan_run, run_progress
from ..service_errors import Conflict, NotFound
from ..storage import schema
from ..storage.store import Store
from ..timefmt import from_iso
from .backend import (
    Cancelled,
    Drained,
    Failure,
    Finished,
    Hung,
    Observation,
    Outcome,
    Preempted,
    Started,
    Submission,
    Submitted,
    Undrained,
    in_order,
)

log = logging.getLogger(__name__)

TRUTH_KEY = "_truth"  # in a demo_jobs row's spec: the job as the cluster resolved it at submission


def job_to_json(job: Job) -> dict[str, Any]:
    """A resolved job (request and truth) as JSON values; `job_from_json` reads it back equal."""
    return {"request": dataclasses.asdict(job.request), "work": job.work, "stall_after": job.stall_after}


def job_from_json(data: Mapping[str, Any]) -> Job:
    req = dict(data["request"])
    if req.get("gpu_types") is not None:
        req["gpu_types"] = tuple(req["gpu_types"])
    return Job(JobRequest(**req), float(data["work"]), data["stall_after"])


@dataclass
class Run:
    job: str
    t0: float
    alloc: tuple[tuple[int, int], ...]
    charge: float
    kept_before: float  # progress kept by earlier runs
    restarted: bool
    stall_done_before: bool
    finish_at: float | None  # truth: when it finishes if left alone (None: it hangs)
    stall_at: float | None
    overhead: float
    t_end: float | None = None
    end_kind: str | None = None  # preempt | cancel (a finish is finish_at)
    kept_after: float = 0.0
    stall_done_after: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    policy: Policy
    policy_text: str
    cluster: Cluster
    jobs: tuple[Job, ...]  # round 0, by submit time (relative to the epoch)
    epoch: float  # the scenario's t = 0 on the service clock (seconds since 1970)
    period: float  # rounds repeat every period

    @staticmethod
    def load(name: str, seed: int = 1) -> Scenario:
        make = SCENARIOS.get(name)
        if make is None:
            raise InputError("--cluster", f"demo:{name}", f"unknown scenario (known: {', '.join(SCENARIOS)})")
        return Scenario.from_data(make(seed), seed)

    @staticmethod
    def from_data(data: ScenarioData, seed: int = 1) -> Scenario:
        """A scenario from its data (tests build small ones)."""
        inputs = inputs_from_scenario(data)
        epoch = from_iso(inputs.cluster.epoch)
        last = max((j.submit for j in inputs.jobs), default=0.0)
        period = inputs.cluster.horizon or (math.ceil((last + 86400.0) / 86400.0) * 86400.0)
        return Scenario(
            data.name,
            seed,
            inputs.policy,
            _live_policy_text(data.policy),
            inputs.cluster,
            tuple(inputs.jobs),
            epoch,
            float(period),
        )


def _live_policy_text(policy: Mapping[str, Any]) -> str:
    import yaml

    return "# the demo scenario's policy\n" + yaml.safe_dump(dict(policy), sort_keys=False)


def spec_of(job: Job, offset: float = 0.0) -> dict[str, Any]:
    """The submission a job makes: its request as workload columns, no truth; `offset` places a
    scenario's relative deadline on the service clock."""
    r = job.request
    spec: dict[str, Any] = {
        "group": r.group,
        "class": r.cls,
        "gpus": r.gpus,
        "nodes": r.nodes,
        "estimate": r.estimate,
        "label": r.label,
        "protected": r.protected,
        "resumable": r.resumable,
    }
    if r.user:
        spec["user"] = r.user
    if r.gpu_types is not None:
        spec["gpu_type"] = "|".join(r.gpu_types)
    if r.cpus:
        spec["cpus"] = r.cpus
    if r.mem_gb:
        spec["mem_gb"] = r.mem_gb
    if r.resumable and r.checkpoint:
        spec["checkpoint"] = r.checkpoint
    if r.deadline is not None:
        spec["deadline"] = offset + r.deadline
    return spec


class DemoCluster:
    """The demo backend (see the module's docstring). `build_job(job_id, spec, t)` resolves an API
    submission's truth against the policy in force (the loop passes it)."""

    name = "demo"
    places_jobs = True
    accepts_submissions = True

    def __init__(
        self,
        store: Store,
        scenario: Scenario,
        build_job: Callable[[str, Mapping[str, Any], float], Submission],
    ):
        self.store, self.scenario, self.build_job = store, scenario, build_job
        self.lock = threading.Lock()  # API threads submit and cancel while the loop observes
        self.submits = [scenario.epoch + j.submit for j in scenario.jobs]
        self.by_id = {j.id: j for j in scenario.jobs}
        self.api_jobs: dict[str, tuple[float, Job | None]] = {}
        self.api_specs: dict[str, dict[str, Any]] = {}
        self.api_resolved: dict[str, Submission] = {}  # this process's submissions, as resolved
        self.api_times: list[tuple[float, str]] = []
        self.runs: dict[str, list[Run]] = {}
        self.log: list[tuple[float, Observation]] = []  # starts and ends the cluster carried out, by time
        self.log_times: list[float] = []
        self.active: dict[str, Run] = {}  # jobs whose last run has not ended by preemption or cancel
        self.cancels: dict[str, float] = {}
        self.observed_until = -math.inf
        self._load()

    # ------------------------------------------------------------------ state
    def nodes(self) -> tuple[Node, ...]:
        return self.scenario.cluster.nodes

    def _load(self) -> None:
        with self.store.read() as tx:
            for r in tx.conn.execute(select(schema.demo_jobs).order_by(schema.demo_jobs.c.t)):
                spec, at = json.loads(r.spec), float(r._mapping["t"])
                truth = spec.pop(TRUTH_KEY, None)
                self.api_jobs[r.job] = (
                    at,
                    job_from_json(truth) if truth else self._resolve_old(r.job, spec, at),
                )
                self.api_specs[r.job] = spec
                self.api_times.append((at, r.job))
            rows = tx.conn.execute(
                select(schema.demo_runs).order_by(schema.demo_runs.c.t0, schema.demo_runs.c.id)
            )
            for r in rows:
                alloc = tuple((int(i), int(g)) for i, g in json.loads(r.alloc))
                run = self._new_run(r.job, float(r.t0), alloc, float(r.charge))
                if r.t_end is not None:
                    self._end(
                        run,
                        float(r.t_end),
                        str(r.end_kind),
                        r.reason,
                        r.by,
                        float(r.lost_gpu_s or 0.0),
                        float(r.kept or 0.0),
                        bool(r.stall_done),
                    )
            for r in tx.conn.execute(select(schema.demo_cancels)):
                at = float(r._mapping["t"])
                self.cancels[r.job] = at
                runs = self.runs.get(r.job)
                if not runs or runs[-1].end_kind != "cancel":  # a run cancelled logged it already
                    self._logged(Cancelled(at, r.job, r.by))
        self.api_times.sort()

    def _resolve_old(self, job_id: str, spec: Mapping[str, Any], at: float) -> Job | None:
        """A submission stored without its truth (before issue 18): resolved again against the
        policy in force; one it no longer takes is a job this cluster cannot run (never started)."""
        try:
            return self.build_job(job_id, spec, at).job
        except InputError as exc:
            log.warning("demo cluster: job %s cannot be resolved again (%s): it will not run", job_id, exc)
            return None

    def job(self, job_id: str) -> Job | None:
        api = self.api_jobs.get(job_id)
        if api is not None:
            return api[1]
        base, _, rnd = job_id.partition("~")
        job = self.by_id.get(base)
        if job is None or (rnd and not rnd.isdigit()):
            return None
        return job

    def submit_time(self, job_id: str) -> float | None:
        api = self.api_jobs.get(job_id)
        if api is not None:
            return api[0]
        base, _, rnd = job_id.partition("~")
        job = self.by_id.get(base)
        if job is None:
            return None
        return self.scenario.epoch + job.submit + (int(rnd) if rnd else 0) * self.scenario.period

    def _new_run(self, job_id: str, t0: float, alloc: tuple[tuple[int, int], ...], charge: float) -> Run:
        job = self.job(job_id)
        assert job is not None, job_id
        past = self.runs.setdefault(job_id, [])
        kept = past[-1].kept_after if past else 0.0
        stall_done = past[-1].stall_done_after if past else False
        plan = plan_run(job, t0, kept, bool(past), stall_done)
        run = Run(
            job_id,
            t0,
            alloc,
            charge,
            kept,
            bool(past),
            stall_done,
            plan.finish_at,
            plan.stall_at,
            plan.overhead,
        )
        past.append(run)
        self.active[job_id] = run
        self._logged(Started(t0, job_id, alloc, charge))
        return run

    def _end(
        self,
        run: Run,
        t: float,
        kind: str,
        reason: str | None,
        by: str | None,
        lost: float,
        kept: float,
        stall_done: bool,
    ) -> None:
        run.t_end, run.end_kind, run.kept_after, run.stall_done_after = t, kind, kept, stall_done
        obs: Observation = (
            Preempted(t, run.job, reason or "fair_share", by, lost, kept)
            if kind == "preempt"
            else Cancelled(t, run.job, by or "")
        )
        self._logged(obs)

    def current(self, job_id: str, t: float) -> Run | None:
        """The job's run holding resources at t (not ended, not finished by then)."""
        runs = self.runs.get(job_id)
        if not runs:
            return None
        r = runs[-1]
        if r.t_end is not None or (r.finish_at is not None and r.finish_at <= t):
            return None
        return r

    def _finished(self, job_id: str, t: float) -> bool:
        runs = self.runs.get(job_id)
        if not runs:
            return False
        last = runs[-1]
        return last.t_end is None and last.finish_at is not None and last.finish_at <= t

    # ------------------------------------------------------------------ observing
    def observe(self, since: float, until: float) -> list[Observation]:
        with self.lock:
            out: list[Observation] = []
            sc = self.scenario
            first = max(0, math.floor((since - sc.epoch) / sc.period)) if since > -math.inf else 0
            last = math.floor((until - sc.epoch) / sc.period)
            for k in range(first, last + 1):
                base = sc.epoch + k * sc.period
                lo = bisect.bisect_left(self.submits, since - k * sc.period)
                hi = bisect.bisect_right(self.submits, until - k * sc.period)
                for job in sc.jobs[lo:hi]:
                    jid = job.id if k == 0 else f"{job.id}~{k}"
                    out.append(Submitted(base + job.submit, jid, spec_of(job, base)))
                for m in sc.cluster.maintenance:
                    if since <= base + m.start <= until:
                        out.append(Drained(base + m.start, m.nodes, base + m.deadline))
                    if m.end is not None and since <= base + m.end <= until:
                        out.append(Undrained(base + m.end, m.nodes))
            lo = bisect.bisect_left(self.api_times, (since, ""))
            for t, jid in self.api_times[lo:]:
                if t > until:
                    break
                out.append(Submitted(t, jid, self.api_specs[jid], self.api_resolved.get(jid)))
            lo, hi = bisect.bisect_left(self.log_times, since), bisect.bisect_right(self.log_times, until)
            out.extend(obs for _, obs in self.log[lo:hi])
            for jid, r in list(self.active.items()):
                end = (
                    r.t_end if r.t_end is not None else (r.finish_at if r.finish_at is not None else math.inf)
                )
                if end < since:
                    del self.active[jid]  # its end was reported by an earlier look
                    continue
                end = r.t_end if r.t_end is not None else math.inf
                if r.finish_at is not None and since <= r.finish_at <= until and r.finish_at < end:
                    out.append(Finished(r.finish_at, r.job))
                if r.stall_at is not None and since <= r.stall_at <= until and r.stall_at < end:
                    out.append(Hung(r.stall_at, r.job))
            self.observed_until = max(self.observed_until, until)
            return in_order(out)

    def _logged(self, obs: Observation) -> None:
        """Record an action the cluster carried out (times never go back: actions happen now)."""
        i = bisect.bisect_right(self.log_times, obs.t)
        self.log_times.insert(i, obs.t)
        self.log.insert(i, (obs.t, obs))

    def resume(self, t: float) -> None:
        with self.lock:
            self.observed_until = t

    def not_startable(self) -> frozenset[str]:
        return frozenset()  # it starts what a pass decides

    def next_time(self) -> float | None:
        """The next instant after what was observed when something happens here."""
        with self.lock:
            after = self.observed_until
            sc = self.scenario
            best = math.inf
            k = max(0, math.floor((after - sc.epoch) / sc.period)) if after > -math.inf else 0
            for kk in (k, k + 1):
                i = bisect.bisect_right(self.submits, after - kk * sc.period)
                if i < len(self.submits):
                    best = min(best, self.submits[i] + kk * sc.period)
                for m in sc.cluster.maintenance:
                    for at in (m.start, m.end):
                        if at is not None and sc.epoch + kk * sc.period + at > after:
                            best = min(best, sc.epoch + kk * sc.period + at)
            i = bisect.bisect_right(self.api_times, (after, "\uffff"))
            if i < len(self.api_times):
                best = min(best, self.api_times[i][0])
            i = bisect.bisect_right(self.log_times, after)
            if i < len(self.log_times):
                best = min(best, self.log_times[i])
            for r in self.active.values():
                if r.t_end is not None:
                    continue  # its end is in the log
                for at in (r.finish_at, r.stall_at):
                    if at is not None and at > after:
                        best = min(best, at)
            return None if best == math.inf else best

    # ------------------------------------------------------------------ acting
    def act(
        self, preempts: Sequence[Preempt], starts: Sequence[Start], order: Sequence[str], t: float
    ) -> Outcome:
        with self.lock:
            confirmed: list[Observation] = []
            failed: list[Failure] = []
            rows: list[tuple[str, dict[str, Any]]] = []
            for p in preempts:
                run = self.current(p.job, t)
                if run is None:
                    failed.append(Failure(p.job, "preempt", "it is not running on the cluster"))
                    continue
                lost, kept, stall_done = self._preempt_truth(run, t)
                self._end(run, t, "preempt", p.reason, p.by, lost, kept, stall_done)
                confirmed.append(Preempted(t, run.job, p.reason, p.by, lost, kept))
                rows.append(
                    (
                        "end",
                        {
                            "job": run.job,
                            "t0": run.t0,
                            "t_end": t,
                            "end_kind": "preempt",
                            "reason": p.reason,
                            "by": p.by,
                            "lost_gpu_s": lost,
                            "kept": kept,
                            "stall_done": int(stall_done),
                        },
                    )
                )
            free = self.free_at(t)
            for s in starts:
                why = self._refuse_start(s, t, free)
                if why is not None:
                    failed.append(Failure(s.job, "start", why))
                    continue
                self._new_run(s.job, t, tuple(s.alloc), s.charge)
                confirmed.append(Started(t, s.job, tuple(s.alloc), s.charge))
                rows.append(
                    (
                        "start",
                        {
                            "job": s.job,
                            "t0": t,
                            "alloc": json.dumps([list(a) for a in s.alloc]),
                            "charge": s.charge,
                        },
                    )
                )
            if rows:
                self._persist(rows)
            return Outcome(confirmed, failed)

    def free_at(self, t: float) -> list[int]:
        """Free GPUs per node at t: runs holding resources then (not ended, not finished by then)."""
        free = [n.gpus for n in self.scenario.cluster.nodes]
        for jid, r in self.active.items():
            if self.current(jid, t) is r:
                for i, g in r.alloc:
                    free[i] -= g
        return free

    def _refuse_start(self, s: Start, t: float, free: list[int]) -> str | None:
        if self.job(s.job) is None:
            return "the cluster has no such job"
        if s.job in self.cancels:
            return "the job was cancelled"
        if self.current(s.job, t) is not None:
            return "the job is already running (a start is never repeated)"
        if self._finished(s.job, t):
            return "the job has finished"
        for i, g in s.alloc:
            if not (0 <= i < len(free)) or free[i] < g:
                return f"node {i} has {free[i] if 0 <= i < len(free) else 0} free GPUs, not {g}"
        for i, g in s.alloc:
            free[i] -= g
        return None

    def _preempt_truth(self, run: Run, t: float) -> tuple[float, float, bool]:
        """(lost GPU-seconds, progress kept in total, hang reached) of preempting `run` at t."""
        job = self.job(run.job)
        assert job is not None
        progress, reached = run_progress(job, run.t0, t, run.overhead, run.kept_before, run.stall_done_before)
        saved = kept_on_preempt(job, progress, run.kept_before)
        lost = ((t - run.t0) - saved) * job.request.gpus
        kept = run.kept_before + saved if job.request.resumable else 0.0
        stall_done = run.stall_done_before or reached or (run.stall_at is not None and t >= run.stall_at)
        return lost, kept, stall_done

    def _persist(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        d = schema.demo_runs
        with self.store.write() as tx:
            for kind, row in rows:
                if kind == "start":
                    tx.conn.execute(d.insert().values(**row))
                else:
                    key = {"job": row.pop("job"), "t0": row.pop("t0")}
                    tx.conn.execute(
                        d.update().where(d.c.job == key["job"], d.c.t0 == key["t0"]).values(**row)
                    )

    # ------------------------------------------------------------------ users
    def submit(self, job_id: str, spec: Mapping[str, Any], t: float, by: str = "api") -> float:
        with self.lock:
            at = max(t, self.observed_until)
            # resolved once, here, at its instant (InputError: the policy in force refuses it)
            resolved = self.build_job(job_id, spec, at)
            if job_id in self.api_jobs or self.job(job_id) is not None:
                raise Conflict(f"a job {job_id!r} exists already", field="job_id")
            job = resolved.job if resolved is not None else None
            # the cluster keeps the truth it was given: a restart must not resolve it again against
            # a policy that may have changed since (or before the scheduler's state is rebuilt)
            stored = {**spec, TRUTH_KEY: job_to_json(job)} if job is not None else dict(spec)
            with self.store.write() as tx:
                tx.conn.execute(
                    schema.demo_jobs.insert().values(job=job_id, t=at, spec=json.dumps(stored), by=by)
                )
            self.api_jobs[job_id] = (at, job)
            self.api_specs[job_id] = dict(spec)
            if resolved is not None:
                self.api_resolved[job_id] = resolved
            bisect.insort(self.api_times, (at, job_id))
            return at

    def cancel(self, job_id: str, t: float, by: str) -> None:
        with self.lock:
            at = max(t, self.observed_until)
            submitted = self.submit_time(job_id)
            if submitted is None or submitted > at:
                raise NotFound(f"no job {job_id!r} on the cluster")
            if job_id in self.cancels or self._finished(job_id, at):
                raise Conflict(f"job {job_id} has ended already")
            run = self.current(job_id, at)
            with self.store.write() as tx:
                if run is not None:
                    lost, kept, stall_done = self._preempt_truth(run, at)
                    tx.conn.execute(
                        schema.demo_runs.update()
                        .where(schema.demo_runs.c.job == job_id, schema.demo_runs.c.t0 == run.t0)
                        .values(
                            t_end=at,
                            end_kind="cancel",
                            by=by,
                            lost_gpu_s=lost,
                            kept=kept,
                            stall_done=int(stall_done),
                        )
                    )
                tx.conn.execute(schema.demo_cancels.insert().values(job=job_id, t=at, by=by))
            self.cancels[job_id] = at
            if run is not None:
                lost, kept, stall_done = self._preempt_truth(run, at)
                self._end(run, at, "cancel", None, by, lost, kept, stall_done)
            else:
                self._logged(Cancelled(at, job_id, by))
