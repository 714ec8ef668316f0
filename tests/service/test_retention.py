"""Retention in the live service: a job's record (and a rejected submission's) is dropped once it
ended more than the retention period (the policy's window, 7d here) ago, inside a journaled `begin`;
a rebuild from the journal and a checkpoint's restore equal the live engine; a backend reporting a
pruned job's submission again does not submit it again; the API answers 404 and points to the audit."""

from __future__ import annotations

import pickle

import pytest
from fastapi.testclient import TestClient

from fairshare.service.api.app import create_app
from fairshare.service.clusters.backend import Finished, Submitted
from fairshare.service.clusters.fake import FakeCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_service import LiveService
from fairshare.service.storage import journal, tokens
from fairshare.service.storage.store import Store

from .conftest import T0, Clock, tick
from .live_helpers import rebuild
from .test_checkpoint import assert_same
from .test_fake_cluster import SPEC

DAY = 86400.0


def _ended_jobs(loop: SchedulerLoop, fake: FakeCluster, clock: Clock) -> None:
    """j0 runs and finishes at T0+100; `bad` is rejected (no such group); j1 and j2 keep running."""
    fake.push(
        Submitted(T0 + 10, "j0", SPEC),
        Submitted(T0 + 10, "j1", SPEC),
        Submitted(T0 + 10, "bad", {**SPEC, "group": "nope"}),
    )
    tick(loop, clock, 60)
    fake.push(Finished(T0 + 100, "j0"), Submitted(T0 + 100, "j2", SPEC))
    tick(loop, clock, 60)
    e = loop.engine
    assert e is not None and e.info["j0"].state == "done" and "bad" in e.rejected
    assert set(e.state.running) == {"j1", "j2"}


def _submits(store: Store) -> int:
    with store.read() as tx:
        return [ev.kind for ev in journal.events(tx)].count("submit")


@pytest.mark.parametrize(
    ("after", "kept"),
    [(6 * DAY, True), (7 * DAY - 300, True), (7 * DAY + 300, False)],
)
def test_records_pruned_after_the_retention_period(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock, after: float, kept: bool
) -> None:
    loop, fake, store = fake_loop
    _ended_jobs(loop, fake, clock)
    e = loop.engine
    assert e is not None and e.retention == 7 * DAY
    tick(loop, clock, T0 + 100 + after - clock.t)
    assert ("j0" in e.info) is kept and ("bad" in e.rejected) is kept
    assert {"j1", "j2"} <= set(e.info)  # running: kept whatever their age
    assert "j0" not in e.state.states  # the engine dropped its state when it finished
    # a rebuild from the journal, and a checkpoint's restore, equal the live engine
    assert_same(rebuild(store), e)
    restored = pickle.loads(pickle.dumps(e))
    restored.policies = e.policies
    assert_same(restored, e)


@pytest.mark.parametrize("late", [True, False])
def test_a_pruned_jobs_submission_reported_again_is_not_submitted(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock, late: bool
) -> None:
    loop, fake, store = fake_loop
    _ended_jobs(loop, fake, clock)
    tick(loop, clock, 8 * DAY)
    e = loop.engine
    assert e is not None and "j0" not in e.info and "bad" not in e.rejected
    before = _submits(store)
    fake.held.clear()  # the backend reports it once more, on its own (not with the rest of its past)
    t = T0 + 10 if late else clock.t + 30  # at its old instant, or as new
    fake.push(Submitted(t, "j0", SPEC), Submitted(t, "bad", {**SPEC, "group": "nope"}))
    tick(loop, clock, 60)
    tick(loop, clock, 60)
    assert "j0" not in e.info and "j0" not in e.state.pending.jobs and "bad" not in e.rejected
    assert _submits(store) == before
    fake.push(Submitted(clock.t + 10, "j9", SPEC))  # a new job still is
    tick(loop, clock, 60)
    assert "j9" in e.info and _submits(store) == before + 1


def test_the_api_answers_404_for_a_pruned_job(
    fake_loop: tuple[SchedulerLoop, FakeCluster, Store], clock: Clock
) -> None:
    loop, fake, store = fake_loop
    _ended_jobs(loop, fake, clock)
    with store.write() as tx:
        secret = tokens.create_token(tx, "viewer", None, "v", "setup")[1]
    h = {"Authorization": f"Bearer {secret}"}
    with TestClient(
        create_app(store, live=LiveService(store, loop)), raise_server_exceptions=False
    ) as client:
        assert client.get("/api/jobs/j0", headers=h).status_code == 200  # ended, kept
        tick(loop, clock, 8 * DAY)
        loop.publish(force=True)
        for path in ("/api/jobs/j0", "/api/jobs/j0/explain"):
            r = client.get(path, headers=h)
            assert r.status_code == 404, r.text
            assert "retention period" in r.text and "/api/decisions?job=j0" in r.text
        r = client.get("/api/jobs/j2", headers=h)  # still running
        assert r.status_code == 200
        r = client.get("/api/jobs/nobody", headers=h)
        assert r.status_code == 404 and "retention" not in r.text
        r = client.get("/api/decisions?job=j0", headers=h)
        assert r.status_code == 200 and "start" in r.text
