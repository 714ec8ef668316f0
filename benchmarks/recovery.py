"""Recovery benchmark: how long the live service takes to rebuild its engine from the database,
replaying the whole journal versus loading the newest checkpoint and replaying the tail after it.

    .venv/bin/python benchmarks/recovery.py                       # the normal demo, 4 simulated days
    .venv/bin/python benchmarks/recovery.py --days 1 --step 60    # a smaller journal
    .venv/bin/python benchmarks/recovery.py --quick               # a smoke run

It runs the scheduler loop in this process on a demo cluster (`serve --demo`'s backend) with a
manual clock, a cycle every --step simulated seconds, into a temp SQLite database without
checkpoints; then writes one checkpoint and runs --tail-hours more (the journal tail). Then, as a
restarting service or a follower does (SchedulerLoop.catch_up on a fresh loop): the rebuild with the
checkpoint, and, after deleting the checkpoint, the full replay; each --repeat times (the best is
reported), and checks that both engines agree.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from fairshare.service.clusters.demo import DemoCluster, Scenario
from fairshare.service.loop import checkpoint
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.options import LoopOptions
from fairshare.service.storage import portfolio, schema
from fairshare.service.storage.store import Store


class ManualClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def writer(store: Store, scenario: Scenario, clock: ManualClock) -> SchedulerLoop:
    with store.write() as tx:
        portfolio.put_policy(tx, scenario.policy_text, "benchmark")
    holder: list[SchedulerLoop] = []
    opts = LoopOptions(
        speed=0.0, forecast_s=1e9, publish_s=1e9, refresh_s=1e9, checkpoint_events=0, checkpoint_s=0
    )
    loop = SchedulerLoop(
        store, lambda: DemoCluster(store, scenario, holder[0].resolve_submission), clock, opts
    )
    holder.append(loop)
    assert loop.take_lock()
    loop.become_writer()
    return loop


def rebuild(store: Store, scenario: Scenario, clock: ManualClock) -> tuple[float, SchedulerLoop]:
    """A fresh follower's catch_up: the recovery path (with the checkpoint if one is stored)."""
    loop = SchedulerLoop(
        store, lambda: DemoCluster(store, scenario, loop.resolve_submission), clock, LoopOptions()
    )
    t0 = time.perf_counter()
    assert loop.catch_up()
    return time.perf_counter() - t0, loop


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="normal")
    ap.add_argument("--days", type=float, default=4.0, help="simulated days before the checkpoint")
    ap.add_argument("--tail-hours", type=float, default=2.0, help="simulated hours after it")
    ap.add_argument("--step", type=float, default=15.0, help="simulated seconds between cycles")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="6 simulated hours, 1 repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.days, args.tail_hours, args.repeat = 0.25, 0.5, 1
    scenario = Scenario.load(args.scenario)
    folder = tempfile.mkdtemp(prefix="fairshare-recovery-")
    db = f"sqlite:///{Path(folder) / 'recovery.db'}"
    clock = ManualClock(scenario.epoch)
    print(f"fairshare recovery benchmark: demo:{args.scenario}, {args.days} days + {args.tail_hours} h tail, "
          f"a cycle every {args.step:g} simulated s; {platform.python_implementation()} "
          f"{platform.python_version()}, {os.cpu_count()} CPUs")  # fmt: skip
    with Store.open(db, clock) as store:
        loop = writer(store, scenario, clock)
        t0 = time.perf_counter()

        def run(seconds: float) -> None:
            end = clock.t + seconds
            while clock.t < end:
                clock.t = min(end, clock.t + args.step)
                loop.cycle()

        run(args.days * 86400)
        built = time.perf_counter() - t0
        assert loop.engine is not None
        t1 = time.perf_counter()
        with store.write() as tx:
            stored = checkpoint.write(tx, loop.last_seq, loop.engine)
        wrote = time.perf_counter() - t1
        run(args.tail_hours * 3600)
        events, tail = loop.last_seq, loop.last_seq - stored.seq
        jobs = len(loop.engine.info)
        loop._reset()
        print(f"journal: {events:,} events ({jobs:,} jobs) built in {built:.1f} s; checkpoint at seq "
              f"{stored.seq:,}: {stored.size / 1e6:.2f} MB compressed, written in {wrote:.3f} s; "
              f"tail {tail:,} events")  # fmt: skip

        with_ckpt: list[float] = []
        for _ in range(args.repeat):
            took, fast = rebuild(store, scenario, clock)
            assert fast.ckpt.restored is not None and fast.replayed == tail
            with_ckpt.append(took)
        with store.write() as tx:
            tx.conn.execute(schema.checkpoint.delete())
        full: list[float] = []
        for _ in range(args.repeat):
            took, slow = rebuild(store, scenario, clock)
            assert slow.ckpt.restored is None and slow.replayed == events
            full.append(took)
        a, b = fast.engine, slow.engine
        assert a is not None and b is not None
        same: dict[str, Any] = {
            "t": a.t == b.t,
            "ledger": bool(np.array_equal(a.state.ledger.sums, b.state.ledger.sums)),
            "jobs": {k: v.state for k, v in a.info.items()} == {k: v.state for k, v in b.info.items()},
            "running": set(a.state.running) == set(b.state.running),
        }
        assert all(same.values()), same
    print(f"rebuild, full replay of {events:,} events: {min(full):.2f} s (best of {len(full)}; "
          f"{events / min(full):,.0f} events/s)")  # fmt: skip
    print(f"rebuild, checkpoint + {tail:,} events: {min(with_ckpt):.3f} s (best of {len(with_ckpt)})")
    print(f"speed-up: {min(full) / min(with_ckpt):.0f}x; engines agree: {', '.join(same)}")
    for p in Path(folder).glob("*"):
        p.unlink()
    os.rmdir(folder)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
