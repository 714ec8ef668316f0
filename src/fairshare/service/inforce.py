"""The portfolio in force in the loop: the policy version and the share exceptions that apply now.

A new policy version with the same tree paths, GPU rates and window applies from the next pass
(`LiveEngine.set_policy`, audited `policy_applied`); another one is stored but not applied, audited
once as `policy_not_applied` with the reason (the running ledger is indexed by the tree). The
exceptions in force are the policy file's (by their dates) and the stored ones (by their expiry or
early end); each change is journaled (`set_exceptions`) and audited (`exception_applied`,
`exception_expired`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..inputs.policy import Policy
from .audit import AuditRecord
from .liveengine import LiveEngine, same_structure
from .portfolio import ExceptionRecord, PolicyVersion
from .timefmt import from_iso, iso

log = logging.getLogger("fairshare.service.loop")


def apply_policy(
    e: LiveEngine,
    cur: PolicyVersion | None,
    policies: Callable[[str], Policy],
    note: dict[str, Any] | None,
    now: float,
    audits: list[AuditRecord],
) -> dict[str, Any] | None:
    """Apply the current version if it is new and can be; returns the note of a version that
    cannot (None when every stored version is in force)."""
    if cur is None or cur.sha256 == e.policy_sha:
        return None
    if note is not None and note.get("sha256") == cur.sha256:
        return note
    why = same_structure(policies(e.policy_sha), policies(cur.sha256))
    if why:
        evidence = {
            "version": cur.version,
            "sha256": cur.sha256,
            "in_force": e.policy_sha,
            "why": why,
            "what_to_do": "the running ledger keeps the version in force; a change of tree, GPU rates "
            "or window needs a new database (not built yet)",
        }
        audits.append(AuditRecord(now, "policy_not_applied", None, evidence, e.policy_sha))
        log.warning("policy version %s not applied: %s", cur.version, "; ".join(why))
        return {"version": cur.version, "sha256": cur.sha256, "why": why}
    e.set_policy(cur.sha256)
    audits.append(
        AuditRecord(now, "policy_applied", None, {"version": cur.version, "sha256": cur.sha256}, cur.sha256)
    )
    return None


def in_force(pol: Policy, stored: Sequence[ExceptionRecord], now: float) -> list[dict[str, Any]]:
    """The exceptions that apply at `now`: the policy file's, then the stored ones, by id."""
    out: list[dict[str, Any]] = []
    for k, ex in enumerate(pol.exceptions):
        t = from_iso(ex.expires)
        if t > now:
            out.append(_entry(f"policy:{k}", ex.group, ex.extra_share, t, ex.approver, ex.reason))
    for rec in stored:
        if rec.active(now):
            out.append(
                _entry(f"api:{rec.id}", rec.group, rec.extra_share, rec.ends_t, rec.approver, rec.reason)
            )
    return out


def _entry(
    key: str, group: str, extra: float, expires_t: float, approver: str | None, reason: str | None
) -> dict[str, Any]:
    return {
        "id": key,
        "group": group,
        "extra_share": extra,
        "expires_t": expires_t,
        "approver": approver,
        "reason": reason,
    }


def apply_exceptions(
    e: LiveEngine, pol: Policy, stored: Sequence[ExceptionRecord], now: float, audits: list[AuditRecord]
) -> None:
    wanted = in_force(pol, stored, now)
    if wanted == e.exceptions_in_force:
        return
    before = {x["id"]: x for x in e.exceptions_in_force}
    after = {x["id"]: x for x in wanted}
    e.set_exceptions(wanted)
    for kind, these, others in (("exception_applied", after, before), ("exception_expired", before, after)):
        for k, x in these.items():
            if k not in others:
                audits.append(
                    AuditRecord(now, kind, None, {**x, "expires": iso(x["expires_t"])}, e.policy_sha)
                )
