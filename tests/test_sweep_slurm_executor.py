"""The sweep's Slurm executor (fairshare.sweep.run.SlurmExecutor) over a stand-in for submitit and
squeue: how it tells that a task ended, and which it retries. The real cluster's test is
tests/slurm/test_sweep_slurm.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fairshare.sweep.run import Outcome, SlurmExecutor, Task


@dataclass
class FakeJob:
    """A submitit job: `done` once it has a result or sacct an end; `result` raises without one."""

    job_id: str
    looks_to_end: int | None  # None: never ends by submitit's lights
    code: int | None  # None: no result (killed by Slurm)
    looks: int = 0

    def done(self) -> bool:
        self.looks += 1
        assert self.looks < 100, f"job {self.job_id} waited for for ever"
        return self.looks_to_end is not None and self.looks >= self.looks_to_end

    def result(self) -> int:
        if self.code is None:
            raise RuntimeError("has not produced any output (state: CANCELLED)")
        return self.code

    def cancel(self, check: bool = False) -> None:
        pass


@dataclass
class FakeSlurm:
    """Attempts by task, in order: (looks until submitit sees it end, its code, in squeue meanwhile)."""

    plan: dict[str, list[tuple[int | None, int | None, bool]]]
    jobs: list[FakeJob] = field(default_factory=list)
    listed: set[str] = field(default_factory=set)
    squeue_fails: bool = False

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield

    def submit(self, fn: Any, argv: list[str], log: str, env: dict[str, str]) -> FakeJob:
        task = Path(log).stem
        ends, code, listed = self.plan[task].pop(0)
        job = FakeJob(f"{len(self.jobs) + 1}_0", ends, code)
        self.jobs.append(job)
        if listed:
            self.listed.add(job.job_id)
        return job


class Executor(SlurmExecutor):
    def __init__(self, slurm: FakeSlurm, retries: int = 1) -> None:
        super().__init__(Path("/nonexistent"), None, 2, retries, 10, poll=0.0)
        self.slurm = slurm
        self.squeue_calls = 0

    def _executor(self) -> Any:
        return self.slurm

    def in_squeue(self) -> set[str] | None:
        self.squeue_calls += 1
        return None if self.slurm.squeue_fails else set(self.slurm.listed)


CASES = [
    # a task that ends with its result; one that Slurm killed (sacct says so, no result): retried
    pytest.param({"a": [(2, 0, True)], "b": [(2, None, True), (1, 0, True)]}, False, {"a": [0], "b": [-1, 0]},
                 id="a_killed_task_with_an_end_in_sacct_is_retried"),
    # cancelled while it pended: no result, no accounting record (submitit never says done), gone
    # from squeue: retried after two looks
    pytest.param({"a": [(None, None, False), (1, 0, True)], "b": [(1, 0, True)]}, False,
                 {"a": [-1, 0], "b": [0]}, id="a_task_cancelled_while_pending_and_gone_is_retried"),
    # still listed by Slurm (pending for long): waited for, not retried
    pytest.param({"a": [(30, 0, True)]}, False, {"a": [0]}, id="a_task_slurm_still_has_is_waited_for"),
    # when squeue cannot answer nothing is taken for gone
    pytest.param({"a": [(30, 0, False)]}, True, {"a": [0]}, id="an_unanswered_squeue_takes_nothing_for_gone"),
]  # fmt: skip


@pytest.mark.parametrize(("plan", "squeue_fails", "attempts"), CASES)
def test_the_slurm_executor_retries_a_task_that_ended_without_its_result(
    plan: dict[str, list[tuple[int | None, int | None, bool]]],
    squeue_fails: bool,
    attempts: dict[str, list[int]],
) -> None:
    slurm = FakeSlurm({k: list(v) for k, v in plan.items()}, squeue_fails=squeue_fails)
    ex = Executor(slurm)
    heard: list[Outcome] = []
    tasks = [Task(k, ("compare",), Path(f"/nonexistent/logs/{k}.log")) for k in sorted(plan)]
    out = ex.run(tasks, heard.append)
    assert {o.task.id: o.attempts for o in out} == attempts
    assert [o.task.id for o in heard] == [o.task.id for o in out]


def test_a_task_that_leaves_squeue_as_it_ends_is_not_taken_for_gone() -> None:
    # at the first look submitit has no result yet and squeue no longer lists it (it ended in
    # between): one absent look is not enough, and the next look finds its result
    slurm = FakeSlurm({"a": [(2, 0, False)]})
    ex = Executor(slurm)
    (out,) = ex.run([Task("a", ("compare",), Path("/nonexistent/logs/a.log"))], lambda o: None)
    assert out.attempts == [0] and ex.squeue_calls == 1
