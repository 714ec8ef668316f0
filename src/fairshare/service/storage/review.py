"""`review`: what the portfolio's owners should look at now.

Nodes whose review date has come, exceptions (stored or in the policy file) that stop applying
within the next days, tokens tied to nodes the current policy no longer has, and classes declared
`resumable: true` whose requeued runs did not resume from a checkpoint (recovery.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..._units import fmt_duration
from ...engine.progress import RESUMED_MIN, not_borne_out
from ...inputs.policy import GroupNode
from ..timefmt import from_iso, iso, today
from .portfolio import ExceptionRecord, PolicyVersion
from .recovery import ClassRecovery
from .tokens import TokenRecord


@dataclass(frozen=True)
class NodeDue:
    path: str
    review: str  # the date, ISO
    days_overdue: int  # 0: due today
    owner: str | None
    hypothesis: str | None


@dataclass(frozen=True)
class Expiring:
    source: str  # "api" (stored exception, with its id) or "policy" (exceptions[i] of the policy file)
    ref: str  # "#12" or "exceptions[0]"
    group: str
    extra_share: float
    expires: str
    seconds_left: float
    approver: str | None
    reason: str | None


@dataclass(frozen=True)
class OrphanToken:
    token: int
    name: str
    role: str
    node: str


@dataclass(frozen=True)
class Review:
    now: str
    days: float
    policy_version: int | None
    nodes_past_review: list[NodeDue] = field(default_factory=list)
    exceptions_expiring: list[Expiring] = field(default_factory=list)
    tokens_on_missing_nodes: list[OrphanToken] = field(default_factory=list)
    classes_not_resuming: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def empty(self) -> bool:
        return not (
            self.nodes_past_review
            or self.exceptions_expiring
            or self.tokens_on_missing_nodes
            or self.classes_not_resuming
        )


def review(
    current: PolicyVersion | None,
    exceptions: list[ExceptionRecord],
    tokens: list[TokenRecord],
    now: float,
    days: float = 7.0,
    recovery: list[ClassRecovery] | None = None,
) -> Review:
    out = Review(iso(now) or "", days, None if current is None else current.version)
    if current is None:
        return out
    pol = current.policy()
    day = today(now)
    paths: list[str] = []

    def walk(nodes: tuple[GroupNode, ...], prefix: str) -> None:
        for n in nodes:
            path = f"{prefix}/{n.name}" if prefix else n.name
            paths.append(path)
            if n.review is not None and n.review <= day:
                out.nodes_past_review.append(
                    NodeDue(path, n.review.isoformat(), (day - n.review).days, n.owner, n.hypothesis)
                )
            walk(n.children, path)

    walk(pol.tree, "")
    horizon = now + days * 86400.0
    for ex in exceptions:
        if ex.active(now) and ex.ends_t <= horizon:
            out.exceptions_expiring.append(
                Expiring(
                    "api",
                    f"#{ex.id}",
                    ex.group,
                    ex.extra_share,
                    iso(ex.ends_t) or "",
                    ex.ends_t - now,
                    ex.approver,
                    ex.reason,
                )
            )
    for i, pex in enumerate(pol.exceptions):
        try:
            t = from_iso(pex.expires)
        except ValueError:
            continue  # stored policies have absolute expiries (portfolio.parse_policy)
        if now < t <= horizon:
            out.exceptions_expiring.append(
                Expiring(
                    "policy",
                    f"exceptions[{i}]",
                    pex.group,
                    pex.extra_share,
                    iso(t) or "",
                    t - now,
                    pex.approver,
                    pex.reason,
                )
            )
    out.exceptions_expiring.sort(key=lambda e: (e.seconds_left, e.source, e.ref))
    known = set(paths)
    for tok in tokens:
        if tok.valid(now) and tok.node is not None and tok.node not in known:
            out.tokens_on_missing_nodes.append(OrphanToken(tok.id, tok.name, tok.role, tok.node))
    declared = {name for name, c in pol.classes.items() if c.resumable}
    for c in recovery or ():
        if c.cls in declared and not_borne_out(True, c.restarts, c.resumed):
            out.classes_not_resuming.append(c.as_json())
    return out


def review_text(r: Review) -> str:
    if r.policy_version is None:
        return "no policy is stored yet: nothing to review"
    lines = [f"review at {r.now} (policy version {r.policy_version})"]
    if r.nodes_past_review:
        lines.append(f"nodes past their review date ({len(r.nodes_past_review)}):")
        for n in r.nodes_past_review:
            late = "due today" if n.days_overdue == 0 else f"{n.days_overdue} day(s) overdue"
            extra = "".join(
                (
                    f", owner {n.owner}" if n.owner else "",
                    f", hypothesis: {n.hypothesis}" if n.hypothesis else "",
                )
            )
            lines.append(f"  {n.path}: review {n.review} ({late}){extra}")
    if r.exceptions_expiring:
        lines.append(f"exceptions expiring within {r.days:g} day(s) ({len(r.exceptions_expiring)}):")
        for e in r.exceptions_expiring:
            who = f", approver {e.approver}" if e.approver else ""
            why = f", reason: {e.reason}" if e.reason else ""
            src = f"exception {e.ref}" if e.source == "api" else f"policy {e.ref}"
            lines.append(
                f"  {src}: {e.group} +{e.extra_share:g} share until {e.expires} "
                f"(in {fmt_duration(e.seconds_left)}){who}{why}"
            )
    if r.tokens_on_missing_nodes:
        lines.append(f"tokens tied to nodes not in the policy ({len(r.tokens_on_missing_nodes)}):")
        for tk in r.tokens_on_missing_nodes:
            lines.append(f"  token {tk.token} ({tk.name}, {tk.role}): node {tk.node}")
    if r.classes_not_resuming:
        lines.append(
            f"classes declared resumable whose requeued runs did not resume ({len(r.classes_not_resuming)}):"
        )
        for c in r.classes_not_resuming:
            lines.append(
                f"  {c['class']}: {c['resumed']} of {c['restarts']} requeued runs reported resumed "
                f"(below {RESUMED_MIN:.0%}): check its checkpoints, or declare resumable: false"
            )
    if r.empty:
        lines.append(
            f"nothing to review: no node past its review date, no exception expiring within {r.days:g} day(s)"
        )
    return "\n".join(lines)
