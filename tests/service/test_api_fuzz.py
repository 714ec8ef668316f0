"""Hundreds of generated bad (and some good) requests on both backends: never a 5xx.

Bad JSON, wrong types, unknown fields, odd text (NUL, surrogates, huge numbers), odd paths and
query strings, missing or wrong tokens, any content type: each gets a 4xx with a message (or a 2xx
when it happens to be valid), never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairshare.service.api.app import create_app
from fairshare.service.storage import tokens
from fairshare.service.storage.store import Store

PATHS = [
    "/healthz",
    "/api/whoami",
    "/api/policy",
    "/api/policy/versions",
    "/api/policy/versions/{id}",
    "/api/exceptions",
    "/api/exceptions/{id}",
    "/api/exceptions/{id}/expire",
    "/api/decisions",
    "/api/tokens",
    "/api/tokens/{id}",
    "/api/review",
    "/api/audit/verify",
]
FIELDS = ["group", "extra_share", "expires", "expires_in", "reason", "text", "note", "name", "role", "node"]
QUERY = ["job", "kind", "since", "until", "after", "limit", "order", "status", "group", "days", "note"]

odd_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["ml", "ml/vision", "ops", "admin", "7d", "2026-12-03", "1e308", "-1", "\x00", "\ud800", "NaN"]
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    odd_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
    max_leaves=8,
)
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.just(b'{"text": "window: 7d\\ntree: [{name: a, share: 1}]\\nclasses: {x: {}}"}'),
)
ids = st.one_of(st.integers(min_value=-(2**70), max_value=2**70).map(str), st.text(max_size=10))


@pytest.fixture
def client(policy_store: Store) -> Iterator[tuple[TestClient, dict[str, str]]]:
    secrets = {}
    with policy_store.write() as tx:
        for name, role, node in (
            ("admin", "admin", None),
            ("owner", "owner", "ml"),
            ("viewer", "viewer", None),
        ):
            secrets[name] = tokens.create_token(tx, role, node, name, "setup")[1]
    app = create_app(policy_store, max_body_bytes=16 * 1024)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c, secrets


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
    path=st.sampled_from(PATHS),
    ident=ids,
    query=st.dictionaries(st.sampled_from(QUERY), odd_text, max_size=3),
    who=st.sampled_from(["admin", "owner", "viewer", "none", "garbage"]),
    ctype=st.sampled_from(
        [
            "application/json",
            "application/yaml",
            "text/plain",
            "application/x-www-form-urlencoded",
            "",
            "application/json; charset=latin-1",
        ]
    ),
    body=bodies,
)
def test_no_request_gets_a_5xx(
    client: tuple[TestClient, dict[str, str]],
    method: str,
    path: str,
    ident: str,
    query: dict[str, str],
    who: str,
    ctype: str,
    body: bytes,
) -> None:
    c, secrets = client
    headers: dict[str, Any] = {}
    if who in secrets:
        headers["Authorization"] = f"Bearer {secrets[who]}"
    elif who == "garbage":
        headers["Authorization"] = "Bearer fs_garbage"
    if ctype:
        headers["Content-Type"] = ctype
    url = path.replace("{id}", quote(ident.encode("utf-8", "surrogatepass"), safe="") or "0")
    params = {
        k: v.replace("\x00", "%00").encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        for k, v in query.items()
    }
    r = c.request(
        method,
        url,
        params=params,
        content=body if method in ("POST", "PUT", "PATCH") else None,
        headers=headers,
    )
    assert r.status_code < 500, (method, url, params, body[:200], r.status_code, r.text[:500])
    if r.status_code >= 400:
        assert r.json()["message"], r.text
