"""The project's own formats: the workload CSV / JSON Lines and the cluster YAML of FORMATS.md."""

from __future__ import annotations

from pathlib import Path

from ...core.tree import TreeIndex
from ...errors import InputError
from .._validation import load_yaml
from ..cluster import Cluster
from ..policy import Policy
from ..reader import check_input
from ..workload import Job, load_workload
from .registry import (
    ClusterFormat,
    ClusterSource,
    LoadedWorkload,
    TraceOptions,
    WorkloadFormat,
    cluster_format,
    workload_format,
)


@workload_format
class NativeWorkload(WorkloadFormat):
    name = "native"
    description = "fairshare workload CSV or JSON Lines (FORMATS.md)"
    window = False

    def read(self, path: Path, options: TraceOptions) -> LoadedWorkload:
        check_input(path)  # missing, a folder, a FIFO or device, a path the OS refuses: at once

        def jobs(policy: Policy, tree: TreeIndex, cluster: Cluster) -> list[Job]:
            return load_workload(path, policy, tree, cluster)

        return LoadedWorkload(where=str(path), jobs=jobs)


@cluster_format
class NativeCluster(ClusterFormat):
    name = "native"
    description = "fairshare cluster YAML (FORMATS.md)"

    def read(self, path: Path) -> ClusterSource:
        data = load_yaml(path)
        if not isinstance(data, dict):
            raise InputError(str(path), "", "expected a mapping with pools: (a fairshare cluster YAML)")
        return ClusterSource(data, str(path))
