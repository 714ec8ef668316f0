"""The scheduling core: `decide(snapshot, strategy) -> Decisions`, a pure function.

One pass runs the strategy's phases (Strategy.phases, from its flags), on a private tentative view
of free capacity:
  forced     runs on nodes whose drain deadline has come (`drain`) and, the hang watchdog, runs that
             made no progress for their class's max_stall (`no_progress`), under every policy;
  deadlines  (fairshare) a pending job whose deadline is near (latest start − slack reached) and
             still feasible starts first, preempting any run past its protected window if that is
             what makes it placeable (`deadline`);
  fast_lane  (fairshare) jobs of knobs.fast_classes, in submit order, keeping off the GPUs the
             last pass reserved; one that does not fit may preempt under the strategy's rule, then
             under victims.FastLane (a run of its own group, of another class, no larger);
  ordered    jobs in the strategy's order; a job that does not fit may preempt victims allowed by
             the strategy's victim rule; otherwise it is held and its shape fails for the pass.
             With reservation (fairshare), a job in order that cannot start after waiting at least
             `gang_reserve_after` gets the GPUs that will hold it soonest reserved (up to
             knobs.max_reservations jobs per pass; 0: every such job): later jobs in the pass may
             not use them, so a large gang is not starved by a stream of small jobs, and only the
             group the fair-share order favours can drain capacity this way;
  slurm      (slurm-multifactor) Slurm's main scheduler and backfill (backfill.py).
Victims are runs past protection, least lost work first, and only a set that makes the preemptor
placeable (no futile preemption); a job never preempts the job that last preempted it, nor a job
preempted knobs.preempt_budget times already.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from . import backfill, held_backfill
from .contract import lost_gpu_s, remaining
from .fairness import PassPriorities
from .model import STALL_EPS, TIME_EPS, JobRequest
from .placement import Alloc, Shape, Tentative, place
from .snapshot import (
    Decisions,
    Hold,
    HoldReason,
    Preempt,
    PreemptReason,
    RunView,
    Snapshot,
    Start,
)
from .strategies import Strategy
from .victims import DEADLINE, FAST_LANE, VictimRule, could_free, find_victims, num, over_served

EPS = TIME_EPS


def deadline_due(latest_start: float, slack: float, now: float) -> bool:
    """A pending deadline job is urgent once `now` reaches its latest start minus the slack:
    phase 2 then starts it first, preempting if it must."""
    return latest_start - slack <= now + EPS


def may_be_victim(
    strategy: Strategy,
    ancestors: Sequence[int],
    used: Sequence[float],
    owed: Sequence[float],
    deadline_urgent: bool,
) -> bool:
    """Whether a pass with these rates could preempt a run past its protected window, whose leaf
    and ancestors are `ancestors`: the deadline phase may take any run once a deadline job is
    urgent; otherwise the strategy's victim rule decides (victims.*.could_take). A necessary
    condition, not a sufficient one: the pass decides."""
    if strategy.deadline_reservation and deadline_urgent:
        return True
    return strategy.victims.could_take(ancestors, used, owed)


class _Pass:
    def __init__(self, snap: Snapshot, strategy: Strategy) -> None:
        self.s = snap
        self.strategy = strategy
        self.view = Tentative(snap.index)
        self.used = list(snap.used)
        self.gone: set[str] = set()
        self.handled: set[str] = set()
        self.preempts: list[Preempt] = []
        self.starts: list[Start] = []
        self.holds: list[Hold] = []
        self.failed: list[Shape] = []  # shapes that could not be placed on free capacity
        self.failed_in: dict[int, list[Shape]] = {}  # per leaf: shapes that could not start at all
        self.attempts = 0
        self.lost: dict[str, float] = {}  # job id -> lost work if preempted now (victim search)
        self.prio = PassPriorities(
            snap.debt,
            snap.owed,
            self.used,
            snap.entitlement,
            snap.knobs.lookahead,
            snap.tree.leaf_ancestors,
        )  # shared with the queue order
        self.tried: str | None = None
        self.reservation: tuple[str, tuple[int, ...]] | None = None  # the first of the pass
        self.n_reserved = 0
        # requeue_reserve_gpus: leaves whose long-waiting requeued run reserved in this pass (their
        # other jobs only backfill), and leaves whose such run has had its turn (_reserves_in_turn)
        self.waits_for: dict[int, str] = {}
        self.turn_taken: set[int] = set()
        self.backfilled = False
        self.sched = snap.knobs
        self.victims_latest = max(snap.victims_at, default=-math.inf)
        # node -> (expected end, estimated end, GPUs, job) of its runs, by expected end (_ready)
        # node -> (expected end, estimated end, GPUs there, job, the run's GPUs), by expected end
        self.ends_on: dict[int, list[tuple[float, float, int, str, int]]] | None = None
        self.next_unprotected = math.inf  # the first protection end after now of those runs

    # ------------------------------------------------------------------ effects on the pass
    def _adjust_used(self, leaf: int, delta: float) -> None:
        for a in self.s.tree.leaf_ancestors[leaf]:
            self.used[a] += delta
        self.prio.changed(leaf)

    def preempt(self, r: RunView, reason: PreemptReason, by: str | None, evidence: dict[str, Any]) -> None:
        if r.ckpt_at is not None:  # lost work from the reported checkpoint, beside the declared one
            declared = lost_gpu_s(r.job, r.t0, self.s.now, r.overhead, r.hung_since)
            evidence = {**evidence, "checkpoint_at": r.ckpt_at, "lost_gpu_s_declared": declared}
        self.preempts.append(Preempt(r.job.id, reason, by, self.lost_of(r), evidence))
        self.gone.add(r.job.id)
        self.view.give(r.alloc)
        self._adjust_used(r.job.leaf, -r.charge)

    def start(self, job: JobRequest, alloc: Alloc, evidence: dict[str, Any]) -> None:
        charge = job.charge_on(self.s.index.nodes[alloc[0][0]], dict(self.s.rates))
        if self.ends_on is not None:
            st = self.s.states[job.id]
            end = self.s.now + remaining(job, st.starts > 0, st.kept)
            for i, g in alloc:
                bisect.insort(self.ends_on.setdefault(i, []), (end, end, g, job.id, job.gpus))
        self.view.take(alloc)
        self.starts.append(Start(job.id, alloc, charge, evidence))
        self.handled.add(job.id)
        self._adjust_used(job.leaf, charge)

    def shape_of(self, job: JobRequest) -> Shape:
        return self.s.pending.shape_of[job.id][2]

    def wait(self, job: JobRequest) -> float:
        return self.s.now - self.s.states[job.id].pending_since

    # ------------------------------------------------------------------ forced
    def forced(self) -> None:
        s = self.s
        if s.drain_due:
            for r in s.running.values():
                hit = sorted(i for i, _ in r.alloc if i in s.drain_due)
                if hit:
                    self.preempt(r, "drain", None, {"nodes": [s.index.nodes[i].name for i in hit]})
        for jid in s.hung:  # the hang watchdog, under every strategy
            r = s.running[jid]
            if (
                r.hung_since is not None
                and jid not in self.gone
                and s.now - r.hung_since >= r.job.max_stall - STALL_EPS
            ):
                self.preempt(
                    r,
                    "no_progress",
                    None,
                    {"no_progress_since": r.hung_since, "max_stall_s": r.job.max_stall},
                )

    # ------------------------------------------------------------------ victims
    def _may_preempt(self, job: JobRequest, rule: VictimRule) -> bool:
        """Whether `job` may search for victims under a budgeted rule now: the rule preempts, the
        pass has attempts left, and the job is not in backoff after finding no victims (backoff
        ends early when a run the rule could take left its protected window since)."""
        if not rule.preempts or self.attempts >= self.strategy.max_preempt_attempts:
            return False
        st = self.s.states[job.id]
        if st.preempt_retry_at <= self.s.now:
            return True
        failed = st.preempt_failed_at
        if self.victims_latest <= failed:
            return False  # no run left its protected window since this job's last search
        return rule.new_victims(self, job, failed)

    def could_free(self, shape: Shape, job: JobRequest, runs: list[RunView]) -> bool:
        """victims.could_free: the capacity pre-check before a search prices its candidates."""
        return could_free(self, shape, job, runs)

    def lost_of(self, r: RunView) -> float:
        """GPU-seconds `r` would lose if preempted now (computed once per pass per run)."""
        lost = self.lost.get(r.job.id)
        if lost is None:  # victims.cheapest fills the same cache
            lost = self.lost[r.job.id] = lost_gpu_s(
                r.job, r.t0, self.s.now, r.overhead, r.hung_since, r.ckpt_at
            )
        return lost

    def try_preempting(self, job: JobRequest, rule: VictimRule, evidence: dict[str, Any]) -> bool:
        if rule.budgeted:
            if not self._may_preempt(job, rule):
                return False  # no rule, attempts used up, or in backoff; deadlines are exempt from both
            self.attempts += 1
        self.tried = job.id
        found = find_victims(self, job, rule)
        if found is None:
            return False
        victims, _, considered = found
        for r in victims:
            ev: dict[str, Any] = {
                "candidates_considered": considered,
                "victim_group": r.job.group,
                "preemptor_group": job.group,
            }
            ev.update(rule.evidence(self, job, r))
            self.preempt(r, rule.reason, job.id, ev)
        alloc = place(self.view, job.id, self.shape_of(job))
        assert alloc is not None, "victim selection guaranteed a placement"
        self.start(job, alloc, {**evidence, "preempted": [r.job.id for r in victims]})
        return True

    # ------------------------------------------------------------------ deadlines
    def deadlines(self) -> None:
        s = self.s
        if not s.deadline_queue:
            return
        slack = self.sched.deadline_slack
        for latest_start, _, jid in s.deadline_queue:
            if not deadline_due(latest_start, slack, s.now):
                break
            job = s.pending.jobs.get(jid)
            if job is None or jid in self.handled or job.deadline is None:
                continue
            state = s.states[jid]
            if s.now + remaining(job, state.starts > 0, state.kept) > job.deadline + EPS:
                continue  # no longer feasible: ordinary order
            ev = {"phase": "deadline", "deadline": job.deadline, "latest_start": latest_start}
            alloc = place(self.view, jid, self.shape_of(job))
            if alloc is not None:
                self.start(job, alloc, ev)
            else:
                self.try_preempting(job, DEADLINE, ev)

    # ------------------------------------------------------------------ reservations (ordered)
    def reserve(self, job: JobRequest, shape: Shape, ev: dict[str, Any]) -> None:
        """Hold the GPUs that will fit `job` soonest; later jobs in the pass may not use them."""
        until: float | None = None
        if self.sched.reservation_backfill:
            not_before, largest = (
                self._victims_not_before(job),
                self.strategy.victims.largest_victim(self, job),
            )
            held, until = self._hold_nodes_by_estimate(shape, not_before, largest)
        else:
            held = self.view.most_free_nodes(shape)
        if held:
            self.view.hold(held, shape.per_node, job.id, until)
            if self.reservation is None:
                self.reservation = (job.id, held)
            self.n_reserved += 1
            ev["reserved_nodes"] = [self.s.index.nodes[i].name for i in held]

    def _hold_nodes_by_estimate(
        self, shape: Shape, not_before: float, largest: float = math.inf
    ) -> tuple[tuple[int, ...], float]:
        """The k nodes of one allowed type, not held for another job yet, expected to have
        `per_node` free GPUs soonest (_ready; ties: the most free GPUs now, then the lowest index),
        and when the last of them is expected to (the reservation's expected start); of the types,
        the one expected soonest (ties: the most free GPUs, then the first type)."""
        index, view = self.s.index, self.view
        held, per = view.held, shape.per_node
        best: tuple[float, int, tuple[int, ...]] | None = None
        for ty in shape.types if shape.types is not None else range(len(index.types)):
            ranked = sorted(
                (self._ready(i, per, not_before, largest), -view.free(i), i)
                for i in range(len(index.nodes))
                if index.node_type[i] == ty and index.available[i] and i not in held
            )[: shape.nodes]
            if len(ranked) < shape.nodes:
                continue
            at, free = max(r[0] for r in ranked), sum(r[1] for r in ranked)
            if best is None or (at, free) < (best[0], best[1]):
                best = (at, free, tuple(sorted(r[2] for r in ranked)))
        return (best[2], best[0]) if best is not None else ((), self.s.now)

    def _ready(
        self, i: int, per_node: int, not_before: float = -math.inf, largest: float = math.inf
    ) -> float:
        """When node i is expected to have `per_node` free GPUs: now if it has them, else as its
        runs end by their estimates (the pass's starts included, its preemptions not), or earlier
        by their protection's end when the strategy's victim rule could take them (over-served
        side, budget left, no more GPUs than `largest`), but not before `not_before`
        (_victims_not_before); infinity if never. Reads estimates only, never the true run times."""
        free = self.view.free(i)
        if free >= per_node:
            return self.s.now
        ends = self._ends().get(i, [])
        if not_before > -math.inf or (largest < math.inf and any(e[4] > largest for e in ends)):
            # a run is taken no earlier than not_before, nor after its end; a larger one not at all
            ends = sorted(
                (est if gpus > largest else min(est, max(end, not_before)), est, g, jid, gpus)
                for end, est, g, jid, gpus in ends
            )
        for end, _, g, jid, _ in ends:
            if jid in self.gone:
                continue
            free += g
            if free >= per_node:
                return max(self.s.now, end)
        return math.inf

    def _ends(self) -> dict[int, list[tuple[float, float, int, str, int]]]:
        """ends_on, built at its first use in the pass (_ready), with next_unprotected."""
        if self.ends_on is None:
            self.ends_on = {}
            s, rule = self.s, self.strategy.victims
            anc, budget = s.tree.leaf_ancestors, s.knobs.preempt_budget
            for r in s.running.values():
                end = est = r.t0 + r.overhead + r.job.estimate - r.kept
                if (
                    rule.preempts
                    and (not budget or s.states[r.job.id].preemptions < budget)
                    and rule.could_take(anc[r.job.leaf], self.used, s.owed)
                ):
                    end = min(end, r.protected_until)
                    if s.now < end < est:
                        self.next_unprotected = min(self.next_unprotected, end)
                for n, g in r.alloc:
                    self.ends_on.setdefault(n, []).append((end, est, g, r.job.id, r.job.gpus))
            for ends in self.ends_on.values():
                ends.sort()
        return self.ends_on

    def _victims_not_before(self, job: JobRequest) -> float:
        """From when a reservation for `job` may expect the runs the fair-share rule could take
        to leave (-inf: at the end of their protection; inf: only at their estimated ends).
        Not before they end when its own leaf is over-served: such a job seldom finds a victim
        (the victim's side must be over-served more), and a reservation expected at once would
        keep every other job off its idle GPUs while the runs on them go on to their estimated
        ends (issue 20 measured such reservations as most of the idle GPUs a waiting job fits on).
        Not before its next search when its search in this pass found no victims: the preemption
        backoff's grid point, or earlier when a run the rule could take leaves its protected window
        before then (that protection end is a pass, and it ends the backoff: new_victims); a job
        that ends by then never delays it. A job its fair share
        favours otherwise keeps the earlier expected start (idle-return's returning team: its
        preemptions are not blocked by backfilled runs)."""
        if over_served(job.leaf, self.used, self.s.owed):
            return math.inf
        if self.tried == job.id:
            backoff = self.sched.preempt_backoff
            grid = (math.floor(self.s.now / backoff) + 2) * backoff if backoff > 0 else self.s.now
            self._ends()
            return min(grid, self.next_unprotected)
        return -math.inf

    def _until(self, job: JobRequest) -> float | None:
        """The job's estimated end if it started now (reservation backfill), else None."""
        if not self.sched.reservation_backfill:
            return None
        st = self.s.states[job.id]
        return self.s.now + remaining(job, st.starts > 0, st.kept)

    def estimated_end(self, job: JobRequest) -> float | None:
        return self._until(job)

    def _avail_of(self, job: JobRequest) -> int:
        return self.view.free_of_types(self.shape_of(job).types)

    # ------------------------------------------------------------------ the fast lane
    def fast_lane(self) -> None:
        """Jobs of knobs.fast_classes first, in submit order, off the GPUs the last pass reserved
        for a waiting job (it is likely to hold them again); one that does not fit may preempt
        under the strategy's rule, then under the fast lane's own (victims.FastLane)."""
        s = self.s
        if not s.fast_queue:
            return
        rule = self.strategy.victims
        prev = s.prev_reservation
        if prev is not None and prev[0] in s.pending.jobs:
            self.view.hold(prev[1], self.shape_of(s.pending.jobs[prev[0]]).per_node, prev[0])
        for _, jid in s.fast_queue:
            if jid in self.handled:
                continue
            job = s.pending.jobs[jid]
            ev = {"phase": "fast_lane", "order": self.strategy.name, "waited_s": self.wait(job)}
            alloc = place(self.view, jid, self.shape_of(job))
            if alloc is not None:
                self.start(job, alloc, ev)
            elif rule.preempts and not self.try_preempting(job, rule, ev):
                self.try_preempting(job, FAST_LANE, {**ev, "fast_lane_preemption": True})
        self.view.release()

    # ------------------------------------------------------------------ ordered starts
    def ordered(self) -> None:
        s = self.s
        rule = self.strategy.victims
        borrowing = rule.preempts
        reserving, cap = self.strategy.gang_reservation, self.sched.max_reservations
        if not borrowing and self.view.total_avail() <= 0:
            return  # nothing can start and nothing may be preempted (explain: the rest is ordered later)
        order = self.strategy.order(s, self.handled, self.prio)
        while True:
            if not borrowing and self.view.total_avail() <= 0:
                break
            nxt = order.next()
            if nxt is None:
                break
            qk, jid = nxt
            shape = qk[2]
            job = s.pending.jobs[jid]
            behind = self.waits_for.get(job.leaf)
            if behind is not None:  # its leaf's requeued run reserved: the rest only backfill
                self.handled.add(jid)
                self.holds.append(Hold(jid, "reserved", {"phase": "ordered", "behind": behind}))
                order.failed(qk)
                continue
            # a shape at least as large as one that failed cannot be placed on free capacity, but
            # this job may still make room by preemption (its group may be owed what another isn't);
            # after a failure in its own leaf (same group, same exchange terms) it cannot either
            dominated = any(shape.dominates(f) for f in self.failed)
            same_leaf = any(shape.dominates(f) for f in self.failed_in.get(job.leaf, ()))
            in_turn = self._reserves_in_turn(job)
            if dominated and (same_leaf or not self._may_preempt(job, rule)) and not in_turn:
                # later jobs of this leaf with this shape or larger are skipped too (FIFO within a
                # leaf; and labels, which split queues, must not change the outcome)
                self.failed_in.setdefault(job.leaf, []).append(shape)
                order.failed(qk)
                continue
            ev = self._evidence(order, job)
            self.view.until = self._until(job)
            alloc = None if dominated else place(self.view, jid, shape)
            if alloc is not None:
                if self.view.until is not None and self._on_held(alloc, jid):
                    ev["reservation_backfill"] = True
                self.view.until = None
                self.start(job, alloc, ev)
                order.started(qk)
                order.used_changed(job.leaf)
                continue
            self.view.until = None
            before = len(self.preempts)
            if self.try_preempting(job, rule, ev):
                order.started(qk)
                for p in self.preempts[before:]:
                    order.used_changed(s.running[p.job].job.leaf)
                order.used_changed(job.leaf)
                continue
            self.handled.add(jid)
            tried = self.tried == jid
            ev = dict(ev)
            why = self.hold_reason(job, shape, tried)
            if in_turn:
                ev["requeue_reserve"] = True
                self.reserve(job, shape, ev)
                self.waits_for[job.leaf] = jid
            elif (
                reserving
                and (cap == 0 or self.n_reserved < cap)
                and self.wait(job) >= self.sched.gang_reserve_after - EPS
            ):
                self.reserve(job, shape, ev)
            self.holds.append(Hold(jid, why, ev))
            if not dominated:
                self.failed.append(shape)
            self.failed_in.setdefault(job.leaf, []).append(shape)
            order.failed(qk)
            if self.attempts >= self.strategy.max_preempt_attempts:
                borrowing = False
        if reserving and self.sched.reservation_backfill and self.view.held:
            self.backfill_held()

    def _reserves_in_turn(self, job: JobRequest) -> bool:
        """knobs.requeue_reserve_gpus G > 0: whether `job` is a requeued run of at least G GPUs
        that has gone first in its leaf (requeue_first_after) and waited half of requeue_within
        since its preemption, the first such of its leaf reached in this pass. Such a run is tried
        in its team's turn even when a shape it dominates failed earlier in the pass (it may not
        fit on free GPUs, but it may preempt and it reserves), and if it cannot start it holds
        the GPUs that will fit it soonest and its leaf's later jobs in the pass only backfill
        (held_backfill: estimated to end by the reservation's expected start).

        Why: in sustained overload a team at its share gets it through its small jobs, which
        start in the holes the other teams' runs leave, while its requeued whole-node runs never
        find a whole node free in its turn (issue 20: 8- and 16-GPU runs requeued for 26-32 days
        on the whole Philly trace). Holding its turn for the oldest such run spends the team's
        share on it instead: the team gets no more than before, its small jobs wait. One run per
        leaf, so a leaf holds at most one such reservation per pass."""
        big = self.sched.requeue_reserve_gpus
        if big <= 0 or job.gpus < big or job.leaf in self.turn_taken:
            return False
        st = self.s.states[job.id]
        if not st.requeue_boost or self.wait(job) < self.sched.requeue_within / 2 - EPS:
            return False
        self.turn_taken.add(job.leaf)
        return True

    def backfill_held(self) -> None:
        held_backfill.run(self)

    def _on_held(self, alloc: Alloc, job: str) -> bool:
        held, holder = self.view.held, self.view.holder
        return any(i in held and holder[i] != job for i, _ in alloc)

    def _evidence(self, order: object, job: JobRequest) -> dict[str, Any]:
        ev: dict[str, Any] = {"phase": "ordered", "order": self.strategy.name, "waited_s": self.wait(job)}
        path = getattr(order, "chosen_path", None)
        if path:
            ev["walk"] = [
                {
                    "group": g,
                    "priority": num(p),
                    "runner_up": r,
                    "runner_up_priority": None if rp is None else num(rp),
                }
                for g, p, r, rp in path
            ]
        return ev

    def hold_reason(self, job: JobRequest, shape: Shape, tried_preempting: bool) -> HoldReason:
        if tried_preempting:
            return "no_victims"
        avail = self._avail_of(job)
        if avail < job.gpus:
            return "no_capacity"
        if self.view.holds_for_others(job.id):
            free_view = self.view.copy()
            free_view.release()
            if place(free_view, job.id, shape) is not None:
                return "reserved"
        return "fragmented"

    # ------------------------------------------------------------------ order and why-pending
    def explained(self) -> tuple[tuple[str, ...], dict[str, HoldReason]]:
        """Every job pending at the snapshot in the strategy's order, and why each one that did
        not start waits.

        The order is the strategy's ranking of the whole queue as if each job started in turn
        from the snapshot (its charge counted against its group, so the fair-share order moves
        between groups as a pass with room for all would): submit order for fifo, label then
        submit for priority-labels, priority for slurm-multifactor. Which of them start now
        depends on capacity, and is the pass's. A job the pass held keeps its hold's reason; any
        other is judged on the capacity the pass left (no_capacity, fragmented, reserved)."""
        s = self.s
        ranked = self.strategy.rank(s)
        started = {st.job for st in self.starts}
        held = {h.job: h.reason for h in self.holds}
        by_shape: dict[Shape, HoldReason] = {}
        why: dict[str, HoldReason] = {}
        for (_, _, shape), queue in s.pending.queues.items():
            reason = by_shape.get(shape)
            for _, jid in queue:
                if jid in started:
                    continue
                if jid in held:
                    why[jid] = held[jid]
                    continue
                if reason is None:
                    reason = by_shape[shape] = self.hold_reason(s.pending.jobs[jid], shape, False)
                why[jid] = reason
        return tuple(ranked), why

    def result(self) -> Decisions:
        return Decisions(
            tuple(self.preempts),
            tuple(self.starts),
            tuple(self.holds),
            self.reservation,
            backfilled=self.backfilled,
        )

    def slurm(self) -> None:
        backfill.slurm(self)


PHASES: dict[str, Callable[[_Pass], None]] = {
    "forced": _Pass.forced,
    "deadlines": _Pass.deadlines,
    "fast_lane": _Pass.fast_lane,
    "ordered": _Pass.ordered,
    "slurm": _Pass.slurm,
}


def decide(snap: Snapshot, strategy: Strategy, explain: bool = False) -> Decisions:
    """One scheduling pass on a snapshot. Pure: reads the snapshot, returns decisions.

    With `explain`, the decisions also carry the whole pending queue in the strategy's order and
    a hold reason for every pending job that does not start (a live driver's why-pending and the
    Slurm driver's priorities); a replay does not ask and pays nothing for it."""
    p = _Pass(snap, strategy)
    for phase in strategy.phases:
        PHASES[phase](p)
    d = p.result()
    if explain:
        order, why = p.explained()
        d = dataclasses.replace(d, order=order, why_pending=why)
    return d


__all__ = ["deadline_due", "decide", "may_be_victim"]
