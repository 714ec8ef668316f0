"""The scheduler loop (DESIGN §5): one per database, the engine state in memory, write-ahead.

A cycle at `now` (the injected clock: real time, or real time x speed for the demo):

    1. observe the cluster since the last cycle; skip observations already journaled (keys)
    2. for each instant with observations, in order: engine.begin(t), the observations as engine
       events (submit, finished, hung, drain, ...), settle; no pass at a past instant (a loop
       that was late does not act in the past); an observation older than the engine's last
       instant counts from that instant (the engine never goes back)
    3. at now: the policy and exceptions in force (a new version or exception applies now),
       settle, and if a pass is due: decide(snapshot, strategy, explain=True), engine.apply
    4. commit the journal events, audit records and usage intervals in ONE transaction
    5. only then act on the cluster (preempt, then start); its confirmations are engine events
       (preempted, started) and usage, committed in turn
    6. publish a view for the API; sleep until the engine's or the cluster's next instant

Restart rebuilds the engine from the database alone (journal replay, live_engine.replay) and asks
the cluster what happened since the last committed instant: a start the cluster made before the
crash comes back as an observation (never repeated: the cluster refuses to start a running job),
a start it did not make is decided again. A second process on the same database (no writer lock)
follows the journal read-only and serves the same views; it takes over when the lock frees.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from ...core.model import JobRequest
from ...core.scheduler import decide
from ...core.snapshot import Decisions, Preempt, Start
from ...engine.events import Event
from ...engine.forecast import forecast_starts
from ...errors import InputError
from ...inputs.policy import Policy
from ..clusters.backend import (
    Backend,
    Cancelled,
    Drained,
    Finished,
    Hung,
    NodesChanged,
    Noted,
    Observation,
    Preempted,
    Started,
    Submission,
    Submitted,
    Undrained,
    startable,
)
from ..service_errors import ClusterUnavailable, Unavailable, WriterLockHeld
from ..storage import audit, journal, portfolio
from ..storage.audit import AuditRecord
from ..storage.journal import Interval, JournalEvent
from ..storage.lock import WriterLock
from ..storage.store import Store
from ..timefmt import iso
from . import retention
from .checkpoint import Checkpoints
from .counters import LoopCounters
from .health import LoopHealth
from .inforce import apply_exceptions, apply_policy
from .live_engine import SETUP, LiveEngine, Setup, new_engine, replay
from .options import LoopOptions
from .reports import Inbox
from .requests import Requests
from .views import EMPTY, View, build_view, owners_of, quantiles, reader_order

log = logging.getLogger("fairshare.service.loop.cycle")


class SchedulerLoop:
    """See the module's docstring. `run(stop)` runs until `stop` is set; views via `view`."""

    def __init__(
        self,
        store: Store,
        backend_factory: Callable[[], Backend],
        clock: Callable[[], float],
        options: LoopOptions | None = None,
        wall: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store, self.backend_factory, self.clock = store, backend_factory, clock
        self.opt = options or LoopOptions()
        self.wall = wall
        self.backend: Backend | None = None
        self.engine: LiveEngine | None = None
        self.lock: WriterLock | None = None
        self.role = "starting"
        self.view: View = EMPTY
        self.version = 0
        self.wake = threading.Event()
        self.buf: list[Event] = []
        self.keys: dict[int, str] = {}  # index in buf -> observation key
        self.seen: dict[str, float] = {}  # keys journaled at or after `since`
        self.since = -math.inf
        self.last_seq = 0
        self.order: tuple[str, ...] = ()
        self.why: dict[str, str] = {}
        self.forecasts: dict[str, float] = {}
        self.forecast_at: float | None = None
        self.last_forecast = -math.inf
        self.last_publish = -math.inf
        self.pass_times: deque[float] = deque(maxlen=5000)  # wall seconds of recent passes
        self.pass_log: deque[tuple[float, float]] = deque(maxlen=20000)  # (unix time, seconds) of passes
        self.cycle_times: deque[float] = deque(maxlen=5000)
        self.cycle_log: deque[tuple[float, float, float]] = deque(maxlen=20000)  # (unix time, s, lag)
        self.passes = 0
        self.cycles = 0
        self.policies_cache: dict[str, Policy] = {}
        self.requests: Requests | None = None
        self.policy_note: dict[str, Any] | None = None  # a stored version the ledger cannot take
        self.error: str | None = None
        self.health = LoopHealth()  # last completed cycle, last error, errors (/healthz, /metrics)
        self.counters = LoopCounters()  # starts, preemptions, lost GPU-hours, requeues, waits (/metrics)
        self.seen_exceptions: set[int] = set()  # stored exceptions in force at the last cycle's pass
        self.ok_exceptions: set[int] | None = None  # ... at the last cycle that completed
        self.unavailable = 0  # consecutive cycles the cluster could not be read
        self.retry = False  # the cluster did not take all of the last pass: pass again
        self.blocked: frozenset[str] = frozenset()  # jobs the cluster may not start now
        self.last_cycle = -math.inf
        self.holder: str | None = None
        self.on_pass: list[Callable[[float], None]] = []  # observers of pass durations (metrics)
        self.inbox = Inbox()  # jobs' progress reports from the API (loop/reports.py)
        o = self.opt  # the writer's checkpoints, and what the last rebuild started from
        self.ckpt = Checkpoints(store, wall, o.crash, o.checkpoint_events, o.checkpoint_s, o.checkpoint_keep)
        self.replayed = 0  # journal events replayed by the last rebuild

    # ------------------------------------------------------------------ policies
    def policy(self, sha: str) -> Policy:
        pol = self.policies_cache.get(sha)
        if pol is None:
            with self.store.read() as tx:
                for v in portfolio.policy_history(tx):
                    if v.sha256 == sha:
                        pol = self.policies_cache[sha] = v.policy()
                        break
        if pol is None:
            raise Unavailable(f"policy version {sha[:12]} is not stored: the database is incomplete")
        return pol

    # ------------------------------------------------------------------ start, recovery, following
    def take_lock(self) -> bool:
        lock = self.store.writer_lock()
        try:
            lock.acquire()
        except WriterLockHeld as exc:
            self.holder = exc.message
            return False
        self.lock = lock
        self.holder = None
        return True

    def _events_after(self, after: int) -> list[tuple[int, float, Event]]:
        out = []
        with self.store.read(snapshot=True) as tx:
            for ev in journal.events(tx, after=after):
                out.append((ev.seq, ev.t, Event.from_json(ev.payload)))
        return out

    def catch_up(self) -> bool:
        """Apply journal events committed since the last look (a reader's tail; recovery's replay).
        False when there is no journal yet."""
        rebuilding = self.engine is None
        if rebuilding:  # the newest valid checkpoint, if any, then the journal after it
            self.engine, self.last_seq, self.replayed = self.ckpt.restore(self.policy), self.ckpt.seq, 0
        rows = self._events_after(self.last_seq)
        if self.engine is None:
            if not rows:
                return False
            first = rows[0][2]
            if first.kind != SETUP:
                raise Unavailable("the journal does not start with the loop's setup record")
            self.engine = new_engine(Setup.from_event(first), self.policy)
        if rebuilding:
            self.requests = Requests(self.engine.serving_nodes())
        replay(self.engine, [ev for _, _, ev in rows])
        if rows:
            self.last_seq = rows[-1][0]
        self.replayed += len(rows)
        return True

    def become_writer(self, policy_sha: str | None = None) -> None:
        """With the writer lock held: rebuild from the journal (or start one), reconcile."""
        assert self.lock is not None
        rebuilt = self.catch_up()  # the engine first: a backend may resolve jobs by its policy
        backend = self.backend_factory()
        self.backend = backend
        if not rebuilt:
            with self.store.read() as tx:
                cur = portfolio.current_policy(tx)
            if cur is None:
                raise Unavailable(
                    "no policy is stored: push one first (fairshare policy push, or serve --policy)"
                )
            setup = Setup(policy_sha or cur.sha256, self.opt.strategy, backend.nodes(), backend.name)
            ev = setup.as_event()
            self.store.commit(events=[JournalEvent(0.0, ev.kind, ev.as_json())])
            self.catch_up()
        e = self.engine
        assert e is not None
        known = [n.as_json() for n in e.state.nodes]  # a backend that places jobs keeps its indexes;
        if backend.places_jobs and known != [n.as_json() for n in backend.nodes()]:  # Slurm's: observed
            raise Unavailable(
                f"the {backend.name} cluster's nodes differ from those this database's ledger was built "
                "on, and it places jobs by node index: start it with the same nodes"
            )
        e.state.journal = self.buf
        self.since = e.t
        with self.store.read() as tx:
            self.seen = journal.keys_since(tx, e.t)
        self._buf_t = e.t
        backend.resume(e.t)
        self.role = "writer"
        how = f"checkpoint at journal seq {self.ckpt.seq} and " if self.ckpt.restored else ""
        log.info("writer: rebuilt the engine at %s from %s%d journal events", iso(e.t), how, self.replayed)

    # ------------------------------------------------------------------ the cycle
    def cycle(self) -> None:
        e, backend = self.engine, self.backend
        assert e is not None and backend is not None
        started = self.wall()
        now = max(self.clock(), e.t)
        obs = [o for o in backend.observe(self.since, now) if o.key not in self.seen]
        blocked, was = backend.not_startable(), self.blocked
        self.blocked = blocked  # a job Slurm lets run again is looked at by a pass:
        released = any(j in e.state.pending.jobs and j not in blocked for j in was)
        obs = retention.not_journaled(self.store, e, obs, self.since)  # late, or of a pruned job
        groups: list[tuple[float, list[Observation]]] = []
        for o in obs:
            t = max(o.t, e.t)
            if groups and groups[-1][0] == t:
                groups[-1][1].append(o)
            else:
                groups.append((t, [o]))
        if not groups or groups[-1][0] < now:
            groups.append((now, []))
        audits: list[AuditRecord] = []
        usage: list[Interval] = []
        happened = False
        for t, batch in groups:
            e.begin(t)
            for o in batch:
                self._ingest(o, usage, audits)
            happened = happened or bool(batch)
            if t == now:
                self._portfolio(now, audits)
                self.inbox.take(e, audits)
                if happened or self.retry or released:
                    e.state.poke()
                    self.retry = False
            e.state.settle()
        d: Decisions | None = None
        if e.state.pass_due():
            t0 = self.wall()
            d = startable(decide(e.state.snapshot(), e.state.strategy, explain=True), blocked)
            actions = e.state.apply(d)
            took = self.wall() - t0
            self.pass_times.append(took)
            self.pass_log.append((time.time(), took))
            self.passes += 1
            for observer in self.on_pass:
                observer(took)
            self.order, self.why = d.order, dict(d.why_pending)
            audits.extend(AuditRecord.from_decision(_plain(r), e.policy_sha) for r in actions.audit)
        self.since = now
        self._commit(audits, usage)
        todo: tuple[Sequence[Preempt], Sequence[Start], Sequence[str]] | None = None
        if d is not None and (d.preempts or d.starts or not backend.places_jobs):
            todo = (d.preempts, d.starts, d.order)
        elif d is None and not backend.places_jobs and e.cancelled_by_policy:
            # no pass, but jobs a policy change cancelled may wait in Slurm: act holds them
            todo = ((), (), tuple(j for j in self.order if j in e.state.pending.jobs))
        if todo is not None:
            self.opt.crash("after_commit")
            out = backend.act(*todo, now)
            self.opt.crash("after_act")
            usage, audits = [], []
            for o in out.confirmed:
                if o.key not in self.seen:
                    self._ingest(o, usage, audits)
            for f in out.failed:
                audits.append(
                    AuditRecord(now, f"{f.action}_failed", f.job, {"reason": f.reason}, e.policy_sha)
                )
            for r in out.records:
                audits.append(AuditRecord(now, r.kind, r.job, _plain(r.evidence), e.policy_sha))
            self.retry = out.retry
            self._commit(audits, usage)
        if not self.buf:  # drained by the commits: the engine is exactly the journal up to last_seq
            self.ckpt.after_cycle(e, self.last_seq)
        for k in [k for k, t in self.seen.items() if t < self.since]:
            del self.seen[k]
        self.cycles += 1
        self.cycle_times.append(self.wall() - started)
        self.cycle_log.append((time.time(), self.wall() - started, self.clock() - e.t))
        self._forecast()
        self.publish(force=d is not None and self.wall() - self.last_publish >= self.opt.publish_s)

    def _ingest(self, o: Observation, usage: list[Interval], audits: list[AuditRecord]) -> None:
        e = self.engine
        assert e is not None
        i = len(self.buf)
        t = e.t
        if isinstance(o, Submitted):
            if o.job in e.info or o.job in e.rejected:
                return
            reason: str | None = None
            pol = self.policy(e.policy_sha)  # a database error fails the cycle (retried), not the job
            try:
                req = self._request(o, t, pol)
            except InputError as exc:
                reason = str(exc)
            except Exception as exc:  # a bug resolving this job: set aside, not retried every cycle
                reason = self.health.set_aside_job(o.job, f"{type(exc).__name__}: {exc}")
            if reason is not None:
                e.reject(o.job, reason)
                audits.append(AuditRecord(t, "submit_rejected", o.job, {"reason": reason}, e.policy_sha))
            else:
                e.submit(dataclasses.replace(req, submit=t, seq=e.submits))
        elif isinstance(o, Started):
            if o.job not in e.state.pending.jobs:
                return
            e.started(o.job, o.alloc, o.charge)
            usage.append(Interval(o.job, e.info[o.job].request.group, o.charge, t, None))
        elif isinstance(o, Finished | Preempted):
            view = e.state.running.get(o.job)
            if view is None:
                return
            if isinstance(o, Finished):
                e.finished(o.job)
            else:
                e.preempted(o.job, o.reason, o.by, o.lost_gpu_s, o.kept)
            usage.append(Interval(o.job, view.job.group, e.started_charge(view), view.t0, t))
        elif isinstance(o, Cancelled):
            if o.job not in e.state.pending.jobs and o.job not in e.state.running:
                return
            view = e.state.running.get(o.job)
            e.cancelled(o.job)
            if view is not None:
                usage.append(Interval(o.job, view.job.group, e.started_charge(view), view.t0, t))
        elif isinstance(o, Hung):
            if o.job not in e.state.running or o.job in e.state.hung_since:
                return
            e.state.hung(o.job)
        elif isinstance(o, Drained):
            e.state.drain(o.nodes, o.deadline)
        elif isinstance(o, Undrained):
            e.state.undrain(o.nodes)
        elif isinstance(o, NodesChanged):
            audits.extend(AuditRecord(t, k, None, ev, e.policy_sha) for k, ev in e.change_nodes(o.nodes))
        elif isinstance(o, Noted):
            audits.append(AuditRecord(t, o.kind, o.job, _plain(o.evidence), e.policy_sha))
        if len(self.buf) > i:
            self.keys[i] = o.key
        self.seen[o.key] = o.t
        self.counters.count(o, e)

    def _request(self, o: Submitted, t: float, pol: Policy) -> JobRequest:
        """A submission's request: as resolved when it was submitted (an API submission) if the
        policy version and the nodes are still the same, else resolved now under `pol`."""
        e = self.engine
        assert e is not None and self.requests is not None
        nodes = e.serving_nodes()
        done = o.resolved
        if done is not None and done.policy_sha == e.policy_sha and done.nodes == nodes:
            return done.job.request
        if self.requests.nodes != nodes:  # the cluster's nodes changed
            self.requests = Requests(nodes)
        return self.requests.build(pol, o.job, o.spec, t).request

    def resolve_submission(self, job_id: str, spec: Mapping[str, Any], t: float) -> Submission:
        """(demo) An API submission resolved against the policy in force, with its truth: once,
        when it is submitted (the loop takes its request from it). Raises InputError if refused."""
        e, requests = self.engine, self.requests
        if e is None or requests is None:
            raise Unavailable("the scheduler loop is starting: its state is not rebuilt yet")
        sha = e.policy_sha  # (read on an API thread: the loop's Requests as they are; the loop
        # resolves it again if its nodes or the policy version changed by the time it is ingested)
        return Submission(requests.build(self.policy(sha), job_id, spec, t, truth=True), sha, requests.nodes)

    def _portfolio(self, now: float, audits: list[AuditRecord]) -> None:
        """Apply a new policy version and the exceptions in force at `now` (audited)."""
        e = self.engine
        assert e is not None
        with self.store.read() as tx:
            cur = portfolio.current_policy(tx)
            stored = portfolio.list_exceptions(tx, "all")
        self.seen_exceptions = {x.id for x in stored if x.active(now)}
        self.policy_note = apply_policy(e, cur, self.policy, self.policy_note, now, audits)
        apply_exceptions(e, self.policy(e.policy_sha), stored, now, audits)

    def _commit(self, audits: list[AuditRecord], usage: list[Interval]) -> None:
        events = self._drain()
        if not events and not audits and not usage:
            return
        with self.store.write() as tx:
            seqs = journal.append_events(tx, events)
            audit.append(tx, audits)
            for iv in usage:
                journal.record_usage(tx, iv)
            self.opt.crash("mid_commit")
        if None in seqs:
            raise RuntimeError("an observation was journaled twice: the engine applied it twice; restarting")
        self.last_seq = max([s for s in seqs if s is not None], default=self.last_seq)

    def _drain(self) -> list[JournalEvent]:
        e = self.engine
        assert e is not None
        out = []
        t = self._buf_t
        for i, ev in enumerate(self.buf):
            if ev.kind in ("begin", "advance"):
                t = float(ev.args[0])
            out.append(JournalEvent(t, ev.kind, ev.as_json(), self.keys.get(i)))
        self._buf_t = t
        self.buf.clear()
        self.keys.clear()
        return out

    _buf_t = 0.0

    # ------------------------------------------------------------------ forecasts and views
    def _forecast(self) -> None:
        e = self.engine
        assert e is not None
        since = self.wall() - self.last_forecast
        pending = list(e.state.pending.jobs)
        missing = any(j not in self.forecasts for j in pending)
        if since < self.opt.forecast_s and not (missing and since >= min(0.2, self.opt.forecast_s)):
            return
        self.last_forecast = self.wall()
        if not pending:
            self.forecasts, self.forecast_at = {}, e.t
            return
        self.forecasts = forecast_starts(e.state, pending, max_passes=self.opt.forecast_passes)
        self.forecast_at = e.t

    def publish(self, force: bool = False) -> None:
        e = self.engine
        if e is None:
            self.view = View(
                self.version,
                self.role,
                "",
                self.clock(),
                0.0,
                self.opt.speed,
                self.opt.strategy,
                "",
                3600.0,
                7 * 86400.0,
                0.0,
                0,
                0,
                status=self.status(),
            )
            return
        if not force and self.wall() - self.last_publish < self.opt.publish_s:
            return
        self.version += 1
        owners = {}
        try:
            pol = self.policy(e.policy_sha)
            owners = owners_of(pol)
        except Unavailable:
            pass
        self.view = build_view(
            e,
            version=self.version,
            role=self.role,
            backend=self.backend.name if self.backend else "journal",
            now=self.clock(),
            speed=self.opt.speed,
            order=self.order,
            why=self.why,
            forecasts=self.forecasts,
            forecast_at=self.forecast_at,
            status=self.status(),
            owners=owners,
        )
        self.last_publish = self.wall()

    def status(self) -> dict[str, Any]:
        passes = sorted(self.pass_times)
        cycles = sorted(self.cycle_times)
        return {
            "role": self.role,
            "holder": self.holder,
            "passes": self.passes,
            "cycles": self.cycles,
            "pass_s": quantiles(passes),
            "cycle_s": quantiles(cycles),
            "journal_seq": self.last_seq,
            "checkpoint_seq": self.ckpt.seq,
            "policy_not_applied": self.policy_note,
            "error": self.error,
            "cluster_retries": self.unavailable,
            **self.health.as_json(self.opt.poll_s),
        }

    # ------------------------------------------------------------------ running
    def sleep_s(self) -> float:
        """Wall seconds until the next instant the engine or the cluster needs."""
        e, backend = self.engine, self.backend
        assert e is not None and backend is not None
        poll = max(0.0, self.opt.poll_s - (self.wall() - self.last_cycle))
        nxt = [x for x in (e.state.next_time(), backend.next_time()) if x is not None]
        if not nxt or self.opt.speed <= 0:
            return poll
        return max(0.0, min(poll, (min(nxt) - self.clock()) / self.opt.speed))

    def _reader_order(self) -> None:
        assert self.engine is not None
        self.order, self.why = reader_order(self.engine)

    def run(self, stop: threading.Event) -> None:
        """Run as writer when the lock can be had, else follow the journal and retry the lock."""
        forced = True
        while not stop.is_set():
            try:
                if self.role != "writer":
                    if self.take_lock():
                        self.become_writer()
                        forced = True
                    else:
                        self.role = "reader"
                        if self.catch_up():
                            self._reader_order()
                            self._forecast()
                        self.health.ok()
                        self.publish(force=True)
                        stop.wait(self.opt.follow_s)
                        continue
                if forced or self.sleep_s() <= 0:
                    forced = False
                    try:
                        self.cycle()
                    except ClusterUnavailable as exc:
                        # nothing was changed: keep the state and the lock, retry with backoff
                        self.unavailable += 1
                        self.error = f"cluster unavailable: {exc.message}"
                        log.warning("%s (retry %d)", self.error, self.unavailable)
                        self.health.report(self.store, self.clock(), self.error)
                        self.publish(force=True)
                        stop.wait(min(self.opt.retry_max_s, 2.0 ** min(self.unavailable - 1, 10)))
                        forced = True
                        continue
                    self.unavailable, self.error = 0, None
                    self.health.ok()
                    self.ok_exceptions = self.seen_exceptions
                    self.last_cycle = self.wall()
                    continue
                self.publish(force=self.wall() - self.last_publish >= self.opt.refresh_s)
                if self.wake.wait(min(self.sleep_s(), self.opt.refresh_s)):
                    self.wake.clear()
                    forced = True
            except Exception as exc:  # keep serving reads; a writer gives up its lock and rebuilds
                wait = 1.0
                if isinstance(exc, ClusterUnavailable):  # e.g. the cluster could not be read at start
                    self.unavailable += 1
                    wait = min(self.opt.retry_max_s, 2.0 ** min(self.unavailable - 1, 10))
                    log.warning("cluster unavailable: %s (retry %d)", exc.message, self.unavailable)
                else:
                    log.exception("scheduler loop error")
                self.error = f"{type(exc).__name__}: {exc}"
                self._reset()
                self.health.report(self.store, self.clock(), self.error)
                if self.ok_exceptions is not None and not isinstance(exc, ClusterUnavailable):
                    suspects = self.seen_exceptions - self.ok_exceptions
                    self.health.set_aside_exception(self.store, suspects, self.error)
                # the last view stays (its data as of its instant), its status says what fails
                self.view = dataclasses.replace(self.view, role=self.role, status=self.status())
                stop.wait(wait)
        self._reset()

    def _reset(self) -> None:
        """Drop the in-memory state and the lock: the next round rebuilds from the database."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        self.engine, self.backend, self.last_seq = None, None, 0
        self.buf, self.keys = [], {}
        self._buf_t = 0.0
        self.role = "starting"


def _plain(record: Mapping[str, Any]) -> dict[str, Any]:
    """Evidence as plain JSON values (numpy scalars converted)."""
    out: dict[str, Any] = orjson.loads(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY))
    return out
