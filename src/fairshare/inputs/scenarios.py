"""Built-in scenarios, generated from a seed: the same seed gives the same arrivals.

Each returns a ScenarioData (policy, cluster, workload records). All but `eight-gpu` run on the
large fleet: 320 GPUs (32 H100 nodes in 4 blocks of 8, 8 A100 nodes in 2 blocks of 4) with a
three-program tree. `eight-gpu` is the startup example: one 8-GPU node, three teams.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

H = 3600.0
D = 86400.0


@dataclass(frozen=True)
class ScenarioData:
    name: str
    description: str
    policy: dict[str, Any]
    cluster: dict[str, Any]
    jobs: list[dict[str, Any]]


CLASSES_LARGE: dict[str, Any] = {
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
}

TREE_LARGE: list[dict[str, Any]] = [
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
]

LEAVES = [
    "product/search",
    "product/ads",
    "platform/infra",
    "platform/evals",
    "research/arch",
    "research/rl",
    "research/vision",
]


def large_policy(exceptions: bool = True) -> dict[str, Any]:
    p: dict[str, Any] = {
        "window": "7d",
        "gpu_rates": {"H100": 1.0, "A100": 0.6},
        "tree": TREE_LARGE,
        "classes": CLASSES_LARGE,
        "gates": {"share_floor": 0.9, "lost_work_pct": 5, "deadline_met_pct": 95, "exception_max_days": 30},
    }
    if exceptions:
        p["exceptions"] = [
            {
                "group": "research/arch",
                "extra_share": 10,
                "expires": "2026-12-05",
                "approver": "cto@x",
                "reason": "conference deadline",
            }
        ]
    return p


def large_cluster(horizon: str, maintenance: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "pools": [
            {
                "name": "h100",
                "count": 32,
                "gpus": 8,
                "gpu_type": "H100",
                "cpus": 224,
                "mem_gb": 2048,
                "nodes_per_block": 8,
            },
            {
                "name": "a100",
                "count": 8,
                "gpus": 8,
                "gpu_type": "A100",
                "cpus": 128,
                "mem_gb": 1024,
                "nodes_per_block": 4,
            },
        ],
        "epoch": "2026-12-01T00:00:00Z",
        "horizon": horizon,
    }
    if maintenance:
        c["maintenance"] = maintenance
    return c


class _Gen:
    """Job records from Poisson arrivals per leaf and class; durations log-normal, clipped."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.jobs: list[dict[str, Any]] = []

    def stream(
        self,
        leaf: str,
        cls: str,
        t0: float,
        t1: float,
        per_hour: float,
        gpus: tuple[int, ...],
        gpu_p: tuple[float, ...],
        work_median: float,
        work_sigma: float,
        label: str | Callable[[np.random.Generator], str] = "medium",
        hang_p: float = 0.0,
        gpu_type: str | None = None,
        work_max: float = 3 * D,
    ) -> None:
        if per_hour <= 0:
            return
        t = t0
        while True:
            t += float(self.rng.exponential(H / per_hour))
            if t >= t1:
                return
            g = int(self.rng.choice(gpus, p=gpu_p))
            work = float(np.clip(self.rng.lognormal(np.log(work_median), work_sigma), 60.0, work_max))
            lab = label(self.rng) if callable(label) else label
            rec: dict[str, Any] = {
                "job_id": f"{leaf.replace('/', '.')}-{cls}-{len(self.jobs):06d}",
                "submit": round(t, 3),
                "group": leaf,
                "user": leaf.rsplit("/", maxsplit=1)[-1],
                "class": cls,
                "gpus": g,
                "work": round(work, 3),
                "label": lab,
                "gpu_type": gpu_type,
            }
            if hang_p and self.rng.random() < hang_p:
                rec["stall_after"] = round(work * float(self.rng.uniform(0.2, 0.8)), 3)
            self.jobs.append(rec)

    def mixed_load(
        self, leaf: str, t0: float, t1: float, scale: float, label: Any = "medium", hang_p: float = 0.0
    ) -> None:
        """A team's everyday mix: debug, evals with deadlines, training gangs."""
        self.stream(leaf, "debug", t0, t1, 2.0 * scale, (1, 2), (0.8, 0.2), 600, 0.5, label)
        self.stream(
            leaf,
            "eval",
            t0,
            t1,
            0.8 * scale,
            (1, 2, 4, 8),
            (0.4, 0.3, 0.2, 0.1),
            1800,
            0.6,
            label,
            work_max=3 * H,
        )
        self.stream(
            leaf,
            "train",
            t0,
            t1,
            0.35 * scale,
            (8, 16, 32),
            (0.6, 0.3, 0.1),
            8 * H,
            0.8,
            label,
            hang_p=hang_p,
        )

    def records(self) -> list[dict[str, Any]]:
        self.jobs.sort(key=lambda r: (r["submit"], r["job_id"]))
        return self.jobs


def _labels_inflated(rng: np.random.Generator) -> str:
    return "high"


def _labels_mixed(rng: np.random.Generator) -> str:
    return str(rng.choice(["high", "medium", "low"], p=[0.6, 0.3, 0.1]))


SCALE = {
    "product/search": 1.2,
    "product/ads": 0.8,
    "platform/infra": 0.7,
    "platform/evals": 1.0,
    "research/arch": 0.9,
    "research/rl": 0.6,
    "research/vision": 0.4,
}


def normal(seed: int) -> ScenarioData:
    g = _Gen(seed)
    for leaf in LEAVES:
        g.mixed_load(leaf, 0, 6 * D, SCALE[leaf], _labels_mixed, hang_p=0.01)
    return ScenarioData(
        "normal",
        "Six days of everyday load from seven teams on 320 GPUs, about 1% of training runs hang part-way.",
        large_policy(),
        large_cluster("8d"),
        g.records(),
    )


def small_burst(seed: int) -> ScenarioData:
    g = _Gen(seed)
    for leaf in ("research/arch", "research/rl", "research/vision"):
        g.stream(leaf, "train", 0, 3 * D, 1.6, (8, 16, 32), (0.5, 0.3, 0.2), 10 * H, 0.5, "high")
    for leaf in ("product/search", "product/ads", "platform/infra", "platform/evals"):
        g.stream(leaf, "train", 0, 3 * D, 0.08, (8,), (1.0,), 6 * H, 0.5, "high")
        g.stream(leaf, "debug", 1.5 * D, 1.5 * D + 2 * H, 30.0, (1, 2), (0.8, 0.2), 600, 0.5, _labels_mixed)
    return ScenarioData(
        "small-burst",
        "Research keeps the cluster full of long training on loaned capacity; "
        "product and platform send a two-hour burst of short debug jobs.",
        large_policy(),
        large_cluster("5d"),
        g.records(),
    )


def large_training(seed: int) -> ScenarioData:
    g = _Gen(seed)
    for leaf in LEAVES:
        g.stream(
            leaf, "debug", 0, 4 * D, 3.0 * SCALE[leaf], (1, 2, 4), (0.6, 0.3, 0.1), 1200, 0.6, _labels_mixed
        )
        g.stream(
            leaf,
            "eval",
            0,
            4 * D,
            1.2 * SCALE[leaf],
            (1, 2, 4),
            (0.5, 0.3, 0.2),
            2400,
            0.6,
            _labels_mixed,
            work_max=3 * H,
        )
    g.jobs.append(
        {
            "job_id": "research.arch-bigrun",
            "submit": 1 * D,
            "group": "research/arch",
            "user": "arch",
            "class": "train",
            "gpus": 256,
            "work": 12 * H,
            "label": "high",
            "gpu_type": "H100",
        }
    )
    return ScenarioData(
        "large-training",
        "A 256-GPU training gang (32 H100 nodes, most of the cluster) "
        "arrives on day 1 into a steady stream of small debug and eval jobs.",
        large_policy(),
        large_cluster("6d"),
        g.records(),
    )


def maintenance_drain(seed: int) -> ScenarioData:
    g = _Gen(seed)
    for leaf in LEAVES:
        g.mixed_load(leaf, 0, 4 * D, SCALE[leaf], _labels_mixed)
    block = [f"h100-{i:03d}" for i in range(8, 16)]
    maint = [
        {"nodes": block, "start": "2d", "deadline": "2d2h", "end": "2d8h"},
        {"nodes": ["a100-000", "a100-001"], "start": "3d", "deadline": "3d", "end": "3d4h"},
    ]
    return ScenarioData(
        "maintenance-drain",
        "Everyday load; an H100 block (64 GPUs) drains on day 2 with a "
        "2-hour deadline, and two A100 nodes are taken at once on day 3.",
        large_policy(),
        large_cluster("6d", maint),
        g.records(),
    )


def idle_return(seed: int) -> ScenarioData:
    g = _Gen(seed)
    for leaf in LEAVES:
        if leaf.startswith("product/"):
            g.mixed_load(leaf, 0, 1 * D, SCALE[leaf] * 1.5, _labels_mixed)
            g.mixed_load(leaf, 2 * D, 5 * D, SCALE[leaf] * 1.5, _labels_mixed)
        else:
            g.mixed_load(leaf, 0, 5 * D, SCALE[leaf] * 1.6, _labels_mixed)
    return ScenarioData(
        "idle-return",
        "Product (40% share) goes idle for day 1 and returns on day 2 at its "
        "usual load; the other teams fill the cluster meanwhile.",
        large_policy(),
        large_cluster("7d"),
        g.records(),
    )


def label_inflation(seed: int) -> ScenarioData:
    g = _Gen(seed)
    for leaf in LEAVES:
        g.mixed_load(leaf, 0, 4 * D, SCALE[leaf] * 1.5, _labels_inflated)
    return ScenarioData(
        "label-inflation",
        "A busy four days where every team marks every job high: the labels "
        "carry no information, so priority-labels degenerates to fifo.",
        large_policy(),
        large_cluster("6d"),
        g.records(),
    )


def _startup_policy() -> dict[str, Any]:
    """eight-gpu's (and gang-mix's) policy: product 40%, platform 35%, research 25%."""
    return {
        "window": "7d",
        "gpu_rates": {"H100": 1.0},
        "tree": [
            {
                "name": "product",
                "share": 40,
                "owner": "pm@startup",
                "review": "2027-01-31",
                "hypothesis": "weekly eval ships",
            },
            {
                "name": "platform",
                "share": 35,
                "owner": "eng@startup",
                "review": "2027-01-31",
                "hypothesis": "infra tests stay green",
            },
            {
                "name": "research",
                "share": 25,
                "owner": "res@startup",
                "review": "2027-01-31",
                "hypothesis": "new loss improves eval",
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
                "protected": "30m",
                "max_protected": "1h",
                "resumable": False,
                "deadline": "4h",
                "max_stall": "15m",
            },
            "train": {
                "protected": "1h",
                "max_protected": "2h",
                "resumable": True,
                "checkpoint": "30m",
                "restore": "2m",
                "startup": "2m",
                "max_stall": "30m",
            },
        },
    }


def eight_gpu(seed: int) -> ScenarioData:
    """The startup example: one 8-GPU node, product 40%, platform 35%, research 25%."""
    g = _Gen(seed)
    policy = _startup_policy()
    cluster = {
        "pools": [{"name": "node", "count": 1, "gpus": 8, "gpu_type": "H100", "cpus": 96, "mem_gb": 768}],
        "epoch": "2026-12-01T00:00:00Z",
        "horizon": "5d",
    }
    for team, scale in (("product", 1.0), ("platform", 0.8), ("research", 0.9)):
        g.stream(team, "debug", 0, 4 * D, 1.0 * scale, (1,), (1.0,), 15 * 60, 0.3, _labels_mixed)
        g.stream(
            team,
            "eval",
            0,
            4 * D,
            0.4 * scale,
            (1, 2),
            (0.7, 0.3),
            30 * 60,
            0.4,
            _labels_mixed,
            work_max=2 * H,
        )
        g.stream(
            team, "train", 0, 4 * D, 0.08 * scale, (2, 4), (0.6, 0.4), 6 * H, 0.6, _labels_mixed, hang_p=0.03
        )
    return ScenarioData(
        "eight-gpu",
        "The startup case: one 8-GPU node shared by product (40%), platform (35%) "
        "and research (25%); 15-minute resumable debug jobs, short evals with 4h deadlines, "
        "training that checkpoints every 30 minutes.",
        policy,
        cluster,
        g.records(),
    )


def gang_mix(seed: int) -> ScenarioData:
    """Issue 20: 16-GPU gangs (two whole nodes) among 1-GPU jobs on four 8-GPU nodes, fully loaded."""
    g = _Gen(seed)
    cluster = {
        "pools": [
            {
                "name": "node",
                "count": 4,
                "gpus": 8,
                "gpu_type": "H100",
                "cpus": 96,
                "mem_gb": 768,
                "nodes_per_block": 4,
            }
        ],
        "epoch": "2026-12-01T00:00:00Z",
        "horizon": "6d",
    }
    for team, scale in (("product", 1.0), ("platform", 0.8), ("research", 1.2)):
        g.stream(team, "train", 0, 4 * D, 2.0 * scale, (1,), (1.0,), 2 * H, 0.7, _labels_mixed)
        g.stream(team, "train", 0, 4 * D, 0.08 * scale, (16,), (1.0,), 3 * H, 0.5, _labels_mixed)
    return ScenarioData(
        "gang-mix",
        "Four 8-GPU nodes given about as much work as they hold (1.05 times, in bursts above it): "
        "a steady stream of 1-GPU training jobs from three teams, and among them 16-GPU gangs "
        "that need two whole nodes.",
        _startup_policy(),
        cluster,
        g.records(),
    )


SCENARIOS: dict[str, Callable[[int], ScenarioData]] = {
    "normal": normal,
    "small-burst": small_burst,
    "large-training": large_training,
    "maintenance-drain": maintenance_drain,
    "idle-return": idle_return,
    "label-inflation": label_inflation,
    "eight-gpu": eight_gpu,
    "gang-mix": gang_mix,
}


DESCRIPTIONS: dict[str, str] = {
    "normal": "six days of everyday load from seven teams on 320 GPUs; ~1% of training runs hang",
    "small-burst": "research fills the cluster with long training on loan; product and platform send a "
    "2-hour burst of debug jobs",
    "large-training": "a 256-GPU gang (most of the cluster) arrives into a steady stream of small jobs",
    "maintenance-drain": "an H100 block drains on day 2 with a 2-hour deadline; two A100 nodes go at once "
    "on day 3",
    "idle-return": "product (40% share) is idle for a day while others fill the cluster, then returns",
    "label-inflation": "everyday load where every team marks every job high",
    "eight-gpu": "the startup case: one 8-GPU node, product 40% / platform 35% / research 25%",
    "gang-mix": "16-GPU gangs among 1-GPU jobs on four 8-GPU nodes, fully loaded",
}
