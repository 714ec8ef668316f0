"""A loop that fails is visible (issue 18): /healthz 503 once no cycle completed for 3 poll
intervals, the last error and the last good cycle in /api/status, fairshare_loop_errors_total and
fairshare_last_pass_timestamp_seconds in /metrics, the error audited once however often it repeats,
and all of it clears when the loop works again. Both databases."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fairshare.service.api.app import create_app
from fairshare.service.clusters.backend import Observation
from fairshare.service.clusters.fake import FakeCluster
from fairshare.service.loop.cycle import LoopOptions, SchedulerLoop
from fairshare.service.loop.live_service import LiveService
from fairshare.service.storage import audit, portfolio, tokens
from fairshare.service.storage.store import Store

from .conftest import FAKE_NODES, POLICY, Clock


class BrokenDriver(FakeCluster):
    """A cluster driver with a bug: while `broken`, reading the cluster raises."""

    broken = False

    def observe(self, since: float, until: float) -> list[Observation]:
        if self.broken:
            raise RuntimeError("driver bug: index out of range")
        return super().observe(since, until)


def _until(cond: Callable[[], bool], timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _metric(text: str, name: str) -> float:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                return float(s.value)
    raise AssertionError(f"no {name} in /metrics")


def test_a_failing_loop_shows_in_healthz_status_metrics_and_one_audit_record(
    db_url: str, clock: Clock
) -> None:
    fake = BrokenDriver(FAKE_NODES)
    with Store.open(db_url, clock) as store:
        with store.write() as tx:
            portfolio.put_policy(tx, POLICY, "test")
            secret = tokens.create_token(tx, "admin", None, "admin", "test")[1]
        opts = LoopOptions(speed=0, forecast_s=0.0, publish_s=0.0, poll_s=0.1, refresh_s=0.1)
        loop = SchedulerLoop(store, lambda: fake, clock, opts)
        live = LiveService(store, loop)
        h = {"Authorization": f"Bearer {secret}"}
        stop = threading.Event()
        th = threading.Thread(target=loop.run, args=(stop,), daemon=True)
        th.start()
        try:
            with TestClient(create_app(store, live=live), raise_server_exceptions=False) as client:
                assert _until(lambda: loop.health.last_ok is not None)
                ok = client.get("/healthz")
                assert ok.status_code == 200 and ok.json()["loop"] == "writer", ok.text
                fake.broken = True
                assert _until(lambda: loop.health.errors_total >= 3)
                assert _until(lambda: client.get("/healthz").status_code == 503)
                bad = client.get("/healthz").json()
                assert bad["ok"] is False and "driver bug" in bad["loop_error"], bad
                status = client.get("/api/status", headers=h).json()["loop"]
                assert "driver bug" in status["last_error"] and status["healthy"] is False, status
                assert status["last_pass_ok"] is not None
                text = client.get("/metrics", headers=h).text
                assert _metric(text, "fairshare_loop_errors_total") >= 3
                last = _metric(text, "fairshare_last_pass_timestamp_seconds")
                assert last == status["last_pass_ok_unix"] and last > 0
                with store.read() as tx:
                    records = [r for r in audit.query(tx, limit=None) if r.decision == "loop_error"]
                assert len(records) == 1 and "driver bug" in records[0].evidence["error"]
                fake.broken = False  # fixed: it recovers, healthz is ok again
                assert _until(lambda: client.get("/healthz").status_code == 200)
                status = client.get("/api/status", headers=h).json()["loop"]
                assert status["error"] is None and status["healthy"] is True
                assert "driver bug" in status["last_error"]  # still shown, with its time
        finally:
            stop.set()
            loop.wake.set()
            th.join(15)
