"""Shared test helpers: tiny inputs built from dicts, replays, and the independent checker."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from fairshare.core.model import JobRequest
from fairshare.inputs.scenarios import ScenarioData
from fairshare.replay.loaded import Inputs
from fairshare.replay.results import ReplayOutput
from fairshare.replay.runner import inputs_from_scenario, run_strategy

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FAIRSHARE_SHARED", ROOT.parent / "shared"))
CHECKER = SHARED / "tools" / "check_replay.py"


def apt_install(packages: Sequence[str], what: str) -> str | None:
    """apt-get install `packages` for a test that needs `what` (a service's binaries); the reason
    it could not, or None (the dev cluster's installer: one at a time on this host, retried after
    `apt-get update`)."""
    from fairshare.slurm.devcluster import apt_install as install

    failed = install(packages)
    return None if failed is None else f"no {what}: {failed}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow suites run when asked for (-m slow) or when FAIRSHARE_SLOW=1 (CI sets it)."""
    if os.environ.get("FAIRSHARE_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow suite: run with FAIRSHARE_SLOW=1 or -m slow (CI runs it)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def tiny_policy(**over: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "window": "7d",
        "gpu_rates": {"H100": 1.0, "A100": 0.5},
        "tree": [{"name": "a", "share": 50}, {"name": "b", "share": 50}],
        "classes": {
            "debug": {
                "protected": "15m",
                "resumable": True,
                "checkpoint": "5m",
                "restore": "30s",
                "max_stall": "10m",
            },
            "train": {
                "protected": "30m",
                "max_protected": "2h",
                "resumable": True,
                "checkpoint": "30m",
                "restore": "2m",
                "startup": "1m",
                "max_stall": "20m",
            },
            "eval": {"protected": "10m", "resumable": False, "deadline": "2h"},
        },
    }
    p.update(over)
    return p


def tiny_cluster(nodes: int = 2, gpus: int = 8, per_block: int | None = None, **over: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "pools": [
            {
                "name": "n",
                "count": nodes,
                "gpus": gpus,
                "gpu_type": "H100",
                "cpus": 64,
                "mem_gb": 512,
                **({"nodes_per_block": per_block} if per_block else {}),
            }
        ]
    }
    c.update(over)
    return c


def a_request(**fields: Any) -> JobRequest:
    """A JobRequest for core and engine tests: an 8-GPU resumable training job of leaf 0 (`fields`
    override any value)."""
    base = JobRequest(
        id="j1",
        submit=0.0,
        group="a",
        leaf=0,
        user=None,
        cls="train",
        gpus=8,
        nodes=1,
        gpu_types=None,
        cpus=None,
        mem_gb=None,
        estimate=3600.0,
        label="medium",
        deadline=None,
        protected=600.0,
        protected_capped=False,
        resumable=True,
        checkpoint=300.0,
        restore=30.0,
        startup=0.0,
        max_stall=600.0,
        charge=8.0,
        seq=0,
    )
    return dataclasses.replace(base, **fields)


def job(jid: str, submit: float, group: str, cls: str, gpus: int, work: float, **kw: Any) -> dict[str, Any]:
    return {"job_id": jid, "submit": submit, "group": group, "class": cls, "gpus": gpus, "work": work, **kw}


def make_inputs(
    policy: dict[str, Any], cluster: dict[str, Any], jobs: list[dict[str, Any]], name: str = "test"
) -> Inputs:
    return inputs_from_scenario(ScenarioData(name, name, policy, cluster, jobs))


def replay(
    policy: dict[str, Any], cluster: dict[str, Any], jobs: list[dict[str, Any]], strategy: str = "fairshare"
) -> ReplayOutput:
    return run_strategy(make_inputs(policy, cluster, jobs), strategy)


def events_of(out: ReplayOutput) -> list[dict[str, Any]]:
    import json

    return [json.loads(e) for e in out.events]


def run_checker(
    folder: Path, policy: dict[str, Any], cluster: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """Run the independent checker from ../shared on an output folder (fails loudly if absent)."""
    if not CHECKER.exists():
        pytest.fail(
            f"the independent checker is missing: {CHECKER} (set FAIRSHARE_SHARED to the shared folder)"
        )
    (folder / "_policy.yaml").write_text(yaml.safe_dump(policy))
    (folder / "_cluster.yaml").write_text(yaml.safe_dump(cluster))
    return subprocess.run(
        [
            sys.executable,
            str(CHECKER),
            str(folder),
            "--policy",
            str(folder / "_policy.yaml"),
            "--cluster",
            str(folder / "_cluster.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
