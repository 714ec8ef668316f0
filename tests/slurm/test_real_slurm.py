"""Against the real Slurm only: the dev cluster itself, `slurm check`, the priority setter driving
Slurm's scheduler, the mapping of real jobs, and faults (controller restart, timeout, vanished job).
The vanished-job cases run on both backends in test_backend_contract.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from fairshare.inputs.policy import load_policy
from fairshare.slurm import procs
from fairshare.slurm.client import CliBackend
from fairshare.slurm.devcluster import DevCluster
from fairshare.slurm.mapping import Mapper
from fairshare.slurm.priority import Band, apply_priorities, plan_priorities, priorities_of
from fairshare.slurm.slurm_errors import SlurmTimeout, SlurmUnavailable

from .conftest import EXAMPLE
from .harness import RealHarness, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.slurm_cluster]
BAND = Band(1_000_000, 1_000_000_000, 1000)


def fairshare(dev_cluster: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLURM_CONF": str(dev_cluster.spec.slurm_conf)}
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_every_daemon_listens_on_loopback_only(dev_cluster: DevCluster) -> None:
    records = procs.read_records(dev_cluster.spec.pids)
    assert {r.name for r in records} >= {
        "munged",
        "mariadbd",
        "slurmdbd",
        "slurmctld",
        "slurmd-n1",
        "slurmd-n4",
    }
    listening = {r.name: procs.listening(r.pid) for r in records}
    assert listening["slurmctld"] == [f"127.0.0.1:{dev_cluster.spec.ctld_port}"]
    assert listening["slurmd-n2"] == [f"127.0.0.1:{dev_cluster.spec.slurmd_port0 + 1}"]
    assert all(procs.is_loopback(a) for addrs in listening.values() for a in addrs), listening


def test_up_again_says_already_up_and_status_lists_every_daemon(dev_cluster: DevCluster) -> None:
    base = str(dev_cluster.spec.base)
    r = fairshare(dev_cluster, "slurm", "dev-cluster", "up", "--dir", base, "--policy", str(EXAMPLE))
    assert r.returncode == 0, r.stderr
    assert "already up" in r.stderr
    assert r.stdout == f"export SLURM_CONF={dev_cluster.spec.slurm_conf}\n"
    r = fairshare(dev_cluster, "slurm", "dev-cluster", "status", "--dir", base)
    assert r.returncode == 0 and r.stdout.count("running") == 8


def test_slurm_check_passes_on_the_dev_cluster(dev_cluster: DevCluster) -> None:
    r = fairshare(dev_cluster, "slurm", "check", "--policy", str(EXAMPLE))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 wrong" in r.stdout and "WRONG" not in r.stdout
    assert "ok     account research" in r.stdout and "ok     gpu type a100" in r.stdout


def test_slurm_starts_jobs_in_the_order_fairshare_sets(real: RealHarness) -> None:
    blockers = [real.running(a, 8) for a in ("product", "product", "research", "platform")]
    queued = [real.sbatch(a, 8) for a in ("product", "research", "platform")]
    wait_for("the queue", lambda: all((j := real.job(q)) is not None and j.pending for q in queued))
    order = [queued[2], queued[0], queued[1]]  # platform, product, research: not submit order
    results = apply_priorities(
        real.backend, plan_priorities(order, priorities_of(real.backend.read_jobs()), BAND)
    )
    assert [r.outcome for r in results] == ["applied"] * 3
    started: list[int] = []

    def runs(job: int) -> bool:
        j = real.job(job)
        return j is not None and j.state == "RUNNING"

    for b in blockers[:3]:
        real.sh("scancel", str(b))
        nxt = order[len(started)]
        wait_for(f"job {nxt} to start", lambda: runs(nxt))  # noqa: B023 (called at once)
        started.append(nxt)
        others = [q for q in order if q not in started]
        assert all((j := real.job(q)) is not None and j.pending for q in others)
    assert started == order


def test_reset_priorities_rolls_back_to_slurms_own(dev_cluster: DevCluster, real: RealHarness) -> None:
    jobs = [real.pending(a) for a in ("product", "research")]
    apply_priorities(real.backend, plan_priorities(jobs, priorities_of(real.backend.read_jobs()), BAND))
    assert all(j.priority in BAND for j in real.backend.read_jobs())
    r = fairshare(dev_cluster, "slurm", "reset-priorities", "--policy", str(EXAMPLE), "--yes")
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "reset 2 job(s)", r.stdout + r.stderr
    after = {j.job_id: j for j in real.backend.read_jobs()}
    assert all(0 < after[j].priority < BAND.low and not after[j].held for j in jobs)


def test_real_jobs_map_to_leaves_classes_and_contracts(real: RealHarness) -> None:
    gang = real.running("research", 4, nodes=2, qos="debug", comment="fairshare:protect=1h")
    waiting = real.pending("platform", 2, comment="fairshare:protect=3h,checkpoint=10m,resumable")
    policy = load_policy(EXAMPLE)
    view = Mapper(policy).view(real.backend.read_nodes(), real.backend.read_jobs())
    (run,) = [r for r in view.running if r.request.slurm_id == gang]
    assert (run.request.leaf, run.request.cls, run.request.protected, run.charge) == (
        "research",
        "debug",
        900,
        8.0,
    )
    assert run.request.notes == ("protect 1h capped to 15m by class debug's max_protected",)
    assert sorted(a.node for a in run.alloc) == sorted({a.node for a in run.alloc}) and len(run.alloc) == 2
    (req,) = [q for q in view.pending if q.slurm_id == waiting]
    assert (req.leaf, req.cls, req.protected, req.protected_capped, req.resumable, req.checkpoint) == (
        "platform",
        "train",
        7200,
        True,
        True,
        600,
    )
    assert req.estimate == 600 and req.gpus == 2 and not req.held


def test_usage_from_sacct_has_one_interval_per_run(real: RealHarness) -> None:
    job = real.running("product", 2)
    assert real.backend.requeue(job).ok
    real.wait_runs(job, 1)  # the requeued run; the job itself waits ~10 s before it may run again
    policy = load_policy(EXAMPLE)
    m = Mapper(policy)
    nodes = {n.name: m.node(n)[0] for n in real.backend.read_nodes()}
    runs = real.backend.read_runs(time.time() - 600, time.time())
    usage, unknown = m.usage(runs, nodes)
    mine = [u for u in usage if u.slurm_id == job]
    assert len(mine) == 1 and mine[0].end is not None and mine[0].charge == 2.0 and mine[0].leaf == "product"
    assert unknown == []


def test_controller_restart_gives_typed_errors_then_everything_is_back(
    dev_cluster: DevCluster, real: RealHarness
) -> None:
    waiting = real.pending("research")
    assert real.backend.set_priority(waiting, 700_000_000).ok
    dev_cluster.stop_daemon("slurmctld")
    try:
        b = real.backend
        t0 = time.monotonic()
        with pytest.raises(SlurmUnavailable) as info:
            b.read_jobs()
        assert info.value.command == ("squeue", "--json") and time.monotonic() - t0 < 20
        with pytest.raises(SlurmUnavailable) as info:
            b.set_priority(waiting, 700_000_001)
        assert info.value.command[:2] == ("scontrol", "update")
        with pytest.raises(SlurmUnavailable):
            b.requeue(waiting)
        with pytest.raises(SlurmTimeout) as tinfo:
            CliBackend(slurm_conf=real.slurm_conf, timeout=1).read_nodes()
        assert tinfo.value.command == ("sinfo", "--json") and tinfo.value.timeout == 1
    finally:
        dev_cluster.start_controller()
    j = wait_for("the controller", lambda: real.job(waiting), timeout=30)
    assert j.priority == 700_000_000 and j.pending  # an admin priority survives the restart
    assert real.backend.set_priority(waiting, 700_000_001).ok
