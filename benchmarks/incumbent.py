"""slurm-multifactor's replay time against fairshare's on an overloaded generated month.

    .venv/bin/python benchmarks/incumbent.py                      # 1,000,000 jobs in 30 days
    .venv/bin/python benchmarks/incumbent.py --jobs 3000 --days 1.1 --nodes 0.5   # a quick one

The workload is benchmarks/workload_gen.py's mix with its arrival rate scaled so that `--jobs` jobs
arrive over `--days` days, on its fleet scaled by `--nodes` (default: the rate's scale x 0.8, so
the fleet gets about 1.05 times the work it can do and the queue holds thousands of jobs for
weeks, as at an overloaded site). Each policy is replayed in a fresh process; the script prints
replay CPU and wall seconds per policy and slurm-multifactor's ratio to fairshare (issue 17 asks
for at most 3). `--out DIR` also writes each replay's outputs (events.jsonl, decisions.jsonl,
metrics.json) under DIR/<policy>, to compare two versions of the code byte for byte.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CHILD_FLAG = "--child"


def _scaled(jobs: int, days: float, nodes: float | None, seed: int) -> object:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import workload_gen as wg

    rate = jobs / days / wg.jobs_per_day()
    scale = rate * 0.8 if nodes is None else nodes
    wg.LOAD = wg.LOAD * rate
    cluster = copy.deepcopy(wg.CLUSTER)
    for pool in cluster["pools"]:  # whole blocks of 16 nodes, at least one
        pool["count"] = max(16, round(pool["count"] * scale / 16) * 16)
    wg.CLUSTER = cluster
    return wg.generate(jobs, seed)


def child(policy: str, jobs: int, days: float, nodes: float | None, seed: int, out: str) -> None:
    from fairshare.inputs.scenarios import ScenarioData
    from fairshare.replay.outputs import write_replay
    from fairshare.replay.runner import inputs_from_scenario, run_strategy

    data = _scaled(jobs, days, nodes, seed)
    assert isinstance(data, ScenarioData)
    inputs = inputs_from_scenario(data)
    gpus = sum(int(p["count"]) * int(p["gpus"]) for p in data.cluster["pools"])
    load = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    res = run_strategy(inputs, policy)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    if out:
        write_replay(Path(out) / policy, inputs.cluster, inputs.policy_text, res)
    m = res.result.metrics
    print(
        json.dumps(
            {
                "policy": policy,
                "jobs": len(inputs.jobs),
                "gpus": gpus,
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "loadavg": load,
                "events": len(res.events),
                "occupancy": m.get("occupancy"),
                "max_wait_h": m.get("starvation", {}).get("max_wait_s", 0.0) / 3600.0,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--days", type=float, default=30.0, help="span of the arrivals (default 30)")
    ap.add_argument("--nodes", type=float, default=None, help="fleet scale (default: rate x 0.8)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--policies", default="fairshare,slurm-multifactor")
    ap.add_argument("--out", default="", help="also write each replay's outputs under this folder")
    a = ap.parse_args(argv)
    rows = []
    for policy in a.policies.split(","):
        cmd = [sys.executable, __file__, CHILD_FLAG, policy, str(a.jobs), str(a.days)]
        cmd += [str(a.nodes) if a.nodes is not None else "", str(a.seed), a.out]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return 1
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    cpu = {r["policy"]: r["cpu_s"] for r in rows}
    if "fairshare" in cpu and "slurm-multifactor" in cpu:
        print(f"slurm-multifactor / fairshare replay CPU: {cpu['slurm-multifactor'] / cpu['fairshare']:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        p, n, days, nodes, seed, out = sys.argv[2:8]
        child(p, int(n), float(days), float(nodes) if nodes else None, int(seed), out)
    else:
        raise SystemExit(main())
