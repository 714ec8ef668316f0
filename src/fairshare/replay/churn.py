"""Churn metrics (docs/formats.md "Churn, overhead and waits by team and size"), accumulated while
a replay runs: preemptions per preempted job, flip-flops between teams, the start overhead paid by
restarts beside the lost work, and waits by team and by job size.

A team is a top-level group; W is the policy's window. Everything here is recomputed from
events.jsonl alone by benchmarks/policy.py (tests/test_churn_metrics.py checks they agree).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# job sizes (GPUs) for the waits by size: name, lowest, highest
SIZES = (("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), (">8", 9, None))


def size_of(gpus: int) -> str | None:
    """The size a job of `gpus` GPUs counts under (None: a CPU-only job)."""
    for name, lo, hi in SIZES:
        if gpus >= lo and (hi is None or gpus <= hi):
            return name
    return None


def team_of(group: str) -> str:
    return group.split("/", 1)[0]


def waits_summary(waits: Iterable[float]) -> dict[str, Any]:
    w = np.asarray(list(waits), dtype=float)
    return {
        "jobs": len(w),
        "wait_p50_s": float(np.percentile(w, 50)) if len(w) else None,
        "wait_p90_s": float(np.percentile(w, 90)) if len(w) else None,
    }


@dataclass
class Churn:
    window: float
    preempts_of: dict[str, int] = field(default_factory=dict)  # job -> its preempt events
    preemptions: int = 0
    flip_flops: int = 0
    # (victim team, taker team) -> t of the last preempt event of a run of the first by the second
    last: dict[tuple[str, str], float] = field(default_factory=dict)
    runs: dict[str, tuple[float, int, float, bool]] = field(default_factory=dict)  # t0, GPUs, overhead, first
    restart_overhead_s: float = 0.0  # GPU-seconds
    first_startup_s: float = 0.0

    def started(self, job: str, t: float, gpus: int, overhead: float, first: bool) -> None:
        self.runs[job] = (t, gpus, overhead, first)

    def stopped(self, job: str, t: float) -> None:
        """A run ended (finished, preempted, or cut by the horizon): the overhead it paid."""
        t0, gpus, overhead, first = self.runs.pop(job)
        paid = min(t - t0, overhead) * gpus
        if first:
            self.first_startup_s += paid
        else:
            self.restart_overhead_s += paid

    def preempted(self, job: str, t: float, victim_team: str, taker_team: str | None) -> None:
        self.preemptions += 1
        self.preempts_of[job] = self.preempts_of.get(job, 0) + 1
        if taker_team is None:
            return  # drain, no_progress: never a flip-flop
        if taker_team != victim_team:
            prev = self.last.get((taker_team, victim_team))
            if prev is not None and t - prev <= self.window:
                self.flip_flops += 1
        self.last[(victim_team, taker_team)] = t

    def finalize(self, horizon: float, allocated_s: float, lost_s: float) -> dict[str, Any]:
        for job in list(self.runs):
            self.stopped(job, horizon)
        counts = np.asarray(sorted(self.preempts_of.values()), dtype=float)

        def pct(x: float) -> float:
            return 100 * x / allocated_s if allocated_s else 0.0

        return {
            "preempted_jobs": len(counts),
            "preemptions_per_preempted_job": {
                "p50": float(np.percentile(counts, 50)) if len(counts) else None,
                "p99": float(np.percentile(counts, 99)) if len(counts) else None,
                "max": int(counts[-1]) if len(counts) else 0,
            },
            "flip_flops": self.flip_flops,
            "flip_flop_pct": 100 * self.flip_flops / self.preemptions if self.preemptions else 0.0,
            "restore_startup_gpu_h": self.restart_overhead_s / 3600,
            "restore_startup_pct": pct(self.restart_overhead_s),
            "first_startup_gpu_h": self.first_startup_s / 3600,
            "lost_plus_restore_pct": pct(lost_s + self.restart_overhead_s),
        }
