"""Every number the API accepts is bounded by fairshare.inputs.limits where it enters (issue 18): a
value out of range is a 422 naming the field and the range, never stored, never reaching the loop."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from fairshare.cli import main

from .live_helpers import Live, live_service

NLP = {"group": "ml/nlp", "class": "debug", "gpus": 1, "estimate": "20m"}
MAX_SHARE = "1,000,000,000,000"
EXC = {"group": "ml/nlp", "expires_in": "2d", "reason": "deadline"}


@pytest.fixture(scope="module")
def svc() -> Iterator[Live]:
    with tempfile.TemporaryDirectory() as folder:
        yield from live_service(f"sqlite:///{folder}/fs.db")


CASES: list[tuple[str, str, str, dict[str, Any], str, str]] = [
    # (id, method, path, body, field, a piece of the range the message must give)
    ("extra_share-1e300", "POST", "/api/exceptions", {**EXC, "extra_share": 1e300}, "extra_share", MAX_SHARE),
    ("extra_share-1e16", "POST", "/api/exceptions", {**EXC, "extra_share": 1e16}, "extra_share", MAX_SHARE),
    ("extra_share-tiny", "POST", "/api/exceptions", {**EXC, "extra_share": 1e-9}, "extra_share", "1e-06"),
    ("extra_share-ratio", "POST", "/api/exceptions", {**EXC, "extra_share": 1e11}, "extra_share", "1e+09"),
    ("exception-expires_in", "POST", "/api/exceptions", {**EXC, "extra_share": 1.0, "expires_in": "9999d"},
     "expires_in", "10 years"),
    ("job-estimate", "POST", "/api/jobs", {**NLP, "estimate": 1e300}, "estimate", "10 years"),
    ("job-estimate-text", "POST", "/api/jobs", {**NLP, "estimate": "99999999d"}, "estimate", "10 years"),
    ("job-work", "POST", "/api/jobs", {**NLP, "work": "1e300"}, "work", "10 years"),
    ("job-protected", "POST", "/api/jobs", {**NLP, "protected": 1e300}, "protected", "10 years"),
    ("job-checkpoint", "POST", "/api/jobs", {**NLP, "checkpoint": "9999999999h"}, "checkpoint", "10 years"),
    ("job-deadline", "POST", "/api/jobs", {**NLP, "deadline": "9999999999h"}, "deadline", "10 years"),
    ("job-cpus", "POST", "/api/jobs", {**NLP, "cpus": 1e300}, "cpus", "10,000,000,000"),
    ("job-mem_gb", "POST", "/api/jobs", {**NLP, "mem_gb": 1e300}, "mem_gb", "100,000,000,000"),
    ("job-gpus", "POST", "/api/jobs", {**NLP, "gpus": 10**12}, "gpus", "102,400,000"),
    ("job-nodes", "POST", "/api/jobs", {**NLP, "nodes": 10**9}, "nodes", "100,000"),
    ("token-expires_in", "POST", "/api/tokens", {"name": "x", "role": "viewer", "expires_in": "99999999d"},
     "expires_in", "10 years"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "field", "range_"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_a_number_out_of_range_is_a_422_naming_the_field_and_the_range(
    svc: Live, method: str, path: str, body: dict[str, Any], field: str, range_: str
) -> None:
    r = svc.client.request(method, path, headers=svc.h("admin"), json=body)
    assert r.status_code == 422, r.text
    out = r.json()
    assert out["field"] == field, out
    assert range_ in out["message"], out


@pytest.mark.parametrize(
    ("query", "field"),
    [("/api/decisions?since=1e300", "since"), ("/api/decisions?until=-1e300", "until"),
     ("/api/decisions?limit=1000000000", "limit"), ("/api/review?days=1e300", "days"),
     ("/api/review?days=nan", "days"), ("/api/review?days=-1", "days"),
     ("/api/jobs?limit=1000000000", "limit")],
    ids=["since", "until", "decisions-limit", "review-days", "review-days-nan", "review-days-negative",
         "jobs-limit"],
)  # fmt: skip
def test_a_query_parameter_out_of_range_is_a_422_naming_it(svc: Live, query: str, field: str) -> None:
    r = svc.get("admin", query)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()


def test_an_exception_within_the_limits_is_granted_and_the_loop_goes_on(svc: Live) -> None:
    r = svc.post("admin", "/api/exceptions", json={**EXC, "extra_share": 1e6})
    assert r.status_code == 201, r.text
    svc.clock.t += 600
    svc.loop.wake.set()
    svc.loop.cycle()
    assert svc.loop.error is None


POLICY_CASES: list[tuple[str, str, object, str, str]] = [
    # (id, the policy key path, its new value, field, a piece of the range the message must give)
    ("share-1e300", "tree[1].share", 1e300, "tree[1].share", "1e+12"),
    ("share-tiny", "tree[0].children[1].share", 1e-9, "tree[0].children[1].share", "1e-06"),
    ("share-nan", "tree[1].share", float("nan"), "tree[1].share", "finite"),
    ("window-1s", "window", "1s", "window", "1h"),
    ("window-99999d", "window", "99999d", "window", "10 years"),
    ("exception_max_days", "gates.exception_max_days", 1e300, "gates.exception_max_days", "3,650"),
]  # fmt: skip


def _set(doc: dict[str, Any], path: str, value: object) -> None:
    """doc with the value at a key path such as tree[0].children[1].share set (in place)."""
    *parents, last = path.replace("[", ".").replace("]", "").split(".")
    node: Any = doc
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    node[last] = value


@pytest.mark.parametrize(("path", "value", "field", "range_"), [c[1:] for c in POLICY_CASES],
                         ids=[c[0] for c in POLICY_CASES])  # fmt: skip
def test_a_policy_push_out_of_range_is_a_422_naming_the_field_and_the_range(
    svc: Live, path: str, value: object, field: str, range_: str
) -> None:
    before = svc.get("admin", "/api/policy").json()
    doc = yaml.safe_load(before["text"])
    _set(doc, path, value)
    r = svc.client.put("/api/policy", headers=svc.h("admin"), json={"text": yaml.safe_dump(doc)})
    assert r.status_code == 422, r.text
    out = r.json()
    assert out["field"] == field, out
    assert range_ in out["message"], out
    assert svc.get("admin", "/api/policy").json()["version"] == before["version"]  # nothing stored


@pytest.mark.parametrize("days", ["nan", "inf", "-inf", "1e300", "3651", "-1", "seven"])
def test_review_days_out_of_range_is_refused_naming_the_option_and_the_range(days: str) -> None:
    res = CliRunner().invoke(main, ["review", "--db", "sqlite:///nowhere.db", "--days", days])
    assert res.exit_code == 2, res.output
    assert "--days" in res.stderr and f"{days}: expected a number from 0 to 3,650" in res.stderr, res.stderr


def test_review_days_at_the_limit_is_the_same_limit_the_api_takes(svc: Live) -> None:
    assert svc.get("admin", "/api/review?days=3650").status_code == 200
    assert svc.get("admin", "/api/review?days=3650.001").status_code == 422
