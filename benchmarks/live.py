"""Live-case benchmark: the engine state of a large cluster, driven as a service would drive it.

    .venv/bin/python benchmarks/live.py                 # 1,024 nodes x 8 GPUs, 6,000 running, 20,000 pending
    .venv/bin/python benchmarks/live.py --repeat 5 --strategy fairshare

The state is built through the engine's own events (no simulator): 200 leaves (10 programs x 20
projects), 6,000 jobs started on 8,192 GPUs and 20,000 pending, after 6 hours of usage so the
ledger has history. Then, each timed `--repeat` times on a fresh copy of that state (best reported):

    cold pass        snapshot + decide(explain=True): one pass with the whole order and a reason
                     for every pending job, as the service's first pass after a restart
    incremental      one run finishes; begin + finished + settle + snapshot + decide + apply: the
                     pass a service runs after a single event (no order asked)
    forecast         the start forecast of the last job in the fair-share order (engine.forecast)

Goals (issue 8): cold pass <= 100 ms, incremental pass <= 5 ms.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

from fairshare.core import JobRequest, Knobs, Node, TreeIndex, decide, get_strategy
from fairshare.engine import EngineSetup, EngineState
from fairshare.engine.forecast import forecast_starts

NODES, GPUS_PER_NODE, BLOCK = 1024, 8, 16
PROGRAMS, PROJECTS = 10, 20
RUNNING, PENDING = 6000, 20000


@dataclass(frozen=True)
class Group:
    name: str
    share: float
    children: tuple[Group, ...] = ()


def build(strategy: str, seed: int) -> EngineState:
    rng = random.Random(seed)
    tree = TreeIndex.build(
        [
            Group(
                f"p{p}",
                rng.randint(1, 10),
                tuple(Group(f"r{r}", rng.randint(1, 10)) for r in range(PROJECTS)),
            )
            for p in range(PROGRAMS)
        ]
    )
    nodes = tuple(
        Node(f"n-{i:04d}", "n", GPUS_PER_NODE, "H100", 224.0, 2048.0, f"n-b{i // BLOCK}")
        for i in range(NODES)
    )
    engine = EngineState(
        EngineSetup(tree, Knobs(), {"H100": 1.0}, nodes, 7 * 86400.0), get_strategy(strategy)
    )
    leaves = list(tree.leaves)
    seq = 0

    def job(submit: float, gpus: int) -> JobRequest:
        nonlocal seq
        leaf = rng.choice(leaves)
        seq += 1
        return JobRequest(
            id=f"j{seq:06d}",
            submit=submit,
            group=tree.paths[leaf],
            leaf=leaf,
            user=None,
            cls="train",
            gpus=gpus,
            nodes=1,
            gpu_types=None,
            cpus=None,
            mem_gb=None,
            estimate=rng.uniform(600.0, 8 * 3600.0),
            label="medium",
            deadline=None,
            protected=1800.0,
            protected_capped=False,
            resumable=True,
            checkpoint=1800.0,
            restore=120.0,
            startup=0.0,
            max_stall=3600.0,
            charge=float(gpus),
            seq=seq,
        )

    # 6,000 runs filling the 8,192 GPUs: 880 nodes with 2+2+1+1+1+1, 144 with 2+2+2+1+1
    engine.begin(0.0)
    six = RUNNING - 5 * NODES  # nodes holding six runs (the rest hold five)
    for node in range(NODES):
        for gpus in (2, 2, 1, 1, 1, 1) if node < six else (2, 2, 2, 1, 1):
            req = job(0.0, gpus)
            engine.submit(req)
            engine.started(req.id, ((node, gpus),), float(gpus))
    engine.settle()
    # six hours later, 20,000 jobs wait
    engine.begin(6 * 3600.0)
    for k in range(PENDING):
        engine.submit(job(6 * 3600.0 - PENDING + k, rng.choice((1, 1, 2, 4, 8))))
    engine.settle()
    return engine


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategy", default="fairshare")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--forecast-passes", type=int, default=200_000, help="bound on the forecast's passes")
    args = ap.parse_args()

    t0 = time.perf_counter()
    base = build(args.strategy, args.seed)
    build_s = time.perf_counter() - t0
    used = sum(g for v in base.running.values() for _, g in v.alloc)
    print(
        f"state: {NODES} nodes x {GPUS_PER_NODE} GPUs, {len(base.tree.leaves)} leaves, "
        f"{len(base.running):,} running on {used:,} GPUs, {len(base.pending):,} pending "
        f"(built in {build_s:.1f} s); strategy {args.strategy}"
    )

    copies = [copy.deepcopy(base) for _ in range(args.repeat)]

    def cold() -> Any:
        e = copies.pop()
        return decide(e.snapshot(), e.strategy, explain=True)

    cold_s, d = timed(cold, args.repeat)
    print(
        f"cold pass, order and why-pending: {1000 * cold_s:8.1f} ms  (goal <= 100 ms; "
        f"{len(d.order):,} ordered, {len(d.why_pending):,} reasons, {len(d.starts)} starts)"
    )

    # the incremental case: the state after that first pass, then one run finishes
    warm = copy.deepcopy(base)
    first = warm.apply(decide(warm.snapshot(), warm.strategy))
    for p in first.preempts:
        warm.preempted(p.job, p.reason, p.by, p.lost_gpu_s, 0.0)
    for s in first.starts:
        warm.started(s.job, s.alloc, s.charge)
    victims = sorted(warm.running)[: args.repeat]
    copies = [copy.deepcopy(warm) for _ in range(args.repeat)]
    samples: list[float] = []
    for jid in victims:
        e = copies.pop()
        t = time.perf_counter()
        e.begin(e.t + 60.0)
        e.finished(jid)
        e.settle()
        if e.pass_due():
            e.apply(decide(e.snapshot(), e.strategy))
        samples.append(time.perf_counter() - t)
    print(
        f"incremental pass after one finish:  {1000 * min(samples):8.1f} ms  (goal <= 5 ms; "
        f"median {1000 * statistics.median(samples):.1f} ms)"
    )

    last = d.order[-1]
    t = time.perf_counter()
    starts = forecast_starts(base, [last], max_passes=args.forecast_passes)
    fc_s = time.perf_counter() - t
    at = starts.get(last)
    when = f"starts at +{(at - base.t) / 3600:.1f} h" if at is not None else "no start within the pass bound"
    print(f"forecast of the last job in order: {fc_s:8.2f} s   ({when})")


if __name__ == "__main__":
    main()
