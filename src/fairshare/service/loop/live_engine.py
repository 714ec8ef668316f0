"""The engine state as the live service holds it: `LiveEngine`, its journal replay, its job records.

`LiveEngine` holds the engine state (`LiveEngine.state`, a fairshare.engine.ServingState) and adds
what a live driver changes that a replay never does, each a journaled call like the engine's own,
so a restart rebuilds it exactly:

    set_policy(sha)            a new policy version applies from now: tree, shares, knobs, classes,
                               GPU rates, window and the strategy's preemption switch
                               (ServingState.reconfigure; pending jobs of a removed group or class
                               are cancelled, runs are never preempted by it)
    set_exceptions([...])      the share exceptions in force from now (policy file's and stored ones)
    reject(job, reason)        a submission the policy in force cannot take

The cluster's node changes are the engine's own `set_nodes` (fairshare.engine.nodes);
`change_nodes` applies one and says what to audit. The engine calls a job record follows (begin,
submit, started, finished, preempted, cancelled) go through LiveEngine; every other engine call and
read goes to `LiveEngine.state`.

(A user's cancellation is the engine's own `cancelled`.) It also keeps, from the same calls, a
record per job (submitted, first and last start, end, runs, preemptions) for the API, and
integrates *unallocated* usage per tree node over the window (usage above the node's static
entitlement, static fraction x C(t), at each instant) with a listener.

Retention: a job's record (and a rejected submission's) is dropped once it ended more than the
retention period ago (`retention`: the policy's window, after which its usage no longer counts),
at the first `begin` after that: a journaled call, so a rebuild drops the same records at the
same instant. The audit keeps its decisions for ever; the loop dedupes a submission reported
again after its record is gone by the journal's keys (fairshare.service.loop.retention).

`replay(engine, events)` applies stored journal events as `EngineState.rebuild` does (the recovery path
and a follower's tail); `rebuild(...)` makes a fresh engine from the journal's first `setup` record.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from ...core.model import JobRequest, Node, ResolvedException
from ...core.placement import Alloc
from ...core.snapshot import RunView
from ...core.strategies import Strategy, get_strategy
from ...core.tree import TreeIndex
from ...engine.events import Event
from ...engine.ledger import Ledger
from ...engine.reconfigure import Reconfigured, remap_ledger
from ...engine.serving import ServingState
from ...engine.setup import EngineSetup, node_json, node_of_json
from ...engine.state import EngineState
from ...inputs.policy import Policy

SETUP = "setup"  # the journal's first record: policy sha, nodes, strategy (not an engine call)


def _detached(sha: str) -> Policy:
    """The policy lookup of an engine loaded from a checkpoint until its loader attaches one."""
    raise RuntimeError(f"policy version {sha[:12]}: this engine's policy lookup is not attached")


class ExceptionInForce(TypedDict):
    """A share exception in force, as the loop applies, journals and shows it (`set_exceptions`)."""

    id: str  # policy:<k> (the policy file's k-th) or api:<id> (a stored one)
    group: str
    extra_share: float
    expires_t: float
    approver: str | None
    reason: str | None


@dataclass
class JobInfo:
    """What the API shows of a job beyond the engine's own state."""

    request: JobRequest
    submitted: float
    state: str = "pending"  # pending | running | done | cancelled
    first_start: float | None = None
    last_start: float | None = None
    ended: float | None = None
    runs: int = 0
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    nodes: tuple[int, ...] = ()
    charge: float = 0.0


class Unallocated:
    """Listener: per tree node, charged usage above its static entitlement (static fraction x C)
    integrated over the rolling window, in a ring like the ledger's."""

    def __init__(self, tree: TreeIndex, window: float) -> None:
        self.frac = np.array(tree.static_frac, dtype=np.float64)
        self.ledger = Ledger(len(tree.paths), window)
        self.rate = np.zeros(len(tree.paths))
        self.paths = tree.paths

    def rates_changed(self, engine: EngineState) -> None:
        used = np.asarray(engine.used_list, dtype=np.float64)
        self.rate = np.maximum(0.0, used - self.frac * engine.fleet.capacity)
        self.ledger.set_rates(self.rate, np.zeros_like(self.rate))

    def interval(self, t0: float, t1: float) -> None:
        self.ledger.advance(t1)


class LiveEngine:
    """A live driver's engine: it holds the engine state (`state`, a ServingState) and adds the live
    driver's calls and job records (see the module's docstring). The calls a job record follows
    (begin, submit, started, finished, preempted, cancelled) go through this class; every other
    engine call and read goes to `state`."""

    # the journaled calls replayed through this class (the others are the state's own)
    CALLS = frozenset(
        {
            "begin",
            "submit",
            "started",
            "finished",
            "preempted",
            "cancelled",
            "set_policy",
            "set_exceptions",
            "reject",
        }
    )

    def __init__(
        self,
        setup: EngineSetup,
        strategy: Strategy,
        policies: Callable[[str], Policy],
        journal: list[Event] | None = None,
        policy_sha: str = "",
    ) -> None:
        self.unallocated = Unallocated(setup.tree, setup.window)
        self.state = ServingState(setup, strategy, self.unallocated, journal)
        self.policies = policies  # sha256 -> the stored policy version (parsed)
        self.policy_sha = policy_sha
        self.info: dict[str, JobInfo] = {}
        self.submits = 0  # submit order: the seq of the next job
        self.first_starts: deque[tuple[float, str, str, float]] = deque()  # (t, class, group, wait)
        self.exceptions_in_force: list[ExceptionInForce] = []
        self.rejected: dict[str, str] = {}
        self.cancelled_by_policy: dict[str, str] = {}  # job -> reason (a policy change cancelled it)
        self.ended_q: deque[tuple[float, str]] = deque()  # (when, job): ended or rejected, in order

    def __deepcopy__(self, memo: dict[int, Any]) -> LiveEngine:
        # policies is a function (shared), the rest copied as usual
        cls = type(self)
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            setattr(new, k, v if k == "policies" else copy.deepcopy(v, memo))
        return new

    def __getstate__(self) -> dict[str, Any]:
        # a checkpoint (fairshare.service.loop.checkpoint): the state without the driver's journal buffer
        # and policy lookup (a function of the loop), which the loader attaches again
        out = dict(self.__dict__)
        engine = copy.copy(self.state)
        engine.journal = None
        out["state"] = engine
        out["policies"] = _detached
        return out

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def t(self) -> float:
        """The engine's instant."""
        return self.state.t

    def replay(self, events: Iterable[Event]) -> None:
        """Apply recorded journal events, each through the call that recorded it (this class's for
        the calls it records, the state's for the others)."""
        state = self.state
        for ev in events:
            if ev.kind in self.CALLS:
                getattr(self, ev.kind)(*ev.args)
            else:
                state.replay((ev,))

    # ------------------------------------------------------------------ retention
    @property
    def retention(self) -> float:
        """How long a job's record is kept after it ended: the policy's window."""
        return self.state.setup.window

    def begin(self, t: float) -> None:
        """The engine's `begin` (its timers due by t fire), then the records past retention dropped."""
        self.state.begin(t)
        q = self.ended_q
        if q and q[0][0] < self.state.t - self.retention:
            self._prune(self.state.t - self.retention)

    def _prune(self, before: float) -> None:
        """Drop the records of jobs that ended (or were rejected) before `before`."""
        q = self.ended_q
        while q and q[0][0] < before:
            when, job_id = q.popleft()
            rec = self.info.get(job_id)
            if rec is None:
                self.rejected.pop(job_id, None)
            elif rec.state in ("done", "cancelled") and rec.ended == when:  # else it ended again later
                del self.info[job_id]

    def _ended(self, rec: JobInfo, state: str) -> None:
        rec.state, rec.ended = state, self.state.t
        self.ended_q.append((self.state.t, rec.request.id))

    # ------------------------------------------------------------------ job records
    def submit(self, job: JobRequest) -> None:
        """The engine's `submit`, recorded."""
        self.state.submit(job)
        self.info[job.id] = JobInfo(job, self.state.t)
        self.submits += 1

    def started(self, job_id: str, alloc: Alloc, charge: float) -> RunView:
        """The engine's `started`, recorded."""
        view = self.state.started(job_id, alloc, charge)
        rec = self.info.get(job_id)
        if rec is not None:
            t = self.state.t
            rec.state, rec.runs, rec.last_start = "running", rec.runs + 1, t
            if rec.first_start is None:
                rec.first_start = t
                self.first_starts.append((t, rec.request.cls, rec.request.group, t - rec.submitted))
                while self.first_starts and self.first_starts[0][0] < t - self.state.setup.window:
                    self.first_starts.popleft()
            rec.nodes, rec.charge = tuple(i for i, _ in alloc), charge
        return view

    def finished(self, job_id: str) -> RunView:
        """The engine's `finished`, recorded."""
        view = self.state.finished(job_id)
        rec = self.info.get(job_id)
        if rec is not None and rec.state != "cancelled":
            self._ended(rec, "done")
        return view

    def preempted(self, job_id: str, reason: str, by: str | None, lost_gpu_s: float, kept: float) -> RunView:
        """The engine's `preempted`, recorded."""
        view = self.state.preempted(job_id, reason, by, lost_gpu_s, kept)
        rec = self.info.get(job_id)
        if rec is not None:
            rec.state, rec.preemptions, rec.nodes = "pending", rec.preemptions + 1, ()
            rec.lost_gpu_s += lost_gpu_s
        return view

    # ------------------------------------------------------------------ the live driver's calls
    def cancelled(self, job_id: str) -> None:
        """A job is withdrawn: a pending one leaves the queue, a running one ends (charged until now)."""
        self.state.cancelled(job_id)
        rec = self.info.get(job_id)
        if rec is not None:
            self._ended(rec, "cancelled")
            rec.nodes = ()

    def _log(self, kind: str, *args: Any) -> None:
        if self.state.journal is not None:
            self.state.journal.append(Event(kind, args))

    def set_policy(self, sha: str) -> Reconfigured:
        """A new policy version applies from now, whatever it changes (ServingState.reconfigure's
        rules: usage carried by tree path, pending jobs of a removed group or class cancelled,
        running ones never preempted by it). The exceptions in force are placed on its tree."""
        self._log("set_policy", sha)
        pol = self.policies(sha)
        e = self.state
        setup = setup_of(pol, e.nodes)
        setup = dataclasses.replace(setup, exceptions=self._resolved(setup.tree, self.exceptions_in_force))
        self.policy_sha = sha
        done = e.reconfigure(setup, journaled=False)
        self.unallocated.frac = np.array(setup.tree.static_frac, dtype=np.float64)
        where = setup.tree.index()
        remap = [where.get(p, -1) for p in self.unallocated.paths]
        self.unallocated.ledger = remap_ledger(self.unallocated.ledger, remap, len(where), setup.window)
        self.unallocated.rate = np.zeros(len(where))
        self.unallocated.paths = setup.tree.paths
        for job_id, reason in done.rejected:
            self.cancelled_by_policy[job_id] = reason
            rec = self.info.get(job_id)
            if rec is not None:
                self._ended(rec, "cancelled")
        for job_id in set(self.info) & (set(e.pending.jobs) | set(e.running)):
            rec = self.info[job_id]
            job = e.pending.jobs.get(job_id) or e.running[job_id].job
            rec.request = job
        return done

    def started_charge(self, view: RunView) -> float:
        """The charge rate a run started with (its usage record's: a policy change since may charge
        it at new GPU rates, or to another node, in the ledger)."""
        rec = self.info.get(view.job.id)
        return rec.charge if rec is not None and rec.last_start == view.t0 else view.charge

    def set_exceptions(self, exceptions: Sequence[ExceptionInForce]) -> None:
        """The share exceptions in force from now: [{id, group, extra_share, expires_t, approver,
        reason}] (their expiry instants wake the engine)."""
        self._log("set_exceptions", [dict(e) for e in exceptions])
        self.exceptions_in_force = [e.copy() for e in exceptions]
        self.state.adopt_exceptions(self._resolved(self.state.tree, exceptions))

    @staticmethod
    def _resolved(tree: TreeIndex, exceptions: Sequence[ExceptionInForce]) -> tuple[ResolvedException, ...]:
        idx = tree.index()
        return tuple(
            ResolvedException(
                idx[e["group"]],
                str(e["group"]),
                float(e["extra_share"]),
                float(e["expires_t"]),
                e.get("approver"),
                e.get("reason"),
            )
            for e in exceptions
            if e["group"] in idx
        )

    def reject(self, job_id: str, reason: str) -> None:
        """A submission the policy in force refuses (unknown group or class, fits no node, ...)."""
        self._log("reject", job_id, reason)
        self.rejected[job_id] = reason
        self.ended_q.append((self.state.t, job_id))

    def change_nodes(self, nodes: Sequence[Node]) -> list[tuple[str, dict[str, Any]]]:
        """The cluster's nodes now (ServingState.set_nodes); the audit's records of the change:
        node_added, node_removed (with the jobs still running there: not preempted by it),
        node_returned, or nodes_refused (nothing changed) with the reason."""
        e = self.state
        try:
            change = e.set_nodes(nodes)
        except ValueError as exc:
            return [("nodes_refused", {"reason": str(exc), "nodes": [n.name for n in nodes]})]
        out: list[tuple[str, dict[str, Any]]] = []
        for i in change.added:
            n = e.nodes[i]
            out.append(("node_added", {"node": n.name, "index": i, "gpus": n.gpus, "gpu_type": n.gpu_type}))
        for i in change.removed:
            running = sorted(j for j, v in e.running.items() if any(k == i for k, _ in v.alloc))
            out.append(("node_removed", {"node": e.nodes[i].name, "index": i, "running": running}))
        for i in change.returned:
            out.append(("node_returned", {"node": e.nodes[i].name, "index": i}))
        return out

    # ------------------------------------------------------------------ reads
    def serving_nodes(self) -> tuple[Node, ...]:
        """The nodes in the cluster now (not removed; drained or not); all when none is."""
        e = self.state
        retired = e.fleet.retired
        return tuple(n for i, n in enumerate(e.nodes) if i not in retired) or e.nodes

    def node_names(self) -> list[str]:
        return [n.name for n in self.state.nodes]


def what_changes(a: Policy, b: Policy) -> list[str]:
    """What policy `b` changes of `a` beyond shares, knobs and classes (for the audit): the tree
    paths, the GPU rates, the window (ServingState.reconfigure carries usage over each)."""
    why = []
    ta, tb = TreeIndex.build(a.tree), TreeIndex.build(b.tree)
    if ta.paths != tb.paths:
        gone = sorted(set(ta.paths) - set(tb.paths))
        new = sorted(set(tb.paths) - set(ta.paths))
        what = ", ".join(x for x in (f"removes {gone}" if gone else "", f"adds {new}" if new else "") if x)
        why.append(f"the tree changes ({what or 'its order changes'})")
    if dict(a.gpu_rates) != dict(b.gpu_rates):
        why.append("the GPU rates change")
    if a.window != b.window:
        why.append("the window changes")
    return why


def setup_of(policy: Policy, nodes: Sequence[Node]) -> EngineSetup:
    tree = TreeIndex.build(policy.tree)
    return EngineSetup(
        tree=tree,
        knobs=policy.knobs(),
        gpu_rates=dict(policy.gpu_rates),
        nodes=tuple(nodes),
        window=policy.window,
        exceptions=(),
        classes=frozenset(policy.classes),
    )


def replay(engine: LiveEngine, events: Iterable[Event]) -> None:
    """Apply journal events to `engine` (LiveEngine.replay; the setup record is not an engine call)."""
    engine.replay(ev for ev in events if ev.kind != SETUP)


@dataclass(frozen=True)
class Setup:
    """The journal's first record: what the engine was built from."""

    policy_sha: str
    strategy: str
    nodes: tuple[Node, ...]
    backend: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def as_event(self) -> Event:
        return Event(
            SETUP,
            (
                {
                    "policy_sha": self.policy_sha,
                    "strategy": self.strategy,
                    "backend": self.backend,
                    "nodes": [node_json(n) for n in self.nodes],
                    **dict(self.extra),
                },
            ),
        )

    @staticmethod
    def from_event(ev: Event) -> Setup:
        d = dict(ev.args[0])
        nodes = tuple(node_of_json(n) for n in d["nodes"])
        extra = {k: v for k, v in d.items() if k not in ("policy_sha", "strategy", "backend", "nodes")}
        return Setup(str(d["policy_sha"]), str(d["strategy"]), nodes, str(d["backend"]), extra)


def new_engine(
    setup: Setup, policies: Callable[[str], Policy], journal: list[Event] | None = None
) -> LiveEngine:
    policy = policies(setup.policy_sha)
    strategy = get_strategy(setup.strategy, policy.scheduling.preemption)
    return LiveEngine(setup_of(policy, setup.nodes), strategy, policies, journal, setup.policy_sha)


HOLD_TEXT: dict[str, str] = {
    "no_capacity": "not enough free GPUs of the types it may use",
    "fragmented": "enough GPUs are free in total, but not on few enough nodes for its shape",
    "reserved": "the free GPUs it would fit on are reserved for a larger job that has waited longer",
    "no_victims": "no free GPUs fit it, and no running job may be preempted for it (runs still in "
    "their protected window, or of groups no more over-served than its own)",
    "queued": "jobs ahead of it in the fair-share order take the free GPUs first",
}
