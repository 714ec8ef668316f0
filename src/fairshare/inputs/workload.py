"""The workload: one job a row (CSV with a header, or JSON Lines with the same keys).

Every value is resolved against the policy's classes (defaults, caps) and the cluster (gang size,
allowed GPU types, pending charge). A bad row raises InputError naming file, line and column.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._units import fmt_duration
from ..core.contract import protection
from ..core.model import LABELS, JobRequest, Node, charge_on
from ..core.tree import TreeIndex
from ..errors import InputError, warn
from . import limits
from ._columns import ColumnChecker
from ._quick import Quick, QuickReader
from .cluster import Cluster
from .policy import JobClass, Policy
from .rows import COLUMNS, CsvBlock, Row, csv_blocks, csv_rows, jsonl_rows


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a workload: its request (all a scheduler may know, fairshare.core.JobRequest) and
    the replay's truth about it, which only the simulator reads: `work`, the uninterrupted run time,
    and `stall_after`, the progress at which it hangs (None: it never hangs)."""

    request: JobRequest
    work: float
    stall_after: float | None

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def submit(self) -> float:
        return self.request.submit

    @property
    def seq(self) -> int:
        return self.request.seq

    def submit_event(self) -> dict[str, Any]:
        r = self.request
        return {
            "t": r.submit,
            "type": "submit",
            "job": r.id,
            "group": r.group,
            "class": r.cls,
            "gpus": r.gpus,
            "nodes": r.nodes,
            "gpu_types": list(r.gpu_types) if r.gpu_types is not None else None,
            "work": self.work,
            "estimate": r.estimate,
            "protected": r.protected,
            "resumable": r.resumable,
            "checkpoint": r.checkpoint if r.resumable else None,
            "restore": r.restore,
            "startup": r.startup,
            "max_stall": r.max_stall,
            "deadline": r.deadline,
            "stall_after": self.stall_after,
            "charge": r.charge,
            "cpus": r.cpus,
            "mem_gb": r.mem_gb,
            "user": r.user,
            "protected_capped": r.protected_capped,
        }


def _holds_member(node: Node, per: int, k: int, cpus: float | None, mem: float | None) -> bool:
    """Whether a node holds one member of a k-node gang: `per` GPUs, and a k-th of the job's CPUs
    and memory when the job and the node give them."""
    return (
        node.gpus >= per
        and (not cpus or not node.cpus or cpus / k <= node.cpus)
        and (not mem or not node.mem_gb or mem / k <= node.mem_gb)
    )


class WorkloadBuilder:
    """Resolves raw rows into Jobs against a policy and a cluster."""

    def __init__(self, policy: Policy, tree: TreeIndex, cluster: Cluster, min_gpus: int = 1) -> None:
        """`min_gpus` 0 admits CPU-only jobs (trace loaders only: FORMATS.md workloads need >= 1);
        they hold no GPU, run on one node and are charged by their dominant CPU or memory share."""
        self.min_gpus = min_gpus
        self.policy, self.tree, self.cluster = policy, tree, cluster
        self.paths = tree.index()
        self.leafset = set(tree.leaves)
        self.rates = dict(policy.gpu_rates)
        self.known_types = set(cluster.gpu_types)
        # node kinds by type: identical nodes counted once (feasibility and charge per kind)
        kinds: dict[tuple[str, int, float, float], int] = {}
        for n in cluster.nodes:
            k = (n.gpu_type, n.gpus, n.cpus, n.mem_gb)
            kinds[k] = kinds.get(k, 0) + 1
        self.kinds_by_type: dict[str, list[tuple[Node, int]]] = {}
        for (ty, g, c, m), count in kinds.items():
            proto = Node("", "", g, ty, c, m, "")
            self.kinds_by_type.setdefault(ty, []).append((proto, count))
        # per type: the kinds' GPU counts ascending and how many nodes have at least each, so a
        # job that gives no CPUs or memory is fitted with one binary search per type
        self.by_gpus: dict[str, tuple[list[int], list[int]]] = {}
        for ty, kc in self.kinds_by_type.items():
            ordered = sorted(kc, key=lambda k: k[0].gpus)
            at_least = [0] * (len(ordered) + 1)
            for i in range(len(ordered) - 1, -1, -1):
                at_least[i] = at_least[i + 1] + ordered[i][1]
            self.by_gpus[ty] = ([n.gpus for n, _ in ordered], at_least)
        self.all_types = tuple(sorted(self.known_types))
        self.seen: set[str] = set()
        self.quick = QuickReader(self)
        self.late: list[tuple[str, float]] = []  # (where, deadline - submit) of deadlines before submit
        self._fit_cache: dict[tuple[Any, ...], tuple[int | None, str | None, float]] = {}

    def _holding(self, ty: str, per: int) -> int:
        """Nodes of type `ty` with at least `per` GPUs."""
        counts, at_least = self.by_gpus[ty]
        return at_least[bisect.bisect_left(counts, per)]

    def _gang_size(
        self, gpus: int, types: Sequence[str], cpus: float | None = None, mem: float | None = None
    ) -> int | None:
        """The fewest nodes of one allowed type that hold the job (FORMATS.md default `nodes`):
        k divides `gpus` and at least k nodes of the type each have gpus/k GPUs, and cpus/k CPUs
        and mem/k GB when the job gives them. None when no gang size fits.

        Only k from gpus / (the most GPUs a node of these types has) up to the number of such
        nodes can fit: the loop is bounded by the cluster, not by the job's GPUs."""
        most = max((self.by_gpus[ty][0][-1] for ty in types if self.by_gpus[ty][0]), default=0)
        if not most:
            return None
        count = sum(self.by_gpus[ty][1][0] for ty in types)
        for k in _divisors(gpus, max(1, -(-gpus // most)), min(gpus, count)):
            per = gpus // k
            for ty in types:
                if not cpus and not mem:
                    holding = self._holding(ty, per)
                else:
                    holding = sum(c for n, c in self.kinds_by_type[ty] if _holds_member(n, per, k, cpus, mem))
                if holding >= k:
                    return k
        return None

    def _fit(
        self, gpus: int, nodes: int | None, types: Sequence[str], cpus: float | None, mem: float | None
    ) -> tuple[int | None, str | None, float]:
        """(gang size, error or None, pending charge), cached per request shape."""
        key = (gpus, nodes, tuple(types), cpus, mem)
        hit = self._fit_cache.get(key)
        if hit is not None:
            return hit
        if nodes is None:
            nodes = self._gang_size(gpus, types, cpus, mem) if gpus > 0 else 1
        if nodes is None:
            out: tuple[int | None, str | None, float] = (
                None,
                f"a job of {gpus} GPUs fits no pool of type {'|'.join(types)}",
                0.0,
            )
        else:
            per = gpus // nodes
            charges: list[float] = []
            for ty in types if cpus or mem else ():
                fitting = [
                    (n, c) for n, c in self.kinds_by_type[ty] if _holds_member(n, per, nodes, cpus, mem)
                ]
                if sum(c for _, c in fitting) >= nodes:
                    charges.extend(charge_on(gpus, cpus, mem, n, self.rates) for n, _ in fitting)
            if not cpus and not mem:  # the charge is the type's rate x GPUs on every kind
                charges = [self.rates.get(ty, 1.0) * gpus for ty in types if self._holding(ty, per) >= nodes]
            if charges:
                out = (nodes, None, min(charges))
            else:
                out = (
                    nodes,
                    f"the job ({gpus} GPUs on {nodes} node(s), type {'|'.join(types)}) fits no pool",
                    0.0,
                )
        self._fit_cache[key] = out
        return out

    def _misfit(
        self, gpus: int, nodes: int | None, types: list[str], cpus: float | None, mem: float | None
    ) -> tuple[str, str]:
        """Why a job fits no pool: the column to blame and a message naming what the pools offer."""
        pools = "; ".join(
            f"{p.name}: {p.count} nodes x {p.gpus} {p.gpu_type}"
            + (f", {p.cpus:g} CPUs" if p.cpus else "")
            + (f", {p.mem_gb:g} GB" if p.mem_gb else "")
            for p in self.cluster.pools
            if p.gpu_type in types
        )
        want = f"type {'|'.join(types)}"
        given = nodes is not None
        if nodes is None:
            nodes = self._gang_size(gpus, types) if gpus > 0 else 1
            if nodes is None:
                return "gpus", (
                    f"a job of {gpus} GPUs fits no pool of {want}: a gang runs on one GPU type "
                    f"and no pool has enough nodes to hold it ({pools})"
                )
        per = gpus // nodes
        shape = f"{gpus} GPUs on {nodes} node(s), {per} per node, {want}"

        def enough(ok: Callable[[Node], bool]) -> bool:
            return any(sum(c for n, c in self.kinds_by_type[ty] if ok(n)) >= nodes for ty in types)

        if not enough(lambda n: n.gpus >= per):
            return ("nodes" if given else "gpus"), (
                f"the job ({shape}) fits no pool: no pool has {nodes} nodes with {per} GPUs each ({pools})"
            )
        if cpus and not enough(lambda n: n.gpus >= per and (not n.cpus or cpus / nodes <= n.cpus)):
            return "cpus", (
                f"the job ({shape}) fits no pool: it asks for {cpus:g} CPUs, {cpus / nodes:g} "
                f"per node, more than its nodes have ({pools})"
            )
        return "mem_gb", (
            f"the job ({shape}) fits no pool: it asks for {mem or 0:g} GB of memory, "
            f"{(mem or 0) / nodes:g} GB per node, more than its nodes have ({pools})"
        )

    def _quick_job(self, q: Quick, row: Row, seq: int) -> Job:
        """The job of a row the quick reader read (`fairshare.inputs._quick`)."""
        self.seen.add(q[0])
        if q[21]:  # a deadline before its submit
            self.late.append((row.at("deadline"), q[13] - q[1]))
        cls = self.policy.classes[q[5]]
        request = JobRequest(
            id=q[0],
            submit=q[1],
            group=q[2],
            leaf=q[3],
            user=q[4],
            cls=q[5],
            gpus=q[6],
            nodes=q[7],
            gpu_types=q[8],
            cpus=q[9],
            mem_gb=q[10],
            estimate=q[11],
            label=q[12],
            deadline=q[13],
            protected=q[14],
            protected_capped=q[15],
            resumable=q[16],
            checkpoint=q[17],
            restore=cls.restore,
            startup=cls.startup,
            max_stall=cls.max_stall,
            charge=q[18],
            seq=seq,
            progress_required=cls.progress == "required",
        )
        return Job(request, q[19], q[20])

    def check(self, row: Row, seq: int) -> tuple[bool, float]:
        """Check one row as `build` would, without building the job when the quick reader can read
        it (`fairshare check`): whether its protection was capped, and its submit time."""
        q = self.quick.read(row)
        if q is None:
            request = self.build(row, seq).request
            return request.protected_capped, request.submit
        self.seen.add(q[0])
        if q[21]:
            self.late.append((row.at("deadline"), q[13] - q[1]))
        return q[15], q[1]

    def build(self, row: Row, seq: int) -> Job:
        """One job from one row: its identity, its shape on the cluster, its contract."""
        q = self.quick.read(row)
        if q is not None:
            return self._quick_job(q, row, seq)
        for key in row.values:
            if key not in COLUMNS:
                raise row.fail(key, f"unknown column {key!r} (known: {', '.join(COLUMNS)})")
        job_id, submit, group, leaf, cls_name, cls = self._identity(row)
        gpus = row.integer("gpus", required=True, minimum=self.min_gpus, maximum=limits.MAX_JOB_GPUS)
        assert gpus is not None
        work = row.number("work", required=True, positive=True, maximum=limits.MAX_DURATION)
        assert work is not None
        nodes, types, any_type, cpus, mem, charge = self._shape(row, gpus)
        label = (row.text("label") or "medium").lower()
        if label not in LABELS:
            raise row.fail("label", f"label must be one of high, medium, low; got {label!r}")
        deadline = row.number("deadline", minimum=0.0, maximum=limits.MAX_TIME)
        if deadline is not None and deadline < submit:
            self.late.append((row.at("deadline"), deadline - submit))
        if deadline is None and cls.deadline is not None:
            deadline = submit + cls.deadline
        protected, capped, resumable, checkpoint = self._contract(row, cls)
        stall_after = row.number("stall_after", positive=True, maximum=limits.MAX_DURATION)
        estimate = row.number("estimate", positive=True, maximum=limits.MAX_DURATION)
        request = JobRequest(
            id=job_id,
            submit=submit,
            group=group,
            leaf=leaf,
            user=row.text("user", name=True),
            cls=cls_name,
            gpus=gpus,
            nodes=nodes,
            gpu_types=None if any_type else tuple(types),
            cpus=cpus,
            mem_gb=mem,
            estimate=work if estimate is None else estimate,
            label=label,
            deadline=deadline,
            protected=protected,
            protected_capped=capped,
            resumable=resumable,
            checkpoint=checkpoint,
            restore=cls.restore,
            startup=cls.startup,
            max_stall=cls.max_stall,
            charge=charge,
            seq=seq,
            progress_required=cls.progress == "required",
        )
        return Job(request, work, stall_after)

    def _identity(self, row: Row) -> tuple[str, float, str, int, str, JobClass]:
        """job_id (unique), submit, group (a leaf of the tree) and its node, class name and class."""
        job_id = row.text("job_id", name=True)
        if job_id is None:
            raise row.fail("job_id", "a value is required")
        if job_id in self.seen:
            raise row.fail("job_id", f"duplicate job_id {job_id!r}")
        self.seen.add(job_id)
        submit = row.number("submit", required=True, minimum=0.0, maximum=limits.MAX_TIME)
        assert submit is not None
        group = row.text("group")
        if group is None:
            raise row.fail("group", "a value is required")
        node = self.paths.get(group)
        if node is None:
            raise row.fail(
                "group", f"no group {group!r} in the policy tree{_did_you_mean(group, self.paths)}"
            )
        if node not in self.leafset:
            below = ", ".join(self.tree.paths[c] for c in self.tree.children[node])
            raise row.fail(
                "group", f"group {group!r} is not a leaf: jobs are charged to leaves (under it: {below})"
            )
        cls_name = row.text("class")
        if cls_name is None:
            raise row.fail("class", "a value is required")
        cls = self.policy.classes.get(cls_name)
        if cls is None:
            raise row.fail(
                "class",
                f"unknown class {cls_name!r}"
                f"{_did_you_mean(cls_name, self.policy.classes)} "
                f"(known: {', '.join(self.policy.classes)})",
            )
        return job_id, submit, group, node, cls_name, cls

    def _shape(self, row: Row, gpus: int) -> tuple[int, list[str], bool, float | None, float | None, float]:
        """Gang size, allowed GPU types (and whether any type goes), CPUs, memory and the pending
        charge of a job of `gpus` GPUs; one that fits no pool is an error naming the column to blame."""
        types_text = row.text("gpu_type")
        types: list[str]
        if types_text:
            types = [t.strip() for t in types_text.split("|") if t.strip()]
            for ty in types:
                if ty not in self.known_types:
                    raise row.fail(
                        "gpu_type",
                        f"unknown GPU type {ty!r} (the cluster has {', '.join(sorted(self.known_types))})",
                    )
        else:
            types = sorted(self.known_types)
        nodes = row.integer("nodes", maximum=limits.MAX_NODES)
        if nodes is not None and gpus % nodes:
            raise row.fail("nodes", f"{gpus} GPUs do not divide evenly over {nodes} nodes")
        cpus = row.number("cpus", positive=True, maximum=limits.MAX_JOB_CPUS)
        mem = row.number("mem_gb", positive=True, maximum=limits.MAX_JOB_MEM_GB)
        size, problem, charge = self._fit(gpus, nodes, types, cpus, mem)
        if problem is not None or size is None:
            raise row.fail(*self._misfit(gpus, nodes, types, cpus, mem))
        return size, types, not types_text, cpus, mem, charge

    def _contract(self, row: Row, cls: JobClass) -> tuple[float, bool, bool, float]:
        """Protection (capped by the class, and whether it was), resumable and checkpoint."""
        protected, capped = protection(row.duration("protected"), cls.protected, cls.protected_cap)
        resumable = row.boolean("resumable")
        resumable = cls.resumable if resumable is None else resumable
        checkpoint = row.duration("checkpoint")
        if checkpoint is None:
            checkpoint = cls.checkpoint
        if resumable and not (checkpoint and checkpoint > 0):
            raise row.fail("resumable", "a resumable job needs a checkpoint interval > 0")
        return protected, capped, resumable, float(checkpoint) if resumable and checkpoint else 0.0

    def warn_late_deadlines(self, where: str) -> None:
        """One warning for the jobs whose deadline is before their submit (they cannot meet it)."""
        if not self.late:
            return
        at, by = self.late[0]
        more = f" ({len(self.late) - 1:,} more job(s) too)" if len(self.late) > 1 else ""
        warn(
            where,
            at,
            f"the deadline is {fmt_duration(-by)} before the job's submit (deadlines are absolute "
            f"times on the replay clock, not durations): it cannot be met{more}",
        )


def _divisors(n: int, low: int, high: int) -> list[int]:
    """The divisors k of n with low <= k <= high, smallest first: O(sqrt(n)) work, where trying
    every k up to n took seconds per job on a large cluster."""
    out: set[int] = set()
    d = 1
    while d * d <= n:
        if n % d == 0:
            out.update((d, n // d))
        d += 1
    return sorted(k for k in out if low <= k <= high)


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def build_jobs(
    rows: Iterable[Row], policy: Policy, tree: TreeIndex, cluster: Cluster, min_gpus: int = 1
) -> list[Job]:
    b = WorkloadBuilder(policy, tree, cluster, min_gpus)
    jobs = []
    where = ""
    for i, r in enumerate(rows):
        if i >= limits.MAX_JOBS:
            raise _too_many(r)
        where = r.where
        jobs.append(b.build(r, i))
    b.warn_late_deadlines(where)
    jobs.sort(key=lambda j: (j.submit, j.seq))
    # seq becomes the position in submit order (file order breaks ties): queues order by it. The
    # requests were built just above and nothing else holds them yet, so seq is set in place
    # (dataclasses.replace of two frozen objects per job took most of the time of 2,000,000 jobs)
    for i, j in enumerate(jobs):
        if j.request.seq != i:
            object.__setattr__(j.request, "seq", i)
    return jobs


def _rows(p: Path) -> Iterable[Row]:
    suffix = Path(p.name.removesuffix(".gz")).suffix
    return jsonl_rows(p) if suffix in (".jsonl", ".ndjson", ".json") else csv_rows(p)


def _items(p: Path) -> Iterable[CsvBlock | Row]:
    """The rows of a workload file, a CSV's in blocks where it can (rows.csv_blocks)."""
    suffix = Path(p.name.removesuffix(".gz")).suffix
    return jsonl_rows(p) if suffix in (".jsonl", ".ndjson", ".json") else csv_blocks(p)


def _too_many(r: Row) -> InputError:
    return InputError(
        r.where, f"line {r.line}", f"more than {limits.MAX_JOBS:,} jobs in one workload (the limit)"
    )


@dataclass(frozen=True)
class WorkloadCheck:
    """What `fairshare check` says of a workload: its jobs, and those whose protection was capped
    (how many, and the first in submit order)."""

    jobs: int
    capped: int
    first_capped: Job | None


def check_workload(path: Path | str, policy: Policy, tree: TreeIndex, cluster: Cluster) -> WorkloadCheck:
    """Every row checked as `load_workload` would, streaming, without keeping the jobs: the row
    one past MAX_JOBS is refused as soon as it is read. A CSV is read in blocks checked column by
    column (`fairshare.inputs._columns`); a block that way does not take is checked row by row."""
    p = Path(path)
    b = WorkloadBuilder(policy, tree, cluster)
    n = capped = 0
    first: tuple[float, int, Row] | None = None
    where = str(p)
    columns: ColumnChecker | None = None

    def one(r: Row) -> None:
        nonlocal n, capped, first
        if n >= limits.MAX_JOBS:
            raise _too_many(r)
        was_capped, submit = b.check(r, n)
        if was_capped:
            capped += 1
            if first is None or submit < first[0]:
                first = (submit, n, r)
        n += 1

    for item in _items(p):
        if isinstance(item, Row):
            one(item)
            continue
        if columns is None:
            columns = ColumnChecker(b, item.columns)
        got = columns.check(item.cells, item.first_line) if n + len(item.cells) <= limits.MAX_JOBS else None
        if got is None:
            for r in item.rows():
                one(r)
            continue
        if got.first_capped is not None and (first is None or got.first_capped[0] < first[0]):
            submit, j = got.first_capped
            first = (submit, n + j, item.row(j))
        capped += got.capped
        n += len(item.cells)
    b.warn_late_deadlines(where)
    if not n:
        raise InputError(where, "", "the workload has no jobs")
    job = None
    if first is not None:
        again = WorkloadBuilder(policy, tree, cluster)
        job = again.build(first[2], first[1])
    return WorkloadCheck(n, capped, job)


def load_workload(path: Path | str, policy: Policy, tree: TreeIndex, cluster: Cluster) -> list[Job]:
    p = Path(path)
    jobs = build_jobs(_rows(p), policy, tree, cluster)
    if not jobs:
        raise InputError(str(p), "", "the workload has no jobs")
    return jobs


def jobs_from_dicts(
    records: Iterable[dict[str, Any]],
    policy: Policy,
    tree: TreeIndex,
    cluster: Cluster,
    where: str = "<generated>",
) -> list[Job]:
    rows = (
        Row(where, i + 1, {k: v for k, v in r.items() if v is not None}, None) for i, r in enumerate(records)
    )
    return build_jobs(rows, policy, tree, cluster)
