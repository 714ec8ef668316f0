"""An in-memory Slurm behind the same `SlurmBackend` interface, for fast tests.

It behaves like the real Slurm 22.05 where the driver can tell (the contract tests in
tests/slurm run the same cases against both): a held job refuses a priority and release resets
it to the computed value; requeue keeps an admin-set priority, counts a restart, resets the
submit time and closes the run in accounting; actions on a finished or unknown job report
`vanished`; a job submitted with --no-requeue refuses requeue.

Test controls: `submit`, `start`, `finish`, `forget` (a job vanishes), `schedule` (start pending
jobs by priority, like Slurm's main scheduler plus first-fit backfill), `drain`; faults:
`down = True` (every call raises SlurmUnavailable, like a stopped slurmctld), `fail_next(method,
error)`, and `before_write(callback)` (runs before the next write: a job can vanish between a
read and a write). The clock is injected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .client import check_priority, check_signal
from .model import (
    ACTIVE_STATES,
    Action,
    ActionResult,
    Association,
    Gres,
    NodeAlloc,
    Qos,
    SlurmJob,
    SlurmNode,
    SlurmRun,
)
from .slurm_errors import SlurmError, SlurmUnavailable

COMPUTED_PRIORITY = 10_000  # what the fake's "multifactor" gives every job


def dev_config(**over: str) -> dict[str, str]:
    """`scontrol show config` of the dev cluster (devconf.py), the settings fairshare checks."""
    c = {
        "ClusterName": "fairshare",
        "SLURM_VERSION": "22.05.8",
        "PriorityType": "priority/multifactor",
        "PriorityWeightAge": "1000",
        "PriorityWeightFairShare": "10000",
        "PriorityWeightQOS": "0",
        "PriorityWeightJobSize": "0",
        "PriorityWeightPartition": "0",
        "PriorityWeightAssoc": "0",
        "PriorityWeightTRES": "(null)",
        "PreemptType": "preempt/none",
        "PreemptMode": "OFF",
        "JobRequeue": "1",
        "SchedulerType": "sched/backfill",
        "SchedulerParameters": "bf_interval=5,sched_interval=5",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CORE",
        "GresTypes": "gpu",
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageEnforce": "associations,limits,qos",
        "AccountingStorageTRES": "cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu",
        "SlurmUser": "slurm(64030)",
        "MinJobAge": "300 sec",
    }
    c.update(over)
    return c


@dataclass
class _Job:
    job: SlurmJob
    held: bool = False
    admin_priority: int | None = None
    finished: bool = False
    signals: list[str] = field(default_factory=list)
    begin: float | None = None  # a requeued job may not start before this (requeue_delay_s)


class FakeSlurm:
    def __init__(
        self,
        clock: Callable[[], float],
        nodes: Sequence[SlurmNode] = (),
        config: dict[str, str] | None = None,
        associations: Sequence[Association] = (),
        qos: Sequence[Qos] = (),
        admins: dict[str, str] | None = None,
    ) -> None:
        self.clock = clock
        self.nodes: dict[str, SlurmNode] = {n.name: n for n in nodes}
        self.config = dict(config) if config is not None else dev_config()
        self.associations = list(associations)
        self.qos = list(qos)
        self.admins = dict(admins) if admins is not None else {"root": "Administrator"}
        self.jobs: dict[int, _Job] = {}
        self.runs: list[SlurmRun] = []
        self.writes: list[tuple[Action, int, str]] = []  # every write attempted (for assertions)
        self.down = False
        self._next_id = 1
        self._faults: dict[str, list[SlurmError]] = {}
        self._before_write: list[Callable[[], None]] = []
        # a requeued job waits this long (reason BeginTime) before it may start, like Slurm's
        # requeue delay; None: it keeps the reason BeginTime and `schedule` may start it at once
        self.requeue_delay_s: float | None = None

    @classmethod
    def dev(
        cls, clock: Callable[[], float], accounts: Iterable[str] = ("product", "research", "platform")
    ) -> FakeSlurm:
        """Like `fairshare slurm dev-cluster up` with examples/slurm-policy.yaml: 4 x 8 a100."""
        nodes = [
            SlurmNode(f"n{i}", "idle", (), 16, 0, 64000, (Gres("gpu", "a100", 8),), 0, ("gpu",), "")
            for i in range(1, 5)
        ]
        assocs = [Association("fairshare", "root", None, None, "1", ("normal",), None)]
        for a in accounts:
            assocs.append(Association("fairshare", a, None, "root", "1", ("normal",), None))
            assocs.append(Association("fairshare", a, "root", None, "1", ("normal",), None))
        qos = [Qos(q, 0, (), "cluster", ()) for q in ("debug", "eval", "normal", "train")]
        return cls(clock, nodes, dev_config(), assocs, qos)

    # ------------------------------------------------------------------ faults

    def fail_next(self, method: str, error: SlurmError) -> None:
        """The next call of `method` (e.g. "read_jobs", "set_priority") raises `error`."""
        self._faults.setdefault(method, []).append(error)

    def before_write(self, callback: Callable[[], None]) -> None:
        self._before_write.append(callback)

    def _enter(self, method: str, args: Sequence[str]) -> None:
        if self.down:
            raise SlurmUnavailable(args, 1, "Unable to contact slurm controller (connect failure)")
        queue = self._faults.get(method)
        if queue:
            raise queue.pop(0)

    def _write(self, action: Action, job_id: int, detail: str, args: Sequence[str]) -> _Job | ActionResult:
        self._enter(action if action != "priority" else "set_priority", args)
        while self._before_write:
            self._before_write.pop(0)()
        self.writes.append((action, job_id, detail))
        rec = self.jobs.get(job_id)
        if rec is None:
            return ActionResult(job_id, action, "vanished", f"Invalid job id specified for job {job_id}")
        if rec.finished:
            return ActionResult(job_id, action, "vanished", f"Job has already finished for job {job_id}")
        return rec

    # ------------------------------------------------------------------ reads

    def read_nodes(self) -> list[SlurmNode]:
        """Nodes with their GPUs and CPUs in use and idle/mixed/allocated state, like sinfo."""
        self._enter("read_nodes", ("sinfo", "--json"))
        gpus: dict[str, int] = dict.fromkeys(self.nodes, 0)
        cpus: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for r in self.jobs.values():
            if r.job.running and not r.finished:
                for a in r.job.alloc:
                    if a.node in gpus:  # not a node removed while the job runs there
                        gpus[a.node] += a.gpus
                        cpus[a.node] += a.cpus
        out = []
        for name in sorted(self.nodes):
            n = self.nodes[name]
            state = n.state
            if state in ("idle", "mixed", "allocated"):
                state = (
                    "idle"
                    if not gpus[name] and not cpus[name]
                    else "allocated"
                    if gpus[name] >= n.gpus
                    else "mixed"
                )
            out.append(dataclasses.replace(n, gpus_used=gpus[name], alloc_cpus=cpus[name], state=state))
        return out

    def read_jobs(self) -> list[SlurmJob]:
        self._enter("read_jobs", ("squeue", "--json"))
        self._begin_passed()
        return [
            r.job for _, r in sorted(self.jobs.items()) if r.job.state in ACTIVE_STATES and not r.finished
        ]

    def read_runs(self, since: float, until: float) -> list[SlurmRun]:
        self._enter("read_runs", ("sacct", "--json"))
        if until < since:
            raise ValueError(f"until ({until}) is before since ({since})")
        return sorted(
            (r for r in self.runs if r.start <= until and (r.end is None or r.end >= since)),
            key=lambda r: (r.job_id, r.start),
        )

    def read_config(self) -> dict[str, str]:
        self._enter("read_config", ("scontrol", "show", "config"))
        return dict(self.config)

    def read_associations(self) -> list[Association]:
        self._enter("read_associations", ("sacctmgr", "show", "assoc"))
        return list(self.associations)

    def read_qos(self) -> list[Qos]:
        self._enter("read_qos", ("sacctmgr", "show", "qos"))
        return sorted(self.qos, key=lambda q: q.name)

    def admin_level(self, user: str) -> str | None:
        self._enter("admin_level", ("sacctmgr", "show", "user", user))
        return self.admins.get(user)

    # ------------------------------------------------------------------ writes

    def set_priority(self, job_id: int, priority: int) -> ActionResult:
        check_priority(priority)
        rec = self._write("priority", job_id, str(priority), ("scontrol", "update", f"JobId={job_id}"))
        if isinstance(rec, ActionResult):
            return rec
        if rec.held:
            return ActionResult(job_id, "priority", "held", "Job is in held state, pending scheduler release")
        rec.admin_priority = priority
        self._set(rec, priority=priority)
        return ActionResult(job_id, "priority", "applied")

    def hold(self, job_id: int) -> ActionResult:
        rec = self._write("hold", job_id, "", ("scontrol", "hold", str(job_id)))
        if isinstance(rec, ActionResult):
            return rec
        rec.held, rec.admin_priority = True, None
        if rec.job.pending:
            self._set(rec, priority=0, reason="JobHeldAdmin")
        return ActionResult(job_id, "hold", "applied")

    def release(self, job_id: int) -> ActionResult:
        rec = self._write("release", job_id, "", ("scontrol", "release", str(job_id)))
        if isinstance(rec, ActionResult):
            return rec
        if rec.held:
            rec.held = False
            if rec.job.pending:  # release resets the priority to the computed value
                self._set(rec, priority=COMPUTED_PRIORITY, reason="Priority")
        return ActionResult(job_id, "release", "applied")

    def requeue(self, job_id: int) -> ActionResult:
        rec = self._write("requeue", job_id, "", ("scontrol", "requeue", str(job_id)))
        if isinstance(rec, ActionResult):
            return rec
        if not rec.job.running:
            return ActionResult(job_id, "requeue", "not_running", f"job state {rec.job.state}")
        if not rec.job.requeue:
            return ActionResult(job_id, "requeue", "refused", "Requested operation is presently disabled")
        now = int(self.clock())
        self._close_run(rec, now, "REQUEUED")
        if self.requeue_delay_s is not None:
            rec.begin = now + self.requeue_delay_s
        prio = 0 if rec.held else (rec.admin_priority or COMPUTED_PRIORITY)
        self._set(
            rec,
            state="PENDING",
            reason="JobHeldAdmin" if rec.held else "BeginTime",
            start_time=None,
            alloc=(),
            restarts=rec.job.restarts + 1,
            submit_time=now,
            priority=prio,
        )
        return ActionResult(job_id, "requeue", "applied")

    def signal(self, job_id: int, signal: str, batch_only: bool = False) -> ActionResult:
        name = check_signal(signal)
        rec = self._write("signal", job_id, name, ("scancel", f"--signal={name}", str(job_id)))
        if isinstance(rec, ActionResult):
            return rec
        if not rec.job.running:
            return ActionResult(
                job_id, "signal", "not_running", "Job can not be altered now, try again later"
            )
        rec.signals.append(name)
        return ActionResult(job_id, "signal", "applied")

    # ------------------------------------------------------------------ test controls

    def _set(self, rec: _Job, **changes: object) -> None:
        rec.job = dataclasses.replace(rec.job, **changes)  # type: ignore[arg-type]

    def submit(
        self,
        account: str,
        gpus: int,
        nodes: int = 1,
        *,
        gpu_type: str | None = None,
        time_limit_s: int | None = 3600,
        comment: str = "",
        qos: str = "normal",
        user: str = "root",
        partition: str = "gpu",
        hold: bool = False,
        requeue: bool = True,
        cpus: int | None = None,
        deadline: int | None = None,
    ) -> int:
        job_id = self._next_id
        self._next_id += 1
        job = SlurmJob(
            job_id=job_id,
            name="wrap",
            user=user,
            account=account,
            partition=partition,
            qos=qos,
            state="PENDING",
            reason="JobHeldUser" if hold else "Priority",
            priority=0 if hold else COMPUTED_PRIORITY,
            submit_time=int(self.clock()),
            start_time=None,
            time_limit_s=time_limit_s,
            comment=comment,
            nodes=nodes,
            gpus=gpus,
            gpu_type=gpu_type,
            cpus=cpus if cpus is not None else nodes,
            memory_mb=None,
            alloc=(),
            restarts=0,
            requeue=requeue,
            deadline=deadline,
            array_job_id=None,
            array_task_id=None,
            het_job_id=None,
        )
        self.jobs[job_id] = _Job(job, held=hold)
        return job_id

    def _free(self) -> dict[str, int]:
        used: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for r in self.jobs.values():
            if r.job.running and not r.finished:
                for a in r.job.alloc:
                    used[a.node] = used.get(a.node, 0) + a.gpus
        return {n: node.gpus - used[n] for n, node in self.nodes.items()}

    def fit(self, job_id: int) -> list[str] | None:
        """Nodes the job would get now (its GPUs spread evenly), or None when it does not fit."""
        j = self.jobs[job_id].job
        per = j.gpus // j.nodes
        free = self._free()
        ok = [
            n
            for n in sorted(self.nodes)
            if free[n] >= per
            and not self.nodes[n].drain
            and not self.nodes[n].down
            and j.partition in self.nodes[n].partitions
            and (j.gpu_type is None or j.gpu_type in self.nodes[n].gpu_types)
        ]
        return ok[: j.nodes] if len(ok) >= j.nodes else None

    def start(self, job_id: int, nodes: Sequence[str] | None = None) -> None:
        rec = self.jobs[job_id]
        if not rec.job.pending or rec.held:
            raise ValueError(f"job {job_id} is {rec.job.state}{' (held)' if rec.held else ''}: cannot start")
        chosen = list(nodes) if nodes is not None else self.fit(job_id)
        if not chosen:
            raise ValueError(f"job {job_id} does not fit")
        per = rec.job.gpus // len(chosen)
        alloc = tuple(
            NodeAlloc(n, per, self.nodes[n].gpu_types[0], rec.job.cpus // len(chosen)) for n in chosen
        )
        now = int(self.clock())
        self._set(rec, state="RUNNING", reason="None", start_time=now, alloc=alloc)
        self.runs.append(
            SlurmRun(
                job_id,
                rec.job.account,
                rec.job.user,
                rec.job.partition,
                rec.job.qos,
                "RUNNING",
                now,
                None,
                tuple(chosen),
                rec.job.gpus,
                rec.job.cpus,
                None,
                rec.job.submit_time,
                rec.job.time_limit_s,
                rec.job.comment,
            )
        )

    def _close_run(self, rec: _Job, t: int, state: str) -> None:
        for i, r in enumerate(self.runs):
            if r.job_id == rec.job.job_id and r.end is None:
                self.runs[i] = dataclasses.replace(r, end=t, state=state)

    def finish(self, job_id: int, state: str = "COMPLETED") -> None:
        rec = self.jobs[job_id]
        self._close_run(rec, int(self.clock()), state)
        rec.finished = True
        self._set(rec, state=state, alloc=(), reason="None")

    def forget(self, job_id: int) -> None:
        """The job vanishes from Slurm entirely (purged after MinJobAge, or cancelled and purged)."""
        rec = self.jobs.pop(job_id)
        self._close_run(rec, int(self.clock()), "CANCELLED")

    def add_node(self, name: str, gpus: int = 8, gpu_type: str = "a100", cpus: int = 16) -> None:
        """A node joins the cluster (slurm.conf changed and the controller reconfigured), idle."""
        self.nodes[name] = SlurmNode(
            name, "idle", (), cpus, 0, 64000, (Gres("gpu", gpu_type, gpus),), 0, ("gpu",), ""
        )

    def remove_node(self, name: str) -> None:
        """A node leaves the cluster (sinfo no longer lists it); jobs on it keep running until
        ended here (finish, requeue)."""
        del self.nodes[name]

    def drain(self, node: str, reason: str = "maintenance") -> None:
        n = self.nodes[node]
        self.nodes[node] = dataclasses.replace(n, flags=(*n.flags, "DRAIN"), reason=reason)

    def schedule(self, backfill: bool = True) -> list[int]:
        """Start pending jobs in priority order (ties: submit time, then id). Without backfill it
        stops at the first job that does not fit, like Slurm's main scheduler; with it, later jobs
        that fit start too (first fit)."""
        started = []
        self._begin_passed()
        queue = sorted(
            (
                r.job
                for r in self.jobs.values()
                if r.job.pending and not r.held and not r.finished and r.begin is None
            ),
            key=lambda j: (-j.priority, j.submit_time, j.job_id),
        )
        for j in queue:
            if self.fit(j.job_id) is not None:
                self.start(j.job_id)
                started.append(j.job_id)
            elif not backfill:
                break
        return started

    def _begin_passed(self) -> None:
        """Requeued jobs whose begin time has come are eligible again (reason Priority)."""
        now = self.clock()
        for rec in self.jobs.values():
            if rec.begin is not None and rec.begin <= now:
                rec.begin = None
                if rec.job.pending and rec.job.reason == "BeginTime":
                    self._set(rec, reason="Priority")

    def signals_of(self, job_id: int) -> list[str]:
        return list(self.jobs[job_id].signals)
