"""Typed failures of Slurm commands. Each carries the command line and Slurm's stderr.

SlurmError                  any failure of a Slurm command (base class)
├── SlurmCommandError       the command ran and failed (non-zero exit, or errors in its JSON)
│   ├── SlurmUnavailable    slurmctld (or slurmdbd) could not be reached: retry on the next cycle
│   └── SlurmPermissionError  the caller is not allowed to do this (not root / operator / admin)
├── SlurmTimeout            the command did not finish within its timeout and was killed
├── SlurmOutputError        the command succeeded but its output is not what this Slurm should print
└── SlurmNotFound           the command is not installed (or SLURM_CONF points nowhere)

Per-job outcomes that are part of normal operation (a job that vanished between a read and a
write, a held job, a job no longer running) are not errors: actions return an `ActionResult`.
"""

from __future__ import annotations

from collections.abc import Sequence


def _quote(args: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in args)


class SlurmError(Exception):
    """A Slurm command failed. `command` is the argument list, `stderr` what Slurm printed."""

    def __init__(self, command: Sequence[str], message: str, stderr: str = "") -> None:
        self.command = tuple(command)
        self.stderr = stderr.strip()
        self.message = message
        detail = f": {self.stderr}" if self.stderr and self.stderr not in message else ""
        super().__init__(f"`{_quote(self.command)}` {message}{detail}")


class SlurmCommandError(SlurmError):
    default = "failed with exit code {rc}"

    def __init__(self, command: Sequence[str], returncode: int, stderr: str, message: str = "") -> None:
        self.returncode = returncode
        super().__init__(command, message or self.default.format(rc=returncode), stderr)


class SlurmUnavailable(SlurmCommandError):
    """The controller or the accounting daemon did not answer; the state may be fine a moment later."""

    default = "could not reach Slurm (exit code {rc})"


class SlurmPermissionError(SlurmCommandError):
    """Slurm refused the operation for this user (setting priorities needs root, SlurmUser or an
    operator/administrator AdminLevel in sacctmgr)."""

    default = "was refused: permission (exit code {rc})"


class SlurmTimeout(SlurmError):
    def __init__(self, command: Sequence[str], timeout: float, stderr: str = "") -> None:
        self.timeout = timeout
        super().__init__(command, f"timed out after {timeout:g}s and was killed", stderr)


class SlurmOutputError(SlurmError):
    """Output that cannot be parsed (a different Slurm version, or a truncated answer)."""


class SlurmNotFound(SlurmError):
    pass
