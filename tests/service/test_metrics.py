"""/metrics an operator alerts on (issue 18), read with prometheus_client's parser: counters of
starts, preemptions by reason, lost GPU-hours, requeues, loop errors and HTTP requests by route and
status; waits as a histogram by class (not gauges with a quantile label); no series twice."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from .live_helpers import Live


def test_metrics_parse_with_counters_histograms_and_no_duplicate_series(live: Live) -> None:
    assert live.get("viewer", "/api/jobs/nonesuch").status_code == 404
    assert live.get("viewer", "/api/tree").status_code == 200
    text = live.get("viewer", "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    series = [(s.name, tuple(sorted(s.labels.items()))) for f in families.values() for s in f.samples]
    assert len(series) == len(set(series)), "a series twice"
    types = {name: f.type for name, f in families.items()}
    counters = (
        "starts",
        "preemptions",
        "lost_gpu_hours",
        "requeues",
        "loop_errors",
        "http_requests",
        "passes",
    )
    for name in (f"fairshare_{c}" for c in counters):
        assert types.get(name) == "counter", (name, types.get(name))
    assert types["fairshare_wait_seconds"] == "histogram"
    assert types["fairshare_pass_duration_seconds"] == "histogram"
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples
    }
    e = live.loop.engine
    assert e is not None
    assert samples[("fairshare_starts_total", ())] >= sum(1 for r in e.info.values() if r.runs > 0)
    preempted = sum(v for (n, _), v in samples.items() if n == "fairshare_preemptions_total")
    assert preempted >= 1 and samples[("fairshare_lost_gpu_hours_total", ())] > 0
    assert not any("quantile" in dict(labels) for _, labels in samples)
    waits = {dict(lb)["class"]: v for (n, lb), v in samples.items() if n == "fairshare_wait_seconds_count"}
    first: dict[str, float] = {}
    for r in e.info.values():
        if r.first_start is not None:
            first[r.request.cls] = first.get(r.request.cls, 0) + 1
    assert waits == first  # every first start observed once, by class
    http = {dict(lb)["route"]: v for (n, lb), v in samples.items() if n == "fairshare_http_requests_total"
            and dict(lb)["status"] == "404"}  # fmt: skip
    assert http.get("/api/jobs/{job_id}") == 1  # by route template, not one series per job id
