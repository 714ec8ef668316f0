"""/docs works offline (issue 18): the page loads Swagger UI from the app itself (no CDN), the files
are served."""

from __future__ import annotations

import re

from .live_helpers import Live


def test_docs_load_their_files_from_the_app_not_a_cdn(live: Live) -> None:
    page = live.client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert urls and all(u.startswith("/") for u in urls), urls  # nothing from another host
    for u in urls:
        r = live.client.get(u)
        assert r.status_code == 200 and len(r.content) > 100, u
    assert "cdn" not in page.text.lower()
    assert live.client.get("/redoc").status_code == 404


def test_openapi_has_the_response_models_of_tree_jobs_and_explain(live: Live) -> None:
    schema = live.client.get("/openapi.json").json()
    for path, model in (
        ("/api/tree", "TreeOut"),
        ("/api/jobs", "JobsOut"),
        ("/api/jobs/{job_id}/explain", "ExplainOut"),
    ):
        resp = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert resp == {"$ref": f"#/components/schemas/{model}"}, (path, resp)
    comps = schema["components"]["schemas"]
    assert "debt_gpu_h" in comps["TreeNode"]["properties"] and "position" in comps["JobOut"]["properties"]
    assert "loses_to" in comps["ExplainOut"]["properties"]
    # the models describe the real answers: each answer's keys are the model's (plus extras allowed)
    tree = live.get("viewer", "/api/tree").json()
    assert set(comps["TreeNode"]["required"]) <= set(tree["nodes"][0])
    jobs = live.get("viewer", "/api/jobs").json()
    assert set(comps["JobOut"]["required"]) <= set(jobs["jobs"][0])
    ex = live.get("viewer", f"/api/jobs/{jobs['jobs'][0]['id']}/explain").json()
    assert set(comps["ExplainOut"]["required"]) <= set(ex)
