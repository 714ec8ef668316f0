"""One way to drive the fake and the real Slurm from tests, so the same cases run against both.

FakeHarness wraps FakeSlurm (jobs start only when told); RealHarness submits with sbatch to the
session's dev cluster and waits for Slurm. Both create jobs in the states a case needs.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from fairshare.slurm.client import CliBackend, SlurmBackend
from fairshare.slurm.fake_client import FakeSlurm
from fairshare.slurm.model import SlurmJob

T = TypeVar("T")
NEVER_A_JOB = 9_000_000  # below MaxJobId, never reached by the test clusters


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30.0, step: float = 0.25) -> T:
    end = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


class Harness(Protocol):
    name: str
    backend: SlurmBackend

    def pending(self, account: str = "product", gpus: int = 1, **kw: object) -> int: ...
    def running(self, account: str = "product", gpus: int = 1, nodes: int = 1, **kw: object) -> int: ...
    def held(self, account: str = "product") -> int: ...
    def ended(self, account: str = "product") -> int: ...
    def job(self, job_id: int) -> SlurmJob | None: ...
    def wait_runs(self, job_id: int, count: int) -> None: ...
    def cleanup(self) -> None: ...


class FakeHarness:
    name = "fake"

    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.fake = FakeSlurm.dev(lambda: self.now)
        self.backend: SlurmBackend = self.fake

    def _tick(self) -> None:
        self.now += 5

    def pending(self, account: str = "product", gpus: int = 1, **kw: object) -> int:
        self._tick()
        return self.fake.submit(account, gpus, **kw)  # type: ignore[arg-type]

    def running(self, account: str = "product", gpus: int = 1, nodes: int = 1, **kw: object) -> int:
        job = self.pending(account, gpus * nodes, nodes=nodes, **kw)
        self.fake.start(job)
        self._tick()
        return job

    def held(self, account: str = "product") -> int:
        return self.pending(account, hold=True)

    def ended(self, account: str = "product") -> int:
        job = self.running(account)
        self.fake.finish(job, "CANCELLED")
        return job

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.backend.read_jobs() if j.job_id == job_id), None)

    def wait_runs(self, job_id: int, count: int) -> None:
        assert len([r for r in self.backend.read_runs(0, self.now) if r.job_id == job_id]) == count

    def cleanup(self) -> None:
        pass


class RealHarness:
    name = "real"

    def __init__(self, slurm_conf: str, env: dict[str, str]) -> None:
        self.slurm_conf = slurm_conf
        self.env = env
        self.backend = CliBackend(slurm_conf=slurm_conf, timeout=30)
        self.cli = self.backend

    def sh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            args, capture_output=True, text=True, env=self.env, cwd="/tmp", timeout=60, check=False
        )
        if check and p.returncode:
            raise AssertionError(f"{' '.join(args)}: {p.returncode} {p.stderr.strip()}")
        return p

    def sbatch(
        self,
        account: str,
        gpus: int,
        nodes: int = 1,
        *,
        comment: str = "",
        qos: str | None = None,
        hold: bool = False,
        requeue: bool = True,
        begin_later: bool = False,
        time_limit_min: int = 10,
    ) -> int:
        args = [
            "sbatch",
            "--parsable",
            "-o",
            "/dev/null",
            "-A",
            account,
            f"--gres=gpu:{gpus // nodes}",
            "-N",
            str(nodes),
            f"--time={time_limit_min}",
        ]
        args += [f"--comment={comment}"] if comment else []
        args += [f"--qos={qos}"] if qos else []
        args += ["-H"] if hold else []
        args += [] if requeue else ["--no-requeue"]
        args += ["--begin=now+1hour"] if begin_later else []
        out = self.sh(*args, "--wrap", "sleep 600").stdout.strip()
        return int(out.split(";")[0])

    def pending(self, account: str = "product", gpus: int = 1, **kw: object) -> int:
        job = self.sbatch(account, gpus, begin_later=True, **kw)  # type: ignore[arg-type]
        wait_for(f"job {job} pending", lambda: (j := self.job(job)) is not None and j.pending)
        return job

    def running(self, account: str = "product", gpus: int = 1, nodes: int = 1, **kw: object) -> int:
        job = self.sbatch(account, gpus * nodes, nodes, **kw)  # type: ignore[arg-type]
        wait_for(f"job {job} running", lambda: (j := self.job(job)) is not None and j.state == "RUNNING")
        return job

    def held(self, account: str = "product") -> int:
        job = self.sbatch(account, 1, hold=True)
        wait_for(f"job {job} held", lambda: (j := self.job(job)) is not None and j.held)
        return job

    def ended(self, account: str = "product") -> int:
        job = self.running(account)
        self.sh("scancel", str(job))
        wait_for(f"job {job} to end", lambda: self.job(job) is None)
        return job

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.backend.read_jobs() if j.job_id == job_id), None)

    def wait_runs(self, job_id: int, count: int) -> None:
        # slurmdbd records runs asynchronously: give it a moment
        def runs() -> bool:
            got = [r for r in self.backend.read_runs(time.time() - 3600, time.time()) if r.job_id == job_id]
            return len(got) == count

        wait_for(f"{count} run(s) of job {job_id} in sacct", runs, timeout=20, step=0.5)

    def cleanup(self) -> None:
        ids = [str(j.job_id) for j in self.backend.read_jobs()]
        if ids:
            self.sh("scancel", *ids, check=False)
            wait_for("the queue to empty", lambda: not self.backend.read_jobs(), timeout=30)
