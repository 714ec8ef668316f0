"""`review` as a pure function: review dates, expiring exceptions (stored and in the policy), orphans."""

from __future__ import annotations

import pytest

from fairshare.service.storage import audit, portfolio
from fairshare.service.storage.audit import AuditRecord
from fairshare.service.storage.portfolio import ExceptionRecord, PolicyVersion, sha256_text
from fairshare.service.storage.recovery import recovery_from_audit
from fairshare.service.storage.review import review, review_text
from fairshare.service.storage.store import Store
from fairshare.service.storage.tokens import TokenRecord

from .conftest import POLICY, T0

DAY = 86400.0


def _version(text: str = POLICY) -> PolicyVersion:
    return PolicyVersion(3, sha256_text(text), text, "admin", T0 - DAY, None)


def _exc(i: int, ends_in: float, ended: float | None = None) -> ExceptionRecord:
    return ExceptionRecord(i, "ml/vision", 5.0, T0 + ends_in, "lead", "why", T0 - DAY, "x", ended, None)


def _token(i: int, node: str | None, revoked: float | None = None) -> TokenRecord:
    return TokenRecord(i, f"t{i}", "member" if node else "viewer", node, T0, "x", None, revoked, None)


def test_nothing_without_a_policy() -> None:
    r = review(None, [], [], T0)
    assert r.policy_version is None and review_text(r) == "no policy is stored yet: nothing to review"


def test_review_lists_due_nodes_expiring_exceptions_and_orphan_tokens() -> None:
    exceptions = [_exc(1, 2 * DAY), _exc(2, 8 * DAY), _exc(3, DAY, ended=T0 - 10), _exc(4, 7 * DAY)]
    toks = [_token(1, "ml/nlp"), _token(2, "research"), _token(3, "old", revoked=T0 - 1), _token(4, None)]
    r = review(_version(), exceptions, toks, T0, days=7)
    assert [(n.path, n.days_overdue) for n in r.nodes_past_review] == [("ml", 1), ("ml/nlp", 0)]
    assert [(e.source, e.ref, e.seconds_left) for e in r.exceptions_expiring] == [
        ("api", "#1", 2 * DAY),
        ("policy", "exceptions[0]", 4 * DAY),
        ("api", "#4", 7 * DAY),
    ]
    assert [(t.token, t.node) for t in r.tokens_on_missing_nodes] == [(2, "research")]
    text = review_text(r)
    assert (
        "exception #1: ml/vision +5 share until 2026-12-03T00:00:00Z (in 2d), approver lead, reason: why"
        in text
    )
    assert "token 2 (t2, member): node research" in text
    assert r.as_json()["nodes_past_review"][0] == {
        "path": "ml",
        "review": "2026-11-30",
        "days_overdue": 1,
        "owner": "ml-lead@example.org",
        "hypothesis": "the new model ships",
    }


def test_a_quiet_review_says_so() -> None:
    quiet = POLICY.replace("review: 2026-11-30", "review: 2027-01-01").replace(
        "review: 2026-12-01", "review: 2027-01-01"
    )
    r = review(_version(quiet), [], [], T0, days=1)
    assert r.empty
    assert review_text(r).endswith(
        "nothing to review: no node past its review date, no exception expiring within 1 day(s)"
    )


# ---------------------------------------------------------------------- recovery (docs/progress.md)
def _history(restarts: list[bool]) -> list[tuple[str, str, dict[str, object]]]:
    """Audit records of train jobs: each reports, is preempted and restarts; `True` if its restart
    reported resumed. One job that never reported is preempted and restarts too (not counted)."""
    ev = {"class": "train", "resumable": True, "step": 5}
    out: list[tuple[str, str, dict[str, object]]] = [("start", "silent", {}), ("preempt", "silent", {})]
    out.append(("start", "silent", {}))
    for i, resumed in enumerate(restarts):
        job = f"j{i}"
        out += [("start", job, {}), ("progress", job, ev), ("checkpoint", job, ev), ("preempt", job, {})]
        out.append(("start", job, {}))
        out.append(("resumed", job, ev) if resumed else ("progress", job, ev))
    return out


@pytest.mark.parametrize(
    ("restarts", "flagged"),
    [
        pytest.param([True] * 10, False, id="all-resumed"),
        pytest.param([True] * 9 + [False], False, id="nine-of-ten-is-enough"),
        pytest.param([True] * 8 + [False] * 2, True, id="eight-of-ten-is-flagged"),
        pytest.param([False], True, id="one-restart-started-over"),
        pytest.param([], False, id="no-restarts-no-flag"),
    ],
)
def test_review_flags_a_resumable_class_whose_requeued_runs_do_not_resume(
    policy_store: Store, restarts: list[bool], flagged: bool
) -> None:
    with policy_store.write() as tx:
        audit.append(
            tx, [AuditRecord(T0 + i, d, job, ev) for i, (d, job, ev) in enumerate(_history(restarts))]
        )
    with policy_store.read() as tx:
        rec = recovery_from_audit(tx)
        r = review(portfolio.current_policy(tx), [], [], T0, 7, rec)
    assert [(c.cls, c.restarts, c.resumed) for c in rec] == (
        [("train", len(restarts), sum(restarts))] if restarts else []
    )
    assert bool(r.classes_not_resuming) == flagged
    assert ("classes declared resumable whose requeued runs did not resume" in review_text(r)) == flagged
