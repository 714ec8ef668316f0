"""Issue 9, class 5: `explain` on damaged, incomplete or partial outputs.

A folder that did not come from a finished run (no complete.json, or files that no longer match
it) is refused with a message saying so; lines that are not JSON objects are errors naming the
file, line and column; a job found in some scenarios of a compare output is shown there and the
others are named; a missing decisions.jsonl is said, not printed as an empty section.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fairshare.cli import main

JOB = "product-debug-000000"  # in every scenario with a product/debug leaf; eight-gpu's first job


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "o"
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare,fifo", "--out", out)
    assert res.exit_code == 0, res.output
    return out


def copy_of(compared: Path, tmp_path: Path) -> Path:
    import shutil

    dst = tmp_path / "o"
    shutil.copytree(compared, dst)
    return dst / "eight-gpu" / "fifo"


def remark(folder: Path) -> None:
    """Rewrite complete.json so it matches the files as they are now (a folder whose marker was
    forged or written by another tool: only the content checks can catch what is wrong)."""
    marker = json.loads((folder / "complete.json").read_text())
    marker["files"] = {
        name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name in marker["files"]
        if (folder / name).exists()
        for data in [(folder / name).read_bytes()]
    }
    (folder / "complete.json").write_text(json.dumps(marker))


def truncate(f: Path) -> None:
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


def garbage(f: Path) -> None:
    f.write_bytes(f.read_bytes() + b"\x00\xffnot json\n")


def first_line_is(text: bytes) -> Callable[[Path], None]:
    def edit(f: Path) -> None:
        lines = f.read_bytes().split(b"\n")
        f.write_bytes(b"\n".join([text, *lines[1:]]))

    return edit


@pytest.mark.parametrize(
    ("file", "damage", "forge", "expected"),
    [
        ("events.jsonl", truncate, False, "events.jsonl: " + "{size} bytes, but complete.json says"),
        ("events.jsonl", garbage, False, "but complete.json says"),
        ("decisions.jsonl", truncate, False, "but complete.json says"),
        ("complete.json", lambda f: f.unlink(), False, "not a complete replay output (no complete.json)"),
        ("events.jsonl", lambda f: f.unlink(), False, "events.jsonl: missing, though complete.json lists it"),
        ("events.jsonl", truncate, True, "events.jsonl: line "),
        ("events.jsonl", garbage, True, "not UTF-8 text"),
        (
            "events.jsonl",
            first_line_is(b"[1, 2]"),
            True,
            "events.jsonl: line 1: expected a JSON object, got list",
        ),
        (
            "events.jsonl",
            first_line_is(b'{"t": 0, "'),
            True,
            "events.jsonl: line 1, column 10: not valid JSON",
        ),
        ("decisions.jsonl", first_line_is(b"42"), True, "decisions.jsonl: line 1: expected a JSON object"),
        (
            "events.jsonl",
            first_line_is(b'{"t": "x", "type": "submit", "job": "' + JOB.encode() + b'"}'),
            True,
            "lacks a field or has one of the wrong type",
        ),
    ],
    ids=[
        "truncated-events",
        "garbage-events",
        "truncated-decisions",
        "no-marker",
        "missing-events",
        "forged-truncated-events",
        "forged-non-utf8",
        "forged-list-line",
        "forged-cut-line",
        "forged-number-line",
        "forged-missing-fields",
    ],
)
def test_a_damaged_replay_folder_is_an_error_naming_file_and_place(
    compared: Path,
    tmp_path: Path,
    file: str,
    damage: Callable[[Path], None],
    forge: bool,
    expected: str,
) -> None:
    folder = copy_of(compared, tmp_path)
    damage(folder / file)
    if forge:
        remark(folder)
    if "{size}" in expected:
        expected = expected.format(size=f"{(folder / file).stat().st_size:,}")
    res = invoke("explain", "--out", folder, "--job", JOB)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert expected in res.output, res.output
    # the compare output holding it: its complete.json has the sum of the folder's complete.json,
    # so a forged or missing folder marker is caught there first
    res = invoke("explain", "--out", folder.parent.parent, "--job", JOB)
    assert res.exit_code == 2, res.output
    assert len(res.output.splitlines()) == 1
    marker = str(folder / "complete.json")
    assert (marker if forge or file == "complete.json" else expected) in res.output, res.output


def test_a_folder_without_markers_from_an_unfinished_or_older_run_is_refused(
    compared: Path, tmp_path: Path
) -> None:
    folder = copy_of(compared, tmp_path)
    root = folder.parent.parent
    (root / "complete.json").unlink()
    res = invoke("explain", "--out", root, "--job", JOB)
    assert res.exit_code == 2
    assert "not a complete fairshare output (no complete.json)" in res.output


def test_a_job_missing_from_some_scenarios_is_shown_where_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairshare.inputs import scenarios

    # `--scenario all` over two small scenarios (all seven take ten seconds)
    two = {k: scenarios.SCENARIOS[k] for k in ("small-burst", "eight-gpu")}
    monkeypatch.setattr(scenarios, "SCENARIOS", two)
    out = tmp_path / "o"
    res = invoke("compare", "--scenario", "all", "--policies", "fifo", "--out", out)
    assert res.exit_code == 0, res.output
    eight = json.loads((out / "eight-gpu" / "fifo" / "events.jsonl").read_text().splitlines()[0])
    res = invoke("explain", "--out", out, "--job", eight["job"])
    assert res.exit_code == 0, res.output
    assert f"({out / 'eight-gpu' / 'fifo'})" in res.output
    assert f"job {eight['job']} is not in: " in res.output and str(out / "small-burst" / "fifo") in res.output
    res = invoke("explain", "--out", out, "--job", "no-such-job")
    assert res.exit_code == 2
    assert f"error: {out}: no job 'no-such-job' in any replay here" in res.output


def test_a_missing_decisions_file_is_said_not_shown_as_empty(compared: Path, tmp_path: Path) -> None:
    folder = copy_of(compared, tmp_path)
    (folder / "decisions.jsonl").unlink()
    remark(folder)
    res = invoke("explain", "--out", folder, "--job", JOB)
    assert res.exit_code == 0, res.output
    assert f"none recorded: {folder / 'decisions.jsonl'} does not exist" in res.output


def test_a_job_without_decisions_says_so(compared: Path, tmp_path: Path) -> None:
    folder = copy_of(compared, tmp_path)
    (folder / "decisions.jsonl").write_text("")
    remark(folder)
    res = invoke("explain", "--out", folder, "--job", JOB)
    assert res.exit_code == 0, res.output
    assert "decisions:\n  none about this job" in res.output
