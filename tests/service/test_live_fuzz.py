"""Generated bad (and some good) requests to the live endpoints, on both backends: never a 5xx.

Odd job ids and paths, wrong types and unknown fields in submissions, odd query strings, missing or
wrong tokens, any content type: a 4xx with a message, or a 2xx when the request happens to be valid.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .live_helpers import Live

PATHS = [
    "/api/tree",
    "/api/usage",
    "/api/status",
    "/api/jobs",
    "/api/jobs/{id}",
    "/api/jobs/{id}/explain",
    "/api/jobs/{id}/cancel",
    "/metrics",
    "/",
    "/static/{id}",
]
FIELDS = [
    "job_id",
    "group",
    "class",
    "gpus",
    "nodes",
    "gpu_type",
    "cpus",
    "mem_gb",
    "estimate",
    "work",
    "label",
    "deadline",
    "protected",
    "resumable",
    "checkpoint",
    "user",
    "extra",
]
QUERY = ["state", "group", "limit", "node", "log", "job"]

odd_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "ml/nlp",
            "ops",
            "debug",
            "train",
            "1h",
            "90m",
            "2026-12-03",
            "1e308",
            "-1",
            "\x00",
            "\ud800",
            "NaN",
            "pending",
            "H100",
            "H100|A100",
            "ml/nlp-debug-000",
        ]
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    odd_text,
)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=5)
bodies = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=8).map(lambda d: json.dumps(d).encode()),
    st.fixed_dictionaries(
        {
            "group": st.sampled_from(["ml/nlp", "ops", "ml"]),
            "class": st.sampled_from(["debug", "train", "x"]),
            "gpus": st.integers(min_value=-2, max_value=20),
            "estimate": st.sampled_from(["10m", 600, "0", -5]),
        },
        optional={"deadline": odd_text, "nodes": st.integers(min_value=0, max_value=4), "job_id": odd_text},
    ).map(lambda d: json.dumps(d).encode()),
    st.binary(max_size=100),
)
ids = st.one_of(
    st.text(max_size=12), st.sampled_from(["ops-train-003", "..", "%2e%2e", "dashboard.js", "x" * 300])
)


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT"]),
    path=st.sampled_from(PATHS),
    ident=ids,
    query=st.dictionaries(st.sampled_from(QUERY), odd_text, max_size=3),
    who=st.sampled_from(["admin", "nlp", "viewer", "none", "garbage"]),
    ctype=st.sampled_from(["application/json", "text/plain", "", "application/x-www-form-urlencoded"]),
    body=bodies,
)
def test_no_live_request_gets_a_5xx(
    live: Live, method: str, path: str, ident: str, query: dict[str, str], who: str, ctype: str, body: bytes
) -> None:
    headers: dict[str, Any] = {}
    if who in live.secrets:
        headers["Authorization"] = f"Bearer {live.secrets[who]}"
    elif who == "garbage":
        headers["Authorization"] = "Bearer fs_garbage"
    if ctype:
        headers["Content-Type"] = ctype
    url = path.replace("{id}", quote(ident.encode("utf-8", "surrogatepass"), safe="") or "0")
    params = {
        k: v.replace("\x00", "%00").encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        for k, v in query.items()
    }
    if method == "POST" and path == "/api/jobs" and who in ("admin", "nlp"):
        url = "/api/jobs"  # submissions: the generated bodies, by roles that may submit
    r = live.client.request(
        method, url, params=params, content=body if method in ("POST", "PUT") else None, headers=headers
    )
    assert r.status_code < 500, (method, url, params, body[:200], r.status_code, r.text[:500])
    if r.status_code >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        assert r.json()["message"], r.text
