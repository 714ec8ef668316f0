"""The HTTP API on both backends: auth and roles, policy versions, exceptions, decisions, tokens."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fairshare.service.api.app import create_app
from fairshare.service.storage import tokens
from fairshare.service.storage.audit import AuditRecord
from fairshare.service.storage.store import Store

from .conftest import POLICY, Clock

DAY = 86400.0


@dataclass
class Api:
    client: TestClient
    store: Store
    clock: Clock
    secrets: dict[str, str]

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secrets[who]}"}

    def get(self, who: str, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers=self.as_(who), **kw)

    def post(self, who: str, path: str, **kw: Any) -> Any:
        return self.client.post(path, headers=self.as_(who), **kw)

    def put(self, who: str, path: str, **kw: Any) -> Any:
        return self.client.put(path, headers={**self.as_(who), **kw.pop("headers", {})}, **kw)

    def delete(self, who: str, path: str) -> Any:
        return self.client.delete(path, headers=self.as_(who))


HOLDERS = {
    "admin": ("admin", None),
    "viewer": ("viewer", None),
    "nlp-member": ("member", "ml/nlp"),
    "ml-owner": ("owner", "ml"),
    "ops-owner": ("owner", "ops"),
}


@pytest.fixture
def api(policy_store: Store, clock: Clock) -> Iterator[Api]:
    secrets = {}
    with policy_store.write() as tx:
        for name, (role, node) in HOLDERS.items():
            secrets[name] = tokens.create_token(tx, role, node, name, "setup")[1]
    with TestClient(create_app(policy_store, max_body_bytes=64 * 1024)) as client:
        yield Api(client, policy_store, clock, secrets)


def _exception(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"group": "ml/vision", "extra_share": 5, "expires_in": "3d", "reason": "demo"}
    body.update(over)
    return body


def test_health_and_openapi_need_no_token(api: Api) -> None:
    health = api.client.get("/healthz").json()
    assert health["ok"] is True and health["backend"] == api.store.backend and health["schema"] == "0003"
    spec = api.client.get("/openapi.json").json()
    for path in ("/api/policy", "/api/policy/versions", "/api/exceptions", "/api/decisions", "/api/tokens"):
        assert path in spec["paths"]
    assert "application/yaml" in spec["paths"]["/api/policy"]["put"]["requestBody"]["content"]


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope", "Basic abc", "Bearer fs_" + "x" * 43])
def test_requests_without_a_valid_token_get_401(api: Api, header: str | None) -> None:
    r = api.client.get("/api/policy", headers={"Authorization": header} if header else {})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json()["error"] == "unauthorized"


def test_revoked_and_expired_tokens_stop_working(api: Api) -> None:
    created = api.post("admin", "/api/tokens", json={"name": "temp", "role": "viewer", "expires_in": "1h"})
    assert created.status_code == 201
    secret = created.json()["secret"]
    bearer = {"Authorization": f"Bearer {secret}"}
    assert api.client.get("/api/whoami", headers=bearer).json()["name"] == "temp"
    api.clock.advance(3600)
    assert api.client.get("/api/whoami", headers=bearer).status_code == 401
    assert api.get("viewer", "/api/whoami").status_code == 200
    viewer_id = api.get("viewer", "/api/whoami").json()["token"]
    assert api.delete("admin", f"/api/tokens/{viewer_id}").json()["revoked_at"] is not None
    assert api.get("viewer", "/api/whoami").status_code == 401


def test_a_viewer_reads_everything_and_writes_nothing(api: Api) -> None:
    for path in ("/api/policy", "/api/policy/versions", "/api/exceptions", "/api/decisions", "/api/review"):
        assert api.get("viewer", path).status_code == 200, path
    refused = [
        api.put("viewer", "/api/policy", json={"text": POLICY}),
        api.post("viewer", "/api/exceptions", json=_exception()),
        api.post("viewer", "/api/tokens", json={"name": "x", "role": "admin"}),
        api.get("viewer", "/api/tokens"),
        api.delete("viewer", "/api/tokens/1"),
        api.get("viewer", "/api/audit/verify"),
    ]
    for r in refused:
        assert r.status_code == 403, r.text
        assert r.json()["error"] == "forbidden" and "viewer (viewer, token 2)" in r.json()["message"]


def test_owners_grant_exceptions_only_strictly_under_their_node(api: Api) -> None:
    ok = api.post("ml-owner", "/api/exceptions", json=_exception())
    assert ok.status_code == 201, ok.text
    body = ok.json()
    assert body["approver"] == "ml-owner" and body["group"] == "ml/vision" and body["active"] is True
    assert body["expires_at"] == "2026-12-04T00:00:00Z"
    own = api.post("ml-owner", "/api/exceptions", json=_exception(group="ml"))
    assert own.status_code == 403 and "takes share from its siblings" in own.json()["message"]
    other = api.post("ml-owner", "/api/exceptions", json=_exception(group="ops"))
    assert other.status_code == 403 and "outside ml" in other.json()["message"]
    assert api.post("ops-owner", "/api/exceptions", json=_exception()).status_code == 403
    member = api.post("nlp-member", "/api/exceptions", json=_exception(group="ml/nlp"))
    assert member.status_code == 403 and "owner token" in member.json()["message"]
    # the other team's owner cannot end it either; its own owner can
    assert api.post("ops-owner", f"/api/exceptions/{body['id']}/expire").status_code == 403
    ended = api.post("ml-owner", f"/api/exceptions/{body['id']}/expire", json={"reason": "done early"})
    assert ended.status_code == 200 and ended.json()["active"] is False
    assert ended.json()["ended_by"].startswith("ml-owner (owner of ml")
    again = api.post("ml-owner", f"/api/exceptions/{body['id']}/expire")
    assert again.status_code == 409 and "already stopped applying" in again.json()["message"]


def test_an_owner_cannot_exceed_the_policys_limits(api: Api) -> None:
    long = api.post("ml-owner", "/api/exceptions", json=_exception(expires_in="15d"))
    assert long.status_code == 422
    assert long.json()["field"] == "expires"
    assert "gates.exception_max_days (14 days)" in long.json()["message"]
    assert "latest allowed is 2026-12-15T00:00:00Z" in long.json()["message"]
    at_limit = api.post("ml-owner", "/api/exceptions", json=_exception(expires_in=None, expires="2026-12-15"))
    assert at_limit.status_code == 201
    past = api.post("ml-owner", "/api/exceptions", json=_exception(expires_in=None, expires="2026-11-30"))
    assert past.status_code == 422 and "must be after now" in past.json()["message"]
    missing = api.post("ml-owner", "/api/exceptions", json=_exception(group="ml/speech"))
    assert missing.status_code == 422 and "no group 'ml/speech'" in missing.json()["message"]
    both = api.post("ml-owner", "/api/exceptions", json=_exception(expires="2026-12-03"))
    assert both.status_code == 422 and "exactly one of expires" in both.json()["message"]


def test_exceptions_expire_at_their_instant(api: Api) -> None:
    made = api.post("admin", "/api/exceptions", json=_exception(group="ml", expires_in="1d")).json()
    assert [e["id"] for e in api.get("viewer", "/api/exceptions", params={"status": "active"}).json()] == [
        made["id"]
    ]
    api.clock.advance(DAY)
    assert api.get("viewer", "/api/exceptions", params={"status": "active"}).json() == []
    assert api.get("viewer", f"/api/exceptions/{made['id']}").json()["active"] is False
    assert [e["id"] for e in api.get("viewer", "/api/exceptions", params={"status": "expired"}).json()] == [
        made["id"]
    ]
    assert api.get("viewer", "/api/exceptions/999").status_code == 404


def test_policy_versions_are_validated_stored_and_audited(api: Api) -> None:
    cur = api.get("viewer", "/api/policy")
    assert cur.status_code == 200 and cur.json()["version"] == 1 and cur.json()["text"] == POLICY
    etag = cur.headers["etag"]
    bad = api.put("admin", "/api/policy", json={"text": POLICY.replace("share: 60", "share: zero")})
    assert bad.status_code == 422 and bad.json()["field"] == "tree[0].share"
    assert "expected a number, got 'zero'" in bad.json()["message"]
    same = api.put("admin", "/api/policy", json={"text": POLICY})
    assert same.status_code == 200 and same.json()["changed"] is False
    new = POLICY.replace("share: 40", "share: 45")
    api.clock.advance(60)
    yaml = api.put(
        "admin",
        "/api/policy",
        content=new,
        params={"note": "ops grows"},
        headers={"Content-Type": "application/yaml"},
    )
    assert yaml.status_code == 200, yaml.text
    assert yaml.json()["changed"] is True and yaml.json()["policy"]["version"] == 2
    stale = api.put("admin", "/api/policy", json={"text": POLICY}, headers={"If-Match": etag})
    assert stale.status_code == 409 and "changed meanwhile" in stale.json()["message"]
    assert (
        api.put("admin", "/api/policy", json={"text": POLICY}, headers={"If-Match": "*"}).status_code == 200
    )
    fresh = api.get("viewer", "/api/policy").headers["etag"]
    assert (
        api.put("admin", "/api/policy", json={"text": POLICY}, headers={"If-Match": fresh}).status_code == 200
    )
    versions = api.get("viewer", "/api/policy/versions").json()
    assert [(v["version"], v["author"], v["note"], v["text"]) for v in versions] == [
        (1, "setup", None, None),
        (2, "admin", "ops grows", None),
        (3, "admin", None, None),
    ]
    assert api.get("viewer", "/api/policy/versions/2").json()["text"] == new
    assert api.get("viewer", "/api/policy/versions/9").status_code == 404
    changes = api.get("viewer", "/api/decisions", params={"kind": "policy_version"}).json()["decisions"]
    assert [d["evidence"]["version"] for d in changes] == [1, 2, 3]
    assert changes[1]["evidence"]["note"] == "ops grows" and changes[1]["evidence"]["by"] == "admin"
    assert changes[1]["policy_version"] == changes[1]["evidence"]["sha256"] == versions[1]["sha256"]
    assert changes[1]["evidence"]["previous"] == versions[0]["sha256"]


def test_policy_body_errors(api: Api) -> None:
    r = api.put("admin", "/api/policy", content=b"window: 7d", headers={"Content-Type": "text/csv"})
    assert r.status_code == 415 and "application/yaml" in r.json()["message"]
    r = api.put("admin", "/api/policy", content=b"\xff\xfe", headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422 and "not UTF-8" in r.json()["message"]
    r = api.put("admin", "/api/policy", content=b"a: [1,", headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422 and "not valid YAML" in r.json()["message"]
    r = api.put("admin", "/api/policy", json={"text": POLICY, "author": "me"})
    assert r.status_code == 422 and "unknown field 'author'" in r.json()["message"]
    r = api.put("admin", "/api/policy", json={"text": 5})
    assert r.status_code == 422 and r.json()["field"] == "text"
    r = api.put(
        "admin",
        "/api/policy",
        content=b"[" * 100_000 + b"]" * 100,
        headers={"Content-Type": "application/yaml"},
    )
    assert r.status_code == 413


def test_every_write_is_audited_and_decisions_filter(api: Api) -> None:
    api.store.commit(
        audit_records=[
            AuditRecord(api.clock() - 300, "start", "job-a", {"nodes": ["n-1"]}),
            AuditRecord(api.clock() - 200, "hold", "job-b", {"reason": "no_capacity"}),
            AuditRecord(api.clock() - 100, "start", "job-b", {"nodes": ["n-2"]}),
        ]
    )
    made = api.post("ml-owner", "/api/exceptions", json=_exception()).json()
    api.post("ml-owner", f"/api/exceptions/{made['id']}/expire")
    tok = api.post("admin", "/api/tokens", json={"name": "ci", "role": "member", "node": "ops"}).json()
    api.delete("admin", f"/api/tokens/{tok['token']['id']}")
    kinds = [
        d["decision"] for d in api.get("viewer", "/api/decisions", params={"limit": 1000}).json()["decisions"]
    ]
    assert kinds[-7:] == [
        "start",
        "hold",
        "start",
        "exception_created",
        "exception_expired",
        "token_created",
        "token_revoked",
    ]
    by_job = api.get("viewer", "/api/decisions", params={"job": "job-b"}).json()["decisions"]
    assert [(d["decision"], d["evidence"]) for d in by_job] == [
        ("hold", {"reason": "no_capacity"}),
        ("start", {"nodes": ["n-2"]}),
    ]
    window = api.get(
        "viewer",
        "/api/decisions",
        params={"kind": "start", "since": "2026-11-30T23:55:00Z", "until": api.clock() - 50},
    ).json()["decisions"]
    assert [d["job"] for d in window] == ["job-a", "job-b"]
    page1 = api.get("viewer", "/api/decisions", params={"limit": 7}).json()
    page2 = api.get("viewer", "/api/decisions", params={"limit": 7, "after": page1["next_after"]}).json()
    seqs = [d["seq"] for d in page1["decisions"] + page2["decisions"]]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == len(kinds)
    assert page2["next_after"] is None
    newest = api.get("viewer", "/api/decisions", params={"limit": 1, "order": "desc"}).json()["decisions"]
    assert newest[0]["decision"] == "token_revoked" and newest[0]["evidence"]["by"].startswith("admin (admin")
    created = [
        d
        for d in api.get("viewer", "/api/decisions", params={"kind": "exception_created"}).json()["decisions"]
    ]
    assert (
        created[0]["evidence"]["approver"] == "ml-owner"
        and created[0]["evidence"]["expires"] == "2026-12-04T00:00:00Z"
    )
    bad = api.get("viewer", "/api/decisions", params={"since": "yesterday"})
    assert bad.status_code == 422 and bad.json()["field"] == "since"
    assert api.get("viewer", "/api/decisions", params={"limit": 5000}).status_code == 422
    verified = api.get("admin", "/api/audit/verify").json()
    assert verified["ok"] is True and verified["records"] == len(kinds)


def test_tokens_admin(api: Api) -> None:
    listed = api.get("admin", "/api/tokens").json()
    assert [t["name"] for t in listed] == list(HOLDERS)
    assert all("secret" not in t for t in listed)
    made = api.post("admin", "/api/tokens", json={"name": "bot", "role": "member", "node": "ml/vision"})
    assert made.status_code == 201
    body = made.json()
    assert body["token"]["created_by"].startswith("admin (admin") and body["secret"].startswith("fs_")
    who = api.client.get("/api/whoami", headers={"Authorization": f"Bearer {body['secret']}"}).json()
    assert who == {"token": body["token"]["id"], "name": "bot", "role": "member", "node": "ml/vision"}
    assert api.post("admin", "/api/tokens", json={"name": "x", "role": "member"}).json()["field"] == "node"
    assert (
        api.post("admin", "/api/tokens", json={"name": "x", "role": "member", "node": "nope"}).status_code
        == 422
    )
    assert api.post("admin", "/api/tokens", json={"name": "x", "role": "root"}).status_code == 422
    assert api.post("admin", "/api/tokens", json={"name": "", "role": "viewer"}).status_code == 422
    assert api.delete("admin", "/api/tokens/99").status_code == 404
    assert api.post("ml-owner", "/api/tokens", json={"name": "x", "role": "viewer"}).status_code == 403


def test_review_endpoint(api: Api) -> None:
    r = api.get("viewer", "/api/review", params={"days": 7}).json()
    assert [n["path"] for n in r["nodes_past_review"]] == ["ml", "ml/nlp"]
    assert [e["ref"] for e in r["exceptions_expiring"]] == ["exceptions[0]"]


def test_bad_bodies_get_4xx_with_the_field(api: Api) -> None:
    cases = [
        (b"{bad json", "application/json", 422, "not valid JSON"),
        (
            b'{"group": "ml/vision", "extra_share": "5", "expires_in": "3d", "reason": "x"}',
            "application/json",
            422,
            "extra_share",
        ),
        (
            b'{"group": "ml/vision", "extra_share": 5, "expires_in": "3d", "reason": "x", "bonus": 1}',
            "application/json",
            422,
            "unknown field 'bonus'",
        ),
        (
            b'{"group": "ml/vision", "extra_share": 5, "expires_in": "3d"}',
            "application/json",
            422,
            "required field 'reason'",
        ),
        (
            b'{"group": "ml/vision", "extra_share": 5, "expires_in": "soon", "reason": "x"}',
            "application/json",
            422,
            "expected a duration",
        ),
        (
            b'{"group": "ml/vision", "extra_share": -1, "expires_in": "3d", "reason": "x"}',
            "application/json",
            422,
            "extra_share",
        ),
        (
            b'{"group": "ml/\\u0000", "extra_share": 1, "expires_in": "3d", "reason": "x"}',
            "application/json",
            422,
            "NUL",
        ),
        (
            b'{"group": "ml/\\ud800", "extra_share": 1, "expires_in": "3d", "reason": "x"}',
            "application/json",
            422,
            "group: Input should be a valid string",
        ),
        (b"[1, 2]", "application/json", 422, "the body must be a JSON object"),
        (b"", "application/json", 422, "a JSON body is required"),
        (b"x" * (65 * 1024), "application/json", 413, "larger than the limit"),
    ]
    for body, ctype, status, text in cases:
        r = api.client.post(
            "/api/exceptions", content=body, headers={**api.as_("admin"), "Content-Type": ctype}
        )
        assert r.status_code == status, (body[:80], r.text)
        assert text in r.text, (body[:80], r.text)
    assert api.get("admin", "/api/exceptions/0").status_code == 422
    assert api.get("admin", "/api/exceptions/abc").status_code == 422
    assert api.get("admin", "/api/exceptions", params={"status": "maybe"}).status_code == 422
    assert api.client.get("/nowhere").status_code == 404
    assert api.client.patch("/api/policy", headers=api.as_("admin")).status_code == 405
