"""A loop that fails is visible (issue 18): /healthz 503 once no cycle completed for 3 poll
intervals, the last error and the last good cycle in /api/status, fairshare_loop_errors_total and
fairshare_last_pass_timestamp_seconds in /metrics, the error audited once however often it repeats,
and all of it clears when the loop works again. Both databases."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fairshare.service.api.app import create_app
from fairshare.service.clusters.backend import Observation, Submitted
from fairshare.service.clusters.fake import FakeCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_service import LiveService
from fairshare.service.loop.options import LoopOptions
from fairshare.service.storage import audit, portfolio, tokens
from fairshare.service.storage.store import Store

from .conftest import FAKE_NODES, POLICY, T0, Clock, tick


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


def test_an_exception_that_breaks_the_pass_is_set_aside_named_and_the_loop_goes_on(
    db_url: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stands in for an exception the engine cannot take (before issue 18 an extra share of 1e16 made
    every pass fail): the engine's apply raises while an exception of extra share 777 is in force."""
    from fairshare.service.loop import cycle, inforce

    real = inforce.apply_exceptions

    def breaking(e: Any, pol: Any, stored: Any, now: float, audits: Any) -> None:
        if any(x.extra_share == 777.0 and x.active(now) for x in stored):
            raise ZeroDivisionError("float division by zero")
        real(e, pol, stored, now, audits)

    monkeypatch.setattr(cycle, "apply_exceptions", breaking)
    fake = FakeCluster(FAKE_NODES)
    with Store.open(db_url, clock) as store:
        with store.write() as tx:
            portfolio.put_policy(tx, POLICY, "test")
            good = portfolio.create_exception(tx, "ml/vision", 5.0, clock.t + 86400, "a", "fine", "test")
        opts = LoopOptions(speed=0, forecast_s=0.0, publish_s=0.0, poll_s=0.1, refresh_s=0.1)
        loop = SchedulerLoop(store, lambda: fake, clock, opts)
        stop = threading.Event()
        th = threading.Thread(target=loop.run, args=(stop,), daemon=True)
        th.start()
        try:
            assert _until(lambda: loop.health.last_ok is not None)
            with store.write() as tx:
                bad = portfolio.create_exception(tx, "ml/nlp", 777.0, clock.t + 86400, "a", "breaks", "test")
            loop.wake.set()
            assert _until(lambda: bool(loop.health.set_aside))
            assert loop.health.set_aside[0]["exception"] == bad.id
            assert "ZeroDivisionError" in loop.health.set_aside[0]["error"]
            assert _until(lambda: loop.role == "writer" and loop.error is None and loop.health.repeats == 0)
            with store.read() as tx:
                assert not portfolio.get_exception(tx, bad.id).active(tx.now)
                assert portfolio.get_exception(tx, good.id).active(tx.now)  # the others stay
                ended = [r for r in audit.query(tx, limit=None) if r.decision == "exception_expired"]
            assert len(ended) == 1 and ended[0].evidence["exception"] == bad.id
            assert (
                "set aside" in ended[0].evidence["reason"]
                and "ZeroDivisionError" in ended[0].evidence["reason"]
            )
        finally:
            stop.set()
            loop.wake.set()
            th.join(15)


def test_a_submission_whose_resolution_breaks_is_set_aside_named_and_not_retried(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stands in for a bug resolving one job's spec (not an InputError): before, the pass failed on
    it at every cycle and no job was ever scheduled again."""
    from fairshare.service.loop.requests import Requests

    loop, fake, store = fake_loop
    real = Requests.build
    tried: list[str] = []

    def breaking(self: Requests, policy: Any, job_id: str, spec: Any, t: float, truth: bool = False) -> Any:
        tried.append(job_id)
        if job_id == "boom":
            raise ZeroDivisionError("float division by zero")
        return real(self, policy, job_id, spec, t, truth)

    monkeypatch.setattr(Requests, "build", breaking)
    spec = {"group": "ops", "class": "train", "gpus": 8, "estimate": 3600.0}
    fake.push(
        Submitted(T0 + 10, "ok1", spec), Submitted(T0 + 11, "boom", spec), Submitted(T0 + 12, "ok2", spec)
    )
    for _ in range(4):
        tick(loop, clock, 600)  # raised ZeroDivisionError at every cycle before
    e = loop.engine
    assert e is not None
    assert tried.count("boom") == 1  # set aside once, not retried every cycle
    assert {"ok1", "ok2"} <= set(e.info) and "boom" not in e.info
    assert "set aside" in e.rejected["boom"] and "ZeroDivisionError" in e.rejected["boom"]
    named = loop.status()["set_aside"]  # /api/status's loop
    assert [(x["job"], x["error"]) for x in named] == [("boom", "ZeroDivisionError: float division by zero")]
    with store.read() as tx:
        refused = [r for r in audit.query(tx, job="boom", limit=None) if r.decision == "submit_rejected"]
    assert len(refused) == 1 and "set aside" in refused[0].evidence["reason"]
    assert "ZeroDivisionError" in refused[0].evidence["reason"]
