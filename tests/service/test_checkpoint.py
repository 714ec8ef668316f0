"""Checkpoints of the live engine: the writer stores them after its commits, a restart (writer or
follower) loads the newest valid one and replays the journal after it, and the engine equals a full
replay; bad checkpoints (another version, a wrong digest, unloadable) are skipped; the table is
pruned; a crash before or during a checkpoint loses nothing. Both backends."""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from fairshare.service.clusters.demo import DemoCluster
from fairshare.service.loop import checkpoint
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_engine import LiveEngine
from fairshare.service.loop.options import LoopOptions
from fairshare.service.storage import schema
from fairshare.service.storage.store import Store

from .live_helpers import ManualClock, check_invariants, make_loop, rebuild, small_scenario
from .test_loop import RaisingCrash


def run(loop: SchedulerLoop, clock: ManualClock, seconds: float, step: float = 300.0) -> None:
    end = clock.t + seconds
    while clock.t < end:
        clock.t = min(end, clock.t + step)
        loop.cycle()


MEMOS = ("_sides", "_owed", "_owed_key")  # caches filled on demand (equal inputs, equal answers)


def plain(x: Any, depth: int = 0) -> Any:
    """Everything an engine holds, as comparable plain values (functions and memos left out)."""
    assert depth < 60
    d = depth + 1
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.shape, x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if x is None or isinstance(x, str | int | float | bool | bytes):
        return x
    if isinstance(x, type(plain)) or (callable(x) and not hasattr(x, "__dict__")):
        return "<function>"
    if isinstance(x, dict):
        return {k: plain(v, d) for k, v in x.items()}
    if isinstance(x, list | tuple | deque):
        return (type(x).__name__, [plain(v, d) for v in x])
    if isinstance(x, set | frozenset):
        return (type(x).__name__, sorted((plain(v, d) for v in x), key=repr))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = [f.name for f in dataclasses.fields(x) if f.name not in MEMOS]
        return (type(x).__name__, {k: plain(getattr(x, k), d) for k in fields})
    if hasattr(x, "__dict__"):
        items = {k: v for k, v in vars(x).items() if k not in ("policies", "journal", *MEMOS)}
        return (type(x).__name__, {k: plain(v, d) for k, v in items.items()})
    slots = getattr(type(x), "__slots__", None)
    if slots is not None:
        return (type(x).__name__, {k: plain(getattr(x, k, None), d) for k in slots})
    return repr(x)


def _where(a: Any, b: Any, path: str = "") -> str:
    """The first place two plain values differ."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(map(repr, a.keys() ^ b.keys()))}"
        return next((_where(a[k], b[k], f"{path}.{k}") for k in a if a[k] != b[k]), path)
    if isinstance(a, tuple | list) and len(a) == len(b):
        return next(
            (_where(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), path
        )
    return f"{path}: {a!r:.200} != {b!r:.200}"


def assert_same(a: LiveEngine, b: LiveEngine) -> None:
    pa, pb = plain(a), plain(b)
    assert pa == pb, _where(pa, pb)


def headers(store: Store) -> list[checkpoint.Stored]:
    with store.read() as tx:
        return checkpoint.headers(tx)


def restarted(store: Store, scenario: Any, clock: ManualClock, **opts: Any) -> SchedulerLoop:
    return make_loop(store, scenario, clock, **opts)


def test_a_restart_from_a_checkpoint_and_the_tail_equals_a_full_replay(db_url: str) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock, checkpoint_events=150, checkpoint_keep=3)
        assert loop.ckpt.restored is None
        run(loop, clock, 16 * 3600)
        assert loop.ckpt.written >= 4
        stored = headers(store)
        assert len(stored) == 3  # pruned to the newest 3
        assert [h.seq for h in stored] == sorted((h.seq for h in stored), reverse=True)
        assert stored[0].seq == loop.ckpt.seq <= loop.last_seq
        assert all(h.version == checkpoint.code_version() for h in stored)
        run(loop, clock, 600)  # a short tail after the newest checkpoint
        last = loop.last_seq
        assert last > stored[0].seq or loop.ckpt.seq > stored[0].seq
        live = loop.engine
        assert live is not None
        loop._reset()

        again = restarted(store, scenario, clock, checkpoint_events=150)
        assert again.ckpt.restored is not None and again.ckpt.restored.id == headers(store)[0].id
        assert again.last_seq == last and again.replayed == last - again.ckpt.restored.seq
        assert again.replayed < last / 4
        e = again.engine
        assert e is not None and e.state.journal is again.buf
        full = rebuild(store)
        assert_same(e, full)
        assert_same(e, live)
        # the rebuilt writer schedules on, and stays equal to a replay
        run(again, clock, 4 * 3600)
        assert again.engine is not None
        check_invariants(store, again.engine)
        assert_same(again.engine, rebuild(store))
        again._reset()


def test_a_follower_starts_from_the_checkpoint(tmp_path: object) -> None:
    c = ManualClock()
    scenario = small_scenario()
    url = f"sqlite:///{tmp_path}/x.db"
    with Store.open(url, c) as store, Store.open(url, c) as store2:
        writer = make_loop(store, scenario, c, checkpoint_events=200)
        run(writer, c, 8 * 3600)
        reader = SchedulerLoop(
            store2, lambda: DemoCluster(store2, scenario, reader.resolve_submission), c, LoopOptions(speed=0)
        )
        assert not reader.take_lock()
        assert reader.catch_up()
        assert (
            reader.ckpt.restored is not None and reader.replayed == writer.last_seq - reader.ckpt.restored.seq
        )
        assert writer.engine is not None and reader.engine is not None
        assert_same(reader.engine, rebuild(store2))
        run(writer, c, 3600)
        reader.catch_up()
        assert_same(reader.engine, writer.engine)
        writer._reset()
        assert reader.take_lock()
        reader.become_writer()
        run(reader, c, 2 * 3600)
        check_invariants(store2, reader.engine)
        reader._reset()


def _corrupt(store: Store, id_: int, **values: Any) -> None:
    with store.write() as tx:
        tx.conn.execute(schema.checkpoint.update().where(schema.checkpoint.c.id == id_).values(**values))


def test_bad_checkpoints_are_ignored_and_the_journal_replayed(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        loop = make_loop(store, scenario, clock, checkpoint_events=200, checkpoint_keep=4)
        run(loop, clock, 12 * 3600)
        loop._reset()
        stored = headers(store)
        assert len(stored) == 4
        newest, second, third, fourth = stored
        with store.read() as tx:
            blob = checkpoint.state_of(tx, second.id)
        _corrupt(store, newest.id, state=blob[:-7] + b"1234567")  # its digest no longer matches
        _corrupt(store, second.id, version="fairshare 0.0.1; checkpoint 0")  # another version
        garbage = b"not a pickle"
        import hashlib

        _corrupt(store, third.id, state=garbage, sha256=hashlib.sha256(garbage).hexdigest())  # unloadable
        caplog.set_level(logging.WARNING, "fairshare.service.loop.checkpoint")
        again = restarted(store, scenario, clock, checkpoint_events=0, checkpoint_s=0)
        assert again.ckpt.restored is not None and again.ckpt.restored.id == fourth.id  # the newest valid one
        assert "its sha256 is" in caplog.text and "written by 'fairshare 0.0.1" in caplog.text
        assert "cannot be loaded" in caplog.text
        assert again.engine is not None
        assert_same(again.engine, rebuild(store))
        again._reset()

        _corrupt(store, fourth.id, sha256="0" * 64)  # none usable: the whole journal
        caplog.clear()
        again = restarted(store, scenario, clock, checkpoint_events=0, checkpoint_s=0)
        assert again.ckpt.restored is None and again.replayed == again.last_seq
        assert "replaying the whole journal" in caplog.text
        assert again.engine is not None
        assert_same(again.engine, rebuild(store))
        run(again, clock, 3600)
        assert [h.id for h in headers(store)] == [h.id for h in stored]  # both rules off: none written
        assert again.ckpt.written == 0
        again._reset()


def test_a_checkpoint_beyond_the_journal_is_ignored(tmp_path: object) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(f"sqlite:///{tmp_path}/x.db", clock) as store:
        loop = make_loop(store, scenario, clock, checkpoint_events=0, checkpoint_s=0)
        run(loop, clock, 6 * 3600)
        assert loop.engine is not None
        with store.write() as tx:
            checkpoint.write(tx, loop.last_seq + 10, loop.engine)
        loop._reset()
        again = restarted(store, scenario, clock)
        assert again.ckpt.restored is None
        assert again.engine is not None
        assert_same(again.engine, rebuild(store))
        again._reset()


def test_the_wall_clock_rule_and_pruning(tmp_path: object) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    wall = [0.0]
    with Store.open(f"sqlite:///{tmp_path}/x.db", clock) as store:
        with store.write() as tx:
            from fairshare.service.storage import portfolio

            portfolio.put_policy(tx, scenario.policy_text, "test")
        holder: list[SchedulerLoop] = []
        opts = LoopOptions(speed=0, forecast_s=0, publish_s=0, checkpoint_events=0, checkpoint_s=60,
                           checkpoint_keep=2)  # fmt: skip
        loop = SchedulerLoop(
            store,
            lambda: DemoCluster(store, scenario, holder[0].resolve_submission),
            clock,
            opts,
            wall=lambda: wall[0],
        )
        holder.append(loop)
        assert loop.take_lock()
        loop.become_writer()
        run(loop, clock, 3600)
        assert headers(store) == []  # no wall time has passed
        for _ in range(5):
            wall[0] += 61
            run(loop, clock, 600)
        assert loop.ckpt.written == 5
        stored = headers(store)
        assert len(stored) == 2 and stored[0].seq == loop.ckpt.seq
        with store.read() as tx:
            assert tx.conn.execute(select(schema.checkpoint.c.id)).all().__len__() == 2
            assert checkpoint.prune(tx, 1) == 1
        loop._reset()


class Kill(BaseException):
    """In-process stand-in for SIGKILL (not an Exception: nothing in the loop catches it)."""


@pytest.mark.parametrize("point", ["before_checkpoint", "mid_checkpoint"])
def test_a_crash_before_or_during_a_checkpoint_loses_nothing(db_url: str, point: str) -> None:
    clock = ManualClock()
    scenario = small_scenario()
    with Store.open(db_url, clock) as store:
        for round_ in range(3):
            loop = make_loop(
                store, scenario, clock, checkpoint_events=100, crash=RaisingCrash(point, 2 + round_, Kill)
            )
            before = headers(store)
            with pytest.raises(Kill):
                run(loop, clock, 12 * 3600, step=600)
            committed = loop.last_seq
            assert headers(store)[0].seq < committed  # the checkpoint of the last cycle is not there
            assert len(headers(store)) == min(3, len(before) + 1 + round_)  # the ones before it
            loop._reset()
        loop = make_loop(store, scenario, clock, checkpoint_events=100)
        assert loop.ckpt.restored is not None and loop.last_seq == committed
        assert loop.engine is not None
        assert_same(loop.engine, rebuild(store))
        run(loop, clock, 3600, step=600)
        check_invariants(store, loop.engine)
        assert_same(loop.engine, rebuild(store))
        loop._reset()


def test_serve_takes_the_checkpoint_cadence(tmp_path: object) -> None:
    from click.testing import CliRunner

    from fairshare.cli import main
    from fairshare.service.options import ServeOptions
    from fairshare.service.server import prepare

    db = f"sqlite:///{tmp_path}/x.db"
    p = prepare(ServeOptions(db, None, "demo:normal", None, checkpoint_events=1234))
    try:
        assert p.live.loop.opt.checkpoint_events == 1234
        assert p.live.loop.opt.checkpoint_keep == 3
    finally:
        p.store.close()
    res = CliRunner().invoke(
        main, ["serve", "--db", db, "--cluster", "demo:normal", "--checkpoint-every", "-1"]
    )
    assert res.exit_code == 2 and "--checkpoint-every" in res.output
