"""From Slurm's terms to the engine's: leaves, classes and contracts, GPU types, charges.

The result is plain frozen dataclasses the engine consumes (this module does not import it):
`SlurmRequest` (a pending job's request), `RunningJob` (with start and allocation per node),
`NodeView` (GPU type, count, state incl. drain), `UsageInterval` (one run's charge, for the
ledger) and `UnmappedJob` (a job fairshare neither orders nor charges, with the reason).

Rules
- account -> leaf: accounts.AccountMap (a sub-account charges its leaf; unknown: reported);
- class: `class=` in the comment, else the QOS (slurm.qos_classes, or a QOS named like a class),
  else slurm.default_class; contract values from the comment, else the class; `protect` capped by
  the class's max_protected (reported as a note);
- estimate: the time limit (None when unlimited); deadline: Slurm's --deadline, else the
  comment's, else the class's after submission;
- GPU type: the gres type mapped to a gpu_rates key (slurm.gpu_types, else case-insensitive);
- charge: rate[type] x max(GPUs, CPUs / CPUs-per-GPU, memory / memory-per-GPU) per node (DESIGN
  §2 "Units", the same `charge_on` as the replay); memory counts only where Slurm allocates it.
Times are Unix seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .._units import fmt_duration
from ..core.contract import protected_until, protection
from ..core.model import Node, charge_on
from ..inputs.policy import JobClass, Policy
from .accounts import AccountMap, section_of
from .comment import parse_comment
from .model import SlurmJob, SlurmNode, SlurmRun


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    gpu_type: str | None  # gpu_rates key; None when the node's gres type maps to none
    slurm_gpu_type: str | None
    gpus: int
    gpus_used: int
    cpus: int
    mem_gb: float
    state: str
    drain: bool
    down: bool
    partitions: tuple[str, ...]
    reason: str

    @property
    def schedulable(self) -> bool:
        """New jobs may land here."""
        return not (self.drain or self.down)


@dataclass(frozen=True, slots=True)
class SlurmRequest:
    id: str  # str(slurm_id), the engine's job id
    slurm_id: int
    submit: float  # Slurm resets it on requeue; the engine keeps the first it saw
    account: str
    leaf: str  # path of the budget tree's leaf
    user: str
    cls: str
    gpus: int
    nodes: int
    gpu_types: tuple[str, ...] | None  # None: any type
    cpus: int
    mem_gb: float | None
    estimate: float | None  # seconds, from the time limit; None: no limit
    protected: float
    protected_capped: bool
    resumable: bool
    checkpoint: float  # 0 when not resumable
    restore: float
    deadline: float | None  # Unix seconds
    asked_deadline: float | None  # the job's own (sbatch --deadline or its comment), no class default
    partition: str
    qos: str
    held: bool
    priority: int  # Slurm's current priority (0 when held)
    restarts: int
    requeueable: bool
    notes: tuple[str, ...]  # what the mapping changed or could not read


@dataclass(frozen=True, slots=True)
class NodeShare:
    node: str
    gpus: int
    gpu_type: str | None
    cpus: int


@dataclass(frozen=True, slots=True)
class RunningJob:
    request: SlurmRequest
    start: float
    alloc: tuple[NodeShare, ...]
    charge: float  # GPU-equivalents held (charge per second)
    protected_until: float


@dataclass(frozen=True, slots=True)
class UnmappedJob:
    slurm_id: int
    account: str
    user: str
    state: str
    reason: str


@dataclass(frozen=True, slots=True)
class UsageInterval:
    """One run of a job, charged from start to end (None: still running) at `charge` per second."""

    slurm_id: int
    leaf: str
    account: str
    start: float
    end: float | None
    gpus: int
    charge: float

    @property
    def key(self) -> tuple[int, float]:
        """Idempotency key: a job's run is identified by its start."""
        return (self.slurm_id, self.start)

    def gpu_eq_seconds(self, until: float) -> float:
        end = until if self.end is None else min(self.end, until)
        return max(0.0, end - self.start) * self.charge


@dataclass(frozen=True)
class ClusterView:
    nodes: tuple[NodeView, ...]
    pending: tuple[SlurmRequest, ...]
    running: tuple[RunningJob, ...]
    unmapped: tuple[UnmappedJob, ...]
    notes: tuple[str, ...]


class Mapper:
    """Maps one policy onto what a Slurm cluster reports.

    parents       Slurm's account tree (account -> parent account), for sub-accounts
    count_memory  whether Slurm allocates memory (SelectTypeParameters with MEMORY); otherwise a
                  job's requested memory is ignored in its charge
    """

    def __init__(self, policy: Policy, parents: Mapping[str, str] | None = None, count_memory: bool = False):
        self.policy = policy
        self.section = section_of(policy)
        self.accounts = AccountMap.build(policy, parents)
        self.count_memory = count_memory
        self.rates = dict(policy.gpu_rates)
        self._rate_keys = {k.lower(): k for k in policy.gpu_rates}
        self._classes_lower = {c.lower(): c for c in policy.classes}

    # ------------------------------------------------------------------ GPU types and nodes

    def gpu_type(self, slurm_type: str | None) -> str | None:
        if slurm_type is None:
            return None
        mapped = self.section.gpu_types.get(slurm_type)
        return mapped if mapped is not None else self._rate_keys.get(slurm_type.lower())

    def in_scope(self, partitions: Iterable[str]) -> bool:
        want = self.section.partitions
        return not want or any(p in want for p in partitions)

    def node(self, n: SlurmNode) -> tuple[NodeView, list[str]]:
        notes = []
        types = sorted({t or "" for t in n.gpu_types})  # "" stands for an untyped gres
        slurm_type = types[0] or None if types else None
        if len(types) > 1:
            notes.append(f"node {n.name}: several GPU types {[t or '-' for t in types]}; using {slurm_type}")
        gpu_type = self.gpu_type(slurm_type)
        if n.gpus and gpu_type is None:
            known = ", ".join(sorted(self.rates)) or "none"
            notes.append(
                f"node {n.name}: GPU type {slurm_type or '(untyped)'} has no rate in the policy "
                f"(gpu_rates: {known}; map it under slurm.gpu_types): its GPUs are charged at rate 1"
            )
        view = NodeView(
            name=n.name,
            gpu_type=gpu_type,
            slurm_gpu_type=slurm_type,
            gpus=n.gpus,
            gpus_used=n.gpus_used,
            cpus=n.cpus,
            mem_gb=n.memory_mb / 1024,
            state=n.state,
            drain=n.drain,
            down=n.down,
            partitions=n.partitions,
            reason=n.reason,
        )
        return view, notes

    # ------------------------------------------------------------------ jobs

    def _class(self, j: SlurmJob, asked: str | None, notes: list[str]) -> str | None:
        classes = self.policy.classes
        if asked is not None:
            cls = self._classes_lower.get(asked.lower())
            if cls is not None:
                return cls
            notes.append(f"comment: unknown class {asked!r} (known: {', '.join(classes)}); ignored")
        by_qos = self.section.qos_classes.get(j.qos) or self._classes_lower.get(j.qos.lower())
        if by_qos is not None:
            return by_qos
        return self.section.default_class

    def request(self, j: SlurmJob) -> SlurmRequest | UnmappedJob:
        def unmapped(reason: str) -> UnmappedJob:
            return UnmappedJob(j.job_id, j.account, j.user, j.state, reason)

        if j.het_job_id is not None:
            return unmapped("heterogeneous jobs are not supported: Slurm orders it alone")
        leaf, via = self.accounts.leaf_of(j.account)
        if leaf is None:
            return unmapped(via)
        notes: list[str] = [f"account {j.account}: {via}"] if via else []
        comment = parse_comment(j.comment, self.section.comment_prefix)
        notes.extend(comment.problems)
        cls_name = self._class(j, comment.cls, notes)
        if cls_name is None:
            return unmapped(
                "no class: add class=<name> to its comment, use a QOS named like a class, "
                "or set slurm.default_class in the policy"
            )
        cls: JobClass = self.policy.classes[cls_name]
        protected, capped = protection(comment.protect, cls.protected, cls.protected_cap)
        if capped:
            asked = fmt_duration(comment.protect if comment.protect is not None else cls.protected)
            cap = fmt_duration(protected)
            notes.append(f"protect {asked} capped to {cap} by class {cls_name}'s max_protected")
        resumable = cls.resumable if comment.resumable is None else comment.resumable
        checkpoint = comment.checkpoint if comment.checkpoint is not None else (cls.checkpoint or 0.0)
        if resumable and not checkpoint > 0:
            notes.append(
                "resumable without a checkpoint interval (add checkpoint=...): treated as not resumable"
            )
            resumable = False
        asked_deadline: float | None = None
        if j.deadline is not None:
            asked_deadline = float(j.deadline)
        elif comment.deadline is not None:
            asked_deadline = j.submit_time + comment.deadline
        deadline = asked_deadline
        if deadline is None and cls.deadline is not None:
            deadline = j.submit_time + cls.deadline
        gpu_types: tuple[str, ...] | None = None
        if j.gpu_type is not None:
            mapped = self.gpu_type(j.gpu_type)
            if mapped is None:
                notes.append(f"requests GPU type {j.gpu_type!r}, which has no rate in the policy")
            gpu_types = (mapped or j.gpu_type,)
        mem = j.memory_mb / 1024 if self.count_memory and j.memory_mb is not None else None
        return SlurmRequest(
            id=str(j.job_id),
            slurm_id=j.job_id,
            submit=float(j.submit_time),
            account=j.account,
            leaf=leaf,
            user=j.user,
            cls=cls_name,
            gpus=j.gpus,
            nodes=j.nodes,
            gpu_types=gpu_types,
            cpus=j.cpus,
            mem_gb=mem,
            estimate=None if j.time_limit_s is None else float(j.time_limit_s),
            protected=protected,
            protected_capped=capped,
            resumable=resumable,
            checkpoint=checkpoint if resumable else 0.0,
            restore=comment.restore if comment.restore is not None else cls.restore,
            deadline=deadline,
            asked_deadline=asked_deadline,
            partition=j.partition,
            qos=j.qos,
            held=j.held,
            priority=j.priority,
            restarts=j.restarts,
            requeueable=j.requeue,
            notes=tuple(notes),
        )

    def charge(self, shares: Sequence[NodeShare], mem_mb: int | None, nodes: Mapping[str, NodeView]) -> float:
        """GPU-equivalents held by an allocation (memory spread evenly over its nodes)."""
        total = 0.0
        per_node_mem = None
        if self.count_memory and mem_mb is not None and shares:
            per_node_mem = mem_mb / 1024 / len(shares)
        for s in shares:
            v = nodes.get(s.node)
            if v is None or not v.gpus:
                total += self.rates.get(s.gpu_type or "", 1.0) * s.gpus
                continue
            node = Node(v.name, "slurm", v.gpus, v.gpu_type or "", float(v.cpus), v.mem_gb, "")
            total += charge_on(s.gpus, float(s.cpus) or None, per_node_mem, node, self.rates)
        return total

    def running(self, j: SlurmJob, req: SlurmRequest, nodes: Mapping[str, NodeView]) -> RunningJob:
        shares = tuple(
            NodeShare(
                a.node,
                a.gpus,
                nodes[a.node].gpu_type if a.node in nodes else self.gpu_type(a.gpu_type),
                a.cpus,
            )
            for a in j.alloc
        )
        start = float(j.start_time if j.start_time is not None else j.submit_time)
        mem = j.memory_mb if self.count_memory else None
        return RunningJob(req, start, shares, self.charge(shares, mem, nodes), protected_until(start, req))

    def view(self, nodes: Iterable[SlurmNode], jobs: Iterable[SlurmJob]) -> ClusterView:
        notes: list[str] = []
        views: dict[str, NodeView] = {}
        for n in sorted(nodes, key=lambda n: n.name):
            if not self.in_scope(n.partitions):
                continue
            v, ns = self.node(n)
            views[v.name] = v
            notes.extend(ns)
        pending, running, unmapped = [], [], []
        for j in sorted(jobs, key=lambda j: j.job_id):
            if not self.in_scope(j.partition.split(",")):
                continue
            r = self.request(j)
            if isinstance(r, UnmappedJob):
                unmapped.append(r)
            elif j.running:
                running.append(self.running(j, r, views))
            elif j.pending:
                pending.append(r)
        return ClusterView(
            tuple(views.values()), tuple(pending), tuple(running), tuple(unmapped), tuple(notes)
        )

    # ------------------------------------------------------------------ usage

    def usage(
        self, runs: Iterable[SlurmRun], nodes: Mapping[str, NodeView]
    ) -> tuple[list[UsageInterval], list[UnmappedJob]]:
        """Charged intervals of runs, and runs left uncharged (unknown account) with the reason."""
        out, unknown = [], []
        for r in sorted(runs, key=lambda r: (r.job_id, r.start)):
            # a fresh record may lack its partition (slurmdbd fills it in later): count it
            if self.section.partitions and r.partition and r.partition not in self.section.partitions:
                continue
            leaf, why = self.accounts.leaf_of(r.account)
            if leaf is None:
                unknown.append(UnmappedJob(r.job_id, r.account, r.user, r.state, why))
                continue
            k = max(1, len(r.nodes))
            names = r.nodes or ("",)
            shares = tuple(
                NodeShare(
                    n,
                    r.gpus // k + (1 if i < r.gpus % k else 0),
                    nodes[n].gpu_type if n in nodes else None,
                    r.cpus // k + (1 if i < r.cpus % k else 0),
                )
                for i, n in enumerate(names)
            )
            mem = r.memory_mb if self.count_memory else None
            end = None if r.end is None else float(r.end)
            out.append(
                UsageInterval(
                    r.job_id, leaf, r.account, float(r.start), end, r.gpus, self.charge(shares, mem, nodes)
                )
            )
        return out, unknown


def memory_is_allocated(config: Mapping[str, str]) -> bool:
    """Whether Slurm allocates memory (CR_*_Memory), so that a job's memory may count in its charge."""
    return "MEMORY" in config.get("SelectTypeParameters", "").upper()
