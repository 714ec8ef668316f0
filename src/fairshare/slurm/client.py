"""The narrow cluster interface the Slurm driver uses, and its implementation on Slurm's commands.

Reads: nodes, active jobs, runs for usage, configuration, associations, QOS, a user's admin level.
Writes: priority, hold, release, requeue, signal; each returns an `ActionResult` (a job that
vanished between a read and the write is a result, not an exception). Every command has a timeout;
anything systemic (controller down, timeout, permission, unparsable output) raises a SlurmError
carrying the command and Slurm's stderr.

`FakeSlurm` (fake.py) implements the same protocol in memory for fast tests.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from .commands import Completed, Runner, SubprocessRunner, failure, job_outcome
from .model import (
    ACTIVE_STATES,
    Action,
    ActionOutcome,
    ActionResult,
    Association,
    Qos,
    SlurmJob,
    SlurmNode,
    SlurmRun,
)
from .parse import (
    ASSOC_FORMAT,
    QOS_FORMAT,
    parse_associations,
    parse_config,
    parse_jobs,
    parse_nodes,
    parse_qos,
    parse_runs,
)
from .slurm_errors import SlurmOutputError

RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "SUSPENDED"})
SIGNALS = frozenset(
    {"HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "TERM", "CONT", "STOP", "TSTP", "ALRM", "URG"}
)


class SlurmBackend(Protocol):
    """What the driver needs from a Slurm cluster; nothing more."""

    def read_nodes(self) -> list[SlurmNode]: ...

    def read_jobs(self) -> list[SlurmJob]:
        """Jobs pending or holding resources (finished jobs are left to `read_runs`)."""
        ...

    def read_runs(self, since: float, until: float) -> list[SlurmRun]:
        """Every run that overlapped [since, until] (Unix seconds), one per start of a job."""
        ...

    def read_config(self) -> dict[str, str]: ...

    def read_associations(self) -> list[Association]: ...

    def read_qos(self) -> list[Qos]: ...

    def admin_level(self, user: str) -> str | None:
        """sacctmgr AdminLevel of a user (None, Operator, Administrator); None if unknown to Slurm."""
        ...

    def set_priority(self, job_id: int, priority: int) -> ActionResult: ...

    def hold(self, job_id: int) -> ActionResult: ...

    def release(self, job_id: int) -> ActionResult: ...

    def requeue(self, job_id: int) -> ActionResult: ...

    def signal(self, job_id: int, signal: str, batch_only: bool = False) -> ActionResult: ...


def check_signal(signal: str) -> str:
    name = signal.upper().removeprefix("SIG")
    if name not in SIGNALS:
        raise ValueError(f"signal: unknown signal {signal!r} (known: {', '.join(sorted(SIGNALS))})")
    return name


def check_priority(priority: int) -> None:
    if not 1 <= priority <= 0xFFFFFFFD:
        raise ValueError(
            f"priority: {priority} is outside 1..4294967293 "
            "(0 would hold the job; Slurm reserves the top two values)"
        )


def slurm_time(t: float) -> str:
    """A Unix time as Slurm's text commands read it (UTC; the runner sets TZ=UTC)."""
    return dt.datetime.fromtimestamp(int(t), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


class CliBackend:
    """SlurmBackend over `squeue/sinfo/sacct --json`, `scontrol` and `sacctmgr -P` (Slurm 22.05+).

    timeout        seconds for each command (Slurm's clients themselves wait about MessageTimeout,
                   10 s by default, before reporting an unreachable controller)
    usage_timeout  seconds for sacct, which may read a long window
    """

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        slurm_conf: str | None = None,
        timeout: float = 30.0,
        usage_timeout: float = 120.0,
    ) -> None:
        if runner is not None and slurm_conf is not None:
            raise ValueError("slurm_conf: give it to the runner, not beside one")
        self.run: Runner = runner if runner is not None else SubprocessRunner(slurm_conf)
        self.timeout = timeout
        self.usage_timeout = usage_timeout

    # ----------------------------------------------------------------- reads

    def _read(self, args: Sequence[str], timeout: float | None = None) -> Completed:
        c = self.run(args, self.timeout if timeout is None else timeout)
        if c.returncode != 0:
            raise failure(c)
        return c

    def read_nodes(self) -> list[SlurmNode]:
        c = self._read(["sinfo", "--json"])
        return parse_nodes(c.stdout, c.args)

    def read_jobs(self) -> list[SlurmJob]:
        # 22.05 ignores squeue's filters with --json: read all, keep the active ones
        c = self._read(["squeue", "--json"])
        return [j for j in parse_jobs(c.stdout, c.args) if j.state in ACTIVE_STATES]

    def read_runs(self, since: float, until: float) -> list[SlurmRun]:
        if until < since:
            raise ValueError(f"until ({until}) is before since ({since})")
        # --state=RUNNING with -S/-E selects the jobs that ran during the window (22.05's query on
        # start and end). Without it sacct also needs an eligible time, which Slurm leaves at 0 for
        # some jobs that start at submission: their runs would be missing from the usage.
        args = ["sacct", "--allusers", "--duplicates", "--state=RUNNING", "--json"]
        # -S at the epoch itself reads as "not given"
        start, end = slurm_time(max(since, 1)), slurm_time(max(until, 1))
        c = self._read([*args, "-S", start, "-E", end], self.usage_timeout)
        return parse_runs(c.stdout, c.args)

    def read_config(self) -> dict[str, str]:
        c = self._read(["scontrol", "show", "config"])
        config = parse_config(c.stdout)
        if "SLURM_VERSION" not in config:
            raise SlurmOutputError(c.args, "printed no SLURM_VERSION: not a Slurm configuration")
        return config

    def read_associations(self) -> list[Association]:
        c = self._read(["sacctmgr", "--noheader", "--parsable2", "show", "assoc", f"format={ASSOC_FORMAT}"])
        return parse_associations(c.stdout, c.args)

    def read_qos(self) -> list[Qos]:
        c = self._read(["sacctmgr", "--noheader", "--parsable2", "show", "qos", f"format={QOS_FORMAT}"])
        return parse_qos(c.stdout, c.args)

    def admin_level(self, user: str) -> str | None:
        c = self._read(
            ["sacctmgr", "--noheader", "--parsable2", "show", "user", user, "format=user,adminlevel"]
        )
        for line in c.stdout.splitlines():
            name, _, level = line.partition("|")
            if name == user:
                return level.strip() or "None"
        return None

    # ----------------------------------------------------------------- writes

    def _act(self, job_id: int, action: Action, args: Sequence[str]) -> ActionResult:
        c = self.run(args, self.timeout)
        if c.returncode == 0:
            return ActionResult(job_id, action, "applied")
        outcome = job_outcome(c)
        if outcome is None:
            raise failure(c)
        return ActionResult(job_id, action, outcome, c.stderr.strip())

    def set_priority(self, job_id: int, priority: int) -> ActionResult:
        check_priority(priority)
        return self._act(
            job_id, "priority", ["scontrol", "update", f"JobId={job_id}", f"Priority={priority}"]
        )

    def hold(self, job_id: int) -> ActionResult:
        return self._act(job_id, "hold", ["scontrol", "hold", str(job_id)])

    def release(self, job_id: int) -> ActionResult:
        return self._act(job_id, "release", ["scontrol", "release", str(job_id)])

    def job_state(self, job_id: int) -> str | None:
        """The job's state from `scontrol show job` (None: Slurm no longer knows the job)."""
        c = self.run(["scontrol", "--oneliner", "show", "job", str(job_id)], self.timeout)
        if c.returncode != 0:
            if job_outcome(c) == "vanished":
                return None
            raise failure(c)
        for word in c.stdout.split():
            if word.startswith("JobState="):
                return word.removeprefix("JobState=")
        raise SlurmOutputError(c.args, "printed no JobState")

    def _unless_running(self, job_id: int, action: Action) -> ActionResult | None:
        """The result for a job that no longer runs (None when it runs)."""
        state = self.job_state(job_id)
        if state is not None and state in RUNNING_STATES:
            return None
        outcome: ActionOutcome = "vanished" if state is None or state not in ACTIVE_STATES else "not_running"
        return ActionResult(job_id, action, outcome, f"job state {state or 'unknown'}")

    def requeue(self, job_id: int) -> ActionResult:
        # Slurm requeues a *finished* batch job too (and runs it again): requeue only a job that
        # still runs. A job ending in the instant between the two commands remains a (tiny) race.
        return self._unless_running(job_id, "requeue") or self._act(
            job_id, "requeue", ["scontrol", "requeue", str(job_id)]
        )

    def signal(self, job_id: int, signal: str, batch_only: bool = False) -> ActionResult:
        # scancel --signal retries a pending job ("Job is in transitional state, retrying") until
        # killed: signal only a job that runs
        name = check_signal(signal)
        args = ["scancel", f"--signal={name}", *(["--batch"] if batch_only else []), str(job_id)]
        return self._unless_running(job_id, "signal") or self._act(job_id, "signal", args)
