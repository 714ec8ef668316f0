"""The cluster file: pools of identical nodes in topology blocks, maintenance drains, epoch, horizon."""

from __future__ import annotations

import bisect
import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from .._units import instant, to_utc
from ..core.model import Node
from ..errors import InputError
from . import limits
from ._validation import AtPath, Name, Number, StrictModel, Whole, check_year, load_yaml, validate
from .policy import Policy

EPOCH_DEFAULT = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class Pool(StrictModel):
    name: str = Field(min_length=1, max_length=limits.MAX_NAME_CHARS, pattern=r"^[A-Za-z0-9_.-]+$")
    count: Whole = Field(ge=1, le=limits.MAX_NODES)
    gpus: Whole = Field(ge=1, le=limits.MAX_NODE_GPUS)
    gpu_type: Name = Field(min_length=1)
    cpus: Number = Field(default=0, ge=0, le=limits.MAX_NODE_CPUS)  # 0: CPUs not tracked
    mem_gb: Number = Field(default=0, ge=0, le=limits.MAX_NODE_MEM_GB)  # 0: memory not tracked
    nodes_per_block: Whole | None = Field(default=None, ge=1, le=limits.MAX_NODES)


class Drain(StrictModel):
    nodes: tuple[str, ...] = Field(min_length=1, max_length=limits.MAX_NODES)
    start: Any = Field(default=None, validate_default=True)
    deadline: Any = None
    end: Any = None

    @field_validator("start", mode="before")
    @classmethod
    def _start(cls, v: Any) -> Any:
        if v is None:
            raise ValueError(
                "required key 'start' is missing: when the drain begins (a duration from "
                "t = 0 such as 2d, or a date/datetime)"
            )
        return v


class ClusterSpec(StrictModel):
    pools: tuple[Pool, ...] = Field(min_length=1)
    maintenance: tuple[Drain, ...] = Field(default=(), max_length=limits.MAX_MAINTENANCE)
    epoch: Any = None
    horizon: Any = None

    @field_validator("epoch")
    @classmethod
    def _epoch(cls, v: Any) -> Any:
        if v is not None:
            if isinstance(v, bool | int | float):
                raise ValueError(f"expected a date or datetime such as 2026-12-01T00:00:00Z, got {v!r}")
            check_year(to_utc(v), "the epoch")
        return v

    @model_validator(mode="after")
    def _total_nodes(self) -> ClusterSpec:
        total = sum(p.count for p in self.pools)
        if total > limits.MAX_NODES:
            raise AtPath(
                ("pools",),
                f"the pools have {total:,} nodes in all, more than the limit of {limits.MAX_NODES:,}",
            )
        return self


@dataclass(frozen=True)
class Maintenance:
    nodes: tuple[int, ...]  # node indexes
    start: float
    deadline: float
    end: float | None


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]
    pools: tuple[Pool, ...]
    maintenance: tuple[Maintenance, ...]
    epoch: dt.datetime
    horizon: float | None

    @property
    def gpu_types(self) -> list[str]:
        return sorted({n.gpu_type for n in self.nodes})

    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)


def build_cluster(spec: ClusterSpec, where: str, policy: Policy | None = None) -> Cluster:
    nodes = _nodes(spec, where, policy)
    epoch = to_utc(spec.epoch) if spec.epoch is not None else EPOCH_DEFAULT
    drains = _drains(spec, nodes, epoch, where)
    horizon = None
    if spec.horizon is not None:
        horizon = _instant(spec.horizon, epoch, where, "horizon")
        if horizon <= 0:
            raise InputError(where, "horizon", "the horizon must be after t = 0")
    return Cluster(tuple(nodes), spec.pools, drains, epoch, horizon)


def _nodes(spec: ClusterSpec, where: str, policy: Policy | None) -> list[Node]:
    """The nodes of every pool in order, named `<pool>-<index>` (FORMATS.md)."""
    nodes: list[Node] = []
    names: set[str] = set()
    for pi, pool in enumerate(spec.pools):
        if pool.name in names:
            raise InputError(where, f"pools[{pi}].name", f"duplicate pool name {pool.name!r}")
        names.add(pool.name)
        if policy is not None and pool.gpu_type not in policy.gpu_rates:
            raise InputError(
                where,
                f"pools[{pi}].gpu_type",
                f"GPU type {pool.gpu_type!r} is unknown: the policy's gpu_rates list "
                f"{', '.join(sorted(policy.gpu_rates)) or 'no types'}; fix the type here or add a rate "
                f"for {pool.gpu_type} to the policy",
            )
        per_block = pool.nodes_per_block or pool.count
        for k in range(pool.count):
            nodes.append(
                Node(
                    name=f"{pool.name}-{k:03d}",
                    pool=pool.name,
                    gpus=pool.gpus,
                    gpu_type=pool.gpu_type,
                    cpus=float(pool.cpus),
                    mem_gb=float(pool.mem_gb),
                    block=f"{pool.name}-b{k // per_block}",
                )
            )
    return nodes


def _instant(value: Any, epoch: dt.datetime, where: str, at: str) -> float:
    """A replay-clock instant of the cluster file, within [.., MAX_TIME]."""
    try:
        t = instant(value, epoch)
    except ValueError as exc:
        raise InputError(where, at, str(exc)) from None
    if t > limits.MAX_TIME:
        raise InputError(
            where,
            at,
            f"{value!r} is {t / limits.YEAR:.3g} years after t = 0, more than the limit of "
            f"{limits.fmt_limit(limits.MAX_TIME)} (dates are placed on the replay clock through "
            f"`epoch`, {epoch.date().isoformat()}{' by default' if epoch == EPOCH_DEFAULT else ''})",
        )
    return t


class _Windows:
    """The maintenance windows of one node, kept sorted and disjoint: the overlap check of a new
    window is two binary searches (O(log n) per node and window instead of a scan of all)."""

    __slots__ = ("drains", "ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.drains: list[int] = []

    def overlapping(self, start: float, end: float) -> list[int]:
        """Drain indexes of the windows [s, e) that meet [start, end)."""
        lo = bisect.bisect_right(self.ends, start)  # first window ending after `start`
        hi = bisect.bisect_left(self.starts, end)  # first window starting at or after `end`
        return self.drains[lo:hi]

    def add(self, start: float, end: float, drain: int) -> None:
        i = bisect.bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        self.drains.insert(i, drain)


def _drains(spec: ClusterSpec, nodes: list[Node], epoch: dt.datetime, where: str) -> tuple[Maintenance, ...]:
    """The maintenance drains on the replay clock; one maintenance at a time per node."""
    index = {n.name: i for i, n in enumerate(nodes)}
    windows: dict[int, _Windows] = {}
    drains: list[Maintenance] = []
    for di, d in enumerate(spec.maintenance):
        ids = []
        for ni, name in enumerate(d.nodes):
            if name not in index:
                raise InputError(
                    where,
                    f"maintenance[{di}].nodes[{ni}]",
                    f"no node named {name!r} (nodes are <pool>-<index>, e.g. {nodes[0].name!r})",
                )
            ids.append(index[name])
        start = _instant(d.start, epoch, where, f"maintenance[{di}].start")
        deadline = (
            _instant(d.deadline, epoch, where, f"maintenance[{di}].deadline")
            if d.deadline is not None
            else start
        )
        end = _instant(d.end, epoch, where, f"maintenance[{di}].end") if d.end is not None else None
        if start < 0:
            raise InputError(where, f"maintenance[{di}].start", "a drain cannot start before t = 0")
        if deadline < start:
            raise InputError(where, f"maintenance[{di}].deadline", "the drain deadline is before its start")
        if end is not None and end <= deadline:
            raise InputError(
                where,
                f"maintenance[{di}].end",
                "the drain must end after its deadline (the node takes work again at `end`, before "
                "the runs still on it would be preempted at the deadline)",
            )
        stop = end if end is not None else math.inf
        for ni, node in enumerate(ids):
            clash = windows.setdefault(node, _Windows()).overlapping(start, stop)
            if clash:
                raise InputError(
                    where,
                    f"maintenance[{di}].nodes[{ni}]",
                    f"node {nodes[node].name} is already in maintenance[{min(clash)}] at that time "
                    "(overlapping maintenance windows on one node)",
                )
        for node in dict.fromkeys(ids):
            windows[node].add(start, stop, di)
        drains.append(Maintenance(tuple(ids), start, deadline, end))
    return tuple(drains)


def load_cluster(path: Path | str, policy: Policy | None = None) -> Cluster:
    p = Path(path)
    spec = validate(ClusterSpec, load_yaml(p), str(p))
    return build_cluster(spec, str(p), policy)


def cluster_from_dict(data: dict[str, Any], where: str, policy: Policy | None = None) -> Cluster:
    return build_cluster(validate(ClusterSpec, data, where), where, policy)
