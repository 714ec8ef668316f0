"""The narrow interface between the scheduler loop and a cluster (DESIGN §5 "Clusters").

A backend reports what happened on the cluster as *observations*, each with the instant it happened
and a key naming it (the loop journals a key once, so an observation reported twice is applied
once), and carries out the loop's decisions after the loop has committed them:

    nodes()                          the cluster's nodes at start, in the order node indexes
                                     refer to (a new journal's); later changes are observations
    observe(since, until)            observations with since <= t <= until, in order; the same
                                     observation may come again (the loop skips journaled keys)
    next_time()                      when the backend next has something to report (None: poll)
    resume(t)                        the loop starts (or restarts) at its last committed instant t
    act(preempts, starts, order, t)  preempt (requeue) and start at instant t; returns the
                                     confirmations (Preempted, Started) as observations, and what
                                     failed. Called after a pass that preempts or starts; with
                                     `places_jobs` False (Slurm) after every pass: starts carry no
                                     nodes to obey, `order` is the fair-share order to set (as
                                     priorities), and the backend reports starts as it observes them
    submit(job, spec, t, by), cancel(job, t, by)  (demo and fake) a user's submission or cancellation

A backend that places jobs (`places_jobs`) keeps its node indexes: its nodes must be the journal's.
One that does not (Slurm) reports node changes as `NodesChanged` (the cluster's nodes now, all of
them; ServingState.set_nodes keeps every node's index and appends new ones).

`observe` raises `service_errors.ClusterUnavailable` when the cluster cannot be read (its controller is
down, a command timed out): the loop skips that cycle and retries with backoff, keeping its state
and its lock. `Noted` observations and an outcome's `records` are audited as they are.

Implementations: `demo.DemoCluster` (the simulator's truth on an accelerated clock, its state in the
database as a real cluster keeps its own), `fake.FakeCluster` (scripted, for tests) and
`slurm_cluster.SlurmCluster` (a real Slurm through fairshare.slurm's client; it reads the engine
through `EngineView`, what a backend may read of the loop's live engine).

A submission's `spec` is a workload row (FORMATS.md job columns: group, class, gpus, nodes,
gpu_type, cpus, mem_gb, estimate, label, deadline, protected, resumable, checkpoint; no `work`):
the loop resolves it against the policy in force into the core's JobRequest.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...core.model import Node
from ...core.placement import Alloc
from ...core.snapshot import Decisions, PendingQueues, Preempt, RunView, Start
from ...engine.fleet import Fleet
from ...engine.setup import node_json
from ...inputs.workload import Job


class JobRecordView(Protocol):
    """What a backend reads of the loop's record of a job."""

    @property
    def last_start(self) -> float | None: ...


class StateView(Protocol):
    """What a backend that does not place jobs (Slurm) reads of the live engine's state: the
    nodes and fleet, the GPU rates, pending and running jobs."""

    @property
    def nodes(self) -> tuple[Node, ...]: ...
    @property
    def fleet(self) -> Fleet: ...
    @property
    def rates(self) -> Mapping[str, float]: ...
    @property
    def pending(self) -> PendingQueues: ...
    @property
    def running(self) -> Mapping[str, RunView]: ...


class EngineView(Protocol):
    """What a backend that does not place jobs (Slurm) reads of the loop's live engine: the
    instant, its state (StateView), the job records, the submissions rejected and the jobs a
    policy change cancelled, the policy version in force."""

    @property
    def t(self) -> float: ...
    @property
    def state(self) -> StateView: ...
    @property
    def info(self) -> Mapping[str, JobRecordView]: ...
    @property
    def rejected(self) -> Mapping[str, str]: ...
    @property
    def cancelled_by_policy(self) -> Mapping[str, str]: ...
    @property
    def policy_sha(self) -> str: ...


@dataclass(frozen=True)
class Observation:
    t: float

    rank = 9  # order within one instant (FORMATS.md: finishes, drains, submits, then the rest)

    @property
    def key(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Finished(Observation):
    job: str
    rank = 0

    @property
    def key(self) -> str:
        return f"finish:{self.job}:{self.t!r}"


@dataclass(frozen=True)
class Cancelled(Observation):
    job: str
    by: str = ""
    rank = 0

    @property
    def key(self) -> str:
        return f"cancel:{self.job}"


@dataclass(frozen=True)
class Drained(Observation):
    nodes: tuple[int, ...]
    deadline: float
    rank = 1

    @property
    def key(self) -> str:
        return f"drain:{','.join(map(str, self.nodes))}:{self.t!r}"


@dataclass(frozen=True)
class Undrained(Observation):
    nodes: tuple[int, ...]
    rank = 1

    @property
    def key(self) -> str:
        return f"undrain:{','.join(map(str, self.nodes))}:{self.t!r}"


@dataclass(frozen=True)
class NodesChanged(Observation):
    """The cluster's nodes now, all of them, schedulable or not (ServingState.set_nodes: new ones
    appended, missing ones out of service, returning ones back). Keyed by their content."""

    nodes: tuple[Node, ...]
    rank = 1

    @property
    def key(self) -> str:
        text = "\n".join(repr(sorted(node_json(n).items())) for n in self.nodes)
        return f"nodes:{hashlib.sha256(text.encode()).hexdigest()[:16]}:{self.t!r}"


@dataclass(frozen=True)
class Submission:
    """A submission resolved once against the policy in force (an API submission: the loop's
    `resolve_submission`): the Job (its request and the demo's truth) and what it was resolved
    against, the policy version and the cluster's nodes in service."""

    job: Job
    policy_sha: str
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Submitted(Observation):
    """A job submitted: its spec (workload columns) and, when the cluster was handed one, the
    submission already resolved (the loop takes its request as it is while the policy version
    and the nodes are the same)."""

    job: str
    spec: Mapping[str, Any] = field(default_factory=dict)
    resolved: Submission | None = None
    rank = 2

    @property
    def key(self) -> str:
        return f"submit:{self.job}"


@dataclass(frozen=True)
class Hung(Observation):
    job: str
    rank = 3

    @property
    def key(self) -> str:
        return f"hang:{self.job}:{self.t!r}"


@dataclass(frozen=True)
class Preempted(Observation):
    job: str
    reason: str
    by: str | None
    lost_gpu_s: float
    kept: float
    rank = 4

    @property
    def key(self) -> str:
        return f"preempt:{self.job}:{self.t!r}"


@dataclass(frozen=True)
class Started(Observation):
    job: str
    alloc: Alloc
    charge: float
    rank = 5

    @property
    def key(self) -> str:
        return f"start:{self.job}:{self.t!r}"


@dataclass(frozen=True)
class Noted(Observation):
    """Something the cluster reports for the audit only, not an engine event (an account no leaf
    charges, where the cluster placed a job other than the core would have, ...). The backend
    reports each once."""

    kind: str
    job: str | None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    rank = 8

    @property
    def key(self) -> str:
        return f"note:{self.kind}:{self.job}:{self.t!r}"


def in_order(observations: Sequence[Observation]) -> list[Observation]:
    return sorted(observations, key=lambda o: (o.t, o.rank))


@dataclass(frozen=True)
class Failure:
    """A decision the cluster did not carry out (the job vanished, nodes went away, ...)."""

    job: str
    action: str  # start | preempt
    reason: str


@dataclass(frozen=True)
class Record:
    """An action of the backend's own to audit (priorities set, a requeue skipped, a dry run's
    intent), with its evidence."""

    kind: str
    job: str | None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    confirmed: list[Observation]
    failed: list[Failure]
    records: list[Record] = field(default_factory=list)
    retry: bool = False  # the cluster could not take all of it: ask for a pass again next cycle


class Backend(Protocol):
    name: str
    places_jobs: bool
    accepts_submissions: bool

    def nodes(self) -> tuple[Node, ...]: ...

    def observe(self, since: float, until: float) -> list[Observation]: ...

    def next_time(self) -> float | None: ...

    def not_startable(self) -> frozenset[str]:
        """Pending jobs the cluster may not start now whatever a pass decides (Slurm: held, or
        waiting for a dependency or a begin time, e.g. just requeued), as of the last observe."""
        ...

    def resume(self, t: float) -> None:
        """The loop (re)starts with everything up to instant t committed; new submissions are
        stamped no earlier than t."""
        ...

    def act(
        self, preempts: Sequence[Preempt], starts: Sequence[Start], order: Sequence[str], t: float
    ) -> Outcome: ...

    def submit(self, job: str, spec: Mapping[str, Any], t: float, by: str = "api") -> float:
        """Accept a submission (demo, fake); returns its instant. Raises ServiceError if refused."""
        ...

    def cancel(self, job: str, t: float, by: str) -> None: ...


def startable(d: Decisions, blocked: frozenset[str]) -> Decisions:
    """A pass's decisions without the starts of jobs the cluster may not start now, nor the
    preemptions made for them: they would be audited every pass and never happen. The order
    keeps them (their priorities are in place when they may run)."""
    starts = tuple(s for s in d.starts if s.job not in blocked)
    preempts = tuple(p for p in d.preempts if p.by not in blocked)
    if len(starts) == len(d.starts) and len(preempts) == len(d.preempts):
        return d
    return dataclasses.replace(d, starts=starts, preempts=preempts)
