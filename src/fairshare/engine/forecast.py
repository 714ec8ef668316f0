"""Forecast: the next execution opportunity of pending jobs (DESIGN.md §4).

The engine state is copied and run forward by the core with what the scheduler knows — each run
ends at its start + overhead + estimate − progress kept; protected windows, timers, backoffs and
the strategy's own preemptions as they would happen — and no new arrivals. The forecast start of
a job is the instant that run-forward starts it. It is a lower bound when others arrive later, and
it is wrong by as much as the estimates are; a replay measures its error against the actual start
(fairshare.replay.sim, `forecast=`).

A run that has outlived its estimate is assumed to end now; a hung run is left to the watchdog.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Collection
from dataclasses import dataclass

from ..core.contract import remaining, run_saved
from ..core.scheduler import decide
from .state import EngineState


@dataclass
class Budget:
    """Work a forecast may still do, in units: `copy_units` for the copy of the engine, one per
    instant of the run-forward and one more per scheduling pass (a replay earns them the same way: see
    fairshare.replay.sim, FORECAST_PASS_MULTIPLE). Shared by successive forecasts."""

    left: int


def copy_units(engine: EngineState) -> int:
    """What copying the engine costs in budget units: deepcopy takes about an instant's time per
    eight jobs and nodes it holds."""
    return 1 + (len(engine.states) + len(engine.nodes)) // 8


def forecast_starts(
    engine: EngineState,
    jobs: Collection[str],
    horizon: float | None = None,
    max_passes: int = 100_000,
    budget: Budget | None = None,
) -> dict[str, float]:
    """Forecast start of each of `jobs` (pending in `engine`) that starts by `horizon` (default:
    no limit) within `max_passes` scheduling passes and the `budget` (spent as it goes; a forecast
    out of budget has no start for the jobs it had not reached). The engine itself is not changed."""
    if budget is not None:
        if budget.left <= 0:
            return {}
        budget.left -= copy_units(engine)
    listener, journal = engine.listener, engine.journal
    engine.listener = engine.journal = None
    try:
        e = copy.deepcopy(engine)
    finally:
        engine.listener, engine.journal = listener, journal
    targets = {j for j in jobs if j in e.pending.jobs}
    out: dict[str, float] = {}
    ends: list[tuple[float, str, int]] = []  # (expected end, job, run number)
    now = e.t
    for jid, view in e.running.items():
        end = view.t0 + view.overhead + view.job.estimate - view.kept
        heapq.heappush(ends, (max(end, now), jid, e.states[jid].starts))
    passes = 0
    while targets and passes < max_passes:
        if budget is not None:
            if budget.left <= 0:
                break
            budget.left -= 1
        t = ends[0][0] if ends else None
        timer = e.next_time()
        if t is None or (timer is not None and timer < t):
            t = timer
        if t is None or (horizon is not None and t > horizon):
            break
        e.begin(t)
        while ends and ends[0][0] == t:
            _, jid, run = heapq.heappop(ends)
            if jid in e.running and e.states[jid].starts == run:
                e.finished(jid)
        e.settle()
        if not e.pass_due():
            continue
        passes += 1
        if budget is not None:
            budget.left -= 1
        actions = e.apply(decide(e.snapshot(), e.strategy))
        for p in actions.preempts:
            view = e.running[p.job]
            job = view.job
            saved = min(
                run_saved(job, view.t0, t, view.overhead, view.hung_since, view.ckpt_at),
                job.estimate - view.kept,
            )
            e.preempted(p.job, p.reason, p.by, p.lost_gpu_s, view.kept + max(0.0, saved))
        for s in actions.starts:
            st = e.states[s.job]
            need = remaining(e.pending.jobs[s.job], st.starts > 0, st.kept)
            e.started(s.job, s.alloc, s.charge)
            heapq.heappush(ends, (t + need, s.job, st.starts))
            if s.job in targets:
                targets.discard(s.job)
                out[s.job] = t
    return out
