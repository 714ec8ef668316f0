"""Site-import benchmark (issue 17, must-have 6): `fairshare import slurm` on 1,000,000 sacct rows.

    .venv/bin/python benchmarks/import_sacct.py                 # 1,000,000 rows, best of 1
    .venv/bin/python benchmarks/import_sacct.py --rows 100000 --repeat 3

Generates (seeded) a `sacct -a -X -P -D` file of the narrower column set of docs/own-cluster.md
on a 512-node cluster of two GPU types and 40 accounts: 1/2/4/8-GPU jobs and 2-4-node gangs, 2% of
jobs requeued once (two rows), 1% cancelled before they started, 1% CPU-only, arrays and het
components, ISO times. Plus the associations, settings and nodes files. Then runs the command in a
child process and reports its wall time and peak RSS (the child's ru_maxrss) against the targets
(60 s, 2 GB). Generation is not timed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 60.0
TARGET_MB = 2048.0
HEADER = (
    "JobID|Account|User|Partition|QOS|Submit|Eligible|Start|End|Elapsed|State|AllocTRES|ReqTRES|"
    "NNodes|NodeList|Timelimit"
)


def _t(x: float) -> str:
    return dt.datetime.fromtimestamp(x, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _dur(s: float) -> str:
    s = int(s)
    d, s = divmod(s, 86400)
    return (f"{d}-" if d else "") + f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def generate(folder: Path, rows: int, seed: int) -> Path:
    rng = random.Random(seed)
    nodes = [(f"a{i:03d}", "a100") for i in range(256)] + [(f"h{i:03d}", "h100") for i in range(256)]
    accounts = [f"acct{i:02d}" for i in range(40)]
    pools = {g: [n for n, t in nodes if t == g] for g in ("a100", "h100")}
    (folder / "nodes.txt").write_text(
        "".join(
            f"NodeName={n} Arch=x86_64 CoresPerSocket=64 CPUAlloc=0 CPUTot=128 Gres=gpu:{t}:8 "
            f"RealMemory=1024000 State=IDLE Partitions=gpu\n"
            for n, t in nodes
        )
    )
    assoc = ["Cluster|Account|User|ParentName|Share", "bench|root|||1"]
    for i, a in enumerate(accounts):
        assoc.append(f"bench|{a}||root|{10 + i}")
        assoc.extend(f"bench|{a}|u{a}{k}|{a}|1" for k in range(3))
    (folder / "assoc.txt").write_text("\n".join(assoc) + "\n")
    (folder / "config.txt").write_text(
        "Configuration data as of 2026-10-01T00:00:00\nClusterName             = bench\n"
        "PriorityType            = priority/multifactor\nPriorityDecayHalfLife   = 7-00:00:00\n"
        "PriorityCalcPeriod      = 00:05:00\nPriorityMaxAge          = 7-00:00:00\n"
        "PriorityWeightFairshare = 10000\nPriorityWeightAge       = 1000\n"
        "SchedulerParameters     = bf_interval=30,bf_continue\nSLURM_VERSION           = 23.02.7\n"
    )
    path = folder / "sacct.txt"
    t0 = dt.datetime(2026, 10, 1, tzinfo=dt.UTC).timestamp()
    written = 0
    job = 1000
    clock = t0
    with path.open("w", encoding="utf-8") as f:
        f.write(HEADER + "\n")
        while written < rows:
            job += 1
            clock += rng.expovariate(1 / 2.6)  # one month holds about 1M jobs
            a = rng.choice(accounts)
            user = f"u{a}{rng.randrange(3)}"
            kind = rng.random()
            n_nodes = rng.choice((2, 3, 4)) if kind < 0.03 else 1
            gpus = 8 * n_nodes if n_nodes > 1 else rng.choice((1, 1, 1, 2, 2, 4, 8))
            gtype = rng.choice(("a100", "h100"))
            pool = pools[gtype]
            start = clock + rng.expovariate(1 / 600)
            run = rng.lognormvariate(7.5, 1.2)
            limit = rng.choice((3600 * 4, 86400, 2 * 86400))
            job_id = (
                f"{job}_{rng.randrange(50)}"
                if kind > 0.95
                else f"{job}+{rng.randrange(2)}"
                if kind > 0.94
                else str(job)
            )
            first = rng.randrange(0, len(pool) - n_nodes)
            nodelist = pool[first] if n_nodes == 1 else f"{gtype[0]}[{first:03d}-{first + n_nodes - 1:03d}]"
            tres = (
                f"billing={gpus},cpu={gpus * 8},gres/gpu:{gtype}={gpus},gres/gpu={gpus},"
                f"mem={gpus * 64}G,node={n_nodes}"
            )
            req = tres
            part, qos = "gpu", rng.choice(("normal", "high", "debug"))
            if 0.03 <= kind < 0.04:  # cancelled before it started
                f.write(
                    f"{job_id}|{a}|{user}|{part}|{qos}|{_t(clock)}|{_t(clock)}|{_t(start)}|{_t(start)}|00:00:00|"
                    f"CANCELLED by 0||{req}|1|None assigned|{_dur(limit)}\n"
                )
                written += 1
                continue
            if 0.04 <= kind < 0.05:  # CPU-only
                tres = "billing=4,cpu=4,mem=8G,node=1"
                req = tres
            if 0.05 <= kind < 0.07 and written + 2 <= rows:  # requeued once
                end0 = start + run / 3
                f.write(
                    f"{job_id}|{a}|{user}|{part}|{qos}|{_t(clock)}|{_t(clock)}|{_t(start)}|{_t(end0)}|"
                    f"{_dur(end0 - start)}|REQUEUED|{tres}|{req}|{n_nodes}|{nodelist}|{_dur(limit)}\n"
                )
                written += 1
                start = end0 + 30
            end = start + min(run, limit)
            state = "COMPLETED" if run < limit else "TIMEOUT"
            f.write(
                f"{job_id}|{a}|{user}|{part}|{qos}|{_t(clock)}|{_t(clock)}|{_t(start)}|{_t(end)}|"
                f"{_dur(end - start)}|{state}|{tres}|{req}|{n_nodes}|{nodelist}|{_dur(limit)}\n"
            )
            written += 1
    return path


def run_once(folder: Path) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, the command's first line) of one import in a child process."""
    out = folder / "site"
    exe = str(Path(sys.executable).parent / "fairshare")
    cmd = [
        exe, "import", "slurm", "--sacct", str(folder / "sacct.txt"),
        "--assoc", str(folder / "assoc.txt"), "--config", str(folder / "config.txt"),
        "--nodes", str(folder / "nodes.txt"), "--out", str(out),
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"import failed (exit {done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024, done.stdout.strip().splitlines()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairshare-import-bench-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        path = generate(folder, args.rows, args.seed)
        size = path.stat().st_size / 1e6
        print(f"generated {args.rows:,} rows ({size:.0f} MB) in {time.perf_counter() - t:.1f}s")
        best, best_cpu, peak, summary = float("inf"), float("inf"), 0.0, ""
        for _ in range(args.repeat):
            wall, cpu, rss, summary = run_once(folder)
            best, best_cpu, peak = min(best, wall), min(best_cpu, cpu), max(peak, rss)
        print(summary)
        load = os.getloadavg()[0]
        ok = best <= TARGET_S and peak <= TARGET_MB
        print(
            f"import of {args.rows:,} sacct rows: {best:.1f}s wall, {best_cpu:.1f}s CPU (target "
            f"{TARGET_S:.0f}s), peak RSS {peak:.0f} MB (target {TARGET_MB:.0f} MB): "
            + ("ok" if ok else "OVER TARGET")
            + f"; load average {load:.1f} on {os.cpu_count()} CPUs"
        )
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
