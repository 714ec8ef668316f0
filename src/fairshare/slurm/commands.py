"""Running Slurm's commands: a timeout on every call, typed errors, and the per-job outcomes.

`Runner` is the seam for tests: `SubprocessRunner` runs the real commands, a test may pass any
callable with the same signature (e.g. one replaying recorded output).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .model import ActionOutcome
from .slurm_errors import (
    SlurmCommandError,
    SlurmNotFound,
    SlurmPermissionError,
    SlurmTimeout,
    SlurmUnavailable,
)


@dataclass(frozen=True, slots=True)
class Completed:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class Runner(Protocol):
    def __call__(self, args: Sequence[str], timeout: float) -> Completed: ...


class SubprocessRunner:
    """Runs a command with a timeout (the process is killed when it expires).

    `slurm_conf` sets SLURM_CONF for the commands (default: inherited). TZ is UTC so that times
    given to and printed by Slurm's text commands mean the same thing to both sides.
    """

    def __init__(self, slurm_conf: str | None = None, env: Mapping[str, str] | None = None) -> None:
        base = dict(os.environ if env is None else env)
        if slurm_conf is not None:
            base["SLURM_CONF"] = slurm_conf
        base["TZ"] = "UTC"
        base.pop("SQUEUE_FORMAT", None)  # user formats would change the text output
        base.pop("SQUEUE_SORT", None)
        self.env = base

    def __call__(self, args: Sequence[str], timeout: float) -> Completed:
        argv = tuple(args)
        try:
            p = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self.env,
                cwd="/",
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
            raise SlurmTimeout(argv, timeout, err or "") from None
        except FileNotFoundError:
            raise SlurmNotFound(
                argv, f"cannot run: {argv[0]} is not installed (install the slurm-client package)"
            ) from None
        except PermissionError as exc:
            raise SlurmNotFound(argv, f"cannot run: {exc.strerror}") from None
        return Completed(argv, p.returncode, p.stdout, p.stderr)


# What Slurm 22.05 prints when slurmctld/slurmdbd cannot be reached (client commands wait about
# MessageTimeout first); `scontrol update` says "Unexpected message received" in that case.
UNAVAILABLE = (
    "Unable to contact slurm controller",
    "Unexpected message received",
    "Socket timed out",
    "Connection refused",
    "Zero Bytes were transmitted or received",
    "backup controller in standby mode",
    "Problem talking to the database",
    "Unable to establish connection",
    "Slurm controller not responding",
    "Slurmctld is not responding",
)
PERMISSION = ("Access/permission denied", "Permission denied", "Only root can", "not authorized")

# per-job answers: part of normal operation, not errors
JOB_OUTCOMES: tuple[tuple[str, ActionOutcome], ...] = (
    ("Invalid job id specified", "vanished"),
    ("already completing or completed", "vanished"),
    ("Job has already finished", "vanished"),
    ("Job is in held state", "held"),
    ("Job is no longer pending execution", "not_pending"),
    ("Job is pending execution", "not_running"),
    ("Job can not be altered now", "not_running"),
    ("Requested operation is presently disabled", "refused"),
    ("Requested operation not supported on this job", "refused"),
    ("Job is not in a requeueable state", "refused"),
)


def failure(c: Completed, what: str = "") -> SlurmCommandError:
    """The typed error for a failed command (controller down, permission, or anything else)."""
    text = c.stderr + c.stdout
    lowered = text.lower()
    if any(p.lower() in lowered for p in UNAVAILABLE):
        return SlurmUnavailable(c.args, c.returncode, c.stderr, what)
    if "could not establish a configuration source" in lowered:
        return SlurmCommandError(
            c.args, c.returncode, c.stderr, "found no Slurm configuration (set SLURM_CONF to the slurm.conf)"
        )
    if any(p.lower() in lowered for p in PERMISSION):
        return SlurmPermissionError(c.args, c.returncode, c.stderr, what)
    return SlurmCommandError(c.args, c.returncode, c.stderr, what)


def job_outcome(c: Completed) -> ActionOutcome | None:
    """The per-job outcome a failed action's message names, or None when it names none."""
    text = (c.stderr + c.stdout).lower()
    if any(p.lower() in text for p in UNAVAILABLE):
        return None  # "Unexpected message received for job 5" is the controller, not the job
    for pattern, outcome in JOB_OUTCOMES:
        if pattern.lower() in text:
            return outcome
    return None
