"""What one replay hands to the report and the CLI: metrics plus sampled series (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Series:
    """Time series sampled at regular instants of the replay clock (seconds).

    `owed` and `delivered` are rates in GPU-equivalents, per top-level group path; `occupancy` is the
    fraction of available GPUs allocated at that instant (0..1).
    """

    t: tuple[float, ...]
    occupancy: tuple[float, ...]
    owed: dict[str, tuple[float, ...]]
    delivered: dict[str, tuple[float, ...]]

    def as_json(self) -> dict[str, Any]:
        return {
            "t": list(self.t),
            "occupancy": list(self.occupancy),
            "owed": {k: list(v) for k, v in self.owed.items()},
            "delivered": {k: list(v) for k, v in self.delivered.items()},
        }


@dataclass(frozen=True)
class ReplayResult:
    """One strategy replayed on one workload.

    `metrics` is exactly the content of metrics.json (FORMATS.md). `waits` maps class name to the
    wait in seconds of every job of that class (censored at the horizon like the metric).
    `lost_gpu_h` maps top-level group to the GPU-hours lost to preemption by its jobs.
    """

    strategy: str
    scenario: str
    metrics: dict[str, Any]
    series: Series
    waits: dict[str, tuple[float, ...]]
    lost_gpu_h: dict[str, float]
    out_dir: str | None = None


@dataclass(frozen=True)
class Comparison:
    """Several policies on the same arrivals (one scenario or one workload)."""

    scenario: str
    description: str
    results: tuple[ReplayResult, ...]
    notes: tuple[str, ...] = field(default=())
    #: strategy -> its metrics.json `fidelity` against as-run (only when as-run was compared)
    fidelity: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_modelled: tuple[dict[str, str], ...] = field(default=())  # the incumbent's, from a site folder


@dataclass
class ReplayOutput:
    """One replay's output lines (events.jsonl, decisions.jsonl) and its result."""

    events: list[str]
    decisions: list[str]
    result: ReplayResult
