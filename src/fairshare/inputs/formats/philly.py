"""Microsoft Philly (2017) derived job table: `timestamp, duration, num_gpus, gpu_time, cluster`.

One row a job; `cluster` (a Philly virtual cluster, i.e. a team) is the fair-share group. Rows are
not sorted: jobs are put in submit order by a stable sort on the timestamp (naive wall clock, read as
UTC), then the window `first .. first + count` is taken. Jobs over 8 GPUs are gangs of 8-GPU nodes.

The default policy gives every team a top-level group whose share is the GPU-hours it used in the
whole file (Philly's virtual clusters had quotas; their sizes are not published, and usage is the
best public proxy for them), and one class `train` for every job. The default cluster is 40 nodes of
8 GPUs in 4 blocks, sized for the 16,000-job benchmark window (see docs/traces.md).
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core.tree import TreeIndex
from ...errors import InputError
from .. import limits
from ..cluster import Cluster
from ..policy import Policy
from ..workload import Job, build_jobs
from . import shaping
from ._table import Table, TraceRow, gc_paused, read_table
from .registry import ClusterSource, LoadedWorkload, TraceOptions, WorkloadFormat, workload_format
from .shaping import Record

COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
CLASS = "train"
GPU_TYPE = "gpu"
NODE_GPUS = 8

#: The one class of Philly jobs: DL training that checkpoints (see docs/traces.md).
TRAIN_CLASS: dict[str, Any] = {
    "protected": "30m",
    "max_protected": "30m",
    "resumable": True,
    "checkpoint": "30m",
    "restore": "2m",
    "max_stall": "1h",
}

#: The default cluster: 40 nodes x 8 GPUs in 4 blocks of 10 (examples/philly-window-cluster.yaml).
WINDOW_CLUSTER: dict[str, Any] = {
    "pools": [{"name": "philly", "count": 40, "gpus": NODE_GPUS, "gpu_type": GPU_TYPE, "nodes_per_block": 10}]
}

#: The default cluster for the whole trace: 100 nodes x 8 GPUs in 10 blocks of 10 (800 GPUs), the
#: 90th percentile of the GPUs the trace's jobs would hold at once on an unlimited cluster.
FULL_CLUSTER: dict[str, Any] = {
    "pools": [
        {"name": "philly", "count": 100, "gpus": NODE_GPUS, "gpu_type": GPU_TYPE, "nodes_per_block": 10}
    ]
}

_BASE = dt.datetime(1970, 1, 1)
_UTC = dt.UTC


def _seconds(text: str) -> float:
    """Seconds since 1970-01-01 of a naive wall-clock timestamp (an offset, if any, is honoured)."""
    d = dt.datetime.fromisoformat(text)
    if d.tzinfo is not None:
        d = d.astimezone(_UTC).replace(tzinfo=None)
    return (d - _BASE).total_seconds()


def _wall(seconds: float) -> str:
    return (_BASE + dt.timedelta(seconds=seconds)).isoformat(sep=" ")


def gang_nodes(gpus: int) -> int | None:
    """Nodes of a job over 8 GPUs: the fewest 8-GPU nodes over which its GPUs divide evenly."""
    if gpus <= NODE_GPUS:
        return None  # one node; the workload builder picks it from the cluster
    # the fewest nodes k >= gpus / 8 dividing gpus: gpus over the most GPUs per node (<= 8) that
    # divide it (eight tries, where counting k up would take as long as a prime number of GPUs)
    per = max(d for d in range(1, NODE_GPUS + 1) if gpus % d == 0)
    return gpus // per


def default_policy(team_gpu_h: dict[str, float], gpu_types: Sequence[str]) -> dict[str, Any]:
    """Teams as top-level groups, share = GPU-hours used in the whole file (at least 1)."""
    teams = sorted(team_gpu_h, key=lambda t: (-team_gpu_h[t], t))
    return {
        "window": "7d",
        "gpu_rates": {t: 1.0 for t in gpu_types},
        "tree": [{"name": t, "share": max(1, round(team_gpu_h[t]))} for t in teams],
        "classes": {CLASS: dict(TRAIN_CLASS)},
    }


@workload_format
class PhillyFormat(WorkloadFormat):
    name = "philly"
    description = "Microsoft Philly 2017 job table (timestamp, duration, num_gpus, gpu_time, cluster)"

    def read(self, path: Path, options: TraceOptions) -> LoadedWorkload:
        with gc_paused():
            return self._read(path, options)

    def _read(self, path: Path, options: TraceOptions) -> LoadedWorkload:
        table = read_table(path, COLUMNS, "a Philly trace")
        where = table.where
        n = len(table.rows)
        if n == 0:
            raise InputError(where, "", "the trace has no jobs")
        submit, work, gpus, team = _columns(table)
        team_gpu_s: dict[str, float] = {}
        for c, w, g in zip(team, work, gpus, strict=True):
            team_gpu_s[c] = team_gpu_s.get(c, 0.0) + w * g
        order: list[int] = np.argsort(np.asarray(submit), kind="stable").tolist()
        lines = table.lines

        def job(k: int) -> Record:
            i = order[k]
            return lines[i], {
                "job_id": f"philly-{i}",
                "group": team[i],
                "class": CLASS,
                "gpus": gpus[i],
                "work": work[i],
            }

        shaped = shaping.shape(n, lambda k: submit[order[k]], job, options, where)
        gangs = 0
        for _, values in shaped.records:
            if values["gpus"] > NODE_GPUS:
                gangs += 1
                values["nodes"] = gang_nodes(values["gpus"])
        records = shaping.repeat(shaped.records, options.repeat, where)
        t0 = submit[order[shaped.first if options.rebase else 0]]
        team_gpu_h = {t: v / 3600.0 for t, v in team_gpu_s.items()}
        epoch = _wall(t0).replace(" ", "T") + "Z"
        summary = [
            f"philly: {n:,} jobs of {len(team_gpu_s)} teams in {where}, submitted "
            f"{_wall(submit[order[0]])} .. {_wall(submit[order[-1]])}",
            f"replaying jobs {shaped.first}:{shaped.end} in submit order: {len(shaped.records):,} jobs, "
            f"t = 0 at {_wall(t0)}",
        ]
        if options.repeat > 1:
            summary.append(f"repeated {options.repeat} times back to back: {len(records):,} jobs")
        if gangs:
            summary.append(f"{gangs:,} jobs of more than 8 GPUs run as gangs of 8-GPU nodes")
        summary += shaping.summary(shaped, options, "jobs")
        stats = {
            "jobs_in_file": n,
            "teams": len(team_gpu_s),
            "team_gpu_h": team_gpu_h,
            "window": (shaped.first, shaped.end),
            "jobs": len(shaped.records),
            "rounded": shaped.rounded,
            "clipped": shaped.clipped,
            "gangs": gangs,
            "epoch": epoch,
        }
        return _loaded(
            where,
            records,
            table,
            team_gpu_h,
            whole=options.first == 0 and options.count is None,
            epoch=epoch,
            summary=summary,
            stats=stats,
        )


def _loaded(
    where: str,
    records: list[Record],
    table: Table,
    team_gpu_h: dict[str, float],
    *,
    whole: bool,
    epoch: str,
    summary: list[str],
    stats: dict[str, Any],
) -> LoadedWorkload:
    """The loaded workload: jobs built on demand, the default policy and cluster."""
    cols = {
        "submit": table.column("timestamp"),
        "work": table.column("duration"),
        "gpus": table.column("num_gpus"),
        "nodes": table.column("num_gpus"),
        "group": table.column("cluster"),
    }

    def jobs(policy: Policy, tree: TreeIndex, cluster: Cluster) -> list[Job]:
        if CLASS not in policy.classes:
            raise InputError(
                where,
                "",
                f"Philly jobs are of class {CLASS!r}, which the policy does not define "
                f"(its classes: {', '.join(policy.classes)}); add a {CLASS} class to the policy",
            )
        rows = (TraceRow(where, line, values, cols) for line, values in records)
        with gc_paused():
            return build_jobs(rows, policy, tree, cluster)

    def cluster() -> ClusterSource:
        if whole:
            spec = {**FULL_CLUSTER, "epoch": epoch}
            note = (
                "cluster: the Philly default for the whole trace, 100 nodes x 8 GPUs in 10 blocks (800 GPUs)"
            )
        else:
            spec = {**WINDOW_CLUSTER, "epoch": epoch}
            note = "cluster: the Philly default for a window, 40 nodes x 8 GPUs in 4 blocks (320 GPUs)"
        return ClusterSource(spec, f"{where}: default cluster", (note,))

    return LoadedWorkload(
        where=where,
        jobs=jobs,
        default_policy=lambda types: default_policy(team_gpu_h, types),
        default_cluster=cluster,
        summary=tuple(summary),
        stats=stats,
    )


def _columns(table: Table) -> tuple[list[float], list[float], list[int], list[str]]:
    """submit (seconds since 1970, wall clock), duration, GPUs and team of every row.

    Fast path: numpy parses whole columns; on any problem every row is parsed again one by one so
    the error names the bad cell's line and column.
    """
    ti, di, gi, ci = (table.index[c] for c in COLUMNS)
    cols = list(zip(*table.rows, strict=True))
    team = [c.strip() for c in cols[ci]]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy warns on time zones: take the slow path then
            stamps = np.array(cols[ti], dtype="datetime64[ms]")
            du = np.array(cols[di], dtype=np.float64)
            gp = np.array(cols[gi], dtype=np.int64)
        ok = not np.isnat(stamps).any() and bool(
            np.all(np.isfinite(du) & (du > 0)) and np.all((gp >= 1) & (gp <= limits.MAX_JOB_GPUS))
        )
        ts = stamps.astype(np.int64) / 1000.0
    except (ValueError, TypeError, OverflowError, Warning):
        ok = False
    if ok and all(team):
        return ts.tolist(), du.tolist(), gp.tolist(), team
    submit: list[float] = []
    work: list[float] = []
    gpus: list[int] = []
    for r, cells in enumerate(table.rows):
        s, w, g = _slow_row(table, r, cells, ti, di, gi)
        if not team[r]:
            raise table.fail(r, "cluster", "a team (virtual cluster) is required")
        submit.append(s)
        work.append(w)
        gpus.append(g)
    return submit, work, gpus, team


def _slow_row(table: Table, r: int, cells: list[str], ti: int, di: int, gi: int) -> tuple[float, float, int]:
    """Parse one row again, column by column, to raise an error naming the bad cell."""
    text = cells[ti].strip()
    try:
        s = _seconds(text)
    except ValueError:
        raise table.fail(
            r, "timestamp", f"expected a wall-clock time YYYY-mm-dd HH:MM:SS, got {cells[ti]!r}"
        ) from None
    w = table.number(r, "duration", cells[di])
    if not w > 0:
        raise table.fail(r, "duration", f"the run time must be > 0 seconds, got {cells[di]!r}")
    g = table.whole(r, "num_gpus", cells[gi], minimum=1)
    if g > limits.MAX_JOB_GPUS:
        raise table.fail(
            r, "num_gpus", f"must be at most {limits.MAX_JOB_GPUS:,} (the limit), got {cells[gi]!r}"
        )
    return s, w, g
