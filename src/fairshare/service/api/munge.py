"""A job's munge credential (Slurm, docs/progress.md): `Authorization: Munge <credential>`.

On Slurm a job has no fairshare token; it proves which user it runs as with a credential from
`munge -n` (munged runs on every Slurm node), which the service decodes with `unmunge` against the
same munged key. The caller is then that user, and may report only for a job of that user
(LiveService.report); munged refuses a credential replayed or older than its TTL.
"""

from __future__ import annotations

import re
import subprocess

from ..service_errors import Unauthorized
from ..storage.roles import Principal

MUNGE_ROLE = "munge"
_UID = re.compile(r"^UID:\s+(\S+)\s+\((\d+)\)", re.M)
_STATUS = re.compile(r"^STATUS:\s+(.*)$", re.M)
MAX_CREDENTIAL = 4096


def munge_principal(credential: str, socket: str | None = None) -> Principal:
    """The user a munge credential was made by; Unauthorized when unmunge refuses it."""
    if not credential or len(credential) > MAX_CREDENTIAL or not credential.startswith("MUNGE:"):
        raise Unauthorized("not a munge credential (make one with `munge -n`)")
    cmd = ["unmunge", *(["--socket", socket] if socket else []), "--metadata=-", "--output=/dev/null"]
    try:
        done = subprocess.run(cmd, input=credential, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unauthorized(f"cannot check the munge credential here: {exc}") from None
    status = _STATUS.search(done.stdout)
    uid = _UID.search(done.stdout)
    if done.returncode != 0 or uid is None or status is None or not status.group(1).startswith("Success"):
        why = status.group(1) if status else (done.stderr.strip() or "refused")
        raise Unauthorized(f"munge credential refused: {why}")
    user = uid.group(1)
    return Principal(0, f"munge user {user}", MUNGE_ROLE, user)
