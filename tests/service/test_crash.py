"""Crash safety (DESIGN §5, issue 11): `fairshare serve` on the demo cluster, killed with SIGKILL at
random instants and at named points of its write-ahead cycle (mid-transaction among them), restarted
each time on the same database. Afterwards: the audit chain verifies, no committed usage is lost or
charged twice, no job was started twice, every run the cluster made had a committed decision, and
the service's ledger equals a clean replay of the stored journal."""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from fairshare.service.clusters.demo import DemoCluster, Scenario
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.options import LoopOptions
from fairshare.service.storage import tokens
from fairshare.service.storage.store import Store

from .live_helpers import ManualClock, check_invariants, rebuild, view_of

pytestmark = pytest.mark.slow

KILLS = 24
SPEED = 4000.0  # simulated seconds per second: the whole test stays inside the 7-day window
CHECKPOINT_EVERY = 20  # journal events: restarts start from checkpoints, kills hit them


def start(db: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-c", "from fairshare.cli import main; main()", "serve", "--db", db,
           "--cluster", "demo:eight-gpu", "--speed", str(SPEED), "--port", "0",
           "--checkpoint-every", str(CHECKPOINT_EVERY)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("listening on "):
            return proc, line.split()[-1].rstrip("/")
    proc.kill()
    proc.wait()
    pytest.fail(f"serve did not start: {''.join(lines)}")


def test_serve_killed_at_random_points_loses_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    rng = random.Random(11)
    base_env = {k: v for k, v in os.environ.items() if k != "FAIRSHARE_CRASH_AT"}
    kills = by_itself = 0
    points = ["mid_commit", "after_commit", "after_act", "before_checkpoint", "mid_checkpoint"]
    while kills < KILLS:
        env = dict(base_env)
        if kills % 3 == 2:  # every third run dies at a point of the cycle, mid-transaction too
            point = points[(kills // 3) % len(points)]
            n = rng.randint(1, 3) if "checkpoint" in point else rng.randint(1, 25)
            env["FAIRSHARE_CRASH_AT"] = f"{point}:{n}"
        proc, _ = start(db, env)
        try:
            proc.wait(timeout=rng.uniform(0.2, 1.5))
            by_itself += 1  # it reached its crash point
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stdout.read() if proc.stdout else ""
        if proc.stdout is not None:
            proc.stdout.close()
        kills += 1
    assert by_itself >= 3, "the crash points were never reached"

    # one more run, stopped cleanly after its views are read
    with Store.open(db, time.time) as store, store.write() as tx:
        secret = tokens.create_token(tx, "viewer", None, "crash-test", "test")[1]
    proc, url = start(db, base_env)
    try:
        headers = {"Authorization": f"Bearer {secret}"}
        tree: dict[str, Any] = {}
        for _ in range(100):
            tree = httpx.get(f"{url}/api/tree", headers=headers, timeout=10).json()
            if tree.get("role") == "writer":
                break
            time.sleep(0.1)
        assert tree["role"] == "writer"
        status = httpx.get(f"{url}/api/status", headers=headers, timeout=10).json()
        audit_ok = httpx.get(f"{url}/healthz", timeout=10).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert audit_ok["ok"] and status["loop"]["error"] is None
    assert status["loop"]["checkpoint_seq"] > 0

    with Store.open(db, time.time) as store:
        # the service's ledger is the clean replay of its journal
        clean = view_of(rebuild(store, upto=tree["journal_seq"]), tree["as_of_t"])
        for node, row in zip(tree["nodes"], clean.tree, strict=True):
            for key, value in (("owed_gpu_h", row.owed_s), ("delivered_gpu_h", row.delivered_s),
                               ("debt_gpu_h", row.debt_s)):  # fmt: skip
                assert math.isclose(node[key], value / 3600, rel_tol=1e-12, abs_tol=1e-9), (node["path"], key)
        # a last writer, at the journal's last instant: what the cluster did is all journaled and charged
        engine = rebuild(store)
        clock = ManualClock(engine.t)
        scenario = Scenario.load("eight-gpu")
        holder: list[SchedulerLoop] = []
        loop = SchedulerLoop(
            store,
            lambda: DemoCluster(store, scenario, holder[0].resolve_submission),
            clock,
            LoopOptions(speed=0),
        )
        holder.append(loop)
        assert loop.take_lock()
        loop.become_writer()
        assert loop.ckpt.restored is not None  # from the newest checkpoint: equal to the full replay
        assert (
            np.array_equal(loop.engine.state.ledger.sums, engine.state.ledger.sums) if loop.engine else False
        )
        loop.cycle()
        assert loop.engine is not None
        counts = check_invariants(store, loop.engine)
        loop._reset()
    assert counts["runs"] > 50, counts
    assert engine.t - scenario.epoch < 6.5 * 86400, (
        "the run left the window: the ledger check needs it inside"
    )
