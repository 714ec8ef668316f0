"""Report a job's progress to fairshare from inside the job (docs/progress.md).

    from fairshare.client import report
    report.progress(step)                 # any monotonic counter: steps, samples, tokens
    report.checkpoint(step, path=None)    # a checkpoint of `step` was written and can be restored
    report.resumed(from_step)             # on a restart: the checkpoint it restored

Where to: `FAIRSHARE_URL` (the service, e.g. http://fairshare:8080); which job: `FAIRSHARE_JOB_ID`,
else `SLURM_JOB_ID`; the credential: `FAIRSHARE_JOB_TOKEN`, the job's own token returned when it
was submitted (it can report for that job only and read nothing). Each call is one small HTTP POST
(standard library only, so a training loop imports nothing heavy) with a short timeout; a refusal
raises `ReportError` with the service's one-line reason. A service that refuses the connection
(restarting, or not yet listening) is tried again a few times over about 7 s: the report had not
reached it, so sending it again cannot count it twice. A timeout is not retried (the service may
have taken the report).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 10.0
RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)  # after a refused connection: ~7.5 s in all


class ReportError(RuntimeError):
    """The service refused a report, or could not be reached; the message says why."""


@dataclass(frozen=True)
class Target:
    """Where a report goes: the service's URL, the job and its credential."""

    url: str
    job: str
    token: str
    scheme: str = "Bearer"  # or "Munge": a credential from `munge -n` (Slurm)

    @staticmethod
    def from_env(
        env: Mapping[str, str] | None = None, job: str | None = None, url: str | None = None
    ) -> Target:
        env = os.environ if env is None else env
        url = url or env.get("FAIRSHARE_URL")
        job = job or env.get("FAIRSHARE_JOB_ID") or env.get("SLURM_JOB_ID")
        token = env.get("FAIRSHARE_JOB_TOKEN") or env.get("FAIRSHARE_TOKEN")
        if not url:
            raise ReportError(
                "FAIRSHARE_URL is not set: the fairshare service's URL, e.g. http://fairshare:8080"
            )
        if not job:
            raise ReportError("no job id: set FAIRSHARE_JOB_ID (or run under Slurm, which sets SLURM_JOB_ID)")
        if not token and env.get("SLURM_JOB_ID"):  # on Slurm: the job's user, proved by munge
            return Target(url.rstrip("/"), job, _munge(env), "Munge")
        if not token:
            raise ReportError("FAIRSHARE_JOB_TOKEN is not set: the job's token returned at its submission")
        return Target(url.rstrip("/"), job, token)


def _munge(env: Mapping[str, str]) -> str:
    """A fresh munge credential of this process's user (`munge -n`; FAIRSHARE_MUNGE_SOCKET)."""
    import subprocess

    socket = env.get("FAIRSHARE_MUNGE_SOCKET")
    cmd = ["munge", "-n", *(["--socket", socket] if socket else [])]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReportError(f"no FAIRSHARE_JOB_TOKEN and `munge -n` failed: {exc}") from None
    if done.returncode != 0:
        raise ReportError(f"no FAIRSHARE_JOB_TOKEN and `munge -n` failed: {done.stderr.strip()}")
    return done.stdout.strip()


def send(
    kind: str,
    body: Mapping[str, Any],
    target: Target | None = None,
    sleep: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """POST one report; returns the service's answer (`state`: accepted or queued, `changed`).
    A refused connection is tried again after each of RETRY_DELAYS_S (`sleep` waits them)."""
    import time

    to = target or Target.from_env()  # once: on Slurm each call runs `munge -n`
    wait = sleep or time.sleep
    for delay in RETRY_DELAYS_S:
        try:
            return _post(kind, body, to)
        except _Refused:
            wait(delay)
    return _post(kind, body, to)  # the last refusal is raised (a ReportError)


class _Refused(ReportError):
    """The service refused the connection: the report did not reach it."""


def _post(kind: str, body: Mapping[str, Any], to: Target) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{to.url}/api/jobs/{urllib.parse.quote(to.job, safe='')}/{kind}",
        data=json.dumps(dict(body)).encode(),
        headers={"Authorization": f"{to.scheme} {to.token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            out: dict[str, Any] = json.loads(resp.read())
            return out
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except ValueError:
            message = exc.reason
        raise ReportError(f"job {to.job}: {kind} refused ({exc.code}): {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        kind_of = _Refused if isinstance(reason, ConnectionRefusedError) else ReportError
        raise kind_of(f"job {to.job}: cannot reach {to.url}: {exc}") from None


def progress(step: int, target: Target | None = None) -> dict[str, Any]:
    """The job's counter reached `step`."""
    return send("progress", {"step": step}, target)


def checkpoint(step: int, path: str | None = None, target: Target | None = None) -> dict[str, Any]:
    """A checkpoint of `step` was written (and can be restored from `path`)."""
    body: dict[str, Any] = {"step": step}
    if path is not None:
        body["path"] = path
    return send("checkpoint", body, target)


def resumed(from_step: int, target: Target | None = None) -> dict[str, Any]:
    """This run restored the checkpoint of `from_step`."""
    return send("resumed", {"from_step": from_step}, target)
