"""The format registry: workload and cluster readers, registered by name.

A workload format reads a file into a `LoadedWorkload`: a way to build the jobs once the policy and
cluster are known, plus (for a public trace) a default policy and cluster. A cluster format reads a
file into a cluster spec (the dict a cluster YAML holds). Adding a format is one small module: subclass
`WorkloadFormat` or `ClusterFormat`, decorate it with `@workload_format` / `@cluster_format`, and
import the module from `fairshare/formats/__init__.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ...core.tree import TreeIndex
from ...errors import InputError
from ..cluster import Cluster
from ..policy import Policy
from ..workload import Job


@dataclass(frozen=True)
class TraceOptions:
    """How much of a trace to replay and how to shape it (trace formats only).

    first, count  the slice of jobs in submit order (a stable sort on the submit time): jobs
                  first .. first + count - 1, zero-based; count None = to the end
    round_gpus    round each job's GPUs up to 1, 2, 4 or 8, and above 8 to a multiple of 8
    clip          (min, max) seconds for each job's run time; None = no bound on that side
    rebase        shift arrivals so the window's first job arrives at t = 0 (False: t = 0 is the
                  first arrival of the whole file)
    repeat        replay the window this many times back to back: copy k arrives k periods later,
                  a period being the window's span plus one mean gap between arrivals, so the
                  arrival rate (the load) stays the same; copies' job ids end in `-r<k>`
    """

    first: int = 0
    count: int | None = None
    round_gpus: bool = False
    clip: tuple[float | None, float | None] = (None, None)
    rebase: bool = True
    repeat: int = 1

    def is_default(self) -> bool:
        return self == TraceOptions()

    def describe(self) -> str:
        parts = []
        if self.first or self.count is not None:
            end = "" if self.count is None else str(self.first + self.count)
            parts.append(f"jobs {self.first}:{end}")
        if self.round_gpus:
            parts.append("GPUs rounded up")
        lo, hi = self.clip
        if lo is not None or hi is not None:
            parts.append(f"run time clipped to [{_secs(lo)}, {_secs(hi)}]")
        if not self.rebase:
            parts.append("not rebased")
        return ", ".join(parts)


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:g}s"


def round_gpus(gpus: int) -> int:
    """1, 2, 4 or 8 (the next power of two) up to 8 GPUs; above 8 the next multiple of 8."""
    if gpus <= 8:
        p = 1
        while p < gpus:
            p *= 2
        return p
    return -(-gpus // 8) * 8


def clip(work: float, bounds: tuple[float | None, float | None]) -> float:
    lo, hi = bounds
    if lo is not None and work < lo:
        work = lo
    if hi is not None and work > hi:
        work = hi
    return work


def window(n: int, options: TraceOptions, where: str) -> tuple[int, int]:
    """[first, end) of the window over n jobs; an empty window is an error."""
    first = options.first
    end = n if options.count is None else min(n, first + options.count)
    if first < 0 or (options.count is not None and options.count < 1):
        raise InputError(where, "", f"bad job window {first}:{end}: give FIRST:END with 0 <= FIRST < END")
    if first >= n:
        raise InputError(
            where, "", f"the job window starts at {first} but the trace has only {n:,} jobs (0:{n})"
        )
    return first, end


@dataclass(frozen=True)
class LoadedWorkload:
    """A workload file read once; jobs are resolved when the policy and cluster are known.

    jobs            builds the Job list against a policy, its tree and a cluster (errors name the
                    file, line and column)
    default_policy  a policy dict for this trace given the cluster's GPU types, or None
    default_cluster a cluster dict (with the place it came from) for this trace, or None
    summary         lines telling what was read, skipped or changed (printed by the CLI)
    stats           the same as numbers, for tests and tools (keys depend on the format)
    """

    where: str
    jobs: Callable[[Policy, TreeIndex, Cluster], list[Job]]
    default_policy: Callable[[Sequence[str]], dict[str, Any]] | None = None
    default_cluster: Callable[[], ClusterSource] | None = None
    summary: tuple[str, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSource:
    """A cluster spec (the dict a cluster YAML holds), where it came from, and what was read."""

    spec: dict[str, Any]
    where: str
    summary: tuple[str, ...] = ()


class WorkloadFormat:
    """Reads one kind of workload file. `window` says whether TraceOptions apply."""

    name: ClassVar[str]
    description: ClassVar[str]
    window: ClassVar[bool] = True

    def read(self, path: Path, options: TraceOptions) -> LoadedWorkload:
        raise NotImplementedError


class ClusterFormat:
    """Reads one kind of cluster file into a cluster spec."""

    name: ClassVar[str]
    description: ClassVar[str]

    def read(self, path: Path) -> ClusterSource:
        raise NotImplementedError


WORKLOAD_FORMATS: dict[str, WorkloadFormat] = {}
CLUSTER_FORMATS: dict[str, ClusterFormat] = {}

W = TypeVar("W", bound=type[WorkloadFormat])
C = TypeVar("C", bound=type[ClusterFormat])


def workload_format(cls: W) -> W:
    """Class decorator: register a workload format under its `name`."""
    if cls.name in WORKLOAD_FORMATS:
        raise ValueError(f"workload format {cls.name!r} is already registered")
    WORKLOAD_FORMATS[cls.name] = cls()
    return cls


def cluster_format(cls: C) -> C:
    """Class decorator: register a cluster format under its `name`."""
    if cls.name in CLUSTER_FORMATS:
        raise ValueError(f"cluster format {cls.name!r} is already registered")
    CLUSTER_FORMATS[cls.name] = cls()
    return cls


def get_workload_format(name: str, where: str = "--workload-format") -> WorkloadFormat:
    fmt = WORKLOAD_FORMATS.get(name)
    if fmt is None:
        raise InputError(where, name, f"unknown workload format (known: {', '.join(WORKLOAD_FORMATS)})")
    return fmt


def get_cluster_format(name: str, where: str = "--cluster-format") -> ClusterFormat:
    fmt = CLUSTER_FORMATS.get(name)
    if fmt is None:
        raise InputError(where, name, f"unknown cluster format (known: {', '.join(CLUSTER_FORMATS)})")
    return fmt
