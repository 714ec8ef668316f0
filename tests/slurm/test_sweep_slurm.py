"""`fairshare sweep --executor slurm` on the real dev cluster: each variant a Slurm job (submitit), the
outputs equal to the local run's, and a job killed by Slurm retried and reported."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from fairshare.slurm.devcluster import DevCluster

pytestmark = [pytest.mark.slow, pytest.mark.slurm_cluster]
ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples"
ARGS = [
    "sweep",
    "--policy", str(EX / "policy.yaml"),
    "--cluster", str(EX / "cluster.yaml"),
    "--workload", str(EX / "workload.csv"),
    "--vary", "window=3d,7d",
    "--vary", "cluster.pools.node.count=+0,+1",
    "--policies", "fairshare,fifo",
]  # fmt: skip


def _run(dev_cluster: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": str(dev_cluster.spec.slurm_conf)}
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


def test_a_sweep_on_slurm_writes_what_the_local_sweep_writes(dev_cluster: DevCluster, tmp_path: Path) -> None:
    local, remote = tmp_path / "local", tmp_path / "slurm"
    r = _run(dev_cluster, *ARGS, "--out", str(local))
    assert r.returncode == 0, r.stderr
    r = _run(
        dev_cluster, *ARGS, "--executor", "slurm", "--partition", dev_cluster.spec.partition,
        "--max-parallel", "3", "--out", str(remote),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "variant v04 done" in r.stderr
    assert "attempts" not in r.stderr, r.stderr  # a task waiting its turn in the array is not taken for gone
    # each variant ran as a task of a Slurm job array: submitit's folder holds one per task, named
    # by Slurm's ARRAYID_TASK
    tasks = [p.name for p in _tasks(remote / "slurm")]
    assert len(tasks) == 4, tasks
    spec = orjson.loads((remote / "sweep.json").read_bytes())
    for v in spec["variants"]:
        for policy in ("fairshare", "fifo"):
            for name in ("events.jsonl", "decisions.jsonl", "metrics.json"):
                a = (local / v["id"] / policy / name).read_bytes()
                assert a == (remote / v["id"] / policy / name).read_bytes(), (v["id"], policy, name)
    assert (remote / "summary.json").read_bytes() == (local / "summary.json").read_bytes()


def test_a_variant_whose_slurm_job_is_cancelled_is_retried_and_reported(
    dev_cluster: DevCluster, tmp_path: Path
) -> None:
    env = {**os.environ, "SLURM_CONF": str(dev_cluster.spec.slurm_conf)}
    out = tmp_path / "slurm"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fairshare.cli", *ARGS[:7], "--vary", "window=3d", "--policies", "fairshare",
         "--executor", "slurm", "--max-parallel", "1", "--out", str(out)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # cancel a live task of this sweep's own job array: submitit names each task's folder
    # ARRAYID_TASK as it submits. (Looking the job up by name in squeue found an earlier sweep's
    # array whose last task was still completing, so the cancel hit nothing of this sweep.)
    cancelled = ""
    deadline = time.monotonic() + 120
    while not cancelled and time.monotonic() < deadline:
        arrays = {p.name.split("_")[0] for p in _tasks(out / "slurm")}
        if arrays:
            (array,) = arrays
            q = subprocess.run(
                ["squeue", "-h", "-r", "-j", array, "-t", "PENDING,RUNNING", "-o", "%i"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            ids = q.stdout.split()
            if ids:
                cancelled = ids[0]
                subprocess.run(["scancel", cancelled], env=env, check=True)
        time.sleep(0.2)
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        proc.kill()  # (a sweep still waiting after 10 minutes is not left behind)
    assert cancelled, "no task of the sweep was seen pending or running in squeue"
    assert proc.returncode == 0, err
    # the tasks are the variants in order; the cancelled one ran twice, the other once
    again = ("base", "v01")[int(cancelled.split("_")[1])]
    assert f"variant {again} done after 2 attempts" in err, err
    assert err.count("after 2 attempts") == 1, err
    for v in ("base", "v01"):
        assert (out / v / "complete.json").exists()


def _tasks(folder: Path) -> list[Path]:
    """submitit's per-task folders of a sweep's Slurm jobs, named by Slurm's ARRAYID_TASK."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if re.fullmatch(r"[0-9]+_[0-9]+", p.name))
