"""Submissions into the core's requests, and the crash test's hook.

`Requests` resolves a submission (a workload row: group, class, gpus, estimate, ...) against the
policy in force into the core's `JobRequest`, with the project's workload rules (class defaults and
caps, gang size, the pending charge), so a live job is read exactly as a replayed one.

`CrashPoints` is a test hook: `FAIRSHARE_CRASH_AT=POINT[:N]` SIGKILLs the serving process the N-th
time its loop reaches POINT (`mid_commit`: inside the write-ahead transaction; `after_commit`:
committed, the cluster not told yet; `after_act`: the cluster told, its confirmations not
committed; `before_checkpoint`: the cycle committed, a checkpoint due and not written;
`mid_checkpoint`: inside the checkpoint's transaction). Without the variable it does nothing.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from ...core.model import Node
from ...core.tree import TreeIndex
from ...errors import InputError
from ...inputs.cluster import EPOCH_DEFAULT, Cluster
from ...inputs.policy import Policy
from ...inputs.workload import Job, jobs_from_dicts

CRASH_ENV = "FAIRSHARE_CRASH_AT"
CRASH_POINTS = ("mid_commit", "after_commit", "after_act", "before_checkpoint", "mid_checkpoint")


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
    """Submissions (workload rows) -> Jobs, resolved against the policy in force.

    The workload rules work on a replay's clock (times from t = 0, within the input limits), so a
    submission is resolved at t = 0 and its instants moved to the service's clock afterwards: its
    submit time becomes `t`, a deadline given as an instant counts from `t`, a class's relative
    deadline from `t` too."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = tuple(nodes)
        self.cluster = Cluster(self.nodes, (), (), EPOCH_DEFAULT, None)
        self._trees: dict[int, TreeIndex] = {}

    def build(
        self, policy: Policy, job_id: str, spec: Mapping[str, Any], t: float, truth: bool = False
    ) -> Job:
        """The Job of a submission at instant t. `truth` (demo): keep the spec's `work` and
        `stall_after` (the real run time; default: the estimate); otherwise work is the estimate."""
        keep = ("work", "stall_after") if truth else ()
        row = {
            k: v for k, v in spec.items() if k not in ("job_id", "submit", "work", "stall_after") or k in keep
        }
        if row.get("estimate") is None:
            raise InputError(f"job {job_id}", "estimate", "a job needs its declared run time (estimate)")
        row.setdefault("work", row["estimate"])
        deadline = row.get("deadline")
        if isinstance(deadline, int | float) and not isinstance(deadline, bool):
            if deadline <= t:
                raise InputError(f"job {job_id}", "deadline", "the deadline has passed already")
            row["deadline"] = deadline - t
        row.update({"job_id": job_id, "submit": 0.0})
        tree = self._trees.get(id(policy))
        if tree is None:
            tree = self._trees[id(policy)] = TreeIndex.build(policy.tree)
        job = jobs_from_dicts([row], policy, tree, self.cluster, where=f"job {job_id}")[0]
        r = job.request
        moved = dataclasses.replace(r, submit=t, deadline=None if r.deadline is None else r.deadline + t)
        return dataclasses.replace(job, request=moved)
