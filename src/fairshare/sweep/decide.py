"""From a sweep's summaries to decisions: which variants pass every gate, which are on the Pareto front,
which variant answers each of the five decisions best, and what capacity buys beside what policy buys.

The rules, stated once (docs/decisions.md repeats them):
- A variant *passes* when the policy the sweep decides for (`fairshare`, else the first policy
  given) passes every rollout gate of its metrics.json.
- *Better* is lower wait p90 over all jobs; ties go to the lower share spread, then the lower lost
  work. The recommendation is the best passing variant on the cluster as given (capacity variants
  compete only when none on it passes): a policy for the GPUs one has.
- A decision (unit, hierarchy, window, contract, exception, capacity) is answered with every other
  decision held as in the recommendation: the table shows each value tried for it among the
  variants that agree with the recommendation elsewhere, and the answer is the best passing one.
- Pareto front: no other variant is at least as good on both axes and better on one (wait p90
  against share spread; wait p90 against lost work).
- Scarcity or policy: "what N more nodes buy" is the change of wait p90 and lowest share from the
  base to each variant that changes only the cluster; "what the policy buys" is the change from the
  base to the best variant that changes only the policy, and from the incumbent (the second policy
  given, e.g. slurm-multifactor) to the decided policy on the base files. When more nodes buy a
  large improvement that no policy variant comes near, the wait is physical scarcity; when a policy
  variant buys as much as the nodes do, the policy is the defect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..report.table import fmt_duration
from .spec import DECISION_ORDER, Variant
from .summary import Summary


@dataclass(frozen=True)
class Answer:
    decision: str
    best: str | None  # variant id
    by_value: tuple[tuple[str, str, Summary | None], ...]  # (key=value, best variant id, its summary)


@dataclass(frozen=True)
class Capacity:
    variant: str
    name: str
    d_wait_p90_s: float
    d_lowest_share: float | None


@dataclass(frozen=True)
class Decisions:
    policy: str
    incumbent: str | None
    passing: tuple[str, ...]
    recommended: str | None
    front_spread: tuple[str, ...]
    front_lost: tuple[str, ...]
    answers: tuple[Answer, ...]
    capacity: tuple[Capacity, ...]
    policy_gain: Capacity | None  # the best policy-only variant against base
    incumbent_gain: Capacity | None  # the decided policy against the incumbent, base files
    verdict: str


def _key(s: Summary) -> tuple[float, float, float]:
    spread = s.share_spread if s.share_spread is not None else float("inf")
    return (s.wait_p90_s, spread, s.lost_work_pct)


def pareto(points: Sequence[tuple[str, float, float]]) -> tuple[str, ...]:
    """Ids of the points no other point dominates (lower is better on both axes), in input order."""
    front = []
    for pid, x, y in points:
        dominated = any((ox <= x and oy <= y) and (ox < x or oy < y) for oid, ox, oy in points if oid != pid)
        if not dominated:
            front.append(pid)
    return tuple(front)


def _outside(v: Variant, decision: str) -> dict[str, str]:
    """A variant's effective changes of every other decision."""
    return {c.key: c.raw for c in v.effective if c.decision != decision}


def _delta(a: Summary, b: Summary, variant: Variant) -> Capacity:
    share = None
    if a.lowest_share is not None and b.lowest_share is not None:
        share = b.lowest_share - a.lowest_share
    return Capacity(variant.id, variant.name, b.wait_p90_s - a.wait_p90_s, share)


def decide(variants: Sequence[Variant], summaries: Sequence[Summary], policies: Sequence[str]) -> Decisions:
    policy = "fairshare" if "fairshare" in policies else policies[0]
    incumbent = next((p for p in policies if p != policy), None)
    mine = {s.variant: s for s in summaries if s.policy == policy}
    ran = [v for v in variants if v.id in mine]
    passing = tuple(v.id for v in ran if mine[v.id].gates_pass)
    # the recommendation is a policy for the cluster one has: capacity variants compete only when
    # no variant on the given cluster passes
    own = [v.id for v in ran if v.id in passing and "capacity" not in v.decisions]
    ranked = sorted(own or passing, key=lambda vid: _key(mine[vid]))
    recommended = ranked[0] if ranked else None

    spread_pts = [(v.id, mine[v.id].share_spread, mine[v.id].wait_p90_s) for v in ran]
    front_spread = pareto([(i, x, y) for i, x, y in spread_pts if x is not None])
    front_lost = pareto([(v.id, mine[v.id].lost_work_pct, mine[v.id].wait_p90_s) for v in ran])

    context = next((v for v in ran if v.id == recommended), None) or next(
        (v for v in ran if v.id == "base"), None
    )
    answers = []
    for decision in DECISION_ORDER:
        if not any(decision in v.decisions for v in ran):
            continue
        # the decision's values with every other decision held as in the context variant
        held = _outside(context, decision) if context is not None else {}
        alike = [v for v in ran if _outside(v, decision) == held]
        by_value: dict[str, list[Variant]] = {}
        for v in alike:
            label = (
                ",".join(f"{c.key}={c.raw}" for c in v.effective if c.decision == decision) or "(as in base)"
            )
            by_value.setdefault(label, []).append(v)
        rows = []
        for label, vs in by_value.items():
            ok = [v for v in vs if v.id in passing] or vs
            best_v = min(ok, key=lambda v: _key(mine[v.id]))
            rows.append((label, best_v.id, mine[best_v.id]))
        good = [v for v in alike if v.id in passing]
        best = min(good, key=lambda v: _key(mine[v.id])).id if good else None
        answers.append(Answer(decision, best, tuple(rows)))

    base = mine.get("base")
    capacity: list[Capacity] = []
    policy_gain = incumbent_gain = None
    if base is not None:
        for v in ran:
            if v.effective and all(c.file == "cluster" for c in v.effective):
                capacity.append(_delta(base, mine[v.id], v))
        policy_only = [v for v in ran if v.effective and all(c.file == "policy" for c in v.effective)]
        if policy_only:
            best_policy = min(policy_only, key=lambda v: _key(mine[v.id]))
            policy_gain = _delta(base, mine[best_policy.id], best_policy)
        theirs = next((s for s in summaries if s.policy == incumbent and s.variant == "base"), None)
        if theirs is not None:
            incumbent_gain = _delta(theirs, base, Variant("base", f"{policy} instead of {incumbent}", ()))
    verdict = _verdict(capacity, policy_gain, incumbent_gain, base)
    return Decisions(
        policy,
        incumbent,
        passing,
        recommended,
        front_spread,
        front_lost,
        tuple(answers),
        tuple(capacity),
        policy_gain,
        incumbent_gain,
        verdict,
    )


def _verdict(
    capacity: Sequence[Capacity],
    policy_gain: Capacity | None,
    incumbent_gain: Capacity | None,
    base: Summary | None,
) -> str:
    if base is None or not capacity:
        return (
            "No capacity variant was run: vary a cluster key (e.g. cluster.pools.NAME.count=+0,+10) "
            "to tell physical scarcity from a defective policy."
        )
    best_nodes = min(capacity, key=lambda c: c.d_wait_p90_s)
    gains = [g for g in (policy_gain, incumbent_gain) if g is not None]
    best_policy = min(gains, key=lambda g: g.d_wait_p90_s) if gains else None
    nodes_buy = max(0.0, -best_nodes.d_wait_p90_s)
    policy_buys = max(0.0, -best_policy.d_wait_p90_s) if best_policy is not None else 0.0
    floor = max(0.05 * base.wait_p90_s, 60.0)
    nodes = f"the best capacity variant ({best_nodes.name}) cuts the wait p90 by {fmt_duration(nodes_buy)}"
    policy = (
        f"the best policy change ({best_policy.name}) by {fmt_duration(policy_buys)}"
        if best_policy is not None
        else "no policy change was tried"
    )
    if nodes_buy < floor and policy_buys < floor:
        return f"Neither lever moves the wait p90 by more than {fmt_duration(floor)}: {nodes}, {policy}."
    if policy_buys >= 0.5 * nodes_buy:
        return f"Policy: {policy}, {nodes}; fix the policy before buying GPUs."
    return f"Scarcity: {nodes}, {policy}; the waits come from too few GPUs, not from the policy."
