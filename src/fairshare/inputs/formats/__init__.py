"""Input formats by name: workload readers (native, philly, openb) and cluster readers (native, openb).

`WORKLOAD_FORMATS` and `CLUSTER_FORMATS` map a name to its reader; `TRACES` names the public traces
found under `$FAIRSHARE_TRACES`. To add a format, write one module with a `WorkloadFormat` or
`ClusterFormat` subclass decorated with `@workload_format` / `@cluster_format`, and import it below.
"""

from __future__ import annotations

from . import native, openb, philly  # noqa: F401  (registers the built-in formats)
from .registry import (
    CLUSTER_FORMATS,
    WORKLOAD_FORMATS,
    ClusterFormat,
    ClusterSource,
    LoadedWorkload,
    TraceOptions,
    WorkloadFormat,
    cluster_format,
    get_cluster_format,
    get_workload_format,
    round_gpus,
    workload_format,
)
from .traces import ENV, TRACES, Trace, trace_file, traces_root

__all__ = [
    "CLUSTER_FORMATS",
    "ENV",
    "TRACES",
    "WORKLOAD_FORMATS",
    "ClusterFormat",
    "ClusterSource",
    "LoadedWorkload",
    "Trace",
    "TraceOptions",
    "WorkloadFormat",
    "cluster_format",
    "get_cluster_format",
    "get_workload_format",
    "round_gpus",
    "trace_file",
    "traces_root",
    "workload_format",
]
