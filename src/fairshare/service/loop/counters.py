"""What an operator alerts on, counted by the loop as the cluster confirms it (this process's
counts since it started, as Prometheus counters are): starts, preemptions by reason, the GPU-hours
they lost, requeues (a preempted job back in the queue), and first-start waits by class as a
histogram (buckets, sum, count)."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from ..clusters.backend import Observation, Preempted, Started
from .live_engine import LiveEngine

WAIT_BUCKETS = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0, 259200.0, 604800.0)


@dataclass
class Waits:
    buckets: list[int] = field(default_factory=lambda: [0] * len(WAIT_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, wait: float) -> None:
        i = bisect.bisect_left(WAIT_BUCKETS, wait)
        if i < len(WAIT_BUCKETS):
            self.buckets[i] += 1
        self.total += wait
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for le, n in zip(WAIT_BUCKETS, self.buckets, strict=True):
            running += n
            out.append((f"{le:g}", float(running)))
        out.append(("+Inf", float(self.count)))
        return out


@dataclass
class LoopCounters:
    starts: int = 0
    preemptions: Counter[str] = field(default_factory=Counter)
    lost_gpu_s: float = 0.0
    requeues: int = 0
    waits: dict[str, Waits] = field(default_factory=dict)

    def count(self, o: Observation, e: LiveEngine) -> None:
        """After the engine took observation `o` (a confirmed start or preemption)."""
        rec = e.info.get(o.job) if isinstance(o, Started | Preempted) else None
        if isinstance(o, Started):
            self.starts += 1
            if rec is not None and rec.runs == 1 and rec.first_start is not None:
                self.waits.setdefault(rec.request.cls, Waits()).observe(rec.first_start - rec.submitted)
        elif isinstance(o, Preempted):
            self.preemptions[o.reason] += 1
            self.lost_gpu_s += o.lost_gpu_s
            if o.job in e.state.pending.jobs:
                self.requeues += 1
