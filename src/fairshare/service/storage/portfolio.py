"""The portfolio plane live: policy versions (text, sha256, author) and share exceptions.

A policy change is validated with the project's policy loader plus the live rules below, stored as a
new version and audited in the same transaction. Exceptions carry an expiry and an approver, stay
within the policy's `gates.exception_max_days`, and stop applying at their expiry instant (or when
ended early, which is audited).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select

from ..._units import is_duration_text
from ...core.tree import TreeIndex
from ...errors import InputError
from ...inputs import limits
from ...inputs._validation import parse_yaml, validate
from ...inputs.policy import GroupNode, Policy
from ..service_errors import Conflict, NotFound
from ..timefmt import from_iso, iso
from . import audit, bounds, schema
from .audit import AuditRecord
from .db import Tx, new_id
from .policy_diff import diff_policies

DAY = 86400.0


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_policy(text: str, now: float, where: str = "policy") -> tuple[Policy, list[str]]:
    """Validate a policy text for live use; returns the policy and warnings.

    Besides the loader's checks: an exception must expire at a date or datetime (a duration counts
    from a replay's epoch, which a live cluster does not have) and within exception_max_days of now.
    An exception that has already expired is accepted with a warning (it does not apply).
    """
    pol = validate(Policy, parse_yaml(text, where), where)
    warnings = []
    limit = pol.gates.exception_max_days
    for i, ex in enumerate(pol.exceptions):
        at = f"exceptions[{i}].expires"
        if isinstance(ex.expires, int | float) or is_duration_text(ex.expires) or _number_text(ex.expires):
            raise InputError(
                where,
                at,
                "in a live policy an exception expires at a date or datetime (e.g. 2026-12-15 or "
                "2026-12-15T06:00:00Z): a duration counts from a replay's epoch",
            )
        try:
            t = from_iso(ex.expires)
        except ValueError as exc:
            raise InputError(where, at, str(exc)) from None
        if t <= now:
            warnings.append(f"{at}: the exception for {ex.group} expired at {iso(t)}; it does not apply")
        elif t - now > limit * DAY:
            raise InputError(
                where,
                at,
                f"expires {iso(t)}, more than gates.exception_max_days ({limit:g}) days after now "
                f"({iso(now)})",
            )
    return pol, warnings


def _number_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class PolicyVersion:
    version: int
    sha256: str
    text: str
    author: str
    t: float
    note: str | None

    def policy(self) -> Policy:
        """The stored text parsed again (it was validated when stored)."""
        return validate(Policy, parse_yaml(self.text, f"policy version {self.version}"), "policy")


def _version(row: Any) -> PolicyVersion:
    return PolicyVersion(row.version, row.sha256, row.text, row.author, row._mapping["t"], row.note)


def current_policy(tx: Tx) -> PolicyVersion | None:
    p = schema.policy_versions
    row = tx.conn.execute(select(p).order_by(p.c.version.desc()).limit(1)).one_or_none()
    return None if row is None else _version(row)


def policy_history(tx: Tx) -> list[PolicyVersion]:
    p = schema.policy_versions
    return [_version(r) for r in tx.conn.execute(select(p).order_by(p.c.version))]


def policy_version(tx: Tx, version: int) -> PolicyVersion:
    p = schema.policy_versions
    row = tx.conn.execute(select(p).where(p.c.version == version)).one_or_none()
    if row is None:
        raise NotFound(f"no policy version {version}")
    return _version(row)


def put_policy(
    tx: Tx, text: str, author: str, note: str | None = None, base_sha: str | None = None
) -> tuple[PolicyVersion, list[str], bool]:
    """Validate and store `text` as the next version (audited). Returns (version, warnings, changed).

    The same text as the current version stores nothing. `base_sha`: refuse unless the current
    version has this sha256 (optimistic concurrency: If-Match; `*`: unless there is no version yet).
    """
    _, warnings = parse_policy(text, tx.now)
    audit.head(tx, lock=True)  # serializes policy changes with every other audited write
    cur = current_policy(tx)
    if base_sha is not None and (cur is None or base_sha not in ("*", cur.sha256)):
        raise Conflict(
            f"the policy changed meanwhile: current version is "
            f"{'none' if cur is None else f'{cur.version} ({cur.sha256})'}, not {base_sha}; reload and "
            "apply your change again"
        )
    sha = sha256_text(text)
    if cur is not None and cur.sha256 == sha:
        return cur, warnings, False
    new = PolicyVersion(1 if cur is None else cur.version + 1, sha, text, author, tx.now, note)
    tx.conn.execute(
        schema.policy_versions.insert().values(
            version=new.version, sha256=sha, text=text, author=author, t=tx.now, note=note
        )
    )
    evidence: dict[str, Any] = {
        "version": new.version,
        "sha256": sha,
        "previous": None if cur is None else cur.sha256,
        "by": author,
    }
    if cur is not None:  # what changed, node by node (as `fairshare policy diff` shows it)
        evidence["changes"] = diff_policies(cur.text, text, "policy")
    if note:
        evidence["note"] = note
    if warnings:
        evidence["warnings"] = warnings
    audit.append(tx, [AuditRecord(tx.now, "policy_version", None, evidence, policy_version=sha)])
    return new, warnings, True


@dataclass(frozen=True)
class ExceptionRecord:
    id: int
    group: str
    extra_share: float
    expires_t: float
    approver: str
    reason: str
    created_t: float
    created_by: str
    expired_t: float | None  # set when ended early by hand
    expired_by: str | None

    @property
    def ends_t(self) -> float:
        return self.expires_t if self.expired_t is None else min(self.expires_t, self.expired_t)

    def active(self, now: float) -> bool:
        return now < self.ends_t


def _exception(row: Any) -> ExceptionRecord:
    return ExceptionRecord(
        int(row.id),
        row.group_path,
        row.extra_share,
        row.expires_t,
        row.approver,
        row.reason,
        row.created_t,
        row.created_by,
        row.expired_t,
        row.expired_by,
    )


def _tree_shares(nodes: tuple[GroupNode, ...]) -> list[float]:
    out: list[float] = []
    for n in nodes:
        out.append(n.share)
        out.extend(_tree_shares(n.children))
    return out


def check_exception_limits(pol: Policy, group: str, extra_share: float, expires_t: float, now: float) -> None:
    """The policy's limits on a new exception: its group exists, it expires in the future and
    within gates.exception_max_days, its extra share is a positive number."""
    paths = TreeIndex.build(pol.tree).paths
    if group not in paths:
        raise InputError("exception", "group", f"no group {group!r} in the current policy's tree")
    if isinstance(extra_share, bool) or not math.isfinite(extra_share) or extra_share <= 0:
        raise InputError("exception", "extra_share", f"must be a number > 0, got {extra_share!r}")
    bounds.share("exception", "extra_share", extra_share)
    shares = [*_tree_shares(pol.tree), *(ex.extra_share for ex in pol.exceptions)]
    lo, hi = min(shares), max(shares)
    if extra_share > lo * limits.MAX_SHARE_RATIO or extra_share * limits.MAX_SHARE_RATIO < hi:
        raise InputError(
            "exception",
            "extra_share",
            f"must be between {max(limits.MIN_SHARE, hi / limits.MAX_SHARE_RATIO):g} and "
            f"{min(limits.MAX_SHARE, lo * limits.MAX_SHARE_RATIO):g}: the policy's shares run from "
            f"{lo:g} to {hi:g}, and all shares must be within a factor of {limits.MAX_SHARE_RATIO:g} "
            f"of each other (the limits), got {extra_share:g}",
        )
    limit = pol.gates.exception_max_days
    if not math.isfinite(expires_t) or expires_t <= now:
        raise InputError("exception", "expires", f"must be after now ({iso(now)}), got {iso(expires_t)}")
    if expires_t - now > limit * DAY:
        raise InputError(
            "exception",
            "expires",
            f"{iso(expires_t)} is more than the policy's gates.exception_max_days ({limit:g} days) "
            f"after now ({iso(now)}): the latest allowed is {iso(now + limit * DAY)}",
        )


def create_exception(
    tx: Tx, group: str, extra_share: float, expires_t: float, approver: str, reason: str, by: str
) -> ExceptionRecord:
    """Store a share exception within the current policy's limits (audited)."""
    audit.head(tx, lock=True)
    cur = current_policy(tx)
    if cur is None:
        raise Conflict("no policy is stored yet: store one before granting exceptions")
    check_exception_limits(cur.policy(), group, extra_share, expires_t, tx.now)
    res = tx.conn.execute(
        schema.share_exceptions.insert().values(
            group_path=group,
            extra_share=float(extra_share),
            expires_t=float(expires_t),
            approver=approver,
            reason=reason,
            created_t=tx.now,
            created_by=by,
        )
    )
    rec = get_exception(tx, int(new_id(res)))
    evidence = {
        "exception": rec.id,
        "group": group,
        "extra_share": rec.extra_share,
        "expires": iso(rec.expires_t),
        "approver": approver,
        "reason": reason,
        "by": by,
    }
    audit.append(tx, [AuditRecord(tx.now, "exception_created", None, evidence, cur.sha256)])
    return rec


def get_exception(tx: Tx, ex_id: int) -> ExceptionRecord:
    e = schema.share_exceptions
    row = tx.conn.execute(select(e).where(e.c.id == ex_id)).one_or_none()
    if row is None:
        raise NotFound(f"no exception {ex_id}")
    return _exception(row)


def end_exception(tx: Tx, ex_id: int, by: str, reason: str | None = None) -> ExceptionRecord:
    """End an exception now, before its expiry (audited). Refused when it no longer applies."""
    audit.head(tx, lock=True)
    rec = get_exception(tx, ex_id)
    if not rec.active(tx.now):
        raise Conflict(f"exception {ex_id} already stopped applying at {iso(rec.ends_t)}")
    e = schema.share_exceptions
    tx.conn.execute(e.update().where(e.c.id == ex_id).values(expired_t=tx.now, expired_by=by))
    evidence: dict[str, Any] = {"exception": ex_id, "group": rec.group, "by": by, "early": True}
    if reason:
        evidence["reason"] = reason
    audit.append(tx, [AuditRecord(tx.now, "exception_expired", None, evidence)])
    return get_exception(tx, ex_id)


Status = Literal["active", "expired", "all"]


def list_exceptions(tx: Tx, status: Status = "all", group: str | None = None) -> list[ExceptionRecord]:
    """Exceptions by id; `status` judged at the transaction's instant."""
    e = schema.share_exceptions
    q = select(e).order_by(e.c.id)
    if group is not None:
        q = q.where(e.c.group_path == group)
    out = [_exception(r) for r in tx.conn.execute(q)]
    if status == "all":
        return out
    return [x for x in out if x.active(tx.now) == (status == "active")]
