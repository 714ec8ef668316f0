"""Alibaba GPU cluster trace 2023 "openb" (Weng et al., USENIX ATC 2023): node list and pod list.

Cluster (`openb_node_list_gpu_node.csv`: `sn, cpu_milli, memory_mib, gpu, model`): nodes of the same
shape (model, GPUs, CPUs, memory) form one pool named `<model>-<gpus>g-<cpus>c-<mem>g`, in order of
first appearance; the GPU model is the GPU type. Nodes without GPUs are left out (the replay places
GPU jobs). A pool is one topology block (the trace has no topology).

Workload (`openb_pod_list_*.csv`: `name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
pod_phase, creation_time, deletion_time, scheduled_time`): one job a pod, id = pod name, submitted at
`creation_time`, running for `deletion_time - scheduled_time` (never-scheduled pods: from
`creation_time`), class = `qos`, allowed GPU types = `gpu_spec`, on one node. A pod that shares a
fraction of a GPU (`gpu_milli` < 1000) counts as one whole GPU. Pods without GPUs are not replayed:
they are counted, with their CPU and memory totals, in the load summary (see docs/traces.md).

The default policy has one top-level group and one class per QoS value; shares are each QoS's
GPU-hours in the whole file. GPU rates: `RATES` below (documented with their source in docs/traces.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core.tree import TreeIndex
from ...errors import InputError
from .. import limits
from ..cluster import Cluster
from ..policy import Policy
from ..workload import Job, build_jobs
from . import shaping
from ._table import Table, TraceRow, gc_paused, read_table
from .registry import (
    ClusterFormat,
    ClusterSource,
    LoadedWorkload,
    TraceOptions,
    WorkloadFormat,
    cluster_format,
    workload_format,
)

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "num_gpu", "qos", "creation_time", "deletion_time")
POD_OPTIONAL = ("cpu_milli", "memory_mib", "gpu_milli", "gpu_spec", "scheduled_time")
NODE_LIST = "openb_node_list_gpu_node.csv"

#: GPU-equivalents per GPU: peak dense FP16 throughput (tensor cores where the GPU has them) from
#: NVIDIA's datasheets, relative to V100 (125 TFLOPS). G1, G2, G3 are undisclosed internal models
#: (the trace's README): rated as a V100. See docs/traces.md.
RATES: dict[str, float] = {
    "V100M16": 1.0,
    "V100M32": 1.0,
    "A10": 1.0,
    "T4": 0.52,
    "P100": 0.15,
    "G1": 1.0,
    "G2": 1.0,
    "G3": 1.0,
}

#: Execution contracts by QoS (see docs/traces.md for the reasoning).
QOS_CLASSES: dict[str, dict[str, Any]] = {
    "LS": {"protected": "2h", "max_protected": "2h", "resumable": False, "max_stall": "1h"},
    "Guaranteed": {"protected": "2h", "max_protected": "2h", "resumable": False, "max_stall": "1h"},
    "Burstable": {"protected": "30m", "max_protected": "1h", "resumable": False, "max_stall": "1h"},
    "BE": {
        "protected": "10m",
        "max_protected": "30m",
        "resumable": True,
        "checkpoint": "15m",
        "restore": "1m",
        "max_stall": "1h",
    },
}
#: The contract of a QoS value not in QOS_CLASSES (other pod lists may hold other values).
OTHER_CLASS: dict[str, Any] = QOS_CLASSES["Burstable"]

_NONE = ("", "nan", "NaN", "None", "none", "null")
_POOL_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def _num(x: float) -> str:
    return f"{x:g}"


@cluster_format
class OpenbCluster(ClusterFormat):
    name = "openb"
    description = "Alibaba openb node list (sn, cpu_milli, memory_mib, gpu, model)"

    def read(self, path: Path) -> ClusterSource:
        table = read_table(path, NODE_COLUMNS, "an openb node list")
        shapes: dict[tuple[str, int, float, float], int] = {}
        skipped = 0
        for r, cells in enumerate(table.rows):
            gpus = table.whole(r, "gpu", cells[table.index["gpu"]])
            if gpus > limits.MAX_NODE_GPUS:
                raise table.fail(
                    r, "gpu", f"must be at most {limits.MAX_NODE_GPUS:,} GPUs per node (the limit)"
                )
            if gpus == 0:
                skipped += 1
                continue
            model = cells[table.index["model"]].strip()
            if model in _NONE:
                raise table.fail(r, "model", f"a node with {gpus} GPUs needs a GPU model")
            cpus = table.number(r, "cpu_milli", cells[table.index["cpu_milli"]], minimum=0) / 1000
            mem = table.number(r, "memory_mib", cells[table.index["memory_mib"]], minimum=0) / 1024
            key = (model, gpus, cpus, mem)
            shapes[key] = shapes.get(key, 0) + 1
        if not shapes:
            raise InputError(table.where, "", "the node list has no GPU nodes")
        pools: list[dict[str, Any]] = []
        by_type: dict[str, int] = {}
        for (model, gpus, cpus, mem), count in shapes.items():
            name = _POOL_CHARS.sub("_", f"{model}-{gpus}g-{_num(cpus)}c-{_num(mem)}g")
            pools.append(
                {"name": name, "count": count, "gpus": gpus, "gpu_type": model, "cpus": cpus, "mem_gb": mem}
            )
            by_type[model] = by_type.get(model, 0) + count * gpus
        nodes = sum(shapes.values())
        summary = [
            f"cluster: openb node list {table.where}: {nodes:,} GPU nodes, {sum(by_type.values()):,} GPUs "
            f"in {len(pools)} pools ({', '.join(f'{t} {n:,}' for t, n in by_type.items())})"
        ]
        if skipped:
            summary.append(f"{skipped:,} nodes without GPUs left out (the replay places GPU jobs)")
        return ClusterSource({"pools": pools}, table.where, tuple(summary))


def default_policy(qos_gpu_h: dict[str, float], gpu_types: Sequence[str]) -> dict[str, Any]:
    """One group and one class per QoS value; share = the QoS's GPU-hours in the file (at least 1)."""
    names = sorted(qos_gpu_h, key=lambda q: (-qos_gpu_h[q], q))
    return {
        "window": "7d",
        "gpu_rates": {t: RATES.get(t, 1.0) for t in gpu_types},
        "tree": [{"name": q, "share": max(1, round(qos_gpu_h[q]))} for q in names],
        "classes": {q: dict(QOS_CLASSES.get(q, OTHER_CLASS)) for q in names},
    }


def _absent(text: str) -> bool:
    return text.strip() in _NONE


@workload_format
class OpenbPods(WorkloadFormat):
    name = "openb"
    description = (
        "Alibaba openb pod list (name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, "
        "pod_phase, creation_time, deletion_time, scheduled_time)"
    )

    def read(self, path: Path, options: TraceOptions) -> LoadedWorkload:
        table = read_table(path, POD_COLUMNS, "an openb pod list")
        where = table.where
        if options.repeat != 1:
            raise InputError(where, "", "--repeat is supported by the philly format only")
        pods = _Pods(table)
        for r, cells in enumerate(table.rows):
            pods.add(r, cells)
        if not pods.pods:
            raise InputError(where, "", "the pod list has no pods")
        pods.pods.sort(key=lambda p: p[1])
        items = pods.pods
        shaped = shaping.shape(
            len(items),
            lambda k: items[k][1],
            lambda k: (table.lines[items[k][0]], dict(items[k][2])),
            options,
            where,
        )
        cols = {
            "job_id": table.column("name"),
            "submit": table.column("creation_time"),
            "group": table.column("qos"),
            "class": table.column("qos"),
            "gpus": table.column("num_gpu"),
            "nodes": table.column("num_gpu"),
            "work": table.column("deletion_time"),
        }
        for key, col in (("gpu_type", "gpu_spec"), ("cpus", "cpu_milli"), ("mem_gb", "memory_mib")):
            if col in table.index:
                cols[key] = table.column(col)
        qos_gpu_h = {q: s / 3600.0 for q, s in pods.qos_gpu_s.items()}
        records = shaped.records

        def jobs(policy: Policy, tree: TreeIndex, cluster: Cluster) -> list[Job]:
            rows = (TraceRow(where, line, values, cols) for line, values in records)
            with gc_paused():
                return build_jobs(rows, policy, tree, cluster, min_gpus=0)

        def default_cluster() -> ClusterSource:
            nodes = path.parent / NODE_LIST
            if not nodes.is_file():
                raise InputError(
                    str(nodes),
                    "",
                    f"no --cluster given, and the openb node list is not next to the pod list {where}; "
                    "give --cluster PATH --cluster-format openb",
                )
            return OpenbCluster().read(nodes)

        return LoadedWorkload(
            where=where,
            jobs=jobs,
            default_policy=lambda types: default_policy(qos_gpu_h, types),
            default_cluster=default_cluster,
            summary=tuple(pods.summary(shaped, options)),
            stats=pods.stats(shaped, qos_gpu_h),
        )


class _Pods:
    """The pods of a pod list read row by row: (row, creation time, job values), and counts."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.opt = {c: table.index.get(c) for c in POD_OPTIONAL}
        self.pods: list[tuple[int, float, dict[str, Any]]] = []
        self.qos_gpu_s: dict[str, float] = {}
        self.shared = self.floored = self.cpu_only = 0
        self.cpu_only_cpus = self.cpu_only_mem = self.cpu_only_cpu_s = self.cpu_only_mem_s = 0.0

    def _given(self, cells: list[str], col: str) -> bool:
        return self.opt[col] is not None and not _absent(cells[self.table.index[col]])

    def add(self, r: int, cells: list[str]) -> None:
        table, ix = self.table, self.table.index
        num_gpu = table.whole(r, "num_gpu", cells[ix["num_gpu"]])
        milli = table.whole(r, "gpu_milli", cells[ix["gpu_milli"]]) if self._given(cells, "gpu_milli") else 0
        cpus = mem = 0.0
        if self._given(cells, "cpu_milli"):
            cpus = table.number(r, "cpu_milli", cells[ix["cpu_milli"]], minimum=0) / 1000
        if self._given(cells, "memory_mib"):
            mem = table.number(r, "memory_mib", cells[ix["memory_mib"]], minimum=0) / 1024
        created, work = self._times(r, cells)
        gpus = num_gpu
        if num_gpu == 0 and milli == 0:
            # CPU-only: replayed with no GPU, charged by its dominant CPU or memory share
            self.cpu_only += 1
            self.cpu_only_cpus += cpus
            self.cpu_only_mem += mem
            self.cpu_only_cpu_s += cpus * work
            self.cpu_only_mem_s += mem * work
        if milli and milli < 1000 and num_gpu <= 1:
            self.shared += 1
            gpus = 1
        qos = cells[ix["qos"]].strip()
        if _absent(qos):
            raise table.fail(r, "qos", "a QoS (the job class) is required")
        if work < 1.0:
            self.floored += 1
            work = 1.0
        self.qos_gpu_s[qos] = self.qos_gpu_s.get(qos, 0.0) + max(gpus, 1) * work
        values: dict[str, Any] = {
            "job_id": cells[ix["name"]].strip(),
            "submit": 0.0,  # set by shaping.shape
            "group": qos,
            "class": qos,
            "gpus": gpus,
            "nodes": 1,
            "work": work,
        }
        if self._given(cells, "gpu_spec"):
            values["gpu_type"] = cells[ix["gpu_spec"]].strip()
        if cpus > 0:
            values["cpus"] = cpus
        if mem > 0:
            values["mem_gb"] = mem
        self.pods.append((r, created, values))

    def _times(self, r: int, cells: list[str]) -> tuple[float, float]:
        """creation_time, and the run time deletion_time - scheduled_time (a pod never scheduled:
        from creation_time)."""
        table, ix = self.table, self.table.index
        created = table.number(r, "creation_time", cells[ix["creation_time"]], minimum=0)
        started = created
        if self._given(cells, "scheduled_time"):
            started = table.number(r, "scheduled_time", cells[ix["scheduled_time"]], minimum=created)
        deleted = table.number(r, "deletion_time", cells[ix["deletion_time"]])
        if deleted < started:
            raise table.fail(
                r,
                "deletion_time",
                f"the pod is deleted ({deleted:g}) before it was "
                f"{'scheduled' if started > created else 'created'} ({started:g})",
            )
        return created, deleted - started

    def summary(self, shaped: shaping.Shaped, options: TraceOptions) -> list[str]:
        rows = len(self.table.rows)
        gpu_pods = len(self.pods) - self.cpu_only
        lines = [
            f"openb: {rows:,} pods in {self.table.where}: {gpu_pods:,} with GPUs, {self.cpu_only:,} without",
            f"replaying pods {shaped.first}:{shaped.end} in submit order: {len(shaped.records):,} jobs",
            f"{self.shared:,} pods share a fraction of one GPU (gpu_milli < 1000): each counts as one "
            "whole GPU",
        ]
        if self.cpu_only:
            lines.append(
                f"{self.cpu_only:,} CPU-only pods hold no GPU and are charged by their dominant CPU or "
                f"memory share ({self.cpu_only_cpus:,.0f} CPUs and {self.cpu_only_mem:,.0f} GiB requested, "
                f"{self.cpu_only_cpu_s / 3600:,.0f} CPU-hours and {self.cpu_only_mem_s / 3600:,.0f} "
                "GiB-hours); CPU and memory capacity are not modelled, so they never wait"
            )
        if self.floored:
            lines.append(f"{self.floored:,} pod(s) that lived under 1 s run for 1 s")
        return lines + shaping.summary(shaped, options, "pods")

    def stats(self, shaped: shaping.Shaped, qos_gpu_h: dict[str, float]) -> dict[str, Any]:
        return {
            "pods_in_file": len(self.table.rows),
            "gpu_pods": len(self.pods) - self.cpu_only,
            "shared_gpu_pods": self.shared,
            "cpu_only_pods": self.cpu_only,
            "cpu_only_cpus": self.cpu_only_cpus,
            "cpu_only_mem_gb": self.cpu_only_mem,
            "cpu_only_cpu_h": self.cpu_only_cpu_s / 3600,
            "cpu_only_mem_gb_h": self.cpu_only_mem_s / 3600,
            "qos_gpu_h": qos_gpu_h,
            "window": (shaped.first, shaped.end),
            "jobs": len(shaped.records),
            "rounded": shaped.rounded,
            "clipped": shaped.clipped,
            "floored": self.floored,
        }
