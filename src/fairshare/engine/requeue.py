"""When a requeued job goes first in its leaf (fairshare, issue 20; docs/concepts.md "Overload").

A run preempted (any reason) waits again in its submit position. Its job goes first in its leaf's
order (ahead of the `leaf_order` keys; `JobState.requeue_boost`, core/snapshot.py) at the first of:

  - `requeue_first_after` after the preemption (half of `requeue_within` by default), or
  - its leaf being backlogged: the leaf's oldest waiting job that never started has waited
    `requeue_first_when_backlogged` (0: off). Checked at the preemption and every BACKLOG_CHECK
    (6 h) after it, each time against the leaf's oldest such job then, until requeue_first_after.

Why the backlog: in sustained overload a team's new jobs keep arriving ahead of its requeued runs
(least attained service puts a fresh job first), so a requeued run can wait for weeks unless it
goes first at once; going first at once in a team with little backlog costs that team's first
waits for nothing. A team whose oldest fresh job waited a day is where requeued runs starve. The
measure is the oldest never-started job's wait (PendingQueues.fresh), not the queues' heads: it
must not depend on how labels split a leaf's queues or on the leaf order. Going first changes
which of a team's jobs run, never how much the team gets.

Edge cases: a boost, a start, a new preemption or the job's end cancels a pending timer (each
timer carries the preemption count it was set for); a policy change keeps the timers already set
and a check reads the knobs of its instant (the setting turned off: the check only ends).

A part of EngineState (engine/state.py), kept in its own file as engine/outcome.py is: the
attributes it reads and sets are EngineState's, declared below for the type checker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.model import JobRequest, Knobs
    from ..core.snapshot import JobState, PendingQueues, SortKey
    from .fleet import Fleet


# How often a requeued job's backlog is checked after its preemption (seconds). Measured against
# a check at the very instant the backlog reaches the setting (docs/policy.md "2026-12-07 (5)"):
# that one sends requeued runs first sooner, and in two of four whole-trace runs their held turns
# left more GPUs idle while a waiting job fit (0.63-0.70 % against at most 0.40 % here).
BACKLOG_CHECK = 6 * 3600.0


class RequeueRules:
    """EngineState's requeue timers and boosts (see the module's docstring)."""

    if TYPE_CHECKING:
        t: float
        knobs: Knobs
        states: dict[str, JobState]
        pending: PendingQueues
        fleet: Fleet

        def _push(self, t: float, kind: str, payload: Any) -> None: ...
        def _sort_key(self, job: JobRequest) -> SortKey: ...

    def _requeue_timers(self, job_id: str, leaf: int, preemptions: int) -> None:
        """The timers of a job preempted now (its `preemptions`-th): it goes first at
        requeue_first_after, or at once when its leaf is backlogged, or at the first backlog
        check (every BACKLOG_CHECK) that finds it so."""
        due = self.t + self.knobs.requeue_first_after
        if due <= self.t or self._backlogged(leaf):  # at once: now, not by a timer of this instant
            self._boost(job_id, preemptions)
            return
        if self.knobs.requeue_first_when_backlogged > 0 and self.t + BACKLOG_CHECK < due:
            self._push(self.t + BACKLOG_CHECK, "backlog", (job_id, preemptions))
        self._push(due, "requeue", (job_id, preemptions))

    def _backlogged(self, leaf: int) -> bool:
        """The leaf's oldest waiting job that never started has waited
        requeue_first_when_backlogged (never when the rule is off)."""
        after = self.knobs.requeue_first_when_backlogged
        oldest = self.pending.oldest_fresh(leaf)
        return after > 0 and oldest is not None and self.t - oldest >= after

    def _backlog_check(self, job_id: str, preemptions: int) -> bool:
        """A `backlog` timer: the job goes first now if its leaf is backlogged, else the next check
        is BACKLOG_CHECK later (while before requeue_first_after). True: it went first."""
        job = self._still_requeued(job_id, preemptions)
        if job is None:
            return False
        if self._backlogged(job.leaf):
            self._boost(job_id, preemptions)
            return True
        if self.knobs.requeue_first_when_backlogged > 0:
            nxt = self.t + BACKLOG_CHECK
            if nxt < self.states[job_id].pending_since + self.knobs.requeue_first_after:
                self._push(nxt, "backlog", (job_id, preemptions))
        return False

    def _boost(self, job_id: str, preemptions: int) -> None:
        """The job preempted for the `preemptions`-th time, still waiting, goes first in its leaf."""
        job = self._still_requeued(job_id, preemptions)
        if job is None:
            return
        self.pending.remove(job)
        self.states[job_id].requeue_boost = True
        self.pending.add(job, self.fleet.index, self._sort_key(job), never_started=False)

    def _still_requeued(self, job_id: str, preemptions: int) -> JobRequest | None:
        """The job if it still waits since its `preemptions`-th preemption and has not gone first
        (a timer of an earlier preemption, a started, ended or boosted job: None)."""
        job, st = self.pending.jobs.get(job_id), self.states.get(job_id)
        if job is None or st is None or st.preemptions != preemptions or st.requeue_boost:
            return None
        return job
