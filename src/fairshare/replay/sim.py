"""Discrete-event replay: the simulator is a driver of the engine (DESIGN.md §1, §4; FORMATS.md
replay semantics).

It owns what is its own: the event loop, the jobs' truth (real run time, hangs, progress kept),
the metrics and the output lines. Everything the scheduler knows and every scheduling rule is the
engine's (fairshare.engine) and the core's (fairshare.core); a live driver runs the same ones.

The heap is keyed by (t, rank, sequence): equal times resolve in FORMATS.md's order — finishes,
drains and undrains, submits, then the rest — and equal ranks in push order, so the same inputs
always give the same event log. At each instant the engine's own timers fire first (they only ask
for a pass or change shares), then the simulator's events, then protection ends are judged and
one scheduling pass runs, whose preemptions come before its starts. Internal wake-ups never appear
in events.jsonl; they only make a pass happen at that instant.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple, overload

import orjson

from .. import interrupts
from .._units import format_epoch
from ..core.scheduler import decide
from ..core.snapshot import Preempt, Start
from ..core.strategies import Strategy, get_strategy
from ..core.tree import TreeIndex
from ..engine.events import Event
from ..engine.forecast import Budget, copy_units, forecast_starts
from ..engine.setup import EngineSetup
from ..engine.state import EngineState
from ..inputs.cluster import Cluster
from ..inputs.limits import FORECAST_MIN_UNITS, FORECAST_PASS_MULTIPLE
from ..inputs.policy import Policy, resolve_exceptions
from ..inputs.workload import Job
from .metrics import MetricsFeed, MetricsRecorder
from .reports import first_report, report
from .results import ReplayOutput, ReplayResult
from .truth import kept_on_preempt, plan_run, run_progress

# events and decisions are written with orjson (about ten times json.dumps's speed on these lines)
_ORJSON_OPTS = orjson.OPT_SERIALIZE_NUMPY


class Rank(IntEnum):
    """Same-instant order of the simulator's events (FORMATS.md "Order within one instant")."""

    FINISH = 0
    DRAIN = 1  # drains and undrains
    SUBMIT = 2
    LATER = 3  # hangs and wake-ups


class Finish(NamedTuple):
    job: str
    run: int  # the run it ends; stale once that run stopped


class Drain(NamedTuple):
    nodes: tuple[int, ...]
    deadline: float


class Undrain(NamedTuple):
    nodes: tuple[int, ...]


class Submit(NamedTuple):
    job: Job


class Stall(NamedTuple):
    job: str
    run: int


class Wake(NamedTuple):
    """Ask for a pass at this instant (a hang's max_stall, as planned when the run started)."""


class Report(NamedTuple):
    """`report_progress`: the run reports its progress `at` seconds into its work (a checkpoint
    when `ckpt`); no pass of its own, as a live report."""

    job: str
    run: int
    at: float
    ckpt: bool


# the simulator's events are named tuples: a replay makes one per submit, finish and hang
SimEvent = Finish | Drain | Undrain | Submit | Stall | Wake | Report


@dataclass(slots=True)
class _Truth:
    """What only the simulator knows of a job: its real work and hang, and the current run."""

    job: Job
    kept: float = 0.0  # progress kept by past runs
    starts: int = 0
    stall_done: bool = False  # it hung once: later runs do not hang again
    run: int = 0  # bumped at every start and stop: events of an older run are stale
    t0: float = 0.0
    overhead: float = 0.0
    stall_at: float | None = None


class Simulator:
    """One replay of one strategy over one workload. Each instance owns all of its state.

    `run()` replays to the end and returns the outputs; `run(until=t)` stops after the instant t
    (or the last one before it) and returns None, so a test can look at the engine mid-replay."""

    def __init__(
        self,
        policy: Policy,
        tree: TreeIndex,
        cluster: Cluster,
        jobs: Sequence[Job],
        strategy: Strategy | str,
        scenario: str = "workload",
        where: str = "policy",
        progress: Callable[[int], None] | None = None,
        journal: list[Event] | None = None,
        forecast: int = 0,
        report_progress: bool = False,
        keep_order: bool = False,
    ) -> None:
        """`forecast` N > 0: forecast the start of about N jobs, sampled evenly in submit order,
        when they arrive (after their arrival's pass, if still pending), and report the error
        (metrics.json "forecast", decisions of kind "forecast"); `journal`: record the engine's;
        `report_progress`: the jobs report progress, checkpoints and resumes from their truth
        (replay/reports.py) and hangs are found by the engine's stall rule, as live; `keep_order`:
        each pass also orders the whole queue, kept in `order` (`explain --at`; as live)."""
        self.policy, self.cluster, self.jobs = policy, cluster, list(jobs)
        self.strategy = (
            get_strategy(strategy, policy.scheduling.preemption) if isinstance(strategy, str) else strategy
        )
        self.scenario = scenario
        self.progress = progress
        self.reports = report_progress
        self.keep_order = keep_order
        self.order: tuple[str, ...] = ()  # the last pass's order of the queue (keep_order)
        self.setup = EngineSetup(
            tree=tree,
            knobs=policy.knobs(),
            gpu_rates=dict(policy.gpu_rates),
            nodes=cluster.nodes,
            window=policy.window,
            exceptions=resolve_exceptions(policy, tree, cluster.epoch, where, strict=True),
        )
        index_types = sorted({n.gpu_type for n in cluster.nodes})
        gpus_of_type = [sum(n.gpus for n in cluster.nodes if n.gpu_type == ty) for ty in index_types]
        within = policy.knobs().requeue_within
        self.metrics = MetricsRecorder(
            tree,
            policy.window,
            tuple(index_types),
            tuple(gpus_of_type),
            requeue_bound=within if within > 0 else policy.window,
        )
        self.engine = EngineState(self.setup, self.strategy, MetricsFeed(self.metrics), journal)
        self.heap: list[tuple[float, int, int, SimEvent]] = []
        self.seq = 0
        self.truth: dict[str, _Truth] = {}
        self.events: list[str] = []
        self.decisions: list[str] = []
        self.finished = 0
        self.reported = 0  # finished jobs already told to `progress`
        self.end: float | None = 0.0 if not self.jobs else None  # no jobs: vacuously done at 0
        self.forecast_every = -(-len(self.jobs) // forecast) if forecast > 0 else 0
        self.arrived: list[str] = []  # sampled jobs that arrived at this instant
        self.forecasts: dict[str, float | None] = {}  # sampled job -> forecast start (None: none)
        self.instants = self.passes = 0  # of the replay: they earn the forecasts' budget
        self.last_t, self.pass_owed = -math.inf, False  # the last instant; a pass owed to the next
        self.forecast_spent = 0
        for job in self.jobs:
            self.push(job.submit, Rank.SUBMIT, Submit(job))
        for m in cluster.maintenance:
            self.push(m.start, Rank.DRAIN, Drain(m.nodes, m.deadline))
            if m.end is not None:
                self.push(m.end, Rank.DRAIN, Undrain(m.nodes))

    # ------------------------------------------------------------------ the loop
    def push(self, t: float, rank: Rank, event: SimEvent) -> None:
        heapq.heappush(self.heap, (t, rank, self.seq, event))
        self.seq += 1

    def emit(self, obj: dict[str, Any]) -> None:
        """One line of events.jsonl: compact JSON, floats in their shortest round-trip form."""
        self.events.append(orjson.dumps(obj, option=_ORJSON_OPTS).decode())

    @overload
    def run(self) -> ReplayOutput: ...
    @overload
    def run(self, until: float) -> ReplayOutput | None: ...

    def run(self, until: float | None = None) -> ReplayOutput | None:
        horizon = self.cluster.horizon
        engine, heap, timers = self.engine, self.heap, self.engine.timers
        while self.end is None:
            # the next instant: the simulator's next event or the engine's next timer
            t = heap[0][0] if heap else None
            if timers and (t is None or timers[0][0] < t):
                t = timers[0][0]
            if t is None or (horizon is not None and t > horizon):
                break
            if until is not None and t > until:
                return None
            if t <= self.last_t:  # a timer set after this instant's pass: one pass per instant (FORMATS)
                engine.begin(t)
                self.pass_owed = self.pass_owed or engine.need_pass
                continue
            # one instant (loop body kept inline: it runs once per instant of the replay)
            self.instants += 1
            if not self.instants & 255:
                interrupts.check()  # an interrupt whose exception was lost, a dead worker
            engine.begin(t)
            self.last_t = t
            if self.pass_owed:
                engine.poke()
                self.pass_owed = False
            if heap and heap[0][0] == t:
                poke = False
                while heap and heap[0][0] == t:
                    ev = heapq.heappop(heap)[3]
                    poke = self._handle(ev) or poke
                if poke:  # every event of the simulator's gets a pass, even a stale one; reports not
                    engine.poke()
            if engine.settle():
                self._pass()
            if self.arrived:
                self._forecast()
            if self.progress is not None and self.finished - self.reported >= 1000:
                self.progress(self.finished - self.reported)
                self.reported = self.finished
            if self.finished == len(self.jobs):
                self.end = t
        return self._close()

    def _handle(self, ev: SimEvent) -> bool:
        """Take one event; whether it asks for a pass (all but a job's progress reports)."""
        engine, t = self.engine, self.engine.t
        if isinstance(ev, Finish):
            tr = self.truth[ev.job]
            if tr.run == ev.run:
                tr.run += 1
                engine.finished(ev.job)
                self.finished += 1
                self.metrics.job_finished(ev.job, t)
                self.emit({"t": t, "type": "finish", "job": ev.job})
        elif isinstance(ev, Submit):
            self.truth[ev.job.id] = _Truth(ev.job)
            self.metrics.job_submitted(ev.job)
            self.emit(ev.job.submit_event())
            engine.submit(ev.job.request)
            if self.forecast_every and ev.job.seq % self.forecast_every == 0:
                self.arrived.append(ev.job.id)
        elif isinstance(ev, Drain):
            engine.drain(ev.nodes, ev.deadline)
            for i in ev.nodes:
                self.emit(
                    {"t": t, "type": "drain", "node": self.cluster.nodes[i].name, "deadline": ev.deadline}
                )
        elif isinstance(ev, Undrain):
            for i in engine.undrain(ev.nodes):
                self.emit({"t": t, "type": "undrain", "node": self.cluster.nodes[i].name})
        elif isinstance(ev, Stall) and self.truth[ev.job].run == ev.run and not self.reports:
            engine.hung(ev.job)  # with reports, the engine's stall rule finds the hang itself
        elif isinstance(ev, Report):
            tr = self.truth[ev.job]
            if tr.run == ev.run:
                nxt = report(engine, tr.job, tr.kept, tr.stall_done, ev.at, ev.ckpt, t)
                if nxt is not None:
                    self.push(tr.t0 + tr.overhead + nxt[0], Rank.LATER, Report(ev.job, ev.run, *nxt))
            return False
        return True

    def _pass(self) -> None:
        self.passes += 1
        d = decide(self.engine.snapshot(), self.strategy, explain=self.keep_order)
        if self.keep_order:
            self.order = d.order
        actions = self.engine.apply(d)
        for p in actions.preempts:
            self._preempt(p)
        for s in actions.starts:
            self._start(s)
        for record in actions.audit:
            self.decisions.append(orjson.dumps(record, option=_ORJSON_OPTS).decode())

    def _forecast(self) -> None:
        """Forecast the start of the sampled jobs that arrived now and still wait."""
        waiting = [j for j in self.arrived if j in self.engine.pending.jobs]
        self.arrived = []
        if not waiting:
            return
        # the forecasts' budget: FORECAST_PASS_MULTIPLE times the instants and passes of the replay
        # so far, less what earlier forecasts spent, and at least FORECAST_MIN_UNITS beyond the
        # copy for this one (deterministic: counted, not timed)
        earned = FORECAST_PASS_MULTIPLE * (self.instants + self.passes) - self.forecast_spent
        budget = Budget(max(earned, FORECAST_MIN_UNITS + copy_units(self.engine)))
        before = budget.left
        starts = forecast_starts(self.engine, waiting, budget=budget)
        self.forecast_spent += before - budget.left
        t = self.engine.t
        for jid in waiting:
            at = starts.get(jid)
            self.forecasts[jid] = at
            record = {"t": t, "decision": "forecast", "job": jid, "start_at": at}
            self.decisions.append(orjson.dumps(record, option=_ORJSON_OPTS).decode())

    # ------------------------------------------------------------------ carrying out decisions
    def _start(self, s: Start) -> None:
        t = self.engine.t
        tr = self.truth[s.job]
        job = tr.job
        plan = plan_run(job, t, tr.kept, tr.starts > 0, tr.stall_done)
        tr.starts += 1
        tr.run += 1
        tr.t0, tr.overhead, tr.stall_at = t, plan.overhead, plan.stall_at
        self.engine.started(s.job, s.alloc, s.charge)
        if self.reports:
            nxt = first_report(self.engine, job, tr.kept, tr.stall_done, tr.starts > 1, t)
            if nxt is not None:
                self.push(t + plan.overhead + nxt[0], Rank.LATER, Report(s.job, tr.run, *nxt))
        if plan.finish_at is not None:
            self.push(plan.finish_at, Rank.FINISH, Finish(s.job, tr.run))
        if plan.stall_at is not None:
            self.push(plan.stall_at, Rank.LATER, Stall(s.job, tr.run))
            self.push(plan.stall_at + job.request.max_stall, Rank.LATER, Wake())
        self.metrics.job_started(s.job, t, job.request.gpus, plan.overhead)
        nodes = self.cluster.nodes
        self.emit(
            {
                "t": t,
                "type": "start",
                "job": s.job,
                "alloc": {nodes[i].name: g for i, g in s.alloc},
                "charge": s.charge,
            }
        )

    def _preempt(self, p: Preempt) -> None:
        """The truth of a preemption: the progress the run really kept, and so what it lost."""
        t = self.engine.t
        tr = self.truth[p.job]
        job = tr.job
        progress, reached = run_progress(job, tr.t0, t, tr.overhead, tr.kept, tr.stall_done)
        saved = kept_on_preempt(job, progress, tr.kept)
        lost = ((t - tr.t0) - saved) * job.request.gpus
        tr.kept = tr.kept + saved if job.request.resumable else 0.0
        if reached or (tr.stall_at is not None and t >= tr.stall_at):
            tr.stall_done = True
        tr.run += 1
        self.engine.preempted(p.job, p.reason, p.by, lost, tr.kept)
        self.metrics.job_preempted(p.job, t, lost, p.by)
        self.emit(
            {"t": t, "type": "preempt", "job": p.job, "reason": p.reason, "by": p.by, "lost_gpu_s": lost}
        )

    # ------------------------------------------------------------------ the end
    def _close(self) -> ReplayOutput:
        horizon = self.cluster.horizon
        if self.end is None:
            self.end = horizon if horizon is not None else self.engine.t
        end = self.end
        self.engine.advance(end)
        self.engine.flush()
        self.emit({"t": end, "type": "end"})
        if self.progress is not None:
            self.progress(self.finished - self.reported)
            self.reported = self.finished
        metrics = self.metrics.finalize(
            end,
            self.strategy.name,
            self.scenario,
            format_epoch(self.cluster.epoch),
            self.policy.gates,
            self.setup.exceptions,
        )
        if self.forecast_every:
            metrics["forecast"] = self.metrics.forecast_accuracy(self.forecasts, self.forecast_every)
        waits = {c: tuple(v) for c, v in self.metrics.waits(end).items()}
        result = ReplayResult(
            self.strategy.name,
            self.scenario,
            metrics,
            self.metrics.series(),
            waits,
            {g: s / 3600 for g, s in self.metrics.lost_by_top.items()},
        )
        return ReplayOutput(self.events, self.decisions, result)
