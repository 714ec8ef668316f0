"""Deterministic benchmark workload: N jobs from seven teams on a 2,048-GPU fleet.

The workload is the everyday mix of the built-in scenarios (debug, eval with a deadline, training
gangs of 8-32 GPUs, about 1% of training runs hanging part-way), at a load that keeps the fleet
around 75-85% busy with queues forming. Arrivals are one Poisson process at a fixed total rate
(about 2,710 jobs a day), each arrival drawn into a (team, class) stream in proportion to that
stream's rate: the superposition of the per-stream Poisson processes. So N jobs span N / 2,710
days, and 4x the jobs means 4x the time span at the same load.

The policy, fleet and generator are kept here (a frozen copy of the built-in scenarios' large policy,
without exceptions), not imported from `fairshare.inputs.scenarios`, so that a change to the built-in
scenarios cannot silently change what the benchmark measures. The same (n, seed) always gives the same jobs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairshare.inputs.scenarios import ScenarioData

H = 3600.0
D = 86400.0

EPOCH = "2026-12-01T00:00:00Z"

# A frozen copy of fairshare.inputs.scenarios.large_policy(exceptions=False).
POLICY: dict[str, Any] = {
    "window": "7d",
    "gpu_rates": {"H100": 1.0, "A100": 0.6},
    "tree": [
        {
            "name": "product",
            "share": 40,
            "owner": "lead@product",
            "review": "2027-03-31",
            "hypothesis": "weekly model refresh ships on time",
            "children": [
                {"name": "search", "share": 60, "owner": "a@product"},
                {"name": "ads", "share": 40, "owner": "b@product"},
            ],
        },
        {
            "name": "platform",
            "share": 35,
            "owner": "lead@platform",
            "review": "2027-03-31",
            "hypothesis": "eval turnaround under 4h",
            "children": [
                {"name": "infra", "share": 50, "owner": "c@platform"},
                {"name": "evals", "share": 50, "owner": "d@platform"},
            ],
        },
        {
            "name": "research",
            "share": 25,
            "owner": "lead@research",
            "review": "2027-02-28",
            "hypothesis": "new architecture beats baseline by Q2",
            "children": [
                {"name": "arch", "share": 50, "owner": "e@research"},
                {"name": "rl", "share": 30, "owner": "f@research"},
                {"name": "vision", "share": 20, "owner": "g@research"},
            ],
        },
    ],
    "classes": {
        "debug": {
            "protected": "15m",
            "max_protected": "15m",
            "resumable": True,
            "checkpoint": "5m",
            "restore": "30s",
            "max_stall": "10m",
        },
        "eval": {
            "protected": "1h",
            "max_protected": "2h",
            "resumable": False,
            "deadline": "4h",
            "max_stall": "20m",
        },
        "train": {
            "protected": "30m",
            "max_protected": "2h",
            "resumable": True,
            "checkpoint": "30m",
            "restore": "2m",
            "startup": "3m",
            "max_stall": "30m",
        },
    },
    "gates": {"share_floor": 0.9, "lost_work_pct": 5, "deadline_met_pct": 95, "exception_max_days": 30},
}

# 192 H100 nodes + 64 A100 nodes, 8 GPUs each: 2,048 GPUs in 16-node blocks.
CLUSTER: dict[str, Any] = {
    "pools": [
        {
            "name": "h100",
            "count": 192,
            "gpus": 8,
            "gpu_type": "H100",
            "cpus": 224,
            "mem_gb": 2048,
            "nodes_per_block": 16,
        },
        {
            "name": "a100",
            "count": 64,
            "gpus": 8,
            "gpu_type": "A100",
            "cpus": 128,
            "mem_gb": 1024,
            "nodes_per_block": 16,
        },
    ],
    "epoch": EPOCH,
}

# Relative team sizes (as in the built-in scenarios) and the load multiplier for this fleet.
TEAMS: dict[str, float] = {
    "product/search": 1.2,
    "product/ads": 0.8,
    "platform/infra": 0.7,
    "platform/evals": 1.0,
    "research/arch": 0.9,
    "research/rl": 0.6,
    "research/vision": 0.4,
}
LOAD = 6.4
HANG_P = 0.01


@dataclass(frozen=True)
class JobClass:
    name: str
    per_hour: float  # arrivals per hour per unit of team size
    gpus: tuple[int, ...]
    gpu_p: tuple[float, ...]
    work_median: float  # seconds
    work_sigma: float  # log-normal sigma
    work_max: float
    hang_p: float


CLASSES: tuple[JobClass, ...] = (
    JobClass("debug", 2.0, (1, 2), (0.8, 0.2), 600.0, 0.5, 3 * D, 0.0),
    JobClass("eval", 0.8, (1, 2, 4, 8), (0.4, 0.3, 0.2, 0.1), 1800.0, 0.6, 3 * H, 0.0),
    JobClass("train", 0.35, (8, 16, 32), (0.6, 0.3, 0.1), 8 * H, 0.8, 3 * D, HANG_P),
)


def cluster_gpus() -> int:
    return sum(int(p["count"]) * int(p["gpus"]) for p in CLUSTER["pools"])


def jobs_per_day() -> float:
    return sum(s * LOAD * c.per_hour for s in TEAMS.values() for c in CLASSES) * 24


def generate_records(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """n job records (workload rows), sorted by submit time; deterministic in (n, seed)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    rng = np.random.default_rng(seed)
    streams = [(team, ci) for team in TEAMS for ci in range(len(CLASSES))]
    rates = np.array([TEAMS[team] * LOAD * CLASSES[ci].per_hour for team, ci in streams])
    total = float(rates.sum())  # arrivals per hour
    submit = np.cumsum(rng.exponential(H / total, size=n))
    which = rng.choice(len(streams), size=n, p=rates / total)
    cls_of = np.array([ci for _, ci in streams])[which]

    gpus = np.zeros(n, dtype=np.int64)
    work = np.zeros(n)
    stall = np.full(n, np.nan)
    for ci, c in enumerate(CLASSES):
        idx = np.flatnonzero(cls_of == ci)
        k = len(idx)
        gpus[idx] = rng.choice(np.array(c.gpus), size=k, p=np.array(c.gpu_p))
        work[idx] = np.clip(rng.lognormal(np.log(c.work_median), c.work_sigma, size=k), 60.0, c.work_max)
        if c.hang_p:
            hang = rng.random(k) < c.hang_p
            frac = rng.uniform(0.2, 0.8, size=k)
            stall[idx[hang]] = work[idx[hang]] * frac[hang]

    records: list[dict[str, Any]] = []
    for i in range(n):
        team, ci = streams[int(which[i])]
        w = float(work[i])
        rec: dict[str, Any] = {
            "job_id": f"{team.replace('/', '.')}-{CLASSES[ci].name}-{i:07d}",
            "submit": round(float(submit[i]), 3),
            "group": team,
            "user": team.split("/")[-1],
            "class": CLASSES[ci].name,
            "gpus": int(gpus[i]),
            "work": round(w, 3),
            "label": "medium",
        }
        if not np.isnan(stall[i]):
            rec["stall_after"] = round(float(stall[i]), 3)
        records.append(rec)
    return records


def generate(n: int, seed: int = 7) -> ScenarioData:
    """The benchmark scenario: the frozen policy, the 2,048-GPU fleet, n jobs."""
    days = n / jobs_per_day()
    return ScenarioData(
        f"bench-{n}",
        f"{n} generated jobs over {days:.1f} days on {cluster_gpus()} GPUs",
        copy.deepcopy(POLICY),
        copy.deepcopy(CLUSTER),
        generate_records(n, seed),
    )
