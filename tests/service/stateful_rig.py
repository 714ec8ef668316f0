"""The service as an operator runs it, for the stateful test (test_stateful.py): one database, the
cluster (which outlives every serve: the demo cluster's memory is in its tables, the fake Slurm is
an object), the serving processes — a writer with its API, perhaps a reader following it — each on
a Store of its own, as separate processes would be.

A SIGTERM is the loop's orderly stop (the cycle finished, the lock released); a SIGKILL is the
process gone at a point of its cycle (`RaisingCrash`: the exception unwinds open transactions as
the database rolls back a dead connection's) or between cycles; its lock goes with it.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import numpy as np
import yaml
from fastapi.testclient import TestClient

from fairshare.service.api.app import create_app
from fairshare.service.clusters.backend import Backend
from fairshare.service.clusters.demo import DemoCluster
from fairshare.service.clusters.slurm_cluster import SlurmCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_service import LiveService
from fairshare.service.loop.options import LoopOptions
from fairshare.service.loop.requests import CrashPoints
from fairshare.service.options import SlurmOptions
from fairshare.service.storage import audit, journal, portfolio, tokens
from fairshare.service.storage.store import Store
from fairshare.slurm.fake_client import FakeSlurm

from .conftest import Clock
from .live_helpers import EPOCH, check_invariants, rebuild, small_scenario, view_of
from .slurm_helpers import POLICY as SLURM_POLICY

START_S = 10.0  # a (re)started serve must be scheduling within this many wall seconds

# per backend: the groups jobs go to, the classes, the tokens' nodes, the tree's variants
LEAVES = {"demo": ["ml/vision", "ml/nlp", "ops"], "slurm": ["product", "research", "platform"]}
CLASSES = ["debug", "train", "eval"]
MEMBER = {"demo": "ml/nlp", "slurm": "research"}
OWNER = {"demo": "ml", "slurm": "product"}


class Killed(Exception):
    """The process died here (an in-process SIGKILL)."""


class KillAt(CrashPoints):
    def __init__(self, point: str) -> None:
        super().__init__(None)
        self.point, self.left = point, 1

    def __call__(self, point: str) -> None:
        if point == self.point:
            raise Killed(point)


class Serve:
    """One `fairshare serve` process: its Store, its loop, its API."""

    def __init__(self, rig: ServiceRig, crash: CrashPoints | None = None) -> None:
        self.rig = rig
        self.store = Store.open(rig.url, rig.clock)
        opts = LoopOptions(
            speed=0, forecast_s=3600.0, publish_s=0.0, poll_s=15.0, checkpoint_events=rig.checkpoint_events
        )
        if crash is not None:
            opts.crash = crash
        self.loop = SchedulerLoop(self.store, self._backend, rig.clock, opts)
        self.live = LiveService(self.store, self.loop)
        self.live.wait_s = 0.0  # the test drives the loop: a job action does not wait for it
        self.client = TestClient(create_app(self.store, live=self.live), raise_server_exceptions=False)
        self.client.__enter__()

    def _backend(self) -> Backend:
        rig, loop = self.rig, self.loop
        if rig.kind == "demo":
            return DemoCluster(self.store, rig.scenario, loop.resolve_submission)
        assert rig.fake is not None
        with self.store.read() as tx:
            cur = portfolio.current_policy(tx)
        assert cur is not None
        return SlurmCluster(
            rig.fake, loop.policy(cur.sha256), lambda: loop.engine, SlurmOptions(grace_s=30.0),
            clock=rig.clock, policy_of=loop.policy,
        )  # fmt: skip

    def become_writer(self) -> float:
        """Take the lock, rebuild, run the first cycle: the wall seconds it took."""
        t0 = time.monotonic()
        assert self.loop.take_lock(), self.loop.holder
        self.loop.become_writer()
        self.loop.cycle()
        self.loop.publish(force=True)
        took = time.monotonic() - t0
        assert self.loop.role == "writer" and self.loop.error is None, self.loop.error
        status = self.api("admin", "GET", "/api/status")
        assert status["role"] == "writer", status
        return took

    def follow(self) -> None:
        assert not self.loop.take_lock() and "writer lock" in (self.loop.holder or "")
        assert self.loop.catch_up()
        self.loop.role = "reader"
        self.loop.publish(force=True)

    def api(self, who: str, method: str, path: str, expect: int | tuple[int, ...] = 200, **kw: Any) -> Any:
        secret = self.rig.secrets[who]
        r = self.client.request(method, path, headers={"Authorization": f"Bearer {secret}"}, **kw)
        want = (expect,) if isinstance(expect, int) else expect
        assert r.status_code in want, (method, path, who, r.status_code, r.text[:400])
        return r.json() if r.content else None

    def die(self, orderly: bool) -> None:
        """SIGTERM (orderly) or SIGKILL: either way the lock and the connections go with it."""
        self.client.__exit__(None, None, None)
        self.loop._reset()
        self.store.close()


class ServiceRig:
    def __init__(self, url: str, kind: str, checkpoint_events: int = 40) -> None:
        self.url, self.kind, self.checkpoint_events = url, kind, checkpoint_events
        self.clock = Clock(EPOCH)
        self.scenario = small_scenario(jobs=10, seed=5)
        self.fake = FakeSlurm.dev(self.clock) if kind == "slurm" else None
        self.base_policy = yaml.safe_load(self.scenario.policy_text if kind == "demo" else SLURM_POLICY)
        self.secrets: dict[str, str] = {}
        self.job_ids: list[str] = []  # jobs submitted (API ids, or Slurm ids as text)
        self.exception_ids: list[int] = []
        self.token_ids: list[tuple[int, str]] = []  # extra tokens made through the API: (id, who)
        self.submitted = 0
        self.starts: list[float] = []  # wall seconds each start took
        self.tree_changed = False  # a pushed tree removed a group: its usage left the ledger
        with Store.open(url, self.clock) as store, store.write() as tx:
            portfolio.put_policy(tx, yaml.safe_dump(self.base_policy, sort_keys=False), "test")
            for who, role, node in (
                ("admin", "admin", None),
                ("viewer", "viewer", None),
                ("member", "member", MEMBER[kind]),
                ("owner", "owner", OWNER[kind]),
            ):
                self.secrets[who] = tokens.create_token(tx, role, node, who, "setup")[1]
        self.writer: Serve | None = Serve(self)
        self.starts.append(self.writer.become_writer())
        self.reader: Serve | None = None

    @property
    def w(self) -> Serve:
        assert self.writer is not None
        return self.writer

    # ------------------------------------------------------------------ time and processes
    def tick(self, seconds: float) -> None:
        """Time passes in cycles of at most 10 minutes; Slurm's own scheduler runs before each."""
        end = self.clock.t + seconds
        while self.clock.t < end:
            self.clock.t = min(end, self.clock.t + 600.0)
            if self.fake is not None:
                self.fake.schedule()
            self.w.loop.cycle()
        self.w.loop.publish(force=True)
        if self.reader is not None:  # it follows the journal every second
            self.reader.loop.catch_up()

    def restart(self, how: str, point: str | None = None, seconds: float = 300.0) -> None:
        """The writer stops (SIGTERM) or is killed (SIGKILL at `point` of a cycle within `seconds`,
        or between cycles); a new serve starts on the same database."""
        old = self.w
        if how == "kill" and point is not None:
            old.loop.opt.crash = KillAt(point)
            with contextlib.suppress(Killed):
                self.tick(seconds)
        old.die(orderly=how == "term")
        self.writer = None
        self.clock.t += 30.0  # it is down a while
        new = Serve(self)
        self.writer = new
        self.starts.append(new.become_writer())

    def start_reader(self) -> None:
        if self.reader is None:
            self.reader = Serve(self)
            self.reader.follow()

    def reader_takes_over(self, kill: bool) -> None:
        assert self.reader is not None
        self.w.die(orderly=not kill)
        self.writer, self.reader = self.reader, None
        self.clock.t += 5.0
        self.starts.append(self.w.become_writer())

    def close(self) -> None:
        for s in (self.reader, self.writer):
            if s is not None:
                s.die(orderly=True)
        self.reader = self.writer = None

    # ------------------------------------------------------------------ policies
    def policy_text(self, share: int, tree: str, drop_class: str | None, window: str) -> str:
        data = yaml.safe_load(yaml.safe_dump(self.base_policy))
        data["window"] = window
        data["tree"][0]["share"] = share
        if tree == "added":
            top = data["tree"][0]
            if "children" in top:
                top["children"].append({"name": "audio", "share": 20})
            else:
                data["tree"].append({"name": "extra", "share": 10, "owner": "x@x", "review": "2027-06-30"})
        elif tree == "removed":
            top = data["tree"][0]
            if "children" in top:
                top["children"] = top["children"][1:]
            else:
                data["tree"] = data["tree"][:-1]
        if drop_class is not None:
            del data["classes"][drop_class]
        return str(yaml.safe_dump(data, sort_keys=False))

    # ------------------------------------------------------------------ what must always hold
    def check(self) -> None:
        loop = self.w.loop
        e = loop.engine
        assert loop.role == "writer" and e is not None and loop.error is None, loop.error
        assert not loop.buf, "the writer left engine events uncommitted"
        store = self.w.store
        with store.read(snapshot=True) as tx:
            verdict = audit.verify(tx)
            assert verdict.ok, verdict.reason
        clean = rebuild(store)  # the ledger equals a clean replay of the journal
        assert clean.t == e.t
        assert np.array_equal(clean.state.ledger.sums, e.state.ledger.sums)
        assert np.array_equal(clean.unallocated.ledger.sums, e.unallocated.ledger.sums)
        assert set(clean.state.pending.jobs) == set(e.state.pending.jobs) and set(clean.state.running) == set(
            e.state.running
        )
        assert {k: v.state for k, v in clean.info.items()} == {k: v.state for k, v in e.info.items()}
        if self.kind == "demo":
            check_invariants(
                store, e, ledger_sums=not self.tree_changed
            )  # no job started twice, no usage lost or charged twice
        else:
            self._check_slurm(store)
        if self.reader is not None:
            r = self.reader.loop
            r.catch_up()  # a follower reads the journal every second
            assert r.engine is not None and r.engine.t == e.t
            assert np.array_equal(r.engine.state.ledger.sums, e.state.ledger.sums)
        assert max(self.starts) < START_S, self.starts

    def _check_slurm(self, store: Store) -> None:
        """Every Slurm run is journaled started once and charged once, over its whole length."""
        assert self.fake is not None
        e = self.w.loop.engine
        assert e is not None
        with store.read(snapshot=True) as tx:
            usage = journal.usage_between(tx, -math.inf, math.inf)
        seen = [(iv.job, iv.t_from) for iv in usage]
        assert len(seen) == len(set(seen)), "a run charged twice"
        runs = self.fake.read_runs(0, self.clock.t)
        mapped = [r for r in runs if any(iv.job == str(r.job_id) for iv in usage) or str(r.job_id) in e.info]
        for run in mapped:
            mine = [
                iv
                for iv in usage
                if iv.job == str(run.job_id) and run.start <= iv.t_from <= run.start + 600.5
            ]
            assert len(mine) == 1, (run, mine)
            if run.end is not None and run.end < e.t:
                assert mine[0].t_to is not None and abs(mine[0].t_to - run.end) <= 600.5, (run, mine)
        assert len(usage) == len(mapped), "usage without a Slurm run"
        if self.tree_changed:
            return
        ledger = view_of(e, e.t)
        leaf_of = {row.path: i for i, row in enumerate(ledger.tree)}
        charged = [0.0] * len(ledger.tree)
        for iv in usage:
            if iv.leaf in leaf_of:
                for anc in e.state.tree.leaf_ancestors[leaf_of[iv.leaf]]:
                    charged[anc] += iv.charged(-math.inf, e.t)
        for row, c in zip(ledger.tree, charged, strict=True):
            assert math.isclose(row.delivered_s, c, rel_tol=1e-9, abs_tol=1e-6), (
                row.path,
                row.delivered_s,
                c,
            )
