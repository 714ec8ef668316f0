"""The cluster file: pools of identical nodes in topology blocks, maintenance drains, epoch, horizon."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from .._units import instant, to_utc
from ..core.model import Node
from ..errors import InputError
from ._validation import StrictModel, load_yaml, validate
from .policy import Policy

EPOCH_DEFAULT = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class Pool(StrictModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    count: int = Field(ge=1)
    gpus: int = Field(ge=1)
    gpu_type: str = Field(min_length=1)
    cpus: float = Field(default=0, ge=0)
    mem_gb: float = Field(default=0, ge=0)
    nodes_per_block: int | None = Field(default=None, ge=1)


class Drain(StrictModel):
    nodes: tuple[str, ...] = Field(min_length=1)
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
    maintenance: tuple[Drain, ...] = ()
    epoch: Any = None
    horizon: Any = None

    @field_validator("epoch")
    @classmethod
    def _epoch(cls, v: Any) -> Any:
        if v is not None:
            to_utc(v)
        return v


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
    epoch = to_utc(spec.epoch) if spec.epoch is not None else EPOCH_DEFAULT
    index = {n.name: i for i, n in enumerate(nodes)}
    windows: list[tuple[set[int], float, float | None]] = []
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

        def at(key: str, value: Any, di: int = di) -> float:
            try:
                return instant(value, epoch)
            except ValueError as exc:
                raise InputError(where, f"maintenance[{di}].{key}", str(exc)) from None

        start = at("start", d.start)
        deadline = at("deadline", d.deadline) if d.deadline is not None else start
        end = at("end", d.end) if d.end is not None else None
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
        for ni, node in enumerate(ids):  # one maintenance at a time per node
            for pi, (p_nodes, p_start, p_end) in enumerate(windows):
                if (
                    node in p_nodes
                    and start < (p_end if p_end is not None else float("inf"))
                    and (end is None or p_start < end)
                ):
                    raise InputError(
                        where,
                        f"maintenance[{di}].nodes[{ni}]",
                        f"node {nodes[node].name} is already in maintenance[{pi}] at that time "
                        "(overlapping maintenance windows on one node)",
                    )
        windows.append((set(ids), start, end))
        drains.append(Maintenance(tuple(ids), start, deadline, end))
    horizon = None
    if spec.horizon is not None:
        try:
            horizon = instant(spec.horizon, epoch)
        except ValueError as exc:
            raise InputError(where, "horizon", str(exc)) from None
        if horizon <= 0:
            raise InputError(where, "horizon", "the horizon must be after t = 0")
    return Cluster(tuple(nodes), spec.pools, tuple(drains), epoch, horizon)


def load_cluster(path: Path | str, policy: Policy | None = None) -> Cluster:
    p = Path(path)
    spec = validate(ClusterSpec, load_yaml(p), str(p))
    return build_cluster(spec, str(p), policy)


def cluster_from_dict(data: dict[str, Any], where: str, policy: Policy | None = None) -> Cluster:
    return build_cluster(validate(ClusterSpec, data, where), where, policy)
