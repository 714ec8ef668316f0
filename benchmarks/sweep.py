"""A 12-variant sweep of the Philly window under fairshare, against the same 12 compares one after another.

    .venv/bin/python benchmarks/sweep.py [--workers N] [--out DIR]

Prints the sweep's wall time, the serial wall time of the 12 commands it recorded (each run alone,
in a fresh process, exactly as sweep.json lists them), their ratio (the issue's goal: <= 0.6 on
2 cores), and the sweep's own overhead per variant: its wall time minus the longest chain of
compare runs a worker did, spread over the variants (resolving the base, checking every variant,
writing inputs, starting processes, summarising, the decision report).
Figures: docs/benchmarks.md "Sweeps".
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

WINDOW = ["--trace", "philly", "--jobs", "20000:36000", "--round-gpus", "--clip-duration", "1s:24h"]
VARY = [
    "--vary", "window=3d,7d,14d",
    "--vary", "classes.train.protected=30m,1h",
    "--vary", "cluster.pools.philly.count=+0,+5",
]  # fmt: skip


def fairshare(*args: str) -> list[str]:
    return [sys.executable, "-m", "fairshare.cli", *args]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    root = a.out or Path(tempfile.mkdtemp(prefix="fairshare-sweep-bench-"))
    out = root / "sweep"
    workers = ["--workers", str(a.workers)] if a.workers else []
    t0 = time.perf_counter()
    subprocess.run(
        fairshare("sweep", *WINDOW, *VARY, "--policies", "fairshare", *workers, "--out", str(out)),
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    swept = time.perf_counter() - t0
    spec = orjson.loads((out / "sweep.json").read_bytes())
    commands = spec["commands"]
    serial_each = []
    for vid, cmd in commands.items():
        argv = shlex.split(cmd)[1:]
        argv[argv.index("--out") + 1] = str(root / "serial" / vid)
        t = time.perf_counter()
        subprocess.run(fairshare(*argv), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        serial_each.append(time.perf_counter() - t)
    serial = sum(serial_each)
    n = len(commands)
    cores = a.workers or len(__import__("os").sched_getaffinity(0))
    ideal = max(serial / cores, *serial_each)
    print(f"variants: {n}")
    print(f"sweep (all cores): {swept:.1f} s")
    each = f"each {min(serial_each):.1f}-{max(serial_each):.1f} s"
    print(f"the same {n} compares one after another: {serial:.1f} s ({each})")
    print(f"ratio: {swept / serial:.2f} (goal <= 0.60)")
    overhead = (swept - ideal) / n
    print(
        f"sweep overhead per variant ((wall - ideal split over {cores} cores) / variants): {overhead:.2f} s"
    )


if __name__ == "__main__":
    main()
