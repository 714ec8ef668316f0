"""The live endpoints over a running loop (demo cluster, manual clock), on both backends: the tree
against a clean replay of the journal, the queue, explain, submit and cancel with roles, /metrics,
the dashboard's files, bad requests (4xx, never 5xx)."""

from __future__ import annotations

import math
import time

from fastapi.testclient import TestClient

from fairshare.service.api.app import create_app
from fairshare.service.storage import tokens
from fairshare.service.storage.store import Store

from .live_helpers import Live, rebuild, view_of


def test_the_tree_is_the_ledger_of_a_clean_replay_of_the_journal(live: Live) -> None:
    r = live.get("viewer", "/api/tree")
    assert r.status_code == 200
    body = r.json()
    engine = rebuild(live.store, upto=body["journal_seq"])
    clean = view_of(engine, body["as_of_t"])
    assert [n["path"] for n in body["nodes"]] == [row.path for row in clean.tree]
    for n, row in zip(body["nodes"], clean.tree, strict=True):
        for key, value in (("owed_gpu_h", row.owed_s), ("delivered_gpu_h", row.delivered_s),
                           ("debt_gpu_h", row.debt_s), ("unallocated_gpu_h", row.unallocated_s)):  # fmt: skip
            assert math.isclose(n[key], value / 3600, rel_tol=1e-12, abs_tol=1e-12), (n["path"], key)
    top = [n for n in body["nodes"] if n["depth"] == 0]
    assert math.isclose(sum(n["static_fraction"] for n in top), 1.0)
    assert sum(n["delivered_gpu_h"] for n in top) > 0


def test_the_queue_explain_and_a_job(live: Live) -> None:
    jobs = live.get("viewer", "/api/jobs?state=pending").json()["jobs"]
    assert jobs, "the scenario keeps some jobs waiting"
    assert [j["position"] for j in jobs if j["position"] is not None] == list(range(1, 1 + len(jobs)))
    job = jobs[-1]
    x = live.get("viewer", f"/api/jobs/{job['id']}/explain").json()
    assert x["position"] == job["position"] and x["queue_length"] == len(jobs)
    assert x["why_pending"] in ("no_capacity", "fragmented", "reserved", "no_victims")
    assert x["group_position"] >= 1 and x["group"]["path"] == job["group"]
    tree = {n["path"]: n for n in live.get("viewer", "/api/tree").json()["nodes"]}
    assert math.isclose(x["group"]["debt_gpu_h"], tree[job["group"]]["debt_gpu_h"])
    ahead = sum(a["jobs_ahead"] for a in x["loses_to"]) + x["same_group_ahead"]
    assert ahead == job["position"] - 1
    assert x["summary"].startswith(f"{job['id']} waits")
    assert x["next_opportunity_t"] is None or x["next_opportunity_t"] >= x["as_of_t"]
    detail = live.get("viewer", f"/api/jobs/{job['id']}").json()
    assert detail["job"]["id"] == job["id"]
    assert any(d["decision"] == "hold" for d in detail["decisions"])
    running = live.get("viewer", "/api/jobs?state=running").json()["jobs"]
    assert running and all(j["on_nodes"] for j in running)
    assert live.get("viewer", "/api/jobs/no-such-job/explain").status_code == 404
    assert live.get("viewer", "/api/jobs?state=nonsense").status_code == 422
    assert live.get("viewer", "/api/jobs?group=nowhere").status_code == 404


def test_submit_and_cancel_by_role(live: Live) -> None:
    spec = {"group": "ml/nlp", "class": "debug", "gpus": 1, "estimate": "20m", "job_id": "mine-1"}
    r = live.post("viewer", "/api/jobs", json=spec)
    assert r.status_code == 403
    r = live.post("nlp", "/api/jobs", json={**spec, "group": "ops"})
    assert r.status_code == 403 and "outside ml/nlp" in r.json()["message"]
    r = live.post("nlp", "/api/jobs", json=spec)
    assert r.status_code == 201, r.text
    assert r.json()["id"] == "mine-1" and r.json()["state"] in ("pending", "running")
    assert live.post("nlp", "/api/jobs", json=spec).status_code == 409
    bad = [
        ({**spec, "gpus": "2", "job_id": "b1"}, "gpus"),
        ({**spec, "class": "nope", "job_id": "b2"}, "class"),
        ({**spec, "estimate": "soon", "job_id": "b3"}, "estimate"),
        ({**spec, "gpus": 64, "job_id": "b4"}, "gpus"),
        ({**spec, "job_id": "has space"}, "job_id"),
        ({**spec, "extra": 1, "job_id": "b5"}, "extra"),
    ]
    for body, field in bad:
        r = live.post("nlp", "/api/jobs", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["field"] == field, (body, r.json())
    assert live.post("viewer", "/api/jobs/mine-1/cancel").status_code == 403
    r = live.post("nlp", "/api/jobs/mine-1/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    assert live.post("nlp", "/api/jobs/mine-1/cancel").status_code in (404, 409)
    decisions = live.get("admin", "/api/decisions?job=mine-1").json()["decisions"]
    assert [d["decision"] for d in decisions][:1] == ["submit"] and decisions[-1]["decision"] == "cancel"


def test_metrics_status_usage_and_the_dashboard(live: Live) -> None:
    r = live.client.get("/metrics")
    assert r.status_code == 401
    r = live.get("viewer", "/metrics")
    assert r.status_code == 200
    text = r.text
    names = ['fairshare_debt_gpu_hours{group="ops"}', 'fairshare_queue_jobs{group="ml/nlp"}',
             "fairshare_wait_seconds_bucket{", "fairshare_pass_duration_seconds_bucket",
             "fairshare_share_fraction"]  # fmt: skip
    for name in names:
        assert name in text, name
    status = live.get("viewer", "/api/status").json()
    assert status["role"] == "writer" and status["loop"]["passes"] > 0
    usage = live.get("viewer", "/api/usage?node=ops").json()
    assert len(usage["starts"]) == len(usage["nodes"]["ops"]["delivered"]) == 168
    assert live.get("viewer", "/api/usage?node=nowhere").status_code == 404
    page = live.client.get("/")
    assert page.status_code == 200 and "fairshare" in page.text and "/static/dashboard.js" in page.text
    assert live.client.get("/static/dashboard.js").status_code == 200
    assert live.client.get("/static/dashboard.css").headers["content-type"].startswith("text/css")
    assert live.client.get("/static/secrets.txt").status_code == 404


def test_a_policy_with_a_new_tree_put_through_the_api_applies_from_the_next_pass(live: Live) -> None:
    text = live.get("viewer", "/api/policy").json()["text"]
    r = live.client.put(
        "/api/policy",
        headers=live.h("admin"),
        json={"text": text.replace("name: ops", "name: infra"), "note": "rename"},
    )
    assert r.status_code == 200 and r.json()["changed"], r.text
    sha = r.json()["policy"]["sha256"]
    end = time.monotonic() + 30
    while live.loop.engine is None or live.loop.engine.policy_sha != sha:
        assert time.monotonic() < end, "the loop never applied the new version"
        live.clock.t += 1.0
        live.loop.wake.set()
        time.sleep(0.05)
    applied = live.get("admin", "/api/decisions?kind=policy_applied").json()["decisions"]
    assert any(d["evidence"]["sha256"] == sha and d["evidence"]["changes"] for d in applied)
    status = live.get("viewer", "/api/status").json()
    assert status["loop"]["policy_not_applied"] is None
    assert live.get("viewer", "/api/usage?node=infra").status_code == 200


def test_without_a_loop_the_live_endpoints_answer_503(policy_store: Store) -> None:
    with policy_store.write() as tx:
        secret = tokens.create_token(tx, "viewer", None, "v", "setup")[1]
    with TestClient(create_app(policy_store)) as client:
        r = client.get("/api/tree", headers={"Authorization": f"Bearer {secret}"})
        assert r.status_code == 503 and "fairshare serve" in r.json()["message"]
