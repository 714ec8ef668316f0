"""What the Slurm backend reads and returns, as plain frozen dataclasses (Slurm's own terms).

Times are Unix seconds (Slurm's clock); sizes are Slurm's (memory in MB). The policy mapping
(`mapping.py`) turns these into the engine's terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
# states of a job that still holds or may again hold resources
ACTIVE_STATES = frozenset(
    {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "RESIZING"}
)
ALLOCATED_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"})


@dataclass(frozen=True, slots=True)
class Gres:
    """One gres entry such as `gpu:a100:8` (type None when Slurm has none: `gpu:8`)."""

    name: str
    type: str | None
    count: int


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str  # base state in lower case: idle, mixed, allocated, down, drained, ...
    flags: tuple[str, ...]  # DRAIN, COMPLETING, NOT_RESPONDING, MAINTENANCE, ...
    cpus: int
    alloc_cpus: int
    memory_mb: int
    gres: tuple[Gres, ...]  # configured generic resources
    gpus_used: int
    partitions: tuple[str, ...]
    reason: str

    @property
    def gpus(self) -> int:
        return sum(g.count for g in self.gres if g.name == "gpu")

    @property
    def gpu_types(self) -> tuple[str | None, ...]:
        return tuple(g.type for g in self.gres if g.name == "gpu")

    @property
    def drain(self) -> bool:
        """Draining or drained: no new job lands here (running ones may finish)."""
        return "DRAIN" in self.flags or self.state in ("drained", "draining")

    @property
    def down(self) -> bool:
        return self.state in ("down", "future", "unknown") or "NOT_RESPONDING" in self.flags


@dataclass(frozen=True, slots=True)
class NodeAlloc:
    """GPUs (and CPUs) a running job holds on one node."""

    node: str
    gpus: int
    gpu_type: str | None
    cpus: int = 0


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as squeue reports it. `gpus` is the total over its nodes."""

    job_id: int
    name: str
    user: str
    account: str
    partition: str
    qos: str
    state: str  # PENDING, RUNNING, ... (upper case, as Slurm prints it)
    reason: str  # state_reason: None, Resources, Priority, JobHeldUser, ...
    priority: int
    submit_time: int  # reset by Slurm on requeue (see restarts)
    start_time: int | None  # the current run's start (running jobs); None when not running
    time_limit_s: int | None  # None: no limit (INFINITE)
    comment: str
    nodes: int  # requested (pending) or allocated (running) node count
    gpus: int
    gpu_type: str | None  # the type asked for in the gres request, None: any
    cpus: int
    memory_mb: int | None  # requested or allocated memory over all nodes, None: unknown
    alloc: tuple[NodeAlloc, ...]  # running jobs: per node
    restarts: int
    requeue: bool  # whether Slurm allows requeueing it
    deadline: int | None
    array_job_id: int | None
    array_task_id: int | None
    het_job_id: int | None

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and (self.reason in HELD_REASONS or self.priority == 0)

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def running(self) -> bool:
        return self.state in ALLOCATED_STATES


@dataclass(frozen=True, slots=True)
class SlurmRun:
    """One run of a job from accounting (`sacct -D`: a requeued job has one record per run)."""

    job_id: int
    account: str
    user: str
    partition: str
    qos: str
    state: str
    start: int
    end: int | None  # None: still running
    nodes: tuple[str, ...]
    gpus: int
    cpus: int
    memory_mb: int | None  # allocated memory, None when Slurm does not allocate memory
    # what a run's job asked for, so a job seen only in accounting (it started and ended while
    # fairshare was not looking) can still be charged to the right class
    submit: int | None = None
    time_limit_s: int | None = None
    comment: str = ""


@dataclass(frozen=True, slots=True)
class Association:
    """A row of `sacctmgr show assoc`: an account (user None) or a user's association in it."""

    cluster: str
    account: str
    user: str | None
    parent: str | None  # the parent account of an account row
    shares: str  # Fairshare: a number or "parent"
    qos: tuple[str, ...]
    default_qos: str | None


@dataclass(frozen=True, slots=True)
class Qos:
    name: str
    priority: int
    preempt: tuple[str, ...]
    preempt_mode: str
    flags: tuple[str, ...]


ActionOutcome = Literal["applied", "vanished", "held", "not_pending", "not_running", "refused"]
Action = Literal["priority", "hold", "release", "requeue", "signal"]


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What one control action did to one job.

    applied       done
    vanished      the job is gone or finished (between the read and this write)
    held          the job is held, so Slurm refuses a priority (release resets it to computed)
    not_pending   the action needs a pending job (release of a running job)
    not_running   the action needs a running job (requeue/signal of a pending one)
    refused       Slurm refused for this job (e.g. requeue of a job submitted with --no-requeue)
    """

    job_id: int
    action: Action
    outcome: ActionOutcome
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "applied"
