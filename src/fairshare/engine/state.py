"""Engine state: the execution plane's bookkeeping that every driver shares (DESIGN.md §4).

Like Kueue's cache, it holds what the scheduler needs between passes and turns a driver's events
into it: jobs pending (queues by leaf and shape) and running (run records), capacity C(t) with
drains, demand, the ledger (owed by water-filling, delivered, debt over the rolling window, or
decayed usage for slurm-multifactor), exceptions and their expiry, protection ends and which runs
became possible victims, the preemption backoff grid, the deadline index and the audit's hold
dedupe. It builds the core's `Snapshot`, applies its `Decisions` (returning what the driver must
carry out, with the audit records; engine/outcome.py) and says when it next needs a pass. A serving
engine's changes (a policy, nodes, exceptions) come in as typed values it adopts
(engine/changes.py); the rules that compute them read it and never write it.

A driver's cycle at one instant t (the simulator does exactly this; a service does it per tick):

    engine.begin(t)            clock to t; the engine's timers due by t fire
    engine.submit(...) / started / finished / preempted / drain / undrain / hung / poke
    if engine.settle():        judge the runs whose protected window ended at t; a pass is due
        actions = engine.apply(decide(engine.snapshot(), engine.strategy))
        carry out actions.preempts, then actions.starts, reporting each back (preempted, started)
    next instant: min(the driver's own next event, engine.next_time())

Timers are the engine's own rules, never a driver's: protection ends, deadline jobs' latest start
minus the slack, gang reservation waits, the pass after a requeue, the backoff grid after a failed
victim search, drain deadlines, hung runs' max_stall and exception expiries. Rates are constant
between state changes, so the ledger integrates lazily: up to the last instant when the state
changes, and up to now when a pass reads it. The engine sees requests and estimates only: the
jobs' real run times and hangs reach it as events from the driver.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, Self

import numpy as np

from ..core.contract import latest_start, overhead_of, protected_until
from ..core.model import TIME_EPS, JobRequest, ResolvedException
from ..core.placement import Alloc, FreeIndex
from ..core.scheduler import deadline_due, may_be_victim
from ..core.snapshot import JobState, PendingQueues, RunView, Snapshot, SortKey, leaf_sort_key
from ..core.strategies import Strategy
from .changes import NodesState, PolicyState
from .demand import Demand
from .events import Event, Reservation
from .fleet import Fleet
from .ledger import DecayLedger, Ledger, Vec
from .outcome import PassOutcome
from .owed import effective_shares, water_fill
from .progress import ProgressCalls
from .requeue import RequeueRules
from .setup import EngineSetup

_NONE: frozenset[int] = frozenset()
_NONE_S: frozenset[str] = frozenset()


class RatesListener(Protocol):
    """Told when the engine's rates change and when it integrates them (the replay's metrics)."""

    def rates_changed(self, engine: EngineState) -> None: ...
    def interval(self, t0: float, t1: float) -> None: ...


class EngineState(ProgressCalls, PassOutcome, RequeueRules):
    """One scheduling domain's state. Each instance owns all of it; nothing is global."""

    def __init__(
        self,
        setup: EngineSetup,
        strategy: Strategy,
        listener: RatesListener | None = None,
        journal: list[Event] | None = None,
    ) -> None:
        self.setup, self.strategy, self.listener, self.journal = setup, strategy, listener, journal
        self.tree, self.knobs, self.nodes = setup.tree, setup.knobs, setup.nodes
        self.rates = dict(setup.gpu_rates)
        index = FreeIndex(setup.nodes)
        self.fleet = Fleet(index, [self.rates.get(n.gpu_type, 1.0) for n in setup.nodes])
        self.timers: list[tuple[float, int, str, Any]] = []  # (t, sequence, kind, payload)
        self.seq = 0
        self.t = 0.0
        self.states: dict[str, JobState] = {}
        self.pending = PendingQueues()
        self.running: dict[str, RunView] = {}
        self.by_leaf: dict[int, dict[str, RunView]] = {}
        self.detached: dict[str, int] = {}  # runs whose leaf a reconfigure removed -> node charged
        self.hung_since: dict[str, float] = {}  # job -> since when it makes no progress
        self.deadline_q: list[tuple[float, int, str]] = []  # (latest start, seq, job), sorted
        self.deadline_entry: dict[str, tuple[float, int, str]] = {}
        self.demand = Demand(self.tree, index, setup.nodes, self.rates)
        self.shares = effective_shares(self.tree, setup.exceptions, 0.0)
        n = len(self.tree.paths)
        self.ledger = Ledger(n, setup.window)
        self.decay = (
            DecayLedger(n, self.knobs.decay_half_life, self.knobs.decay_period, 0.0, self.knobs.decay_phase)
            if strategy.decayed_usage
            else None
        )
        self.last_hold: dict[str, str] = {}  # job -> the hold reason last audited
        self.retry_wakes: set[float] = set()  # backoff grid points with a timer already
        self.last_reservation: Reservation = None
        # the flip guard: (taker side, victim side) -> the last fair-share preemption between them
        self.took_from: dict[tuple[int, int], float] = {}
        self.fast_q: list[tuple[int, str]] = []  # pending jobs of the fast classes, by (seq, job)
        self._derive()
        self.last_backfill = -math.inf
        self.backfill_wake = -math.inf  # the backfill timer set last
        self.sched_wake = -math.inf  # the periodic main scheduler's timer set last (sched_interval)
        self.dirty = True  # the state changed since the rates were last computed
        self.computed = False  # rates computed at least once
        self.need_pass = False  # an event at this instant may change a pass's outcome
        self.victims_at = [-math.inf] * n  # per leaf: its latest protection end that made a victim
        self.protect_ended: list[tuple[str, int]] = []  # (job, run number) at this instant
        self.flushed = 0.0  # the ledger is integrated up to here
        self.owed_list: list[float] = [0.0] * n
        self.used_list: list[float] = [0.0] * n
        self.rate_rows: Vec = np.zeros((2, n))  # owed and used rates, as arrays
        self._owed_key: tuple[list[float], float, Sequence[float]] | None = None  # water_fill memo
        self._owed: list[float] = []
        self._init_progress()  # what running jobs reported of their progress (engine/progress.py)
        for ex in setup.exceptions:
            self._push(ex.expires_t, "expiry", None)

    # ------------------------------------------------------------------ journal and rebuild
    @classmethod
    def rebuild(
        cls,
        setup: EngineSetup,
        strategy: Strategy,
        events: Iterable[Event],
        listener: RatesListener | None = None,
        journal: list[Event] | None = None,
    ) -> Self:
        """A fresh state with `events` (a journal) replayed into it: equal to the state that
        recorded them (the service's recovery path)."""
        engine = cls(setup, strategy, listener, journal)
        engine.replay(events)
        return engine

    def replay(self, events: Iterable[Event]) -> None:
        """Apply recorded journal events to this state, each through the call that recorded it
        (a pass's outcome through the snapshot it was decided on)."""
        for ev in events:
            if ev.kind == "applied":
                self.snapshot()
                self._outcome(*ev.args)
            elif ev.kind == "snapshot":
                self.snapshot()
            else:
                getattr(self, ev.kind)(*ev.args)

    # ------------------------------------------------------------------ timers and the clock
    def _push(self, t: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.timers, (t, self.seq, kind, payload))
        self.seq += 1

    def next_time(self) -> float | None:
        """When the engine next needs an instant of its own (a timer), or None."""
        return self.timers[0][0] if self.timers else None

    def begin(self, t: float) -> None:
        """Start the instant t: integrate up to it and fire the timers due by then."""
        if self.journal is not None:
            self.journal.append(Event("begin", (t,)))
        if self.dirty or not self.computed:  # advance(t), inlined: begin runs every instant
            self._flush()
            self._recompute()
            self.dirty = False
        self.t = max(self.t, t)
        self.need_pass = False
        while self.timers and self.timers[0][0] <= t:
            _, _, kind, payload = heapq.heappop(self.timers)
            if kind == "protect":
                self.protect_ended.append(payload)
                continue
            if kind == "requeue":
                self._boost(*payload)
            if kind == "backlog" and not self._backlog_check(*payload):
                continue
            if kind == "stall":  # a reporting run's last progress may be older than max_stall
                self._stall_due(payload)
                continue
            self.need_pass = True
            if kind == "expiry":
                self.shares = effective_shares(self.tree, self.setup.exceptions, self.t)
                self.dirty = True

    def advance(self, t: float) -> None:
        """Move the clock to t without firing timers (a driver's last instant)."""
        if self.journal is not None:
            self.journal.append(Event("advance", (t,)))
        # rates are constant between state changes, so integration into the ledger is deferred
        # until the state changes or a pass reads it
        if self.dirty or not self.computed:
            self._flush()
            self._recompute()
            self.dirty = False
        self.t = max(self.t, t)

    def flush(self) -> None:
        """Integrate the current rates over [last flush, now] (a driver's last instant)."""
        if self.journal is not None:
            self.journal.append(Event("flush"))
        self._flush()

    def _flush(self) -> None:
        if self.t > self.flushed and self.computed:
            self.ledger.advance(self.t)
            if self.decay is not None:
                self.decay.advance(self.t)
            if self.listener is not None:
                self.listener.interval(self.flushed, self.t)
        self.flushed = self.t

    def poke(self) -> None:
        """The driver asks for a pass at this instant (every event of the driver's own gets one)."""
        if self.journal is not None:
            self.journal.append(Event("poke"))
        self.need_pass = True

    # ------------------------------------------------------------------ rates
    def _owed_used(self) -> tuple[list[float], list[float]]:
        """Owed rate (water-filling) and running charge of every tree node, now."""
        used = list(self.demand.node_used)
        demand = [p + u for p, u in zip(self.demand.node_pending, used, strict=True)]
        # owed depends on demand, capacity and shares only: a start or a preemption moves charge
        # between pending and running and leaves it as it was
        key = (demand, self.fleet.capacity, self.shares)
        if key != self._owed_key:
            self._owed_key = key
            self._owed = water_fill(self.tree, self.fleet.capacity, demand, self.shares)
        return self._owed, used

    def rates_now(self) -> tuple[list[float], list[float]]:
        """Owed and used rates after the events handled so far at this instant (the last
        recomputed ones when nothing changed since)."""
        if self.dirty or not self.computed:
            return self._owed_used()
        return self.owed_list, self.used_list

    def _recompute(self) -> None:
        owed, used = self._owed_used()
        self.owed_list, self.used_list = owed, used
        # the rates as arrays, converted once: the ledger, the decayed usage and the metrics read them
        self.rate_rows = np.array([owed, used], dtype=np.float64)
        self.ledger.set_rate_rows(self.rate_rows)
        if self.decay is not None:
            self.decay.set_rate(self.rate_rows[1])
        self.computed = True
        if self.listener is not None:
            self.listener.rates_changed(self)

    def fragmented_gpus(self) -> float:
        """Idle GPUs that some pending job could use but not be placed on (FORMATS.md)."""
        return self.demand.fragmented_gpus()

    # ------------------------------------------------------------------ jobs
    def submit(self, job: JobRequest) -> None:
        """A job arrives (it waits from its submit time)."""
        if self.journal is not None:
            self.journal.append(Event("submit", (job,)))
        self.states[job.id] = JobState(pending_since=job.submit)
        self._to_pending(job)
        self.need_pass = True

    def _sort_key(self, job: JobRequest) -> SortKey:
        return leaf_sort_key(job, self.states[job.id], self.knobs.leaf_order)

    def _to_pending(self, job: JobRequest) -> None:
        key = self._sort_key(job) if self.keyed else None
        self.pending.add(job, self.fleet.index, key, never_started=self.states[job.id].starts == 0)
        self.demand.add_pending(job)
        if job.cls in self.fast:
            bisect.insort(self.fast_q, (job.seq, job.id))
        if job.deadline is not None:
            st = self.states[job.id]
            entry = (latest_start(job, st.starts > 0, st.kept), job.seq, job.id)
            self.deadline_entry[job.id] = entry
            bisect.insort(self.deadline_q, entry)
            wake = entry[0] - self.knobs.deadline_slack
            if wake > self.t:
                self._push(wake, "wake", None)
        if self.strategy.gang_reservation and job.nodes > 1:
            self._push(self.t + self.knobs.gang_reserve_after, "wake", None)
        self.dirty = True

    def _from_pending(self, job: JobRequest) -> None:
        self.pending.remove(job)
        self.demand.remove_pending(job)
        if job.cls in self.fast:
            del self.fast_q[bisect.bisect_left(self.fast_q, (job.seq, job.id))]
        entry = self.deadline_entry.pop(job.id, None)
        if entry is not None:
            del self.deadline_q[bisect.bisect_left(self.deadline_q, entry)]
        self.dirty = True

    def started(self, job_id: str, alloc: Alloc, charge: float) -> RunView:
        """A pending job began a run on `alloc` at the current instant, charged `charge`."""
        if self.journal is not None:
            self.journal.append(Event("started", (job_id, alloc, charge)))
        t = self.t
        job = self.pending.jobs[job_id]
        st = self.states[job_id]
        self._from_pending(job)
        for i, g in alloc:
            self.fleet.change_free(i, -g)
        view = RunView(
            job, t, alloc, charge, overhead_of(job, st.starts > 0), st.kept, protected_until(t, job)
        )
        st.starts += 1
        st.requeue_boost = False
        self.running[job_id] = view
        self.by_leaf.setdefault(job.leaf, {})[job_id] = view
        self.demand.add_run(job.leaf, self.fleet.index.node_type[alloc[0][0]], charge)
        self.last_hold.pop(job_id, None)
        if (self.strategy.victims.preempts or self.strategy.deadline_reservation) and job.protected > 0:
            self._push(view.protected_until, "protect", (job_id, st.starts))
        self._progress_started(view)
        self.dirty = True
        return view

    def _stop(self, job_id: str) -> RunView:
        view = self.running.pop(job_id)
        leaf = view.job.leaf
        self.hung_since.pop(job_id, None)
        self.reports.pop(job_id, None)
        for i, g in view.alloc:
            self.fleet.change_free(i, g)
        if self.detached and job_id in self.detached:  # its leaf was removed by a reconfigure
            self.demand.remove_direct(self.detached.pop(job_id), view.charge)
        else:
            del self.by_leaf[leaf][job_id]
            if not self.by_leaf[leaf]:
                del self.by_leaf[leaf]
            ty = self.fleet.index.node_type[view.alloc[0][0]]
            self.demand.remove_run(leaf, ty, view.charge, leaf in self.by_leaf)
        self.dirty = True
        return view

    def finished(self, job_id: str) -> RunView:
        """A run ended because its job completed."""
        if self.journal is not None:
            self.journal.append(Event("finished", (job_id,)))
        self.need_pass = True
        view = self._stop(job_id)
        self._forget(job_id)  # ended for good: no later call reads its state
        return view

    def _forget(self, job_id: str) -> None:
        """Drop a job's per-job state once it ended (finished or cancelled). The rest of its
        per-job entries (queues, deadline index, hung, detached) left with its run or queue place."""
        self.states.pop(job_id, None)
        self.last_hold.pop(job_id, None)
        self.restarts.pop(job_id, None)

    def preempted(self, job_id: str, reason: str, by: str | None, lost_gpu_s: float, kept: float) -> RunView:
        """A run was preempted at the current instant; the job, with `kept` seconds of progress
        saved in total, waits again from now (in its submit position)."""
        if self.journal is not None:
            self.journal.append(Event("preempted", (job_id, reason, by, lost_gpu_s, kept)))
        self._progress_preempted(job_id)
        view = self._stop(job_id)
        st = self.states[job_id]
        st.kept = kept
        st.preempted_by = by
        st.pending_since = self.t
        st.preemptions += 1
        st.attained += (self.t - view.t0) * view.job.gpus
        if reason == "fair_share" and by is not None:
            self._took(by, view.job.leaf)
        self._to_pending(view.job)
        self._push(self.t + self.knobs.requeue_delay, "wake", None)
        if self.keyed and self.knobs.requeue_within > 0:
            self._requeue_timers(job_id, view.job.leaf, st.preemptions)
        return view

    def _took(self, by: str, victim_leaf: int) -> None:
        """The flip guard's record: the preemptor's side took from the victim's side now (the
        preemptor is pending while its victims are preempted; running if a driver reports late)."""
        taker = self.pending.jobs.get(by)
        if taker is None:
            run = self.running.get(by)
            taker = run.job if run is not None else None
        if taker is not None and taker.leaf != victim_leaf:
            self.took_from[self.tree.sides(taker.leaf, victim_leaf)] = self.t

    def cancelled(self, job_id: str) -> None:
        """A job was withdrawn (a user's cancel): it leaves the queue, or its run ends now."""
        if self.journal is not None:
            self.journal.append(Event("cancelled", (job_id,)))
        self.need_pass = True
        if job_id in self.running:
            self._stop(job_id)
        elif job_id in self.pending.jobs:
            self._from_pending(self.pending.jobs[job_id])
        else:
            return
        self._forget(job_id)

    def hung(self, job_id: str) -> None:
        """A running job stopped making progress now; past its class's max_stall the watchdog may
        preempt it (`no_progress`)."""
        if self.journal is not None:
            self.journal.append(Event("hung", (job_id,)))
        self.need_pass = True
        view = self.running.get(job_id)
        if view is None or job_id in self.hung_since:
            return
        self.hung_since[job_id] = self.t
        view = dataclasses.replace(view, hung_since=self.t)
        self.running[job_id] = view
        if job_id not in self.detached:
            self.by_leaf[view.job.leaf][job_id] = view
        self._push(self.t + view.job.max_stall, "wake", None)

    # ------------------------------------------------------------------ nodes
    def drain(self, nodes: Sequence[int], deadline: float) -> None:
        """Nodes stop taking work now; runs still on them at `deadline` are preempted (`drain`)."""
        if self.journal is not None:
            self.journal.append(Event("drain", (tuple(nodes), deadline)))
        for i in nodes:
            self.fleet.drain(i, deadline)
        if deadline > self.t:
            self._push(deadline, "wake", None)
        self.dirty = self.need_pass = True

    def undrain(self, nodes: Sequence[int]) -> list[int]:
        """Nodes take work again; returns those that were draining."""
        if self.journal is not None:
            self.journal.append(Event("undrain", (tuple(nodes),)))
        back = [i for i in nodes if i in self.fleet.draining]
        for i in back:
            self.fleet.undrain(i)
        self.dirty = self.need_pass = True
        return back

    def drain_due(self) -> frozenset[int]:
        """Draining nodes whose drain deadline has come."""
        draining = self.fleet.draining
        if not draining:
            return _NONE
        return frozenset(i for i, d in draining.items() if self.t >= d - TIME_EPS)

    # ------------------------------------------------------------------ protection ends
    def settle(self) -> bool:
        """The instant's events are in: judge the runs whose protected window ended now. Returns
        whether a pass is due (pass_due()).

        A run that could not be a victim with the rates as they are now (scheduler.may_be_victim)
        gets no pass: rates only change at events, and every event gets a pass of its own, so the
        run is considered at the pass of the event that makes it a possible victim."""
        if self.journal is not None:
            self.journal.append(Event("settle"))
        if not self.protect_ended:
            return self.need_pass and bool(
                len(self.pending) or self.hung_since or (self.fleet.draining and self.drain_due())
            )  # pass_due(), inlined: settle runs every instant
        ended, self.protect_ended = self.protect_ended, []
        owed, used = self.rates_now()
        q = self.deadline_q
        urgent = bool(q) and deadline_due(q[0][0], self.knobs.deadline_slack, self.t)
        for job_id, run in ended:
            view = self.running.get(job_id)
            if view is not None and self.states[job_id].starts == run and job_id not in self.detached:
                ancestors = self.tree.leaf_ancestors[view.job.leaf]
                if may_be_victim(self.strategy, ancestors, used, owed, urgent):
                    self.need_pass = True
                    self.victims_at[view.job.leaf] = self.t
        return self.pass_due()

    # ------------------------------------------------------------------ passes
    def pass_due(self) -> bool:
        """An event at this instant may change a pass's outcome, and a pass has work to look at."""
        return self.need_pass and bool(
            len(self.pending) or self.hung_since or (self.fleet.draining and self.drain_due())
        )

    def snapshot(self) -> Snapshot:
        """The core's view of the state now (the ledger integrated up to now)."""
        if self.journal is not None:
            self.journal.append(Event("snapshot"))
        owed, used = self.rates_now()
        self._flush()  # the ledger's debt must be current
        return Snapshot(
            now=self.t,
            knobs=self.knobs,
            tree=self.tree,
            rates=self.rates,
            index=self.fleet.index,
            drain_due=self.drain_due(),
            running=self.running,
            running_by_leaf=self.by_leaf,
            pending=self.pending,
            states=self.states,
            debt=self.ledger.debt().tolist(),
            owed=owed,
            used=used,
            entitlement=self.ledger.owed_sum.tolist(),
            hung=tuple(self.hung_since),
            deadline_queue=self.deadline_q,
            decayed_usage=self.decay.usage.tolist() if self.decay is not None else (),
            victims_at=self.victims_at,  # read-only during the pass
            took_from=self.took_from,
            fast_queue=self.fast_q,
            prev_reservation=self.last_reservation,
            backfill_due=self.t >= self.last_backfill + self.knobs.bf_interval - TIME_EPS,
        )

    # ------------------------------------------------------------------ a serving engine's changes
    def _derive(self) -> None:
        """What the strategy and the knobs switch on: the fast lane, the backfill cadence
        (slurm-multifactor), the leaf sort keys."""
        s, knobs = self.strategy, self.knobs
        self.fast = frozenset(knobs.fast_classes) if s.fast_lane else _NONE_S
        self.backfills = s.slurm_scheduler
        self.keyed = s.leaf_order and knobs.leaf_order != "submit"

    def integrate(self) -> None:
        """Integrate the rates up to now, not journaled (before a change reads the ledger)."""
        self._flush()

    def adopt_policy(self, p: PolicyState) -> None:
        """Take in a new policy's state (engine/reconfigure.py computed it from this state's
        reads, integrated up to now); the rates are computed again at the next instant."""
        self.setup, self.tree, self.knobs, self.rates, self.strategy = (
            p.setup,
            p.setup.tree,
            p.setup.knobs,
            p.rates,
            p.strategy,
        )
        self._derive()
        if p.node_rates is not None:
            self.fleet.rerate(p.node_rates)
        self.demand, self.pending, self.fast_q = p.demand, p.pending, p.fast_q
        self.deadline_q, self.deadline_entry = p.deadline_q, p.deadline_entry
        self.running, self.by_leaf, self.detached = p.running, p.by_leaf, p.detached
        for job_id in p.forget:
            self._forget(job_id)
        self.ledger, self.decay, self.victims_at, self.took_from = (
            p.ledger,
            p.decay,
            p.victims_at,
            p.took_from,
        )
        self.shares = p.shares
        for t, kind in p.wakes:
            self._push(t, kind, None)
        n = len(self.tree.paths)
        self._owed_key = None
        self.owed_list, self.used_list = [0.0] * n, [0.0] * n
        self.rate_rows = np.zeros((2, n))
        self.dirty = self.need_pass = True

    def adopt_nodes(self, p: NodesState) -> None:
        """Take in a new node set's state (engine/nodes.py computed it from this state's reads,
        integrated up to now)."""
        self.nodes, self.fleet = p.change.nodes, p.fleet
        self.setup = dataclasses.replace(self.setup, nodes=p.change.nodes)
        self.demand, self.pending = p.demand, p.pending
        self._owed_key = None
        self.dirty = self.need_pass = True

    def adopt_exceptions(self, exceptions: tuple[ResolvedException, ...]) -> None:
        """The share exceptions in force from now (their expiry instants wake the engine); the
        driver journals what it was given."""
        self.setup = dataclasses.replace(self.setup, exceptions=exceptions)
        self.shares = effective_shares(self.tree, exceptions, self.t)
        for ex in exceptions:
            if ex.expires_t > self.t:
                self._push(ex.expires_t, "expiry", None)
        self.dirty = self.need_pass = True
