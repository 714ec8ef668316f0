"""/metrics in Prometheus's text format, from the loop's published view (prometheus_client).

Every application has its own registry (no global state). Gauges per tree node (`group` label):
share, effective share, owed / used rate, owed / delivered / debt / unallocated GPU-hours over the
window, pending and running jobs; the cluster's capacity and busy GPUs; wait quantiles by job class
over the window; the pass duration as a histogram observed by the loop; counters of passes and
cycles; how far the ledger's view lags the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
        waits: dict[str, list[float]] = {}
        for _, cls, _, wait in v.waits:
            waits.setdefault(cls, []).append(wait)
        g = GaugeMetricFamily(
            "fairshare_wait_seconds",
            "Wait from submission to first start of jobs started within the window, by class",
            labels=["class", "quantile"],
        )
        for cls, xs in sorted(waits.items()):
            xs.sort()
            for q in (0.5, 0.9, 0.99):
                g.add_metric([cls, str(q)], xs[min(len(xs) - 1, int(q * len(xs)))])
        yield g
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
