"""/metrics in Prometheus's text format, from the loop's published view (prometheus_client).

Every application has its own registry (no global state). Gauges per tree node (`group` label):
share, effective share, owed / used rate, owed / delivered / debt / unallocated GPU-hours over the
window, pending and running jobs; the cluster's capacity and busy GPUs; wait quantiles by job class
over the window; the pass duration as a histogram observed by the loop; counters of passes and
cycles; how far the ledger's view lags the clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..loop.counters import LoopCounters
from ..loop.cycle import SchedulerLoop
from ..loop.views import H, NodeRow, View

PASS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class ViewCollector(Collector):
    def __init__(self, view: Callable[[], View], loop: SchedulerLoop | None = None) -> None:
        self.view = view
        self.loop = loop

    def collect(self) -> Iterator[Metric]:
        v = self.view()
        per_node: dict[str, tuple[str, Callable[[NodeRow], float]]] = {
            "share_fraction": ("Static share of the cluster (fraction of C)", lambda r: r.static_frac),
            "effective_share_fraction": (
                "Share of the cluster with exceptions in force (fraction of C)",
                lambda r: r.effective_share,
            ),
            "owed_rate_gpus": ("Owed rate now (GPU-equivalents)", lambda r: r.owed_rate),
            "used_rate_gpus": ("Charged rate now (GPU-equivalents)", lambda r: r.used_rate),
            "owed_gpu_hours": ("Owed over the window (GPU-equivalent hours)", lambda r: r.owed_s / H),
            "delivered_gpu_hours": (
                "Delivered over the window (GPU-equivalent hours)",
                lambda r: r.delivered_s / H,
            ),
            "debt_gpu_hours": (
                "Owed minus delivered over the window (GPU-equivalent hours)",
                lambda r: r.debt_s / H,
            ),
            "unallocated_gpu_hours": (
                "Usage above the static entitlement over the window (GPU-equivalent hours)",
                lambda r: r.unallocated_s / H,
            ),
            "queue_jobs": ("Pending jobs", lambda r: r.pending),
            "running_jobs": ("Running jobs", lambda r: r.running),
        }
        for name, (doc, get) in per_node.items():
            g = GaugeMetricFamily(f"fairshare_{name}", doc, labels=["group"])
            for r in v.tree:
                g.add_metric([r.path], float(get(r)))
            yield g
        for name, doc, value in (
            ("capacity_gpus", "Cluster capacity C(t) (GPU-equivalents)", v.capacity),
            ("gpus", "GPUs in the cluster", float(v.gpus_total)),
            ("gpus_busy", "GPUs allocated", float(v.gpus_busy)),
            ("queue_length", "Pending jobs in the whole queue", float(len(v.order))),
            ("view_lag_seconds", "Clock now minus the served view's engine instant (seconds)", self._lag(v)),
        ):
            yield GaugeMetricFamily(f"fairshare_{name}", doc, value=value)
        status = v.status
        yield CounterMetricFamily(
            "fairshare_passes", "Scheduling passes", value=float(status.get("passes", 0))
        )
        yield CounterMetricFamily("fairshare_cycles", "Loop cycles", value=float(status.get("cycles", 0)))
        loop = self.loop
        role = loop.role if loop is not None else v.role
        yield GaugeMetricFamily(
            "fairshare_writer", "1 when this process runs the scheduler loop", value=float(role == "writer")
        )
        if loop is not None:
            h = loop.health
            yield CounterMetricFamily(
                "fairshare_loop_errors",
                "Errors of the scheduler loop (cycles that failed)",
                value=h.errors_total,
            )
            yield GaugeMetricFamily(
                "fairshare_last_pass_timestamp_seconds",
                "Unix time of the loop's last completed cycle (0: none yet)",
                value=h.last_ok or 0.0,
            )
            yield from _counted(loop.counters)

    def _lag(self, v: View) -> float:
        """How far the served view is behind the clock now (not behind the view's own instant:
        a view that stopped moving shows its whole lag)."""
        now = self.loop.clock() if self.loop is not None else v.now
        return max(0.0, now - v.t) if v.t > 0 else 0.0


def make_registry(
    view: Callable[[], View], loop: SchedulerLoop | None = None
) -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ViewCollector(view, loop))
    hist = Histogram(
        "fairshare_pass_duration_seconds",
        "Duration of a scheduling pass (decide with explain, apply)",
        buckets=PASS_BUCKETS,
        registry=registry,
    )
    return registry, hist


def _counted(c: LoopCounters) -> Iterator[Metric]:
    """The loop's counts since this process started (Prometheus counters) and the waits' histogram."""
    yield CounterMetricFamily("fairshare_starts", "Job starts the cluster confirmed", value=c.starts)
    pre = CounterMetricFamily(
        "fairshare_preemptions", "Preemptions the cluster confirmed, by reason", labels=["reason"]
    )
    for reason, n in sorted(c.preemptions.items()):
        pre.add_metric([reason], n)
    yield pre
    yield CounterMetricFamily(
        "fairshare_lost_gpu_hours", "GPU-hours of work preemptions lost", value=c.lost_gpu_s / 3600.0
    )
    yield CounterMetricFamily("fairshare_requeues", "Preempted jobs put back in the queue", value=c.requeues)
    hist = HistogramMetricFamily(
        "fairshare_wait_seconds", "Wait from submission to first start, by job class", labels=["class"]
    )
    for cls, w in sorted(c.waits.items()):
        hist.add_metric([cls], w.cumulative(), sum_value=w.total)
    yield hist


def count_requests(app: FastAPI, registry: CollectorRegistry) -> None:
    """fairshare_http_requests_total{route, method, status}: by the route's template (not the raw path,
    which would make a series per job id)."""
    requests = Counter(
        "fairshare_http_requests",
        "HTTP requests answered, by route template, method and status",
        ["route", "method", "status"],
        registry=registry,
    )

    @app.middleware("http")
    async def counted(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", None) or "unmatched"
        requests.labels(path, request.method, str(response.status_code)).inc()
        return response
