"""Issue 9, class 4: command-line options. An error names the option the user typed; a policy is
replayed once however often it is listed; a bad value of a numeric option is an error (exit 2),
never a traceback; nothing is written."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from fairshare._cli_runtime import Main
from fairshare.cli import main

TRACE = ["--trace", "philly", "--jobs", "0:50"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["replay", *TRACE, "--policy-name", "nope"], "error: --policy-name: nope: unknown policy"),
        (
            ["compare", "--scenario", "eight-gpu", "--policies", "fifo,nope"],
            "error: --policies: nope: unknown policy",
        ),
        (["compare", "--scenario", "eight-gpu", "--policies", "fifo,fifo"], "fifo is given twice"),
        (["compare", "--scenario", "eight-gpu", "--policies", " fifo , fifo"], "fifo is given twice"),
        (
            ["compare", "--scenario", "eight-gpu", "--policies", "fifo,"],
            "error: --policies: fifo,: an empty policy",
        ),
        (
            ["replay", *TRACE, "--clip-duration", ":0s"],
            "error: --clip-duration: :0s: MAX must be a run time above 0",
        ),
        (
            ["replay", *TRACE, "--clip-duration", "0:"],
            "error: --clip-duration: 0:: MIN must be a run time above 0",
        ),
        (
            ["replay", *TRACE, "--clip-duration", "1e400:"],
            "error: --clip-duration: 1e400:: a duration must be a finite number",
        ),
        (
            ["replay", *TRACE, "--clip-duration", "1s:100000w"],
            "error: --clip-duration: 1s:100000w: MAX must be",
        ),
        (["replay", *TRACE, "--clip-duration", "2h:1h"], "error: --clip-duration: 2h:1h: MAX is below MIN"),
        (["replay", *TRACE, "--clip-duration", "-1s:"], "error: --clip-duration: -1s:"),
        (["replay", "--trace", "philly", "--jobs", "5:2"], "error: --jobs: 5:2: expected 0 <= FIRST < END"),
        (["replay", "--trace", "philly", "--jobs", "-3:"], "error: --jobs: -3:: expected 0 <= FIRST < END"),
        (["replay", "--trace", "philly", "--jobs", "1e3:2e3"], "error: --jobs: 1e3:2e3: expected FIRST:END"),
        (["replay", "--trace", "philly", "--jobs", "abc"], "error: --jobs: abc: expected FIRST:END"),
        (["replay", "--trace", "philly", "--repeat", "0"], "error: --repeat: 0: expected a whole number"),
        (["replay", "--trace", "philly", "--repeat", "1001"], "error: --repeat: 1001: expected a whole"),
        (["replay", "--trace", "philly", "--repeat", "100"], "error: --repeat: 100: 82,247 jobs x 100"),
        (["replay", *TRACE, "--repeat", "1000"], "error: --repeat: 1000: the last copy would arrive"),
        (["compare", "--scenario", "eight-gpu", "--seed", "-1"], "error: --seed: -1: expected a whole"),
        (["compare", "--scenario", "eight-gpu", "--seed", str(2**64)], "error: --seed: 1844674407370955"),
        (["compare", "--scenario", "eight-gpu", "--seed", "x"], "error: --seed: x: expected a whole number"),
        (["replay", *TRACE, "--forecast", "x"], "error: --forecast: x: expected a whole number from 0"),
        (["replay", *TRACE, "--forecast", "100001"], "error: --forecast: 100001: expected a whole"),
        (["replay", *TRACE, "--forecast", "2.5"], "error: --forecast: 2.5: expected a whole number"),
        (["replay", *TRACE, "--overstate", "1:1e308"], "error: --overstate: 1:1e308: expected 0.001 <="),
        (["replay", *TRACE, "--overstate", "0:2"], "error: --overstate: 0:2: expected 0.001 <= LOW"),
        (["replay", *TRACE, "--overstate", "10:2"], "error: --overstate: 10:2: expected 0.001 <= LOW"),
        (["replay", *TRACE, "--overstate", "nan:2"], "error: --overstate: nan:2: expected 0.001"),
        (["replay", *TRACE, "--overstate", "2"], "error: --overstate: 2: expected LOW:HIGH"),
        (["replay", "--trace", "nope"], "error: --trace: nope: unknown trace"),
        (["replay", "--trace", "philly", "--workload-format", "openb"], "error: --trace: philly: use either"),
        (["replay", "--workload", "w.csv", "--workload-format", "nope"], "error: --workload-format: nope:"),
    ],
    ids=[
        "policy-name-unknown",
        "policies-unknown",
        "policies-twice",
        "policies-twice-spaced",
        "policies-empty-entry",
        "clip-max-zero",
        "clip-min-zero",
        "clip-inf",
        "clip-over-limit",
        "clip-max-below-min",
        "clip-negative",
        "jobs-reversed",
        "jobs-negative",
        "jobs-float",
        "jobs-garbage",
        "repeat-zero",
        "repeat-over-limit",
        "repeat-too-many-jobs",
        "repeat-too-late",
        "seed-negative",
        "seed-huge",
        "seed-text",
        "forecast-text",
        "forecast-over-limit",
        "forecast-fraction",
        "overstate-1e308",
        "overstate-zero",
        "overstate-reversed",
        "overstate-nan",
        "overstate-one-number",
        "trace-unknown",
        "trace-and-format",
        "workload-format-unknown",
    ],
)
def test_a_bad_option_names_itself_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, [*args, "--out", "o"])
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output
    assert expected in res.output, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    assert not (tmp_path / "o").exists()
    assert "philly.csv: line" not in res.output  # an option's error never blames a line of the trace


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["replay", "--bogus"], "error: --bogus: no such option"),
        (["replay", "--out"], "error: --out: Option '--out' requires an argument."),
        (["check"], "error: POLICY: missing: the argument is required (see `fairshare check --help`)"),
        (["compare", "--scenario", "eight-gpu"], "error: --out: missing: the option is required"),
        (["nope"], "error: fairshare: No such command 'nope'. (see `fairshare --help`)"),
        (["compare", "--scenario", "eight-gpu", "--out", "o", "extra"], "Got unexpected extra argument"),
        (["compare", "--scenario", "eight-gpu", "--out", "o", "--repeat", "1e3"], "error: --repeat: 1e3:"),
        (["compare", "--scenario", "eight-gpu", "--out", "o", "--rebase=x"], "error: --rebase"),
        (["explain", "--out", "o"], "error: --job: missing: the option is required"),
        (["review", "--days", "x"], "error: --days: x: expected a number from 0 to 3,650"),
    ],
    ids=[
        "unknown-option",
        "option-without-value",
        "missing-argument",
        "missing-required-option",
        "unknown-command",
        "extra-argument",
        "non-integer",
        "value-to-a-flag",
        "explain-without-job",
        "service-command-float",
    ],
)
def test_a_usage_error_is_one_line_with_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], line: str
) -> None:
    """click's own errors too: the README's one line, not click's three-line usage block."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args, prog_name="fairshare")
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    assert line in res.output, res.output
    assert "Usage:" not in res.output and "Try " not in res.output


def _interrupted_during_an_import(signum: int) -> click.Group:
    """A command the signal reaches while a C extension initialises: Python hands the command an
    ImportError chained from the interrupt, not the interrupt itself."""

    @click.group(cls=Main)
    def group() -> None:
        pass

    @group.command()
    def work() -> None:
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises before this ends
        except BaseException as exc:
            raise ImportError("initialization failed") from exc

    return group


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
    ids=["sigterm", "sigint"],
)
def test_an_interrupt_turned_into_another_exception_still_exits_as_the_interrupt(
    signum: int, code: int, said: str
) -> None:
    result = CliRunner().invoke(_interrupted_during_an_import(signum), ["work"])
    assert result.exit_code == code, result.output
    assert said in result.output


def test_an_error_without_an_interrupt_is_not_taken_for_one() -> None:
    @click.group(cls=Main)
    def group() -> None:
        pass

    @group.command()
    def work() -> None:
        raise ImportError("initialization failed")

    result = CliRunner().invoke(group, ["work"])
    assert isinstance(result.exception, ImportError)
