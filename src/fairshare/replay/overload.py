"""Overload metrics (docs/formats.md "Overload"): requeue waits, the GPUs left idle while a
waiting job fits, occupancy over the span where jobs wait, and the makespan.

A requeue wait runs from a `preempt` event of a job to its next `start` (a job never restarted
counts until the horizon, as FORMATS.md's waits do). Everything here but the bound's exemption is
recomputed from events.jsonl alone by benchmarks/policy.py (tests/test_churn_metrics.py checks
they agree).

The bound's exemption (issue 20: a requeued run regains GPUs within the bound "unless its own
group is above its share for that whole span"): a wait is *exempt* when its team was over-served
over the window (window debt = ∫owed − ∫delivered over the last `window` < 0, DESIGN.md's
over-served) at every 15-minute sample of the span, and the span holds at least one sample. It
needs the owed rates, so it is the recorder's (like share delivery), not the events'. The teams'
over-served state is kept as the last sample at which each team was *not* over-served: a wait
from t0 is exempt iff that sample is before t0 and some sample fell in the span (one comparison
per wait, one per team per sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .churn import team_of


def requeue_summary(waits: list[float], bound: float) -> dict[str, Any]:
    """Count, p50/p90/p99/max (null without requeues) and how many exceeded `bound`."""
    w = np.asarray(waits, dtype=float)
    n = len(w)
    return {
        "requeues": n,
        "p50_s": float(np.percentile(w, 50)) if n else None,
        "p90_s": float(np.percentile(w, 90)) if n else None,
        "p99_s": float(np.percentile(w, 99)) if n else None,
        "max_s": float(w.max()) if n else None,
        "above_bound": int((w > bound).sum()),
    }


@dataclass
class Overload:
    """Accumulates the overload metrics while a replay runs (MetricsRecorder feeds it)."""

    bound: float  # the requeue bound: the policy's scheduling.requeue_within
    preempted_at: dict[str, float] = field(default_factory=dict)  # job -> t of its pending preemption
    waits: dict[str, list[float]] = field(default_factory=dict)  # team -> its requeue waits
    exempt: dict[str, list[bool]] = field(default_factory=dict)  # team -> each wait's exemption
    not_over_at: dict[str, float] = field(default_factory=dict)  # team -> last sample not over-served
    last_sample: float = -math.inf
    last_finish: float | None = None
    waiting_s: float = 0.0  # seconds during which some GPU job waits
    waiting_alloc_s: float = 0.0  # allocated GPU-seconds over those
    waiting_avail_s: float = 0.0  # allocated + idle available GPU-seconds over those
    idle_fit_s: float = 0.0  # GPU-seconds idle while a waiting single-node job fits

    def preempted(self, job: str, t: float) -> None:
        self.preempted_at[job] = t

    def started(self, job: str, group: str, t: float) -> None:
        t0 = self.preempted_at.pop(job, None)
        if t0 is not None:
            team = team_of(group)
            self.waits.setdefault(team, []).append(t - t0)
            self.exempt.setdefault(team, []).append(self._exempt(team, t0))

    def _exempt(self, team: str, t0: float) -> bool:
        """Whether a wait from t0 until now is exempt: some sample fell in it and the team was
        over-served at every one of them."""
        return self.last_sample >= t0 and self.not_over_at.get(team, -math.inf) < t0

    def sample(self, t: float, over_served: dict[str, bool]) -> None:
        """A 15-minute sample: whether each team is over-served over the window at t."""
        self.last_sample = t
        for team, over in over_served.items():
            if not over:
                self.not_over_at[team] = t

    def finished(self, t: float) -> None:
        self.last_finish = t if self.last_finish is None else max(self.last_finish, t)

    def interval(self, dt: float, waiting: bool, allocated: int, idle: int, idle_fit: float) -> None:
        if waiting:
            self.waiting_s += dt
            self.waiting_alloc_s += allocated * dt
            self.waiting_avail_s += (allocated + idle) * dt
            self.idle_fit_s += idle_fit * dt

    def finalize(self, horizon: float, group_of: dict[str, str], teams: list[str]) -> dict[str, Any]:
        waits = {team: list(w) for team, w in self.waits.items()}
        exempt = {team: list(e) for team, e in self.exempt.items()}
        for job, t0 in sorted(self.preempted_at.items()):  # never restarted: censored at the horizon
            team = team_of(group_of[job])
            waits.setdefault(team, []).append(horizon - t0)
            exempt.setdefault(team, []).append(self._exempt(team, t0))
        every = [w for team in sorted(waits) for w in waits[team]]
        kept = [w for team in sorted(waits) for w, e in zip(waits[team], exempt[team], strict=True) if not e]
        requeue = {"bound_s": self.bound, **requeue_summary(every, self.bound)}
        requeue["exempt"] = len(every) - len(kept)
        requeue["not_exempt"] = requeue_summary(kept, self.bound)
        requeue["teams"] = {
            team: {**requeue_summary(waits.get(team, []), self.bound), "exempt": sum(exempt.get(team, []))}
            for team in teams
        }
        avail = self.waiting_avail_s
        return {
            "makespan_s": self.last_finish,
            "requeue": requeue,
            "waiting": {
                "span_s": self.waiting_s,
                "occupancy": self.waiting_alloc_s / avail if avail else None,
                "idle_while_fit_gpu_h": self.idle_fit_s / 3600,
                "idle_while_fit_pct": 100 * self.idle_fit_s / avail if avail else 0.0,
            },
        }
