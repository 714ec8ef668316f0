"""The portfolio in force in the loop: the policy version and the share exceptions that apply now.

A new policy version applies from the next pass, tree, GPU rates and window included
(`LiveEngine.set_policy`, i.e. `ServingState.reconfigure`: usage carried by tree path), audited
`policy_applied` with what it changes; each pending job it cancels (its group or class is gone) is
audited `policy_cancelled` with the reason, each running job whose group is gone `policy_recharged`
with the node now charged. A stored version that cannot be built into an engine setup (its text no
longer reads under this code) is not applied, audited once as `policy_not_applied`. The
exceptions in force are the policy file's (by their dates) and the stored ones (by their expiry or
early end); each change is journaled (`set_exceptions`) and audited (`exception_applied`,
`exception_expired`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ...errors import InputError
from ...inputs.policy import Policy
from ..storage.audit import AuditRecord
from ..storage.portfolio import ExceptionRecord, PolicyVersion
from ..timefmt import from_iso, iso
from .live_engine import ExceptionInForce, LiveEngine, setup_of, what_changes

log = logging.getLogger("fairshare.service.loop.cycle")


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
    try:
        pol = policies(cur.sha256)
        setup_of(pol, e.state.nodes)
    except (InputError, ValueError, KeyError) as exc:
        evidence = {
            "version": cur.version,
            "sha256": cur.sha256,
            "in_force": e.policy_sha,
            "why": [str(exc)],
            "what_to_do": "store a policy version that reads (PUT /api/policy); the one in force stays",
        }
        audits.append(AuditRecord(now, "policy_not_applied", None, evidence, e.policy_sha))
        log.warning("policy version %s not applied: %s", cur.version, exc)
        return {"version": cur.version, "sha256": cur.sha256, "why": [str(exc)]}
    changes = what_changes(policies(e.policy_sha), pol)
    done = e.set_policy(cur.sha256)
    audits.append(
        AuditRecord(
            now,
            "policy_applied",
            None,
            {"version": cur.version, "sha256": cur.sha256, "changes": changes},
            cur.sha256,
        )
    )
    for job_id, reason in done.rejected:
        audits.append(AuditRecord(now, "policy_cancelled", job_id, {"reason": reason}, cur.sha256))
    for job_id, path in done.detached:
        evidence = {"reason": "leaf_removed", "charged_to": path}
        audits.append(AuditRecord(now, "policy_recharged", job_id, evidence, cur.sha256))
    return None


def in_force(pol: Policy, stored: Sequence[ExceptionRecord], now: float) -> list[ExceptionInForce]:
    """The exceptions that apply at `now`: the policy file's, then the stored ones, by id."""
    out: list[ExceptionInForce] = []
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
) -> ExceptionInForce:
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
