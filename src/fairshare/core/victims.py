"""Victim rules: which runs a pending job may preempt, as small named strategies.

A rule is chosen by the strategy (fairshare: `OverServed`; priority-labels: `LowerLabel`; the
baselines: `NoVictims`), or by the pass for an urgent deadline job (`AnyPastProtection`). Every
rule shares the mechanics of `find_victims` below; each says only what is its own:

    preempts          whether it ever preempts (a pass with a rule that does not stops trying once
                      the cluster is full)
    reason            the typed reason its preemptions carry (FORMATS.md: fair_share, label,
                      deadline; drain and no_progress are the forced phase's)
    budgeted          whether searches count against the pass's attempt budget and the job's
                      backoff (a deadline job's search is exempt from both)
    could_take        whether a run of a leaf could be its victim at all, with the rates as they
                      are (the engine asks at a protection end whether a pass is worth running)
    new_victims       in backoff: whether a run it could take left protection since `failed`
    leaf_cap          the largest charge it may take from a leaf's runs (None: none of them)
    admits            a per-run filter
    accept            a check of the chosen set as a whole
    evidence          what its preemptions record beside the common evidence

Victims are always runs past their protected window, never the run that last preempted the job,
never CPU-only runs (freeing them helps no GPU job), of an allowed GPU type; least lost work first;
and only a set that makes the preemptor placeable (no futile preemption).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

from .contract import lost_gpu_s
from .fairness import PassPriorities, Side, may_take_from, service_ratio
from .model import TIME_EPS, JobRequest
from .placement import Alloc, Shape, Tentative, fits_with
from .snapshot import PreemptReason, RunView, Snapshot

EPS = TIME_EPS


class SearchPass(Protocol):
    """What a victim search reads of the scheduling pass it runs in (scheduler._Pass)."""

    s: Snapshot
    used: list[float]  # running charge per tree node, the pass's starts and preemptions included
    prio: PassPriorities
    gone: set[str]  # runs the pass preempted already
    view: Tentative  # the pass's free capacity
    lost: dict[str, float]  # the pass's cache of lost_of

    @property
    def strategy(self) -> _HasCandidateCap: ...
    def lost_of(self, r: RunView) -> float: ...
    def shape_of(self, job: JobRequest) -> Shape: ...
    def could_free(self, shape: Shape, job: JobRequest, runs: list[RunView]) -> bool: ...


class _HasCandidateCap(Protocol):
    @property
    def max_victim_candidates(self) -> int: ...


def over_served(node: int, used: Sequence[float], owed: Sequence[float]) -> bool:
    """A tree node receives more than it is owed now (used > owed): the only side fair-share
    preemption may take a run from."""
    return used[node] > owed[node] + EPS


class VictimRule(Protocol):
    """A strategy's victim rule: which runs a pending job may preempt, and how a search weighs them
    (`find_victims` asks it). NoVictims never preempts; the others are below."""

    name: str
    tiers: bool  # whether `tier` ranks candidates before their lost work
    filters_runs: bool  # whether `admits` can refuse a run (else it is not asked)
    preempts: bool
    reason: PreemptReason
    budgeted: bool  # whether a search under it counts against the pass's attempts and backoff

    def could_take(self, ancestors: Sequence[int], used: Sequence[float], owed: Sequence[float]) -> bool: ...
    def new_victims(self, p: SearchPass, job: JobRequest, failed: float) -> bool: ...
    def leaf_cap(self, p: SearchPass, job: JobRequest, leaf: int) -> float | None: ...
    def admits(self, p: SearchPass, job: JobRequest, run: RunView) -> bool: ...
    def accept(self, p: SearchPass, job: JobRequest, victims: Sequence[RunView]) -> bool: ...
    def evidence(self, p: SearchPass, job: JobRequest, run: RunView) -> dict[str, Any]: ...
    def tier(self, p: SearchPass, job: JobRequest, run: RunView) -> int: ...
    def largest_victim(self, p: SearchPass, job: JobRequest) -> float: ...


class _TakesNothing:
    """What a victim rule does where it says nothing else: it takes no run."""

    tiers = False
    filters_runs = False

    def could_take(self, ancestors: Sequence[int], used: Sequence[float], owed: Sequence[float]) -> bool:
        return False

    def new_victims(self, p: SearchPass, job: JobRequest, failed: float) -> bool:
        return False

    def leaf_cap(self, p: SearchPass, job: JobRequest, leaf: int) -> float | None:
        return None

    def admits(self, p: SearchPass, job: JobRequest, run: RunView) -> bool:
        return False

    def accept(self, p: SearchPass, job: JobRequest, victims: Sequence[RunView]) -> bool:
        return False

    def evidence(self, p: SearchPass, job: JobRequest, run: RunView) -> dict[str, Any]:
        return {}

    def tier(self, p: SearchPass, job: JobRequest, run: RunView) -> int:
        return 0

    def largest_victim(self, p: SearchPass, job: JobRequest) -> float:
        """The most GPUs a run `job` may take holds (reservations expect no larger run to leave
        before its estimated end)."""
        return math.inf


class NoVictims(_TakesNothing):
    """Never preempts for ordering (fifo, slurm-multifactor; fairshare with preemption: none)."""

    name = "none"
    preempts = False
    reason: PreemptReason = "fair_share"  # never used
    budgeted = True


class AnyPastProtection(_TakesNothing):
    """An urgent deadline job may take any run past its protected window (`deadline`). With the
    flip guard on (knobs.flip_guard > 0) it takes its own team's runs first, then other teams'
    whose team did not take a run of its team by fair-share preemption within the guard, then the
    rest (least lost work first within each tier): a deadline met from the job's own team moves no
    share between teams, so it sets off no fair-share reversal (a flip-flop, docs/formats.md)."""

    name = "any"
    preempts = True
    reason: PreemptReason = "deadline"
    budgeted = False
    tiers = True

    def tier(self, p: SearchPass, job: JobRequest, run: RunView) -> int:
        anc = p.s.tree.leaf_ancestors
        a, b = anc[job.leaf][-1], anc[run.job.leaf][-1]  # the two teams
        if a == b:
            return 0
        return 2 if p.s.took_from and flip_guarded(p, a, b) else 1  # tiers only with the guard on

    def leaf_cap(self, p: SearchPass, job: JobRequest, leaf: int) -> float | None:
        return math.inf

    def admits(self, p: SearchPass, job: JobRequest, run: RunView) -> bool:
        return True

    def accept(self, p: SearchPass, job: JobRequest, victims: Sequence[RunView]) -> bool:
        return True


class LowerLabel(AnyPastProtection):
    """priority-labels: a job may take a run of a lower label, its own group's included (`label`)."""

    name = "lower_label"
    filters_runs = True
    reason: PreemptReason = "label"
    budgeted = True

    def could_take(self, ancestors: Sequence[int], used: Sequence[float], owed: Sequence[float]) -> bool:
        return True

    def new_victims(self, p: SearchPass, job: JobRequest, failed: float) -> bool:
        return any(t > failed for t in p.s.victims_at)

    def admits(self, p: SearchPass, job: JobRequest, run: RunView) -> bool:
        return run.job.label_rank > job.label_rank


class FastLane(AnyPastProtection):
    """fairshare's fast lane (knobs.fast_classes): a job of a fast class that finds no room and no
    fair-share victim may take a run of its own group (leaf), of a class that is not fast, no
    larger than itself (`fair_share`; evidence fast_lane_preemption). Its group's share is
    unchanged: it only changes which of the group's jobs run."""

    name = "fast_lane"
    filters_runs = True
    reason: PreemptReason = "fair_share"
    budgeted = True

    def new_victims(self, p: SearchPass, job: JobRequest, failed: float) -> bool:
        return any(t > failed for t in p.s.victims_at)

    def leaf_cap(self, p: SearchPass, job: JobRequest, leaf: int) -> float | None:
        return math.inf if leaf == job.leaf else None

    def largest_victim(self, p: SearchPass, job: JobRequest) -> float:
        return job.gpus

    def admits(self, p: SearchPass, job: JobRequest, run: RunView) -> bool:
        return run.job.cls not in p.s.knobs.fast_classes

    def evidence(self, p: SearchPass, job: JobRequest, run: RunView) -> dict[str, Any]:
        return {"fast_lane_preemption": True}


def flip_guarded(p: SearchPass, mine: int, theirs: int) -> bool:
    """The flip guard (knobs.flip_guard G > 0): side `mine` may not take from side `theirs` when
    `theirs` took a run of `mine` by fair-share preemption less than G ago; reversing it would be a
    flip-flop (docs/formats.md)."""
    s = p.s
    t = s.took_from.get((theirs, mine))
    return t is not None and s.now - t < s.knobs.flip_guard


class OverServed(_TakesNothing):
    """fairshare: a job may take a run of another group whose side, at the children of the two
    leaves' lowest common ancestor, is over-served, has the lower priority, and stays at least
    as well served as the taker's side after the exchange (fairness.may_take_from), unless the
    flip guard holds (the victim's side took from the taker's side within knobs.flip_guard).

    No larger victim: a run holding more GPUs than the taker is never taken, but by a job of
    knobs.fast_classes (short by declaration; their waits are the fast lane's promise). A larger
    run taken must later find a hole its size again, which the cluster makes by holding GPUs idle
    (reservations); on the whole Philly trace at 400 GPUs (about 800 of 11,937 preemptions were
    1 GPU taking 2 or 4, 8 taking 16) the rule lifts occupancy while jobs wait from 0.982-0.987
    to 0.992-0.994 (four perturbed runs each), at the cost of a longer median first wait
    (docs/policy.md, issue 20)."""

    name = "over_served"
    preempts = True
    reason: PreemptReason = "fair_share"
    budgeted = True

    def could_take(self, ancestors: Sequence[int], used: Sequence[float], owed: Sequence[float]) -> bool:
        # a run's side against any taker is its leaf or one of its ancestors
        return any(over_served(a, used, owed) for a in ancestors)

    def new_victims(self, p: SearchPass, job: JobRequest, failed: float) -> bool:
        return any(
            t > failed and leaf != job.leaf and self._may_take_side(p, job, leaf)
            for leaf, t in enumerate(p.s.victims_at)
        )

    def _sides(self, p: SearchPass, taker: JobRequest, leaf: int) -> tuple[Side, Side, int, int]:
        mine, theirs = p.s.tree.sides(taker.leaf, leaf)
        owed = p.s.owed
        return (
            Side(p.prio(mine), p.used[mine], owed[mine]),
            Side(p.prio(theirs), p.used[theirs], owed[theirs]),
            mine,
            theirs,
        )

    def _may_take_side(self, p: SearchPass, job: JobRequest, leaf: int) -> bool:
        """Whether the exchange could let `job` take a run of `leaf` at all: the victim's side is
        over-served, below the taker's in priority, and stays at least as well served as the
        taker would be after taking a victim of zero charge (the real charge only makes it harder)."""
        mine, theirs = p.s.tree.sides(job.leaf, leaf)
        used, owed = p.used, p.s.owed
        if p.s.took_from and p.s.knobs.flip_guard > 0 and flip_guarded(p, mine, theirs):
            return False
        return (
            over_served(theirs, used, owed)
            and p.prio(theirs) < p.prio(mine)
            and service_ratio(used[theirs], owed[theirs])
            >= service_ratio(used[mine] + job.charge, owed[mine])
        )

    def leaf_cap(self, p: SearchPass, job: JobRequest, leaf: int) -> float | None:
        """None for the job's own group and for a leaf even a victim of zero charge could not be
        taken from (_may_take_side, inlined: this runs for every leaf of every search); else the
        largest victim charge the exchange condition allows on its own:
        (U_v - c) / O_v >= R_t  <=>  c <= U_v - R_t * O_v   (O_v > 0 here: U_v > O_v >= 0)."""
        if leaf == job.leaf:
            return None
        mine, theirs = p.s.tree.sides(job.leaf, leaf)
        used, owed = p.used, p.s.owed
        if not used[theirs] > owed[theirs] + EPS or not p.prio(theirs) < p.prio(mine):
            return None
        if p.s.took_from and p.s.knobs.flip_guard > 0 and flip_guarded(p, mine, theirs):
            return None
        taker_after = service_ratio(used[mine] + job.charge, owed[mine])
        if not service_ratio(used[theirs], owed[theirs]) >= taker_after:
            return None
        if owed[theirs] > EPS and not math.isinf(taker_after):
            return used[theirs] - taker_after * owed[theirs] + EPS
        return math.inf

    def largest_victim(self, p: SearchPass, job: JobRequest) -> float:
        knobs = p.s.knobs
        return math.inf if knobs.larger_victims or job.cls in knobs.fast_classes else job.gpus

    def admits(self, p: SearchPass, job: JobRequest, run: RunView) -> bool:
        return True

    def accept(self, p: SearchPass, job: JobRequest, victims: Sequence[RunView]) -> bool:
        """The exchange condition victim by victim, least lost first, with what the set already
        took from each side."""
        taken: dict[int, float] = {}
        for r in victims:
            taker, victim, _, theirs = self._sides(p, job, r.job.leaf)
            extra = taken.get(theirs, 0.0)
            if not may_take_from(taker, victim._replace(used=victim.used - extra), job.charge, r.charge):
                return False
            taken[theirs] = extra + r.charge
        return True

    def evidence(self, p: SearchPass, job: JobRequest, run: RunView) -> dict[str, Any]:
        taker, victim, mine, theirs = self._sides(p, job, run.job.leaf)
        paths = p.s.tree.paths
        return {
            "preemptor_side": paths[mine],
            "preemptor_priority": num(taker.priority),
            "victim_side": paths[theirs],
            "victim_priority": num(victim.priority),
            "victim_side_used": victim.used,
            "victim_side_owed": victim.owed,
        }


NO_VICTIMS = NoVictims()
DEADLINE = AnyPastProtection()
FAST_LANE = FastLane()
RULES: dict[str, VictimRule] = {r.name: r for r in (NO_VICTIMS, OverServed(), LowerLabel())}


def num(x: float) -> float | str:
    """JSON-safe number for evidence (infinity as a string)."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


# ---------------------------------------------------------------------- the search
def candidates(p: SearchPass, job: JobRequest, rule: VictimRule) -> list[RunView]:
    """Runs the rule allows `job` to preempt now (unordered: see `cheapest`). Under every rule, a
    job preempted knobs.preempt_budget times already (any reason) is no candidate: it runs to its
    end (LSF's MAX_JOB_PREEMPT)."""
    s = p.s
    out: list[RunView] = []
    states = s.states
    back = states[job.id].preempted_by  # never preempt back the job that preempted this one
    budget = s.knobs.preempt_budget
    allowed = set(job.gpu_types) if job.gpu_types is not None else None
    now, gone, nodes, filters = s.now, p.gone, s.index.nodes, rule.filters_runs
    largest = rule.largest_victim(p, job)
    for leaf, runs in s.running_by_leaf.items():
        cap = rule.leaf_cap(p, job, leaf)
        if cap is None:
            continue
        for r in runs.values():
            if r.charge > cap or r.job.gpus > largest:
                continue  # too large to take
            rj = r.job
            if rj.gpus == 0 or now < r.protected_until - EPS:
                continue  # holds no GPU (CPU-only: freeing it helps nobody), or protected
            if rj.id in gone or rj.id == back:
                continue
            if budget and states[rj.id].preemptions >= budget:
                continue  # its preemption budget is spent
            if filters and not rule.admits(p, job, r):
                continue
            if allowed is not None and nodes[r.alloc[0][0]].gpu_type not in allowed:
                continue
            out.append(r)
    return out


TIER_COST = 1e15  # GPU-seconds: a rule's tier outweighs any lost work (rule.tier)


def cheapest(
    p: SearchPass, runs: list[RunView], job: JobRequest | None = None, rule: VictimRule | None = None
) -> list[tuple[float, str, RunView]]:
    """The candidates a search considers: least cost first, at most max_victim_candidates. The
    cost is the lost work, plus TIER_COST per tier under a rule that ranks its candidates."""
    cache, now, out = p.lost, p.s.now, []
    tiered = job is not None and rule is not None and rule.tiers and p.s.knobs.flip_guard > 0
    for r in runs:
        rid = r.job.id
        lost = cache.get(rid)
        if lost is None:
            lost = cache[rid] = lost_gpu_s(r.job, r.t0, now, r.overhead, r.hung_since, r.ckpt_at)
        if tiered:
            assert job is not None and rule is not None
            lost += TIER_COST * rule.tier(p, job, r)
        out.append((lost, rid, r))
    out.sort()  # by lost work, then job id (unique: the run itself is never compared)
    return out[: p.strategy.max_victim_candidates]


def could_free(p: SearchPass, shape: Shape, job: JobRequest, runs: list[RunView]) -> bool:
    """Whether taking every candidate would give `shape.nodes` nodes of one allowed type
    `shape.per_node` available GPUs each: a necessary condition for any victim set, checked
    before the lost work of each candidate is computed (most searches fail here)."""
    freeable: dict[int, int] = {}
    for r in runs:
        for i, g in r.alloc:
            freeable[i] = freeable.get(i, 0) + g
    index, view = p.s.index, p.view
    need, per = shape.nodes, shape.per_node
    for ty in shape.types if shape.types is not None else range(len(index.types)):
        # a gang may also use nodes that already have room
        ok = {i for i, _ in view.candidates(ty, per, job.id)} if need > 1 else set()
        if len(ok) >= need:
            return True
        for i, g in freeable.items():
            if i in ok or index.node_type[i] != ty or not index.available[i]:
                continue
            if _room(view, i, job.id) + g >= per:
                ok.add(i)
                if len(ok) >= need:
                    return True
    return False


def _room(view: Tentative, node: int, job: str) -> int:
    """The GPUs of `node` that `job` could use once victims free theirs: its free GPUs minus those
    held there for another job, unclamped (`Tentative.avail` stops at 0, so a node whose held GPUs
    exceed its free ones would look freeable although the victims' GPUs go to the reservation
    first)."""
    f = view.free(node)
    if node in view.held and view.holder[node] != job:
        f -= view.held[node]
    return f


def find_victims(p: SearchPass, job: JobRequest, rule: VictimRule) -> tuple[list[RunView], Alloc, int] | None:
    """Victims whose GPUs make `job` placeable, at the least lost work.

    Node-centric: for every node of an allowed type, the cheapest victims on it that free enough
    GPUs for one member of the job (cost = their lost work); then the `nodes` cheapest such nodes
    of one type. The set is checked for placement (no futile preemption) and by the rule.
    """
    runs = candidates(p, job, rule)
    shape = p.shape_of(job)
    if not runs or not p.could_free(shape, job, runs):
        return None
    cands = cheapest(p, runs, job, rule)
    on_node: dict[int, list[tuple[float, str, RunView]]] = {}
    for c in cands:
        for i, _ in c[2].alloc:
            on_node.setdefault(i, []).append(c)
    index = p.s.index
    best: tuple[float, int, list[RunView]] | None = None
    for ty in shape.types if shape.types is not None else range(len(index.types)):
        options: list[tuple[float, int, list[RunView]]] = []
        nodes = {i for i in on_node if index.node_type[i] == ty and index.available[i]}
        if shape.nodes > 1:  # a gang may also use nodes that already have room
            nodes.update(i for i, _ in p.view.candidates(ty, shape.per_node, job.id))
        if len(nodes) < shape.nodes:
            continue
        for i in sorted(nodes):
            option = _cheapest_on_node(p, job, shape, i, on_node.get(i, ()))
            if option is not None:
                options.append(option)
        if len(options) < shape.nodes:
            continue
        options.sort(key=lambda o: (o[0], o[1]))
        chosen = options[: shape.nodes]
        total = sum(o[0] for o in chosen)
        victims: dict[str, RunView] = {}
        for o in chosen:
            for r in o[2]:
                victims.setdefault(r.job.id, r)
        if best is None or (total, ty) < (best[0], best[1]):
            best = (total, ty, sorted(victims.values(), key=lambda r: r.job.id))
    if best is None or not best[2]:
        return None
    victims_list = sorted(best[2], key=lambda r: (p.lost_of(r), r.job.id))
    if not rule.accept(p, job, victims_list):
        return None
    freed: dict[int, int] = {}
    for r in victims_list:
        for i, g in r.alloc:
            freed[i] = freed.get(i, 0) + g
    alloc = fits_with(p.view, job.id, shape, freed)
    if alloc is None:
        return None
    return victims_list, alloc, len(cands)


def _cheapest_on_node(
    p: SearchPass, job: JobRequest, shape: Shape, node: int, on_it: Sequence[tuple[float, str, RunView]]
) -> tuple[float, int, list[RunView]] | None:
    """(lost work, node, victims): the cheapest candidates on one node that free room for one
    member of the job (none needed when it has room already); None when they cannot."""
    need = shape.per_node - _room(p.view, node, job.id)
    if need <= 0:
        return (0.0, node, [])
    picked: list[RunView] = []
    cost = 0.0
    for lost, _, r in on_it:
        picked.append(r)
        cost += lost
        need -= sum(g for n, g in r.alloc if n == node)
        if need <= 0:
            return (cost, node, picked)
    return None
