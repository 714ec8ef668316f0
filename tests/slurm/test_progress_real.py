"""Progress reports on the real Slurm of the test session (slow, slurm_cluster; docs/progress.md):
sbatch jobs run a script that reports through `fairshare job ...` with the job's munge credential
to the service's HTTP API; one stops reporting and `serve --cluster slurm` requeues it no_progress
so a waiting job starts; another is requeued past protection, loses the time since its last
checkpoint (within the cycle interval), and its restart reports `resumed`, which its class's
recovery shows."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn

from fairshare.service.api.app import create_app
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.live_service import LiveService
from fairshare.slurm.devcluster import DevCluster

from . import e2e
from .harness import RealHarness, wait_for
from .test_serve_real import real_loop, records, running

pytestmark = [pytest.mark.slow, pytest.mark.slurm_cluster]
BIN = Path(sys.executable).parent
# the job's script: on a restart report what it restored; then a step a second, a checkpoint every
# 5 steps (the step saved in a file beside it); `HANG_AFTER` steps in, it stops reporting
SCRIPT = """#!/bin/bash
set -u
export PATH={bin}:$PATH
state={state}/$SLURM_JOB_ID
step=0
if [ "${{SLURM_RESTART_COUNT:-0}}" -gt 0 ] && [ -f "$state" ]; then
  step=$(cat "$state")
  fairshare job resumed --from-step "$step"
fi
n=0
while true; do
  step=$((step + 1)); n=$((n + 1))
  if [ "$n" -le "${{HANG_AFTER:-100000}}" ]; then
    fairshare job progress --step "$step"
    if [ $((step % 5)) -eq 0 ]; then echo "$step" > "$state"; fairshare job checkpoint --step "$step"; fi
  fi
  sleep 1
done
"""
POLICY = e2e.POLICY.replace("restore: 0s, max_stall: 1h}", "restore: 0s, max_stall: 15s}")


@contextmanager
def api(loop: SchedulerLoop, munge_socket: str) -> Iterator[str]:
    """The loop's HTTP API on a free port (the test cycles the loop itself); yields its URL."""
    service = LiveService(loop.store, loop)
    service.wait_s = 0.2  # the report is taken at the test's next cycle
    app = create_app(loop.store, live=service)
    app.state.munge_socket = munge_socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for("the API", lambda: server.started or None, timeout=20)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def _sbatch(
    real: RealHarness, script: Path, account: str, url: str, sock: str, hang_after: int | None = None
) -> int:
    env = f"ALL,FAIRSHARE_URL={url},FAIRSHARE_MUNGE_SOCKET={sock}" + (
        f",HANG_AFTER={hang_after}" if hang_after is not None else ""
    )
    out = real.sh(
        "sbatch", "--parsable", "-o", "/dev/null", "-A", account, "--gres=gpu:8", "--time=10", "--requeue",
        "--comment=fairshare:protect=20s,checkpoint=10s,resumable", f"--export={env}", str(script),
    ).stdout  # fmt: skip
    return int(out.strip().split(";")[0])


def _cycle_until(loop: SchedulerLoop, what: str, probe: object, timeout: float = 90.0) -> None:
    def step() -> bool | None:
        loop.cycle()
        loop.publish(force=True)
        return probe() or None  # type: ignore[operator]

    wait_for(what, step, timeout=timeout, step=1.0)


def test_jobs_report_through_the_cli_and_a_silent_one_is_requeued_no_progress(
    real: RealHarness, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    sock = str(dev_cluster.spec.munge_socket)
    (tmp_path / "state").mkdir()
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(bin=BIN, state=tmp_path / "state"))
    script.chmod(0o755)
    with real_loop(real, tmp_path, POLICY) as loop, api(loop, sock) as url:
        jobs = [
            _sbatch(real, script, "research", url, sock, hang_after=4 if i == 0 else None) for i in range(4)
        ]
        wait_for("research to fill the cluster", lambda: running(real) >= set(jobs) or None)
        waiting = _sbatch(real, script, "research", url, sock)  # same group: no fair-share victim
        _cycle_until(
            loop,
            "the silent job requeued",
            lambda: any(r.job == str(jobs[0]) for r in records(loop, "requeue")),
        )
        (flag,) = [r for r in records(loop, "no_progress") if r.job == str(jobs[0])]
        assert flag.evidence["last_step"] == 4
        e = loop.engine
        assert e is not None
        steady = [str(j) for j in jobs[1:]]
        assert all(
            e.state.run_reports(j) is not None for j in steady
        )  # the others kept reporting through the CLI
        _cycle_until(loop, "the waiting job to start", lambda: waiting in running(real))
        assert not [r for r in records(loop, "no_progress") if r.job in steady]


def test_a_requeue_past_protection_loses_the_time_since_the_last_checkpoint_and_the_restart_resumes(
    real: RealHarness, dev_cluster: DevCluster, tmp_path: Path
) -> None:
    sock = str(dev_cluster.spec.munge_socket)
    state = tmp_path / "state"
    state.mkdir()
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(bin=BIN, state=state))
    script.chmod(0o755)
    with real_loop(real, tmp_path, POLICY) as loop, api(loop, sock) as url:
        research = [_sbatch(real, script, "research", url, sock) for _ in range(4)]
        wait_for("research to fill the cluster", lambda: running(real) >= set(research) or None)
        product = _sbatch(real, script, "product", url, sock)
        _cycle_until(
            loop,
            "a requeue",
            lambda: [r for r in records(loop, "requeue") if r.evidence["result"] == "applied"],
        )
        (rq,) = [r for r in records(loop, "requeue") if r.evidence["result"] == "applied"]
        victim = str(rq.job)
        written = (state / victim).stat().st_mtime  # when the job really wrote its last checkpoint
        (pre,) = [p for p in records(loop, "preempt") if p.job == victim]
        assert pre.evidence["reason"] == "fair_share" and pre.t - rq.t < 5
        # lost work: the GPU time since its last checkpoint (no restore overhead in this class),
        # equal to the real one within the cycle interval and the report's own latency
        assert pre.evidence["checkpoint_at"] is not None
        assert pre.evidence["lost_gpu_s"] == pytest.approx((pre.t - pre.evidence["checkpoint_at"]) * 8)
        assert abs(pre.evidence["lost_gpu_s"] / 8 - (pre.t - written)) <= 5.0
        _cycle_until(loop, "the waiting job to start", lambda: product in running(real))
        other = next(j for j in research if str(j) != victim)
        real.sh("scancel", str(other))  # GPUs for the requeued job's restart
        e = loop.engine
        assert e is not None
        _cycle_until(
            loop,
            "the restart's resumed report",
            lambda: e.state.recovery_json().get("train", {}).get("resumed"),
        )
        rec = e.state.recovery_json()["train"]
        assert (rec["restarts"], rec["resumed"], rec["not_borne_out"]) == (1, 1, False)
        assert [r.job for r in records(loop, "resumed")] == [victim]
        # while Slurm held it back (its begin time, cred_expire=10 s after the requeue) no pass
        # decided its start: at most the one decision once it was eligible (none when Slurm
        # started it first)
        starts = [s.t - rq.t for s in records(loop, "start") if s.job == victim and s.t > rq.t]
        assert len(starts) <= 1 and all(dt >= 10.0 for dt in starts), starts
        assert e.info[victim].runs == 2
