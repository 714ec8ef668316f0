"""The command layer: timeouts, typed errors carrying command and stderr, per-job outcomes.

A scripted runner answers like Slurm 22.05 does (the messages were recorded from the dev cluster).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from fairshare.slurm.client import CliBackend, slurm_time
from fairshare.slurm.commands import Completed, SubprocessRunner
from fairshare.slurm.slurm_errors import (
    SlurmCommandError,
    SlurmNotFound,
    SlurmOutputError,
    SlurmPermissionError,
    SlurmTimeout,
    SlurmUnavailable,
)

DATA = Path(__file__).parent / "data"


class Script:
    """A runner that answers each command from a list of (argv prefix, rc, stdout, stderr)."""

    def __init__(self, *answers: tuple[Sequence[str], int, str, str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[tuple[str, ...], float]] = []

    def __call__(self, args: Sequence[str], timeout: float) -> Completed:
        argv = tuple(args)
        self.calls.append((argv, timeout))
        for prefix, rc, out, err in self.answers:
            if argv[: len(prefix)] == tuple(prefix):
                return Completed(argv, rc, out, err)
        raise AssertionError(f"unexpected command {argv}")


def test_subprocess_runner_kills_a_command_at_its_timeout() -> None:
    run = SubprocessRunner()
    with pytest.raises(SlurmTimeout) as info:
        run(
            [
                sys.executable,
                "-c",
                "import sys, time; sys.stderr.write('slow\\n'); sys.stderr.flush(); time.sleep(30)",
            ],
            0.5,
        )
    assert info.value.command[0] == sys.executable
    assert info.value.timeout == 0.5
    assert "timed out after 0.5s" in str(info.value)


def test_subprocess_runner_reports_a_missing_command() -> None:
    with pytest.raises(SlurmNotFound, match="not installed"):
        SubprocessRunner()(["no-such-squeue-here"], 5)


def test_subprocess_runner_sets_slurm_conf_and_utc() -> None:
    run = SubprocessRunner(slurm_conf="/x/slurm.conf", env={"PATH": "/usr/bin:/bin", "SQUEUE_FORMAT": "%i"})
    c = run(["sh", "-c", 'echo "$SLURM_CONF $TZ ${SQUEUE_FORMAT:-unset}"'], 5)
    assert c.stdout.strip() == "/x/slurm.conf UTC unset"


def test_every_command_gets_the_backend_timeout() -> None:
    script = Script(
        (("squeue",), 0, (DATA / "squeue.json").read_text(), ""), (("sacct",), 0, '{"jobs": []}', "")
    )
    b = CliBackend(script, timeout=7, usage_timeout=99)
    b.read_jobs()
    b.read_runs(0, 3600)
    assert [t for _, t in script.calls] == [7, 99]
    sacct = script.calls[1][0]
    assert "--state=RUNNING" in sacct and "--duplicates" in sacct
    assert sacct[-4:] == ("-S", "1970-01-01T00:00:01", "-E", "1970-01-01T01:00:00")


def test_read_jobs_keeps_only_active_jobs() -> None:
    b = CliBackend(Script((("squeue",), 0, (DATA / "squeue.json").read_text(), "")))
    assert [j.job_id for j in b.read_jobs()] == [5, 6, 7, 8]


UNREACHABLE = "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n"


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        (UNREACHABLE, SlurmUnavailable),
        ("sacctmgr: error: Problem talking to the database: Connection refused\n", SlurmUnavailable),
        ("Access/permission denied for job 5\n", SlurmPermissionError),
        ("something else entirely\n", SlurmCommandError),
        ("scontrol: fatal: Could not establish a configuration source\n", SlurmCommandError),
    ],
)
def test_failed_reads_raise_typed_errors_with_command_and_stderr(stderr: str, kind: type[Exception]) -> None:
    b = CliBackend(Script((("scontrol",), 1, "", stderr)))
    with pytest.raises(SlurmCommandError) as info:
        b.read_config()
    assert type(info.value) is kind
    assert info.value.command == ("scontrol", "show", "config")
    assert info.value.stderr == stderr.strip()
    assert info.value.returncode == 1


def test_config_without_a_version_is_not_slurm() -> None:
    with pytest.raises(SlurmOutputError, match="SLURM_VERSION"):
        CliBackend(Script((("scontrol",), 0, "Foo = bar\n", ""))).read_config()


@pytest.mark.parametrize(
    ("stderr", "outcome"),
    [
        ("Invalid job id specified for job 999\n", "vanished"),
        ("Job has already finished for job 4\nslurm_suspend error: Job has already finished\n", "vanished"),
        ("Job is in held state, pending scheduler release for job 1\n", "held"),
        ("Job is pending execution for job 2\n", "not_running"),
    ],
)
def test_per_job_answers_are_results_not_errors(stderr: str, outcome: str) -> None:
    b = CliBackend(Script((("scontrol", "update"), 1, "", stderr), (("scontrol", "hold"), 1, "", stderr)))
    r = b.set_priority(5, 2_000_000)
    assert (r.job_id, r.action, r.outcome, r.ok) == (5, "priority", outcome, False)
    assert r.detail == stderr.strip()
    assert b.hold(5).outcome == outcome


def test_an_unreachable_controller_during_a_write_raises() -> None:
    # `scontrol update` says "Unexpected message received" when slurmctld is down (22.05.8)
    b = CliBackend(Script((("scontrol", "update"), 1, "", "Unexpected message received for job 5\n")))
    with pytest.raises(SlurmUnavailable) as info:
        b.set_priority(5, 2_000_000)
    assert info.value.command == ("scontrol", "update", "JobId=5", "Priority=2000000")


def test_writes_build_the_documented_commands() -> None:
    script = Script(
        (
            ("scontrol", "--oneliner", "show", "job"),
            0,
            "JobId=5 JobName=wrap JobState=RUNNING Reason=None\n",
            "",
        ),
        (("scontrol",), 0, "", ""),
        (("scancel",), 0, "", ""),
    )
    b = CliBackend(script)
    assert all(
        r.ok
        for r in (
            b.set_priority(5, 7),
            b.hold(5),
            b.release(5),
            b.requeue(5),
            b.signal(5, "sigusr1", batch_only=True),
        )
    )
    assert [c for c, _ in script.calls] == [
        ("scontrol", "update", "JobId=5", "Priority=7"),
        ("scontrol", "hold", "5"),
        ("scontrol", "release", "5"),
        ("scontrol", "--oneliner", "show", "job", "5"),
        ("scontrol", "requeue", "5"),
        ("scontrol", "--oneliner", "show", "job", "5"),
        ("scancel", "--signal=USR1", "--batch", "5"),
    ]


@pytest.mark.parametrize(
    ("show", "outcome"),
    [
        ((0, "JobId=4 JobState=COMPLETED Reason=None\n", ""), "vanished"),
        ((0, "JobId=4 JobState=PENDING Reason=Priority\n", ""), "not_running"),
        ((0, "JobId=4 JobState=COMPLETING Reason=None\n", ""), "not_running"),
        ((1, "", "slurm_load_jobs error: Invalid job id specified\n"), "vanished"),
    ],
)
def test_requeue_and_signal_never_touch_a_job_that_no_longer_runs(
    show: tuple[int, str, str], outcome: str
) -> None:
    # Slurm 22.05 requeues a *finished* batch job too and runs it again, and `scancel --signal`
    # retries a pending job until killed: the backend looks first
    script = Script((("scontrol", "--oneliner", "show", "job"), *show))
    b = CliBackend(script)
    assert b.requeue(4).outcome == outcome
    assert b.signal(4, "USR1").outcome == outcome
    assert [c[0][1] for c in script.calls] == ["--oneliner", "--oneliner"]  # no requeue, no scancel


def test_requeue_of_a_job_submitted_with_no_requeue_is_refused() -> None:
    script = Script(
        (("scontrol", "--oneliner"), 0, "JobId=6 JobState=RUNNING\n", ""),
        (("scontrol", "requeue"), 1, "", "Requested operation is presently disabled for job 6\n"),
    )
    assert CliBackend(script).requeue(6).outcome == "refused"


def test_bad_arguments_are_refused_before_any_command() -> None:
    b = CliBackend(Script())
    with pytest.raises(ValueError, match="priority: 0 is outside"):
        b.set_priority(5, 0)
    with pytest.raises(ValueError, match="unknown signal 'NOPE'"):
        b.signal(5, "NOPE")
    with pytest.raises(ValueError, match="before since"):
        b.read_runs(10, 5)
    with pytest.raises(ValueError, match="give it to the runner"):
        CliBackend(Script(), slurm_conf="/x")


def test_slurm_time_is_utc() -> None:
    assert slurm_time(1796139100.7) == "2026-12-01T15:31:40"


def test_a_missing_configuration_says_to_set_slurm_conf() -> None:
    stderr = (
        "scontrol: error: fetch_config: DNS SRV lookup failed\n"
        "scontrol: fatal: Could not establish a configuration source\n"
    )
    with pytest.raises(SlurmCommandError, match="found no Slurm configuration \\(set SLURM_CONF"):
        CliBackend(Script((("scontrol",), 1, "", stderr))).read_config()
