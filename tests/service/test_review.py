"""`review` as a pure function: review dates, expiring exceptions (stored and in the policy), orphans."""

from __future__ import annotations

from fairshare.service.storage.portfolio import ExceptionRecord, PolicyVersion, sha256_text
from fairshare.service.storage.review import review, review_text
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
