"""Metrics exactly as FORMATS.md defines them, accumulated while a driver replays.

The driver calls `interval(t0, t1, state)` for every span over which rates are constant (it splits
at every event and exception expiry) and reports per-job facts (`job_started`, `job_finished`,
`job_pended`); `finalize(horizon)` returns the metrics.json dict. Window sums for
`min_window_share_delivery` are read off cumulative totals recorded at every window boundary
(k days and k days + window), so no interval list is kept.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._units import fmt_duration
from ..core.model import LEDGER_EPS, ResolvedException
from ..core.tree import TreeIndex
from ..engine.ledger import Vec
from ..engine.owed import water_fill
from ..engine.state import EngineState
from ..inputs.policy import Gates
from ..inputs.workload import Job
from .churn import SIZES, Churn, size_of, team_of, waits_summary
from .overload import Overload
from .results import Series

EPS = LEDGER_EPS
DAY = 86400.0


@dataclass
class _JobFacts:
    submit: float
    cls: str
    group: str
    startup: float
    deadline: float | None
    gpus: int
    first_start: float | None = None
    finished: float | None = None
    pending_since: float | None = None
    max_spell: float = 0.0


@dataclass
class IntervalState:
    """Rates over one constant span. `rates` has three rows per tree node (indexed like
    TreeIndex): owed, delivered (running charge) and unallocated, max(0, delivered − static · C)."""

    rates: Vec  # rows: owed, delivered, unallocated, then delivered and owed per GPU type
    capacity: float
    allocated_gpus: int
    idle_available_gpus: int
    fragmented_gpus: float
    gpus_by_type: Vec  # rows: allocated, idle available GPUs; one column per GPU type
    waiting: bool = False  # some GPU job waits
    idle_fit_gpus: float = 0.0  # idle GPUs a waiting single-node job fits on (Demand.waiting_and_idle_fit)

    @property
    def owed(self) -> Vec:
        row: Vec = self.rates[0]
        return row

    @property
    def used(self) -> Vec:
        row: Vec = self.rates[1]
        return row


class MetricsFeed:
    """Feeds a MetricsRecorder from an engine (its RatesListener): when the engine's rates change,
    the rates of every metric over the span that starts then; when it integrates, the span."""

    def __init__(self, recorder: MetricsRecorder) -> None:
        self.recorder = recorder
        # per GPU type: the last (demand, capacity, shares) water-filled and the owed rates it gave
        # (a start or a preemption moves charge between pending and running: demand is unchanged)
        self._type_memo: dict[int, tuple[list[float], float, Sequence[float], list[float]]] = {}
        self.static_vec = np.asarray(recorder.tree.static_frac)
        # integrating a span goes straight to the recorder, with the rates set below
        self.interval: Callable[[float, float], None] = recorder.interval

    def rates_changed(self, engine: EngineState) -> None:
        """Owed, delivered and unallocated per tree node, delivered and owed per GPU type (the
        type's capacity water-filled over the groups with demand for it: runs on it, pending
        jobs that may use it), and the capacity counters."""
        n = len(engine.owed_list)
        fleet = engine.fleet
        cap = fleet.capacity
        k = len(fleet.cap_t)
        rates = np.empty((3 + 2 * k, n))
        rates[0:2] = engine.rate_rows
        np.maximum(rates[1] - self.static_vec * cap, 0.0, out=rates[2])
        if k == 1:  # one GPU type: everything is delivered and owed on it
            rates[3] = rates[1]
            rates[4] = rates[0]
        else:
            d = engine.demand
            np.matmul(d.leaf_used_t, d.up, out=rates[3 : 3 + k])
            demand_t = (d.leaf_pending_t + d.leaf_used_t) @ d.up
            for ty in range(k):
                rates[3 + k + ty] = self._owed_of_type(engine, ty, demand_t[ty].tolist())
        waiting, idle_fit = engine.demand.waiting_and_idle_fit()
        self.recorder.current = IntervalState(
            rates,
            cap,
            fleet.allocated,
            fleet.idle_available,
            engine.demand.fragmented_gpus(),
            np.array([fleet.alloc_t, fleet.idle_t], dtype=np.float64),
            waiting,
            idle_fit,
        )

    def _owed_of_type(self, engine: EngineState, ty: int, demand: list[float]) -> list[float]:
        """Type `ty`'s capacity water-filled over the groups' demand for it (memoised)."""
        cap, shares = engine.fleet.cap_t[ty], engine.shares
        memo = self._type_memo.get(ty)
        if memo is not None and memo[0] == demand and memo[1] == cap and memo[2] == shares:
            return memo[3]
        owed = water_fill(engine.tree, cap, demand, shares)
        self._type_memo[ty] = (demand, cap, shares, owed)
        return owed


@dataclass
class MetricsRecorder:
    tree: TreeIndex
    window: float
    gpu_types: tuple[str, ...] = ()  # FreeIndex type order
    gpus_of_type: tuple[int, ...] = ()
    sample_every: float = 900.0
    acc: Vec = field(init=False)  # rows: owed, delivered, unallocated (GPU-equivalent seconds)
    static: Vec = field(init=False)
    alloc_s: float = 0.0
    idle_s: float = 0.0
    frag_s: float = 0.0
    lost_gpu_s: float = 0.0
    lost_by_top: dict[str, float] = field(default_factory=dict)
    preemptions: int = 0
    jobs: dict[str, _JobFacts] = field(default_factory=dict)
    cuts: dict[float, tuple[Vec, Vec]] = field(default_factory=dict)
    _next_k: int = 0
    _pending_cuts: list[float] = field(default_factory=list)  # a heap
    samples_t: list[float] = field(default_factory=list)
    samples_occ: list[float] = field(default_factory=list)
    samples_owed: list[Vec] = field(default_factory=list)
    samples_used: list[Vec] = field(default_factory=list)
    _next_sample: float = 0.0
    current: IntervalState | None = None  # the rates now (MetricsFeed sets them)
    churn: Churn = field(init=False)
    requeue_bound: float | None = None  # the policy's requeue_within (None: the window)
    overload: Overload = field(init=False)

    def __post_init__(self) -> None:
        self.churn = Churn(self.window)
        self.overload = Overload(self.window if self.requeue_bound is None else self.requeue_bound)
        self._top = list(self.tree.top)
        self._debt_past: deque[tuple[float, Vec]] = deque()  # (sample t, the teams' ∫owed − ∫delivered)
        n = len(self.tree.paths)
        self.acc = np.zeros((3 + 2 * len(self.gpu_types), n))
        self.gpu_acc = np.zeros((2, len(self.gpu_types)))
        self.static = np.asarray(self.tree.static_frac, dtype=np.float64)
        self.lost_by_top = {self.tree.paths[i]: 0.0 for i in self.tree.top}

    # ----------------------------------------------------------------- per job
    def job_submitted(self, job: Job) -> None:
        r = job.request
        self.jobs[r.id] = _JobFacts(
            r.submit, r.cls, r.group, r.startup, r.deadline, r.gpus, pending_since=r.submit
        )

    def job_started(self, job_id: str, t: float, gpus: int, overhead: float) -> None:
        """A run of `gpus` GPUs began; it pays `overhead` (startup or restore) before progress."""
        f = self.jobs[job_id]
        self.churn.started(job_id, t, gpus, overhead, f.first_start is None)
        if f.first_start is None:
            f.first_start = t
        self.overload.started(job_id, f.group, t)
        if f.pending_since is not None:
            f.max_spell = max(f.max_spell, t - f.pending_since)
        f.pending_since = None

    def job_preempted(self, job_id: str, t: float, lost: float, by: str | None = None) -> None:
        f = self.jobs[job_id]
        self.churn.stopped(job_id, t)
        self.churn.preempted(job_id, t, team_of(f.group), team_of(self.jobs[by].group) if by else None)
        f.pending_since = t
        self.overload.preempted(job_id, t)
        self.preemptions += 1
        self.lost_gpu_s += lost
        top = f.group.split("/", 1)[0]
        self.lost_by_top[top] = self.lost_by_top.get(top, 0.0) + lost

    def job_finished(self, job_id: str, t: float) -> None:
        self.churn.stopped(job_id, t)
        self.jobs[job_id].finished = t
        self.overload.finished(t)

    # ----------------------------------------------------------------- integration
    @property
    def owed(self) -> Vec:
        row: Vec = self.acc[0]
        return row

    @property
    def delivered(self) -> Vec:
        row: Vec = self.acc[1]
        return row

    @property
    def unallocated(self) -> Vec:
        row: Vec = self.acc[2]
        return row

    def _cut_times_until(self, t1: float) -> None:
        while True:
            start = self._next_k * DAY
            if start > t1:
                return
            heapq.heappush(self._pending_cuts, start)
            heapq.heappush(self._pending_cuts, start + self.window)
            self._next_k += 1

    def interval(self, t0: float, t1: float, st: IntervalState | None = None) -> None:
        """Integrate the rates `st` (default: the current ones) over [t0, t1]."""
        if st is None:
            st = self.current
            assert st is not None, "no rates yet"
        dt = t1 - t0
        if dt <= 0:
            return
        if self._next_k * DAY <= t1:
            self._cut_times_until(t1)
        cuts = self._pending_cuts
        while cuts and cuts[0] <= t1:
            c = heapq.heappop(cuts)
            if c >= t0 and c not in self.cuts:
                self.cuts[c] = (self.owed + st.owed * (c - t0), self.delivered + st.used * (c - t0))
        while self._next_sample <= t1:
            if self._next_sample >= t0:
                avail = st.allocated_gpus + st.idle_available_gpus
                self.samples_t.append(self._next_sample)
                self.samples_occ.append(st.allocated_gpus / avail if avail else 0.0)
                self.samples_owed.append(st.owed)
                self.samples_used.append(st.used)
                self._sample_debt(self._next_sample, st.rates[:2] * (self._next_sample - t0))
            self._next_sample += self.sample_every
        self.acc += st.rates * dt
        self.gpu_acc += st.gpus_by_type * dt
        self.alloc_s += st.allocated_gpus * dt
        self.idle_s += st.idle_available_gpus * dt
        self.frag_s += st.fragmented_gpus * dt
        self.overload.interval(dt, st.waiting, st.allocated_gpus, st.idle_available_gpus, st.idle_fit_gpus)

    def _sample_debt(self, t: float, since_t0: Vec) -> None:
        """The teams' window debt at a sample (owed and delivered integrated to t, less what they
        were at t − window: the latest sample at or before it, 0 before t = 0) for the requeue
        bound's exemption (overload.py)."""
        top = self._top
        cum = self.acc[0, top] + since_t0[0, top] - (self.acc[1, top] + since_t0[1, top])
        past = self._debt_past
        past.append((t, cum))
        while len(past) > 1 and past[1][0] <= t - self.window + EPS:
            past.popleft()
        base = past[0][1] if past[0][0] <= t - self.window + EPS else 0.0
        debt = cum - base
        paths = self.tree.paths
        self.overload.sample(t, {paths[g]: bool(d < -EPS) for g, d in zip(top, debt.tolist(), strict=True)})

    # ----------------------------------------------------------------- results
    def _min_window(self, node: int, horizon: float) -> float | None:
        if horizon <= self.window:
            o, d = self.owed[node], self.delivered[node]
            return float(d / o) if o > EPS else None
        vals = []
        k = 0
        while k * DAY + self.window <= horizon + EPS:
            a, b = k * DAY, k * DAY + self.window
            o0, d0 = self.cuts.get(a, (self.owed, self.delivered))
            o1, d1 = self.cuts.get(b, (self.owed, self.delivered))
            o = o1[node] - o0[node]
            if o > EPS:
                vals.append(float((d1[node] - d0[node]) / o))
            k += 1
        return min(vals) if vals else None

    def finalize(
        self,
        horizon: float,
        policy_name: str,
        scenario: str,
        epoch: str,
        gates: Gates,
        exceptions: Sequence[ResolvedException],
    ) -> dict[str, Any]:
        jobs = list(self.jobs.values())
        waits, fps = self.waits(horizon), self.first_progress(horizon)
        classes: dict[str, Any] = {}
        for c in sorted(waits):
            w, fp = np.asarray(waits[c]), np.asarray(fps[c])
            classes[c] = {
                "jobs": len(w),
                "wait_p50_s": float(np.percentile(w, 50)),
                "wait_p90_s": float(np.percentile(w, 90)),
                "wait_p99_s": float(np.percentile(w, 99)),
                "first_progress_p50_s": float(np.percentile(fp, 50)),
                "first_progress_p90_s": float(np.percentile(fp, 90)),
            }
        groups: dict[str, Any] = {}
        for i, path in enumerate(self.tree.paths):
            o, d = float(self.owed[i]), float(self.delivered[i])
            groups[path] = {
                "owed_gpu_h": o / 3600,
                "delivered_gpu_h": d / 3600,
                "share_delivery": d / o if o > EPS else None,
                "unallocated_gpu_h": float(self.unallocated[i]) / 3600,
                "min_window_share_delivery": self._min_window(i, horizon),
            }
        k = len(self.gpu_types)
        for i, path in enumerate(self.tree.paths):
            by_type = {}
            for t, ty in enumerate(self.gpu_types):
                d_t, o_t = float(self.acc[3 + t, i]), float(self.acc[3 + k + t, i])
                by_type[ty] = {
                    "delivered_gpu_h": d_t / 3600,
                    "owed_gpu_h": o_t / 3600,
                    "share_delivery": d_t / o_t if o_t > EPS else None,
                }
            groups[path]["by_type"] = by_type
        gpu_types = {}
        for t, ty in enumerate(self.gpu_types):
            alloc, idle = float(self.gpu_acc[0, t]), float(self.gpu_acc[1, t])
            gpu_types[ty] = {
                "gpus": self.gpus_of_type[t],
                "allocated_gpu_h": alloc / 3600,
                "available_gpu_h": (alloc + idle) / 3600,
                "occupancy": alloc / (alloc + idle) if alloc + idle > 0 else None,
            }
        top = list(self.tree.top)
        so = float(sum(self.owed[i] for i in top))
        sd = float(sum(self.delivered[i] for i in top))
        total_deliv = float(sum(self.delivered[i] for i in self.tree.leaves))
        total_unalloc = float(sum(self.unallocated[i] for i in self.tree.leaves))
        denom = self.alloc_s + self.idle_s
        dl = [j for j in jobs if j.deadline is not None]
        met = sum(
            1
            for j in dl
            if j.finished is not None and j.deadline is not None and j.finished <= j.deadline + EPS
        )
        spells = [
            max(j.max_spell, horizon - j.pending_since if j.pending_since is not None else 0.0) for j in jobs
        ]
        lost_pct = 100 * self.lost_gpu_s / self.alloc_s if self.alloc_s else 0.0
        metrics: dict[str, Any] = {
            "policy": policy_name,
            "scenario": scenario,
            "epoch": epoch,
            "horizon_s": horizon,
            "jobs": {
                "submitted": len(jobs),
                "finished": sum(1 for j in jobs if j.finished is not None),
                "never_started": sum(1 for j in jobs if j.first_start is None),
            },
            "classes": classes,
            "groups": groups,
            "delivery_overall": sd / so if so > EPS else None,
            "lost_work_gpu_h": self.lost_gpu_s / 3600,
            "lost_work_pct": lost_pct,
            "preemptions": self.preemptions,
            "occupancy": self.alloc_s / denom if denom else None,
            "fragmented_gpu_h": self.frag_s / 3600,
            "gpu_types": gpu_types,
            "unallocated_pct": 100 * total_unalloc / total_deliv if total_deliv > EPS else 0.0,
            "deadlines": {"jobs": len(dl), "met": met, "met_pct": 100 * met / len(dl) if dl else None},
            "starvation": {"max_wait_s": max(spells, default=0.0), "groups_below_share_beyond_window": []},
        }
        metrics["churn"] = self.churn.finalize(horizon, self.alloc_s, self.lost_gpu_s)
        self._waits_by_team_and_size(metrics, horizon)
        metrics.update(
            self.overload.finalize(
                horizon,
                {jid: f.group for jid, f in self.jobs.items() if jid in self.overload.preempted_at},
                [self.tree.paths[i] for i in self.tree.top],
            )
        )
        metrics["gates"] = evaluate_gates(metrics, self.tree, gates, exceptions)
        metrics["starvation"]["groups_below_share_beyond_window"] = [
            self.tree.paths[i]
            for i in self.tree.top
            if (v := groups[self.tree.paths[i]]["min_window_share_delivery"]) is not None
            and v < gates.share_floor
        ]
        return metrics

    def _waits_by_team_and_size(self, metrics: dict[str, Any], horizon: float) -> None:
        """wait p50/p90 of each top-level group's jobs (groups.<top>) and by job size (sizes)."""
        by_team: dict[str, list[float]] = {}
        by_size: dict[str, list[float]] = {}
        for j in self.jobs.values():
            w = (j.first_start if j.first_start is not None else horizon) - j.submit
            by_team.setdefault(team_of(j.group), []).append(w)
            size = size_of(j.gpus)
            if size is not None:
                by_size.setdefault(size, []).append(w)
        for i in self.tree.top:
            path = self.tree.paths[i]
            metrics["groups"][path].update(waits_summary(by_team.get(path, ())))
        metrics["sizes"] = {name: waits_summary(by_size[name]) for name, _, _ in SIZES if name in by_size}

    def forecast_accuracy(self, forecasts: dict[str, float | None], every: int) -> dict[str, Any]:
        """How far actual starts were from the starts forecast when the jobs arrived (docs/formats.md
        "forecast"): per class and for all sampled jobs."""
        by_class: dict[str, list[tuple[float | None, float | None]]] = {}
        for jid, at in forecasts.items():
            facts = self.jobs[jid]
            by_class.setdefault(facts.cls, []).append((at, facts.first_start))
        every_job = [x for c in sorted(by_class) for x in by_class[c]]
        return {
            "sampled_every": every,
            "all": _forecast_errors(every_job),
            "classes": {c: _forecast_errors(by_class[c]) for c in sorted(by_class)},
        }

    def waits(self, horizon: float) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for j in self.jobs.values():
            start = j.first_start if j.first_start is not None else horizon
            out.setdefault(j.cls, []).append(start - j.submit)
        return out

    def first_progress(self, horizon: float) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for j in self.jobs.values():
            fp = j.first_start + j.startup if j.first_start is not None else horizon
            out.setdefault(j.cls, []).append(fp - j.submit)
        return out

    def series(self, max_points: int = 2000) -> Series:
        step = max(1, -(-len(self.samples_t) // max_points))
        idx = range(0, len(self.samples_t), step)
        top = self.tree.top
        return Series(
            t=tuple(self.samples_t[i] for i in idx),
            occupancy=tuple(self.samples_occ[i] for i in idx),
            owed={self.tree.paths[g]: tuple(float(self.samples_owed[i][g]) for i in idx) for g in top},
            delivered={self.tree.paths[g]: tuple(float(self.samples_used[i][g]) for i in idx) for g in top},
        )


FORECAST_CLOSE_S = 600.0  # a start within 10 minutes of its forecast counts as on time


def _forecast_errors(pairs: list[tuple[float | None, float | None]]) -> dict[str, Any]:
    """(forecast start, actual start) pairs -> error figures; error = actual − forecast."""
    both = [a - f for f, a in pairs if f is not None and a is not None]
    errors = np.abs(np.asarray(both)) if both else None
    return {
        "jobs": len(pairs),
        "no_forecast": sum(1 for f, _ in pairs if f is None),
        "not_started": sum(1 for _, a in pairs if a is None),
        "abs_error_p50_s": float(np.percentile(errors, 50)) if errors is not None else None,
        "abs_error_p90_s": float(np.percentile(errors, 90)) if errors is not None else None,
        "error_p50_s": float(np.percentile(both, 50)) if both else None,
        "within_10min_pct": (
            100.0 * sum(1 for e in both if abs(e) <= FORECAST_CLOSE_S) / len(both) if both else None
        ),
    }


def evaluate_gates(
    metrics: dict[str, Any], tree: TreeIndex, gates: Gates, exceptions: Sequence[ResolvedException]
) -> dict[str, Any]:
    """Rollout gates with a sentence of evidence each (DESIGN.md §3)."""
    tops = [(tree.paths[i], metrics["groups"][tree.paths[i]]["min_window_share_delivery"]) for i in tree.top]
    known = [(g, v) for g, v in tops if v is not None]
    out: dict[str, Any] = {}
    if known:
        worst_g, worst = min(known, key=lambda x: x[1])
        out["share_floor"] = {
            "pass": worst >= gates.share_floor,
            "value": worst,
            "limit": gates.share_floor,
            "evidence": f"lowest windowed share delivery among top-level groups is {worst:.3f} ({worst_g}); "
            f"floor {gates.share_floor:g}",
        }
    else:
        out["share_floor"] = {
            "pass": True,
            "value": None,
            "limit": gates.share_floor,
            "evidence": "no top-level group was owed anything in any window",
        }
    lost = metrics["lost_work_pct"]
    out["lost_work_pct"] = {
        "pass": lost <= gates.lost_work_pct,
        "value": lost,
        "limit": gates.lost_work_pct,
        "evidence": f"{metrics['lost_work_gpu_h']:.1f} GPU-h lost to {metrics['preemptions']} preemptions = "
        f"{lost:.2f}% of allocated GPU time; limit {gates.lost_work_pct:g}%",
    }
    d = metrics["deadlines"]
    if d["jobs"]:
        out["deadline_met_pct"] = {
            "pass": d["met_pct"] >= gates.deadline_met_pct,
            "value": d["met_pct"],
            "limit": gates.deadline_met_pct,
            "evidence": f"{d['met']} of {d['jobs']} deadline jobs finished in time ({d['met_pct']:.1f}%); "
            f"SLO {gates.deadline_met_pct:g}%",
        }
    else:
        out["deadline_met_pct"] = {
            "pass": True,
            "value": None,
            "limit": gates.deadline_met_pct,
            "evidence": "no job had a deadline",
        }
    if exceptions:
        longest = max(exceptions, key=lambda e: e.expires_t)
        days = longest.expires_t / DAY
        out["exception_max_days"] = {
            "pass": days <= gates.exception_max_days,
            "value": days,
            "limit": gates.exception_max_days,
            "evidence": f"{len(exceptions)} exception(s), all with an expiry; the longest ({longest.group}) "
            f"runs {fmt_duration(longest.expires_t)} past the epoch; limit {gates.exception_max_days:g} d",
        }
    else:
        out["exception_max_days"] = {
            "pass": True,
            "value": 0.0,
            "limit": gates.exception_max_days,
            "evidence": "no exceptions",
        }
    return out
