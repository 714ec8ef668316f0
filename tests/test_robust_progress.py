"""Issue 9, class 7: progress. Each replay reports every job once (jobs still running at the
horizon too), so a progress bar ends at 100 %; when stderr is not a terminal (CI, `2>file`) a line
per finished replay says what was done."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fairshare import _cli_runtime
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import compare, inputs_from_scenario


@pytest.mark.parametrize("scenario", ["eight-gpu", "small-burst", "maintenance-drain"])
def test_progress_adds_up_to_every_job_of_every_policy(scenario: str, tmp_path: Path) -> None:
    inputs = inputs_from_scenario(SCENARIOS[scenario](1))
    told: list[int] = []
    done: list[str] = []
    compare(inputs, ["fairshare", "fifo"], tmp_path, told.append, finished=done.append)
    assert sum(told) == 2 * len(inputs.jobs)
    assert all(n > 0 for n in told)
    assert done == ["fairshare", "fifo"]


def test_a_replay_that_stops_at_its_horizon_still_reaches_100_percent(tmp_path: Path) -> None:
    """small-burst ends at its horizon with jobs unfinished: the bar used to stop at 88 %."""
    inputs = inputs_from_scenario(SCENARIOS["small-burst"](1))
    told: list[int] = []
    out = compare(inputs, ["fifo"], None, told.append)
    finished = out.results[0].metrics["jobs"]["finished"]
    assert finished < len(inputs.jobs)  # the case of the bug: not every job finishes
    assert sum(told) == len(inputs.jobs)


def test_without_a_terminal_each_finished_replay_prints_a_line(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "compare", "--scenario", "eight-gpu", "--out", "o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in res.stderr.splitlines() if line.startswith("replayed ")]
    assert [re.sub(r" \(\d+\.\d s\)$", "", line) for line in lines] == [
        "replayed eight-gpu under fairshare",
        "replayed eight-gpu under slurm-multifactor",
        "replayed eight-gpu under priority-labels",
        "replayed eight-gpu under fifo",
    ]
    assert "replayed" not in res.stdout  # progress goes to stderr: stdout is the results


def test_on_a_terminal_the_bar_reaches_100_percent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The click progress bar, drawn as on a terminal, ends at 100 % for a replay with a horizon."""
    import io

    import click._termui_impl

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(click._termui_impl, "isatty", lambda f: True)
    inputs = inputs_from_scenario(SCENARIOS["small-burst"](1))
    with _cli_runtime.progress(inputs.name, len(inputs.jobs)) as bar:
        compare(inputs, ["fifo"], None, bar.update, finished=bar.finished)
        assert bar.bar is not None and bar.bar.pos == len(inputs.jobs)
    assert "100%" in err.getvalue()
