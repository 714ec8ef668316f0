"""Submissions into the core's requests, and the crash test's hook.

`Requests` resolves a submission (a workload row: group, class, gpus, estimate, ...) against the
policy in force into the core's `JobRequest`, with the project's workload rules (class defaults and
caps, gang size, the pending charge), so a live job is read exactly as a replayed one.

`CrashPoints` is a test hook: `FAIRSHARE_CRASH_AT=POINT[:N]` SIGKILLs the serving process the N-th
time its loop reaches POINT (`mid_commit`: inside the write-ahead transaction; `after_commit`:
committed, the cluster not told yet; `after_act`: the cluster told, its confirmations not
committed). Without the variable it does nothing.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.model import Node
from ..core.tree import TreeIndex
from ..errors import InputError
from ..inputs.cluster import EPOCH_DEFAULT, Cluster
from ..inputs.policy import Policy
from ..inputs.workload import Job, jobs_from_dicts

CRASH_ENV = "FAIRSHARE_CRASH_AT"
CRASH_POINTS = ("mid_commit", "after_commit", "after_act")


class CrashPoints:
    """Test hook for the crash test: SIGKILL this process at a named point of the cycle."""

    def __init__(self, spec: str | None) -> None:
        self.point, self.left = None, 0
        if spec:
            point, _, n = spec.partition(":")
            if point not in CRASH_POINTS:
                raise InputError(CRASH_ENV, spec, f"unknown crash point (one of {', '.join(CRASH_POINTS)})")
            self.point, self.left = point, int(n or 1)

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.left -= 1
            if self.left <= 0:
                os.kill(os.getpid(), signal.SIGKILL)


class Requests:
    """Submissions (workload rows) -> JobRequests, resolved against the policy in force."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.cluster = Cluster(tuple(nodes), (), (), EPOCH_DEFAULT, None)

    def build(self, policy: Policy, job_id: str, spec: Mapping[str, Any], t: float) -> Job:
        row = {k: v for k, v in spec.items() if k not in ("job_id", "submit", "work", "stall_after")}
        if row.get("estimate") is None:
            raise InputError(f"job {job_id}", "estimate", "a job needs its declared run time (estimate)")
        row.update({"job_id": job_id, "submit": t, "work": row["estimate"]})
        jobs = jobs_from_dicts(
            [row], policy, TreeIndex.build(policy.tree), self.cluster, where=f"job {job_id}"
        )
        return jobs[0]
