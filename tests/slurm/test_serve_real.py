"""`serve --cluster slurm` on the real Slurm of the test session (slow, slurm_cluster): Slurm follows
the priorities the cycle sets; a requeue only after the victim's protected window, and the waiting
job starts on the freed GPUs; a job a policy change cancels is held in Slurm; slurmctld restarted
mid-cycle; the service killed with SIGKILL and restarted (nothing charged twice, nothing lost); and
the end-to-end 3:1 run with its replay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fairshare.engine.serving import ServingState
from fairshare.service.clusters.slurm_cluster import SlurmCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.options import LoopOptions
from fairshare.service.options import SlurmOptions
from fairshare.service.service_errors import ClusterUnavailable
from fairshare.service.storage import audit, journal, portfolio
from fairshare.service.storage.store import Store
from fairshare.slurm.devcluster import DevCluster

from . import e2e
from .harness import RealHarness, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.slurm_cluster]
PROTECT = "fairshare:protect=20s,checkpoint=10s,resumable"


@contextmanager
def real_loop(real: RealHarness, tmp_path: Path, policy: str = e2e.POLICY) -> Iterator[SchedulerLoop]:
    with Store.open(f"sqlite:///{tmp_path / 'fs.db'}", time.time) as store:
        with store.write() as tx:
            portfolio.put_policy(tx, policy, "test")
        loop: SchedulerLoop | None = None

        def backend() -> SlurmCluster:
            assert loop is not None
            with store.read() as tx:
                cur = portfolio.current_policy(tx)
            assert cur is not None
            return SlurmCluster(
                real.backend, cur.policy(), lambda: loop.engine if loop else None, SlurmOptions(grace_s=10.0),
                policy_of=loop.policy,
            )  # fmt: skip

        loop = SchedulerLoop(
            store, backend, time.time, LoopOptions(poll_s=1.0, forecast_s=3600.0, publish_s=3600.0)
        )
        assert loop.take_lock()
        loop.become_writer()
        try:
            yield loop
        finally:
            loop._reset()


def sbatch(real: RealHarness, account: str, gpus: int, sleep: int, comment: str = PROTECT) -> int:
    out = real.sh(
        "sbatch", "--parsable", "-o", "/dev/null", "-A", account, f"--gres=gpu:{gpus}", "--time=5",
        f"--comment={comment}", "--wrap", f"sleep {sleep}",
    ).stdout  # fmt: skip
    return int(out.strip().split(";")[0])


def running(real: RealHarness) -> set[int]:
    return {j.job_id for j in real.backend.read_jobs() if j.state == "RUNNING"}


def cycled(loop: SchedulerLoop) -> SchedulerLoop:
    loop.cycle()
    return loop


def state_of(loop: SchedulerLoop) -> ServingState:
    """The loop's engine state (the loop has cycled, so it has an engine)."""
    assert loop.engine is not None
    return loop.engine.state


def records(loop: SchedulerLoop, kind: str) -> list[audit.StoredRecord]:
    with loop.store.read() as tx:
        return audit.query(tx, decision=kind, limit=None)


def test_slurm_starts_jobs_in_the_order_the_cycle_sets(real: RealHarness, tmp_path: Path) -> None:
    blockers = [sbatch(real, "platform", 8, 600) for _ in range(4)]  # an account the policy does not have
    wait_for("the blockers to run", lambda: running(real) >= set(blockers))
    waiting = [sbatch(real, a, 8, 600) for a in ("research", "research", "product", "product")]
    with real_loop(real, tmp_path) as loop:
        wait_for("the jobs in the engine", lambda: len(state_of(cycled(loop)).pending.jobs) == 4)
        started: list[int] = []
        expected: list[int] = []
        for b in blockers:
            first = int(loop.order[0])
            expected.append(first)
            real.sh("scancel", str(b))
            new = wait_for("a start", lambda: running(real) & set(waiting) - set(started), timeout=20)
            started.extend(sorted(new))
            loop.cycle()
        assert started == expected
        # product (3 shares) first; then research, owed more than product once product runs one
        assert started[0] == waiting[2] and started[1] == waiting[0]
        assert records(loop, "slurm_unmapped")  # the blockers' account is reported, not charged


def test_a_requeue_comes_only_after_protection_and_starts_the_waiting_job(
    real: RealHarness, tmp_path: Path
) -> None:
    research = [sbatch(real, "research", 8, 600) for _ in range(4)]
    wait_for("research to fill the cluster", lambda: running(real) >= set(research))
    with real_loop(real, tmp_path) as loop:
        loop.cycle()
        product = sbatch(real, "product", 8, 600)
        deadline = time.time() + 60
        while time.time() < deadline and product not in running(real):
            loop.cycle()
            time.sleep(1.0)
        loop.cycle()
        assert product in running(real)
        (rq,) = [r for r in records(loop, "requeue") if r.evidence["result"] == "applied"]
        victim = int(rq.job or 0)
        runs = [r for r in real.backend.read_runs(time.time() - 600, time.time()) if r.job_id == victim]
        first = min(runs, key=lambda r: r.start)
        assert rq.t >= first.start + 20  # never inside the protected window
        start = next(
            r.start for r in real.backend.read_runs(time.time() - 600, time.time()) if r.job_id == product
        )
        assert start - rq.t < 15  # the waiting job took the freed GPUs
        e = loop.engine
        assert e is not None and str(product) in e.state.running and str(victim) in e.state.pending.jobs


def test_a_job_a_policy_change_cancels_is_held_in_slurm(real: RealHarness, tmp_path: Path) -> None:
    product = [sbatch(real, "product", 8, 600) for _ in range(4)]
    wait_for("product to fill the cluster", lambda: running(real) >= set(product))
    with real_loop(real, tmp_path) as loop:
        research = sbatch(real, "research", 8, 600)
        wait_for("the job in the engine", lambda: str(research) in state_of(cycled(loop)).pending.jobs)
        research_leaf = "- {name: research, share: 1, owner: res@example.com, review: '2027-06-30'}\n"
        assert research_leaf in e2e.POLICY
        with loop.store.write() as tx:
            portfolio.put_policy(tx, e2e.POLICY.replace(research_leaf, ""), "test")
        loop.cycle()
        (held,) = records(loop, "slurm_hold")
        assert held.job == str(research) and held.evidence["outcome"] == "applied"
        (job,) = [j for j in real.backend.read_jobs() if j.job_id == research]
        assert job.held
        real.sh("scancel", str(product[0]))  # GPUs free: Slurm's scheduler must not start it
        time.sleep(5.0)
        loop.cycle()
        assert research not in running(real)
        (job,) = [j for j in real.backend.read_jobs() if j.job_id == research]
        assert job.held and job.state == "PENDING"


def test_slurmctld_restarted_mid_cycle(real: RealHarness, dev_cluster: DevCluster, tmp_path: Path) -> None:
    with real_loop(real, tmp_path) as loop:
        a = sbatch(real, "product", 8, 6)
        b = sbatch(real, "research", 8, 600)
        wait_for("both running", lambda: running(real) >= {a, b})
        loop.cycle()
        dev_cluster.stop_daemon("slurmctld")
        try:
            with pytest.raises(ClusterUnavailable):
                loop.cycle()
            time.sleep(6)  # job a ends while the controller is down
        finally:
            dev_cluster.start_controller()
        wait_for("a cycle", lambda: cycled(loop), timeout=30)
        wait_for("job a's end", lambda: str(a) not in state_of(cycled(loop)).running)
        with loop.store.read() as tx:
            usage = journal.usage_between(tx, 0, time.time() + 1)
        assert sorted(iv.job for iv in usage) == sorted([str(a), str(b)])
        (ua,) = [iv for iv in usage if iv.job == str(a)]
        # it ended while the controller was down: Slurm records the end when it is back
        assert ua.t_to is not None and 5 <= ua.t_to - ua.t_from <= 40


def test_the_service_killed_and_restarted_charges_nothing_twice(real: RealHarness, tmp_path: Path) -> None:
    env = {**real.env}
    (tmp_path / "policy.yaml").write_text(e2e.POLICY)
    db = f"sqlite:///{tmp_path / 'fs.db'}"
    args = [e2e.FAIRSHARE, "serve", "--policy", str(tmp_path / "policy.yaml"), "--db", db,
            "--cluster", "slurm", "--interval", "1s", "--port", "0"]  # fmt: skip
    jobs = [sbatch(real, acct, 8, 8) for acct in ("product", "research") * 4]
    for k in range(2):
        log = tmp_path / f"serve{k}.log"
        with open(log, "w") as f:
            p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env, cwd="/tmp")
        wait_for("serve", lambda: "listening on" in log.read_text() or p.poll() is not None)  # noqa: B023
        time.sleep(7)
        if k == 0:
            os.kill(p.pid, signal.SIGKILL)  # mid-run; jobs start and end while it is down
            p.wait()
            time.sleep(6)
        else:
            wait_for("the queue to empty", lambda: not real.backend.read_jobs(), timeout=40)
            time.sleep(3)
            p.send_signal(signal.SIGTERM)
            p.wait(20)
    runs = [r for r in real.backend.read_runs(time.time() - 600, time.time()) if r.job_id in jobs]
    with Store.open(db, time.time) as store, store.read() as tx:
        usage = journal.usage_between(tx, 0, time.time() + 1)
        assert audit.verify(tx).ok
        kinds = [ev.kind for ev in journal.events(tx)]
    assert len(runs) == len(jobs) == len(usage) == kinds.count("started") == kinds.count("finished")
    for r in runs:
        (iv,) = [iv for iv in usage if iv.job == str(r.job_id)]
        assert r.start <= iv.t_from <= r.start + 2.5 and r.end is not None and iv.t_to is not None
        assert abs(iv.t_to - r.end) <= 2.5


def test_end_to_end_shares_3_to_1_and_the_replay(real: RealHarness, tmp_path: Path) -> None:
    result = e2e.run(real.slurm_conf, tmp_path / "e2e")
    figures = json.dumps(result.as_json(), indent=2)
    (Path(os.environ.get("FAIRSHARE_E2E_OUT", tmp_path)) / "slurm-e2e.json").write_text(figures)
    print(figures)
    assert abs(result.ratio / 3.0 - 1.0) <= 0.10, figures
    assert result.requeues >= 1 and result.min_requeued_run_s is not None
    assert result.min_requeued_run_s >= e2e.PROTECT, figures  # no requeue inside a protected window
    assert result.first_product_start_after_requeue_t is not None
    assert result.first_product_start_after_requeue_t - (result.first_requeue_t or 0) < 10, figures
    assert result.audit.get("requeue", 0) >= result.requeues
    assert "Traceback" not in result.serve_log
