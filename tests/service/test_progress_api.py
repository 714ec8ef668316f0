"""A job's own progress reports through the live API (docs/progress.md), on both backends: the
per-job token returned once at submission, scoped to that job (it reports nothing else and reads
nothing), the reports shown on the job and audited, a regressing counter and an ended job refused,
and a run that stops reporting flagged no_progress (with its evidence) and preempted by the watchdog."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import apt_install

from .live_helpers import Live


def _tick(live: Live, seconds: float, until: Any, tries: int = 40) -> None:
    """Move the manual clock in steps until `until()` holds (the loop's thread runs the cycles)."""
    for _ in range(tries):
        if until():
            return
        live.clock.t += seconds
        live.loop.wake.set()
        time.sleep(0.15)
    assert until(), "the loop did not get there"


def _job(live: Live, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = live.get("viewer", f"/api/jobs/{job_id}").json()["job"]
    return job


def _submit_running(live: Live, job_id: str) -> str:
    spec = {"group": "ml/nlp", "class": "debug", "gpus": 1, "estimate": "2h", "work": "2h", "job_id": job_id}
    r = live.post("nlp", "/api/jobs", json=spec)
    assert r.status_code == 201, r.text
    secret: str = r.json()["report_token"]
    assert secret.startswith("fs_")
    _tick(live, 120.0, lambda: _job(live, job_id)["state"] == "running")
    return secret


def _as(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_a_job_reports_with_its_own_token_and_the_service_shows_and_audits_it(live: Live) -> None:
    secret = _submit_running(live, "rep-1")
    c = live.client
    r = c.post("/api/jobs/rep-1/progress", json={"step": 10}, headers=_as(secret))
    assert r.status_code == 200, r.text
    assert (r.json()["state"], r.json()["changed"]) == ("accepted", True)
    r = c.post("/api/jobs/rep-1/checkpoint", json={"step": 10, "path": "s3://ckpt/10"}, headers=_as(secret))
    assert r.status_code == 200 and r.json()["changed"] is True
    again = c.post("/api/jobs/rep-1/progress", json={"step": 10}, headers=_as(secret))
    assert again.status_code == 200 and again.json()["changed"] is False  # the same report: idempotent
    live.loop.publish(force=True)
    progress = _job(live, "rep-1")["progress"]
    assert (progress["step"], progress["checkpoint_step"], progress["checkpoint_path"]) == (
        10,
        10,
        "s3://ckpt/10",
    )
    assert progress["progress_age_s"] >= 0 and progress["checkpoint_age_s"] >= 0
    summary = live.get("viewer", "/api/jobs/rep-1/explain").json()["summary"]
    assert "last progress step 10" in summary and "last checkpoint step 10" in summary
    running = {j["id"]: j for j in live.get("viewer", "/api/jobs?state=running").json()["jobs"]}
    assert running["rep-1"]["progress"]["step"] == 10  # the dashboard's running list
    audited = [d["decision"] for d in live.get("admin", "/api/decisions?job=rep-1").json()["decisions"]]
    assert "progress" in audited and "checkpoint" in audited
    # a regressing counter is refused with a clear message
    r = c.post("/api/jobs/rep-1/progress", json={"step": 3}, headers=_as(secret))
    assert r.status_code == 409 and "below the step 10" in r.json()["message"]


@pytest.mark.parametrize(
    ("who", "path", "status"),
    [
        pytest.param("job", "/api/tree", 403, id="reads-nothing-tree"),
        pytest.param("job", "/api/jobs", 403, id="reads-nothing-jobs"),
        pytest.param("job", "/api/jobs/rep-2", 403, id="reads-nothing-its-own-job"),
        pytest.param("job", "/api/decisions", 403, id="reads-nothing-audit"),
    ],
)
def test_a_jobs_token_reads_nothing(live: Live, who: str, path: str, status: int) -> None:
    secret = _submit_running(live, "rep-2")
    assert live.client.get(path, headers=_as(secret)).status_code == status


def test_a_jobs_token_cannot_report_for_another_job_nor_may_others_report_for_it(live: Live) -> None:
    mine = _submit_running(live, "rep-3")
    _submit_running(live, "rep-4")
    c = live.client
    r = c.post("/api/jobs/rep-4/progress", json={"step": 1}, headers=_as(mine))
    assert r.status_code == 403 and "job rep-4" in r.json()["message"]
    for who in ("viewer", "nlp"):  # a member of the job's own group is not the job
        assert live.post(who, "/api/jobs/rep-3/progress", json={"step": 1}).status_code == 403
    assert live.post("admin", "/api/jobs/rep-3/progress", json={"step": 1}).status_code == 200
    assert c.post("/api/jobs/rep-3/progress", json={"step": 2}, headers=_as(mine)).status_code == 200
    assert c.post("/api/jobs/rep-3/progress", json={"step": -1}, headers=_as(mine)).status_code == 422
    assert c.post("/api/jobs/rep-3/progress", json={"step": "5"}, headers=_as(mine)).status_code == 422
    # once ended, its reports are refused
    assert live.post("nlp", "/api/jobs/rep-3/cancel").status_code == 200
    r = c.post("/api/jobs/rep-3/progress", json={"step": 3}, headers=_as(mine))
    assert r.status_code in (404, 409), r.text


def test_a_run_that_stops_reporting_is_flagged_no_progress_and_preempted(live: Live) -> None:
    secret = _submit_running(live, "rep-5")
    assert (
        live.client.post("/api/jobs/rep-5/progress", json={"step": 42}, headers=_as(secret)).status_code
        == 200
    )

    def decisions() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = live.get("admin", "/api/decisions?job=rep-5").json()["decisions"]
        return out

    _tick(live, 120.0, lambda: any(d["decision"] == "preempt" for d in decisions()))
    flagged = [d for d in decisions() if d["decision"] == "no_progress"]
    assert len(flagged) == 1
    ev = flagged[0]["evidence"]
    assert ev["last_step"] == 42 and ev["max_stall_s"] == 600.0
    preempt = next(d for d in decisions() if d["decision"] == "preempt")
    pev = preempt["evidence"]
    assert pev["reason"] == "no_progress" and pev["no_progress_since"] == ev["last_progress_t"]


def test_the_cli_and_the_python_helper_report_over_http(live: Live, tmp_path: Any) -> None:
    import socket
    import subprocess
    import sys
    import threading

    import uvicorn

    from fairshare.client import report

    secret = _submit_running(live, "rep-6")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(live.client.app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        env = {"FAIRSHARE_URL": url, "SLURM_JOB_ID": "rep-6", "FAIRSHARE_JOB_TOKEN": secret}
        target = report.Target.from_env(env)
        assert report.resumed(0, target)["state"] == "accepted"
        assert report.checkpoint(100, "/ckpt/100", target)["changed"] is True
        with pytest.raises(report.ReportError, match="below the step 100"):
            report.progress(50, target)
        cli = [sys.executable, "-m", "fairshare", "job", "progress", "--step", "120"]
        done = subprocess.run(
            cli, check=False, env={**env, "PATH": ""}, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "progress 120 accepted" in done.stdout
        bad = subprocess.run(
            [*cli[:-1], "7"], check=False, env={**env, "PATH": ""}, capture_output=True, text=True, timeout=60
        )
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "below the step 120" in bad.stderr
    finally:
        server.should_exit = True
        thread.join(10)
    live.loop.publish(force=True)
    progress = _job(live, "rep-6")["progress"]
    assert (progress["step"], progress["resumed_from"], progress["checkpoint_path"]) == (120, 0, "/ckpt/100")


def test_a_report_sent_while_the_service_is_not_listening_yet_is_sent_again_once_it_is(live: Live) -> None:
    """A job that reports while the service restarts (connection refused) is not lost: the helper
    tries again after RETRY_DELAYS_S; here the service starts listening during the second wait."""
    import socket
    import threading

    import uvicorn

    from fairshare.client import report

    secret = _submit_running(live, "rep-7")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(live.client.app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 2:
            thread.start()
            for _ in range(200):
                if server.started:
                    return
                time.sleep(0.05)

    target = report.Target(f"http://127.0.0.1:{port}", "rep-7", secret)
    try:
        assert report.send("progress", {"step": 5}, target, sleep=sleep)["state"] == "accepted"
    finally:
        server.should_exit = True
        if thread.is_alive():
            thread.join(10)
    assert waits == list(report.RETRY_DELAYS_S[:2])


def test_a_service_that_never_listens_is_reported_after_the_retries() -> None:
    import socket

    from fairshare.client import report

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    waits: list[float] = []
    target = report.Target(f"http://127.0.0.1:{port}", "j1", "fs_x")
    with pytest.raises(report.ReportError, match="cannot reach"):
        report.send("progress", {"step": 1}, target, sleep=waits.append)
    assert waits == list(report.RETRY_DELAYS_S)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param({"SLURM_JOB_ID": "1", "FAIRSHARE_JOB_TOKEN": "fs_x"}, "FAIRSHARE_URL", id="no-url"),
        pytest.param({"FAIRSHARE_URL": "http://x", "FAIRSHARE_JOB_TOKEN": "fs_x"}, "no job id", id="no-job"),
        pytest.param(
            {"FAIRSHARE_URL": "http://x", "SLURM_JOB_ID": "1"}, "FAIRSHARE_JOB_TOKEN", id="no-token"
        ),
    ],
)
def test_the_helper_says_what_is_missing(env: dict[str, str], message: str) -> None:
    from fairshare.client import report

    with pytest.raises(report.ReportError, match=message):
        report.Target.from_env(env)


@pytest.fixture
def munged() -> Iterator[str]:
    """A munged of this test's own (its own key and socket, in a folder another user can reach:
    the job's user asks it for credentials); yields the socket's path."""
    if shutil.which("munged") is None or shutil.which("mungekey") is None:
        reason = apt_install(["munge"], "munge binaries")  # its daemon is not started by this
        if shutil.which("munged") is None or shutil.which("mungekey") is None:
            pytest.fail(f"cannot run the munge test: {reason or 'no munged after installing'}", pytrace=False)
    d = Path(tempfile.mkdtemp(prefix="fairshare-munge-", dir="/tmp"))
    d.chmod(0o755)
    subprocess.run(["mungekey", "-c", "-k", str(d / "munge.key")], check=True, capture_output=True)
    sock = d / "munge.socket"
    proc = subprocess.Popen(
        ["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={d / 'munge.key'}",
         f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
         f"--seed-file={d / 'munged.seed'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        yield str(sock)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(d, ignore_errors=True)


def _cred(sock: str, user: str | None = None) -> str:
    as_user = ["runuser", "-u", user, "--"] if user else []
    done = subprocess.run(
        [*as_user, "munge", "-n", "--socket", sock], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_on_slurm_a_munge_credential_reports_only_for_its_users_jobs(live: Live, munged: str) -> None:
    live.client.app.state.munge_socket = munged  # type: ignore[attr-defined]
    spec = {"group": "ml/nlp", "class": "debug", "gpus": 1, "estimate": "2h", "work": "2h", "user": "nobody"}
    assert live.post("nlp", "/api/jobs", json={**spec, "job_id": "rep-7"}).status_code == 201
    _tick(live, 120.0, lambda: _job(live, "rep-7")["state"] == "running")
    c = live.client
    mine = _cred(munged, "nobody")
    r = c.post("/api/jobs/rep-7/progress", json={"step": 1}, headers={"Authorization": f"Munge {mine}"})
    assert r.status_code == 200, r.text
    replayed = c.post(
        "/api/jobs/rep-7/progress", json={"step": 2}, headers={"Authorization": f"Munge {mine}"}
    )
    assert replayed.status_code == 401 and "Replayed" in replayed.json()["message"]
    other = _cred(munged)  # root's credential: another user than the job's
    r = c.post("/api/jobs/rep-7/progress", json={"step": 3}, headers={"Authorization": f"Munge {other}"})
    assert r.status_code == 403 and "user root may not report for job rep-7" in r.json()["message"]
    fresh = _cred(munged, "nobody")
    assert c.get("/api/tree", headers={"Authorization": f"Munge {fresh}"}).status_code == 401  # reads nothing
    forged = c.post(
        "/api/jobs/rep-7/progress", json={"step": 4}, headers={"Authorization": "Munge MUNGE:forged:"}
    )
    assert forged.status_code == 401
