"""Do two versions of the code replay byte-identically? Every built-in scenario and the Philly window
(README), under every strategy.

    .venv/bin/python benchmarks/same_outputs.py run OUT            # this checkout's outputs into OUT
    .venv/bin/python benchmarks/same_outputs.py diff OLD NEW       # compare two such folders

`run` writes OUT/scenarios (`compare --scenario all`) and OUT/philly (`compare --trace philly --jobs
20000:36000 --round-gpus --clip-duration 1s:24h`), both with `--policies` set to every strategy.
For the old code, run the same command with an old checkout's `src` first on PYTHONPATH (a
`git worktree add /tmp/old <commit>`, then `PYTHONPATH=/tmp/old/src`). `diff` compares
events.jsonl, decisions.jsonl and metrics.json of every (scenario, strategy) folder byte for byte,
prints one line per difference and exits 1 if there is one (or if a folder is only on one side).
The trace is read from $FAIRSHARE_TRACES (default ../shared/traces).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

FILES = ("events.jsonl", "decisions.jsonl", "metrics.json")
STRATEGIES = "fairshare,fifo,priority-labels,slurm-multifactor,slurm-multifactor-firstfit"
RUNS = {
    "scenarios": ["--scenario", "all"],
    "philly": ["--trace", "philly", "--jobs", "20000:36000", "--round-gpus", "--clip-duration", "1s:24h"],
}


def run(out: Path) -> None:
    for name, args in RUNS.items():
        cmd = [sys.executable, "-m", "fairshare.cli", "compare", *args, "--policies", STRATEGIES]
        cmd += ["--out", str(out / name)]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def replays(root: Path) -> set[Path]:
    """The folders under root that hold a replay's outputs, relative to root."""
    return {p.parent.relative_to(root) for p in root.rglob("metrics.json")}


def diff(old: Path, new: Path) -> list[str]:
    a, b = replays(old), replays(new)
    problems = [f"only in {old}: {p}" for p in sorted(a - b)]
    problems += [f"only in {new}: {p}" for p in sorted(b - a)]
    for rel in sorted(a & b):
        for name in FILES:
            x, y = old / rel / name, new / rel / name
            if x.exists() != y.exists() or (x.exists() and x.read_bytes() != y.read_bytes()):
                problems.append(f"differs: {rel / name}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.out)
        return 0
    problems = diff(args.old, args.new)
    for line in problems:
        print(line)
    n = len(replays(args.old) & replays(args.new))
    print(f"{n} replays compared ({', '.join(FILES)}): {'identical' if not problems else 'DIFFERENT'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
