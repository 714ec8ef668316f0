"""A pass's outcome taken into the engine state: `apply` (a pass's decisions, journaled as
`applied`) records the holds (the preemption backoff grid, the hold audit's dedupe), the
reservation and slurm-multifactor's backfill cadence, and returns what the driver must carry out
with the audit records (engine/actions.py).

A part of EngineState (engine/state.py), kept in its own file as engine/progress.py is: the
attributes it reads and sets are EngineState's, declared below for the type checker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .actions import Actions, pass_audit
from .events import Event, Reservation

if TYPE_CHECKING:
    from ..core.model import Knobs, Node
    from ..core.snapshot import Decisions, JobState, PendingQueues
    from .fleet import Fleet


class PassOutcome:
    """EngineState's `apply` and what a pass's outcome changes (see the module's docstring)."""

    if TYPE_CHECKING:
        journal: list[Event] | None
        t: float
        knobs: Knobs
        nodes: tuple[Node, ...]
        states: dict[str, JobState]
        pending: PendingQueues
        fleet: Fleet
        backfills: bool
        last_reservation: Reservation
        last_hold: dict[str, str]
        retry_wakes: set[float]
        last_backfill: float
        backfill_wake: float
        sched_wake: float

        def _push(self, t: float, kind: str, payload: Any) -> None: ...

    def apply(self, d: Decisions) -> Actions:
        """Take a pass's decisions: record its holds (backoff, hold audit dedupe) and reservation;
        return the preemptions and starts for the driver to carry out, and the audit records."""
        holds = tuple((h.job, h.reason) for h in d.holds)
        if self.journal is not None:
            self.journal.append(Event("applied", (holds, d.reservation, d.backfilled)))
        return pass_audit(self.t, self.nodes, d, self._outcome(holds, d.reservation, d.backfilled))

    def _outcome(
        self, holds: Sequence[tuple[str, str]], reservation: Reservation, backfilled: bool = False
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """The state a pass's holds, reservation and backfill change; the (decision, job, evidence)
        records to audit: a reservation when it changed, a hold when its reason changed."""
        out: list[tuple[str, str, dict[str, Any]]] = []
        if self.backfills:
            self._backfill_cadence(backfilled)
        if reservation != self.last_reservation:
            self.last_reservation = reservation
            if reservation is not None:
                job_id, held = reservation
                out.append(("reserve", job_id, {"nodes": [self.nodes[i].name for i in held]}))
        backoff = self.knobs.preempt_backoff
        for job_id, reason in holds:
            if reason == "no_victims":
                # retries fall on a grid of `backoff`, so one pass serves every job due then
                retry = (math.floor(self.t / backoff) + 2) * backoff if backoff > 0 else self.t
                st = self.states[job_id]
                st.preempt_retry_at, st.preempt_failed_at = retry, self.t
                if retry not in self.retry_wakes:
                    if len(self.retry_wakes) >= 64:  # grid points past are never asked for again
                        self.retry_wakes = {w for w in self.retry_wakes if w > self.t}
                    self.retry_wakes.add(retry)
                    self._push(retry, "wake", None)
            if self.last_hold.get(job_id) != reason:
                self.last_hold[job_id] = reason
                out.append(("hold", job_id, {"reason": reason}))
        return out

    def _backfill_cadence(self, backfilled: bool) -> None:
        """slurm-multifactor: a backfill cycle runs at most every bf_interval, and only after a
        change; a pass that could not run one while jobs wait and GPUs are idle asks for a pass
        when it is due."""
        every = self.knobs.sched_interval
        if every > 0 and len(self.pending) and self.sched_wake <= self.t:
            # Slurm's main scheduler also runs every sched_interval: priorities age and decay
            # between events, so a pass then may start a job that none would at the events
            self.sched_wake = (math.floor(self.t / every) + 1) * every
            self._push(self.sched_wake, "wake", None)
        if backfilled:
            self.last_backfill = self.t
        elif len(self.pending) and self.fleet.idle_available > 0:
            due = self.last_backfill + self.knobs.bf_interval
            if due > self.t and due != self.backfill_wake:
                self.backfill_wake = due
                self._push(due, "wake", None)
