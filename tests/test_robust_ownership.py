"""Issue 19, outputs: no command deletes or overwrites a file it did not write, and every reader
of an output folder checks the SHA-256 sums before it trusts a byte.

`--out` is accepted only when missing, truly empty (hidden entries count) or holding exactly the
files a complete earlier run listed, each with its sum; `explain` refuses a folder whose files are
not those sums, and crafted files (same-size edits, 1E9999, a NUL in a listed name, symbolic
links to /dev/zero, FIFOs) end in exit 2 and one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairshare.cli import main

JOB = "product-debug-000000"
RUN = ["compare", "--scenario", "eight-gpu", "--policies", "fifo"]


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def tree(folder: Path) -> dict[str, str]:
    """Every entry under `folder`, hidden ones too, with what it is (file bytes, link target)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = "special"
    return out


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The complete output of an earlier run (copied by each test that changes it)."""
    out = tmp_path_factory.mktemp("earlier") / "o"
    res = invoke(*RUN, "--out", out)
    assert res.exit_code == 0, res.output
    return out


def _user_file(name: str) -> Callable[[Path], None]:
    def make(out: Path) -> None:
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("the user's\n")

    return make


def _same_size_edit(out: Path) -> None:
    path = out / "eight-gpu" / "fifo" / "events.jsonl"
    data = bytearray(path.read_bytes())
    data[2] = ord("x") if data[2] != ord("x") else ord("y")
    path.write_bytes(bytes(data))


def _forged_marker(out: Path) -> None:
    """A complete.json of our shape beside a file of the user's (listed in it, with its sum)."""
    _user_file("notes.txt")(out)
    notes = out / "notes.txt"
    (out / "complete.json").write_text(
        json.dumps(
            {
                "fairshare_output": "output",
                "command": "compare",
                "folders": ["eight-gpu/fifo"],
                "report": None,
                "files": {"notes.txt": {"bytes": notes.stat().st_size, "sha256": "0" * 64}},
            }
        )
    )


def _link(name: str, target: str) -> Callable[[Path], None]:
    def make(out: Path) -> None:
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(target)

    return make


def _fifo(name: str) -> Callable[[Path], None]:
    def make(out: Path) -> None:
        (out / name).unlink(missing_ok=True)
        os.mkfifo(out / name)

    return make


@pytest.mark.parametrize(
    ("from_earlier", "make", "said"),
    [
        (False, lambda o: (o / ".git").mkdir(), ".git, which is not a fairshare output"),
        (False, _user_file(".env"), ".env, which is not a fairshare output"),
        (False, _user_file("notes.txt"), "notes.txt, which is not a fairshare output"),
        (True, _user_file("notes.txt"), "notes.txt: no run wrote it"),
        (True, _user_file(".DS_Store"), ".DS_Store: no run wrote it"),
        (True, _user_file("eight-gpu/fifo/mine.csv"), "mine.csv: no run wrote it"),
        (True, _user_file("eight-gpu/.git/config"), ".git: no run wrote it"),
        (True, _same_size_edit, "events.jsonl: its SHA-256 is not the one complete.json lists"),
        (
            True,
            _forged_marker,
            "lists 'notes.txt', which a run does not write there",
        ),
        (True, _link("complete.json", "/dev/zero"), "complete.json, which is not the marker of a run"),
        (True, _fifo("complete.json"), "complete.json, which is not the marker of a run"),
        (True, _link("eight-gpu/fifo/notes", "/dev/zero"), "notes: no run wrote it"),
        (True, _link("eight-gpu/fifo/events.jsonl", "/dev/zero"), "is a symbolic link"),
        (
            False,
            lambda o: (o / "complete.json").write_text('{"fairshare_output": "output", "folders": []}'),
            "lists no replay folders",
        ),
    ],
    ids=[
        "hidden-git-folder",
        "dotenv",
        "a-user-file",
        "complete-run-plus-user-file",
        "complete-run-plus-hidden-file",
        "user-file-in-a-replay-folder",
        "hidden-folder-in-a-replay-folder",
        "same-size-edit",
        "forged-marker-listing-a-user-file",
        "marker-symlinked-to-dev-zero",
        "marker-is-a-fifo",
        "symlink-to-dev-zero-in-a-replay-folder",
        "listed-file-replaced-by-a-symlink",
        "forged-marker-alone",
    ],
)
def test_an_out_holding_anything_a_run_did_not_write_is_refused_and_left_untouched(
    earlier: Path, tmp_path: Path, from_earlier: bool, make: Callable[[Path], object], said: str
) -> None:
    out = tmp_path / "o"
    if from_earlier:
        shutil.copytree(earlier, out, symlinks=True)
    else:
        out.mkdir()
    make(out)
    before = tree(out)
    res = invoke(*RUN, "--out", out)
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and res.output.startswith(f"error: --out: {out}: holds "), res.output
    assert said in res.output, res.output
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # no temporary folder left either


@pytest.mark.parametrize(
    ("prepare", "command"),
    [
        (lambda o: None, RUN),
        (lambda o: o.mkdir(), RUN),
        ("earlier", RUN),
        ("earlier", ["compare", "--scenario", "eight-gpu", "--policies", "fairshare,fifo"]),
    ],
    ids=["missing", "truly-empty", "exactly-an-earlier-run", "earlier-run-other-policies"],
)
def test_an_out_that_is_missing_empty_or_exactly_an_earlier_run_is_replaced(
    earlier: Path, tmp_path: Path, prepare: object, command: list[str]
) -> None:
    out = tmp_path / "o"
    if prepare == "earlier":
        shutil.copytree(earlier, out)
    elif callable(prepare):
        prepare(out)
    res = invoke(*command, "--out", out)
    assert res.exit_code == 0, res.output
    assert invoke(*RUN, "--out", out).exit_code == 0  # and the new output is in turn replaceable


def test_a_file_put_into_out_during_the_run_is_not_deleted(
    earlier: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OUT is checked again just before the swap: a file the user saved there meanwhile stays."""
    from fairshare.report import html

    out = tmp_path / "o"
    shutil.copytree(earlier, out)
    real = html.write_report

    def write_and_meddle(*args: object, **kw: object) -> None:
        real(*args, **kw)  # type: ignore[arg-type]
        (out / "draft.txt").write_text("saved while the run ran")

    monkeypatch.setattr(html, "write_report", write_and_meddle)
    res = invoke(*RUN, "--out", out)
    assert res.exit_code == 2, res.output
    assert "draft.txt: no run wrote it" in res.output
    assert (out / "draft.txt").read_text() == "saved while the run ran"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


# --- explain reads only what the sums vouch for ------------------------------------------------


def _remark(folder: Path) -> None:
    """complete.json rewritten to match the files as they are (a forged marker)."""
    marker = json.loads((folder / "complete.json").read_text())
    marker["files"] = {
        name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name in marker["files"]
        for data in [(folder / name).read_bytes()]
    }
    (folder / "complete.json").write_text(json.dumps(marker))


def _replace_line_value(old: bytes, new: bytes) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "events.jsonl"
        data = path.read_bytes()
        assert old in data
        path.write_bytes(data.replace(old, new, 1))
        _remark(folder)

    return edit


def _marker_edit(change: Callable[[dict[str, object]], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        marker = json.loads((folder / "complete.json").read_text())
        change(marker)
        (folder / "complete.json").write_text(json.dumps(marker))

    return edit


def _huge(marker: dict[str, object]) -> None:
    files = marker["files"]
    assert isinstance(files, dict)
    files["events.jsonl"]["bytes"] = 10**30


def _nul(marker: dict[str, object]) -> None:
    files = marker["files"]
    assert isinstance(files, dict)
    files["events\x00.jsonl"] = files.pop("events.jsonl")


def _dotdot(marker: dict[str, object]) -> None:
    files = marker["files"]
    assert isinstance(files, dict)
    files["../../../etc/passwd"] = files.pop("events.jsonl")


def _events_to(kind: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "events.jsonl"
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")

    return edit


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_same_size_edit_in := None, "events.jsonl: its SHA-256 is not the one complete.json lists"),
        (_replace_line_value(b'"t":3862.904', b'"t":1E9999'), "not a finite number"),
        (_replace_line_value(b'"t":3862.904', b'"t":NaN'), "not a number JSON allows"),
        (_marker_edit(_huge), "files.events.jsonl: not a size and SHA-256 a run writes"),
        (_marker_edit(_nul), "not a name a run writes"),
        (_marker_edit(_dotdot), "not a name a run writes"),
        (_link("complete.json", "/dev/zero"), "complete.json: is a symbolic link"),
        (_fifo("complete.json"), "complete.json: is a FIFO, device or socket"),
        (_events_to("link"), "events.jsonl: is a symbolic link"),
        (_events_to("fifo"), "events.jsonl: is a FIFO, device or socket"),
        (lambda f: (f / "complete.json").write_bytes(b" " * (2 << 20)), "more than the 1,048,576"),
    ],
    ids=[
        "same-size-edit",
        "overflowing-number",
        "nan",
        "huge-listed-size",
        "nul-in-a-listed-name",
        "dotdot-in-a-listed-name",
        "marker-symlinked-to-dev-zero",
        "marker-is-a-fifo",
        "events-symlinked-to-dev-zero",
        "events-is-a-fifo",
        "marker-too-large",
    ],
)
def test_explain_refuses_a_crafted_folder_with_one_line(
    earlier: Path, tmp_path: Path, damage: Callable[[Path], None] | None, said: str
) -> None:
    out = tmp_path / "o"
    shutil.copytree(earlier, out)
    folder = out / "eight-gpu" / "fifo"
    (damage or (lambda f: _same_size_edit(out)))(folder)
    res = invoke("explain", "--out", folder, "--job", JOB)
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    assert said in res.output, res.output


# --- generated --out paths ---------------------------------------------------------------------

SPECIAL = ["/dev/null", "/dev/zero", "/dev/full", "/proc/self/status", "/proc", "/sys", "/"]


@settings(
    max_examples=60 if os.environ.get("FAIRSHARE_SLOW") == "1" else 12,
    derandomize=os.environ.get("FAIRSHARE_SLOW") != "1",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(
    st.one_of(
        st.sampled_from(SPECIAL),
        st.sampled_from(["fifo", "fifo/sub", "sock", "link-to-zero", "link-loop"]),
        st.integers(1, 12).flatmap(
            lambda n: st.lists(st.integers(200, 300), min_size=n, max_size=n).map(
                lambda sizes: "/".join("d" * k for k in sizes)
            )
        ),
        st.integers(4000, 9000).map(lambda n: "x" * n),
    )
)
def test_generated_special_and_very_long_out_paths_end_in_one_line(tmp_path: Path, path: str) -> None:
    import socket

    work = tmp_path / "w"
    work.mkdir(exist_ok=True)
    if not (work / "fifo").exists():
        os.mkfifo(work / "fifo")
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(work / "sock"))
        sock.close()
        (work / "link-to-zero").symlink_to("/dev/zero")
        (work / "link-loop").symlink_to(work / "link-loop")
    target = path if path.startswith("/") else str(work / path)
    res = invoke(*RUN, "--out", target)
    if res.exit_code == 0:  # a long path the file system took: a complete output
        assert (Path(target) / "complete.json").is_file()
        shutil.rmtree(target)
        return
    assert res.exit_code == 2, (res.exit_code, res.output[-500:], res.exception)
    assert res.output.count("\n") == 1 and res.output.startswith("error: --out: "), res.output[-500:]
    assert not any(p.name.startswith(".") for p in work.iterdir() if p.is_dir())  # no temporary folder
