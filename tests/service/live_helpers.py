"""Helpers of the live-loop tests: a small demo scenario, a loop on a manual clock, the invariants
a crash must not break, and a clean rebuild of the engine from the stored journal."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from fairshare.engine.events import Event
from fairshare.inputs.scenarios import ScenarioData
from fairshare.service.api.app import create_app
from fairshare.service.clusters.demo import DemoCluster, Scenario
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_engine import LiveEngine, Setup, new_engine, replay
from fairshare.service.loop.live_service import LiveService
from fairshare.service.loop.options import LoopOptions
from fairshare.service.loop.views import View, build_view
from fairshare.service.storage import audit, journal, portfolio, schema, tokens
from fairshare.service.storage.store import Store

EPOCH = 1796083200.0  # 2026-12-01T00:00:00Z


def small_scenario(jobs: int = 60, seed: int = 3) -> Scenario:
    """Two teams on two 8-GPU nodes; debug, train (resumable) and eval jobs; one hangs."""
    import random

    rng = random.Random(seed)
    policy = {
        "window": "7d",
        "gpu_rates": {"H100": 1.0},
        "tree": [
            {"name": "ml", "share": 60, "owner": "ml@x", "review": "2026-11-30", "hypothesis": "ships",
             "children": [{"name": "vision", "share": 50}, {"name": "nlp", "share": 50}]},
            {"name": "ops", "share": 40, "owner": "ops@x", "review": "2027-06-30"},
        ],
        "classes": {
            "debug": {"protected": "10m", "resumable": True, "checkpoint": "5m", "max_stall": "10m"},
            "train": {"protected": "30m", "max_protected": "2h", "resumable": True, "checkpoint": "20m",
                      "restore": "1m", "max_stall": "20m"},
            "eval": {"protected": "10m", "resumable": False, "deadline": "3h"},
        },
        "gates": {"exception_max_days": 14},
    }  # fmt: skip
    cluster = {
        "pools": [{"name": "h100", "count": 2, "gpus": 8, "gpu_type": "H100", "cpus": 64, "mem_gb": 512}],
        "epoch": "2026-12-01T00:00:00Z",
        "horizon": "2d",
    }
    records = []
    for i in range(jobs):
        group = rng.choice(["ml/vision", "ml/nlp", "ops"])
        cls = rng.choice(["debug", "debug", "train", "eval"])
        gpus = {"debug": 1, "train": rng.choice([4, 8]), "eval": 2}[cls]
        work = {"debug": 600.0, "train": 3 * 3600.0, "eval": 1800.0}[cls] * rng.uniform(0.5, 1.5)
        rec = {"job_id": f"{group.replace('/', '-')}-{cls}-{i:03d}", "group": group, "class": cls,
               "gpus": gpus, "submit": round(i * 900 * rng.uniform(0.5, 1.5), 1),
               "work": round(work, 1)}  # fmt: skip
        if i == 7:
            rec["stall_after"] = 600.0
            rec["class"], rec["gpus"] = "train", 4
        records.append(rec)
    return Scenario.from_data(ScenarioData("small", "test scenario", policy, cluster, records))


class ManualClock:
    def __init__(self, t: float = EPOCH) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_loop(store: Store, scenario: Scenario, clock: Callable[[], float], **opts: Any) -> SchedulerLoop:
    """A writer loop on `store` driving the demo cluster of `scenario` (the policy stored first)."""
    with store.write() as tx:
        if portfolio.current_policy(tx) is None:
            portfolio.put_policy(tx, scenario.policy_text, "test")
    holder: list[SchedulerLoop] = []

    def backend() -> DemoCluster:
        return DemoCluster(store, scenario, holder[0].resolve_submission)

    options = {"speed": 0.0, "forecast_s": 0.0, "publish_s": 0.0, **opts}
    loop = SchedulerLoop(store, backend, clock, LoopOptions(**options))
    holder.append(loop)
    assert loop.take_lock()
    loop.become_writer()
    return loop


def rebuild(store: Store, upto: int | None = None) -> LiveEngine:
    """A clean engine from the stored journal (up to seq `upto`)."""
    with store.read(snapshot=True) as tx:
        rows = [ev for ev in journal.events(tx) if upto is None or ev.seq <= upto]
        versions = {v.sha256: v.policy() for v in portfolio.policy_history(tx)}
    events = [Event.from_json(r.payload) for r in rows]
    engine = new_engine(Setup.from_event(events[0]), versions.__getitem__)
    replay(engine, events[1:])
    return engine


def view_of(engine: LiveEngine, now: float) -> View:
    return build_view(engine, version=1, role="test", backend="test", now=now, speed=1.0, order=(), why={},
                      forecasts={}, forecast_at=None, status={})  # fmt: skip


def check_invariants(store: Store, engine: LiveEngine, ledger_sums: bool = True) -> dict[str, int]:
    """What a crash must never break; returns counts for the caller to look at. `ledger_sums`:
    also compare the ledger's delivered usage with the stored intervals (not after a change of the
    tree, which takes a removed group's usage out of the ledger)."""
    with store.read(snapshot=True) as tx:
        verdict = audit.verify(tx)
        assert verdict.ok, verdict.reason
        runs = [
            dict(r._mapping)
            for r in tx.conn.execute(select(schema.demo_runs).order_by(schema.demo_runs.c.id))
        ]
        usage = {(iv.job, iv.t_from): iv for iv in journal.usage_between(tx, -math.inf, math.inf)}
        keys = journal.keys_since(tx, -math.inf)
        starts = {
            (r.job, r._mapping["t"])
            for r in tx.conn.execute(
                select(schema.audit.c.job, schema.audit.c.t).where(schema.audit.c.decision == "start")
            )
        }
    # the cluster never ran a job twice at once, and never started a job the loop had not decided
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_job.setdefault(r["job"], []).append(r)
    for job, rs in by_job.items():
        rs.sort(key=lambda r: r["t0"])
        for a, b in itertools.pairwise(rs):
            assert a["t_end"] is not None and a["t_end"] <= b["t0"], f"{job}: overlapping runs {a} {b}"
        for r in rs:
            assert (job, r["t0"]) in starts, f"{job}: a run at {r['t0']} without a committed start decision"
    # every run the cluster made up to the engine's instant is journaled once and charged once
    for r in runs:
        if r["t0"] > engine.t:
            continue
        key = f"start:{r['job']}:{r['t0']!r}"
        assert key in keys, f"run {r['job']}@{r['t0']} not journaled"
        iv = usage.get((r["job"], r["t0"]))
        assert iv is not None, f"run {r['job']}@{r['t0']} has no usage"
        assert iv.charge_rate == r["charge"]
    assert len(usage) == sum(1 for r in runs if r["t0"] <= engine.t), "usage rows without a cluster run"
    if not ledger_sums:
        return {"runs": len(runs), "usage": len(usage), "jobs": len(by_job)}
    # the ledger's delivered usage equals the stored intervals (nothing lost, nothing twice)
    ledger = view_of(engine, engine.t)
    leaf_of = {row.path: i for i, row in enumerate(ledger.tree)}
    charged = [0.0] * len(ledger.tree)
    for iv in usage.values():
        c = iv.charged(-math.inf, engine.t)
        for anc in engine.state.tree.leaf_ancestors[leaf_of[iv.leaf]]:
            charged[anc] += c
    for row, c in zip(ledger.tree, charged, strict=True):
        assert math.isclose(row.delivered_s, c, rel_tol=1e-9, abs_tol=1e-6), (row.path, row.delivered_s, c)
    return {"runs": len(runs), "usage": len(usage), "jobs": len(by_job)}


def demo_runs(store: Store) -> list[dict[str, Any]]:
    with store.read() as tx:
        return [dict(r._mapping) for r in tx.conn.execute(select(schema.demo_runs))]


def loads(text: str) -> Any:
    return json.loads(text)


@dataclass
class Live:
    client: TestClient
    loop: SchedulerLoop
    clock: ManualClock
    store: Store
    secrets: dict[str, str]

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secrets[who]}"}

    def get(self, who: str, path: str, **kw: Any) -> Any:
        return self.client.get(path, headers=self.h(who), **kw)

    def post(self, who: str, path: str, **kw: Any) -> Any:
        return self.client.post(path, headers=self.h(who), **kw)


def live_service(db_url: str) -> Iterator[Live]:
    clock = ManualClock()
    scenario = small_scenario(jobs=80)
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock)
        # a busy stretch: many jobs arrive in the first hours, so some wait
        end = clock.t + 5 * 3600
        while clock.t < end:
            clock.t += 300
            loop.cycle()
        loop.publish(force=True)
        secrets = {}
        with store.write() as tx:
            for name, role, node in (
                ("admin", "admin", None),
                ("viewer", "viewer", None),
                ("nlp", "member", "ml/nlp"),
            ):
                secrets[name] = tokens.create_token(tx, role, node, name, "setup")[1]
        service = LiveService(store, loop)
        service.start()
        try:
            with TestClient(
                create_app(store, live=service, auth_cache_s=5.0), raise_server_exceptions=False
            ) as client:
                yield Live(client, loop, clock, store, secrets)
        finally:
            service.stop()
