"""Running a sweep's variants: each is one `fairshare compare` process, on local cores or as a Slurm job.

A task is the command line of that compare (a list of arguments), so what a variant did can be run
again by hand, and a task's outcome is its exit code and log. Exit 2 is bad input (it would fail the
same way again) and is not retried; any other failure (a crash, a kill, a preempted Slurm job) is
retried up to `retries` times, and every attempt is reported.

Locally, tasks run as child processes from a thread pool (the threads only wait), `workers` at a
time. On Slurm they go through submitit (docs/decisions.md says why submitit): one job per task,
at most `max_parallel` at once as a job array, each running the same command with the Python that
runs the sweep, so the cluster's nodes must see this installation and OUT (a shared file system, as
on every Slurm cluster).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Task:
    """One variant's compare: `argv` after `fairshare`, its log file, and the environment it needs
    beyond the sweep's own (e.g. FAIRSHARE_TRACES made absolute, for a job on another host)."""

    id: str
    argv: tuple[str, ...]
    log: Path
    env: tuple[tuple[str, str], ...] = ()


@dataclass
class Outcome:
    """How a task ended: its last exit code (None: never ran) and every attempt's code."""

    task: Task
    attempts: list[int] = field(default_factory=list)
    where: str = "local"

    @property
    def ok(self) -> bool:
        return bool(self.attempts) and self.attempts[-1] == 0


def command(argv: Sequence[str]) -> list[str]:
    """The process that runs `fairshare ARGV` with this installation's Python."""
    return [sys.executable, "-m", "fairshare", *argv]


def _open_log(log: Path, argv: Sequence[str]) -> BinaryIO:
    """The task's log, appended to (a retry's output follows the failed attempt's), headed by the command."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab")  # noqa: SIM115 (the caller's with-block closes it)
    out.write(f"$ fairshare {shlex.join(argv)}\n".encode())
    out.flush()
    return out


def run_task(argv: Sequence[str], log: str, env: dict[str, str]) -> int:
    """Run one compare, its output to `log`; the exit code. (What a Slurm job runs.)"""
    with _open_log(Path(log), argv) as out:
        full = {**os.environ, **env}
        return subprocess.run(
            command(argv), stdout=out, stderr=subprocess.STDOUT, env=full, check=False
        ).returncode


class LocalExecutor:
    """Tasks as child processes, `workers` at a time. `launcher` turns a task's argv into the
    process to start (default: `command`, this installation's fairshare)."""

    def __init__(
        self, workers: int, retries: int, launcher: Callable[[Sequence[str]], list[str]] = command
    ) -> None:
        self.workers = max(1, workers)
        self.retries = retries
        self.launcher = launcher
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._stopping = False

    def _attempt(self, task: Task) -> int:
        with _open_log(task.log, task.argv) as out:
            with self._lock:
                if self._stopping:
                    return -int(signal.SIGTERM)
                env = {**os.environ, **dict(task.env)}
                proc = subprocess.Popen(
                    self.launcher(task.argv), stdout=out, stderr=subprocess.STDOUT, env=env
                )
                self._procs[task.id] = proc
            try:
                return proc.wait()
            finally:
                with self._lock:
                    self._procs.pop(task.id, None)

    def _run(self, task: Task) -> Outcome:
        outcome = Outcome(task)
        while True:
            code = self._attempt(task)
            outcome.attempts.append(code)
            if code in (0, EXIT_BAD_INPUT) or self._stopping or len(outcome.attempts) > self.retries:
                return outcome

    def run(self, tasks: Sequence[Task], done: Callable[[Outcome], None]) -> list[Outcome]:
        """Run every task; `done` hears of each as it ends. An interrupt (KeyboardInterrupt or the
        project's Terminated) stops the children with SIGTERM (compare then leaves no partial
        folder), waits for them, and is raised again."""
        outcomes: list[Outcome] = []
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sweep")
        pending: set[Future[Outcome]] = {pool.submit(self._run, t) for t in tasks}
        try:
            while pending:
                finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in finished:
                    outcome = fut.result()
                    outcomes.append(outcome)
                    done(outcome)
        except BaseException:
            self.stop()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return outcomes

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)


class SlurmExecutor:
    """Tasks as Slurm jobs through submitit, at most `max_parallel` running at once."""

    def __init__(
        self,
        folder: Path,
        partition: str | None,
        max_parallel: int,
        retries: int,
        timeout_min: int,
        extra: dict[str, Any] | None = None,
        poll: float = 2.0,
    ) -> None:
        self.folder = folder
        self.partition = partition
        self.max_parallel = max_parallel
        self.retries = retries
        self.timeout_min = timeout_min
        self.extra = extra or {}
        self.poll = poll
        self.name = str(self.extra.get("name", "fairshare-sweep"))

    def _executor(self) -> Any:
        import submitit

        ex = submitit.AutoExecutor(folder=str(self.folder / "%j"), cluster="slurm")
        params: dict[str, Any] = {
            "timeout_min": self.timeout_min,
            "slurm_array_parallelism": self.max_parallel,
            "cpus_per_task": 1,
            "tasks_per_node": 1,
            "nodes": 1,
            "name": self.name,
        }
        if self.partition:
            params["slurm_partition"] = self.partition
        params.update(self.extra)
        ex.update_parameters(**params)
        return ex

    def run(self, tasks: Sequence[Task], done: Callable[[Outcome], None]) -> list[Outcome]:
        ex = self._executor()
        outcomes = {t.id: Outcome(t, where="slurm") for t in tasks}
        todo = list(tasks)
        finished: list[Outcome] = []
        jobs: list[tuple[Task, Any]] = []
        absent: dict[str, int] = {}  # job -> consecutive looks Slurm did not have it, unfinished
        try:
            while todo or jobs:
                if todo:
                    with ex.batch():
                        submitted = [
                            (t, ex.submit(run_task, list(t.argv), str(t.log), dict(t.env))) for t in todo
                        ]
                    jobs += submitted
                    todo = []
                time.sleep(self.poll)
                still: list[tuple[Task, Any]] = []
                queued: list[set[str] | None] = []  # squeue's answer, asked once per look
                for task, job in jobs:
                    if job.done():
                        try:
                            code = int(job.result())
                        except Exception:  # the job failed, was preempted or killed: Slurm's end
                            code = -1
                    elif self._vanished(str(job.job_id), queued, absent):
                        code = -1  # Slurm dropped it unfinished, with no record to say so
                    else:
                        still.append((task, job))
                        continue
                    outcome = outcomes[task.id]
                    outcome.attempts.append(code)
                    if code not in (0, EXIT_BAD_INPUT) and len(outcome.attempts) <= self.retries:
                        todo.append(task)
                    else:
                        finished.append(outcome)
                        done(outcome)
                jobs = still
        except BaseException:
            for _, job in jobs:
                job.cancel(check=False)
            raise
        return finished

    def _vanished(self, job_id: str, queued: list[set[str] | None], absent: dict[str, int]) -> bool:
        """Whether an unfinished job (no result, no end in sacct) is gone from Slurm: not in squeue
        at two looks in a row. A task of a job array cancelled while it pended has no accounting
        record, so submitit's watcher would wait for it for ever. (Two looks: a task that ends
        between submitit's look at its result and squeue's answer is not taken for gone.)"""
        if not queued:
            queued.append(self.in_squeue())
        ids = queued[0]
        if ids is None or job_id in ids:  # squeue could not say, or Slurm still has it
            absent.pop(job_id, None)
            return False
        absent[job_id] = absent.get(job_id, 0) + 1
        return absent[job_id] >= 2

    def in_squeue(self) -> set[str] | None:
        """The ids Slurm still has (pending, running or completing) of the jobs named as the
        sweep's, one per array task (ARRAYID_TASK); None when squeue fails."""
        try:
            done = subprocess.run(
                ["squeue", "-h", "-r", "-n", self.name, "-o", "%i"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return set(done.stdout.split()) if done.returncode == 0 else None


def default_workers() -> int:
    """All the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
