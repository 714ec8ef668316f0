"""Issue 9, class 3: output folders are replaced whole or not at all, and interrupts are clean.

`--out` is checked before any replay; a run writes into a hidden temporary sibling and swaps it in
when complete, so OUT always holds one complete run: the previous one until the swap, the new one
after it. Killed at any instant (SIGKILL, SIGTERM, Ctrl-C), a run leaves the previous output or the
new one, never a mix, and the independent checker passes on whatever is there.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from conftest import run_checker
from fairshare.cli import main
from fairshare.replay import staging

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
FILES = ["--policy", str(EX / "policy.yaml"), "--cluster", str(EX / "cluster.yaml"), "--workload"]
WORKLOAD = [*FILES, str(EX / "workload.csv")]


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def hidden_siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


# --- --out that cannot be an output folder ---------------------------------------------------


@pytest.mark.parametrize(
    ("make", "arg", "message"),
    [
        (lambda d: (d / "f").write_text("x"), "f", "f: is a file: give a folder"),
        (lambda d: (d / "f").write_text("x"), "f/sub", "which is a file: give a folder"),
        (lambda d: None, "", "is the current folder"),
        (lambda d: None, ".", "is the current folder"),
        (lambda d: None, "..", "is the current folder or holds it"),
        (
            lambda d: (d / "mine").mkdir() or (d / "mine" / "notes.txt").write_text("x"),
            "mine",
            "not a fairshare output",
        ),
        (
            lambda d: (
                (d / "mine" / "fifo").mkdir(parents=True)
                or (d / "mine" / "fifo" / "notes.txt").write_text("x")
            ),
            "mine",
            "not a fairshare output",
        ),
    ],
    ids=[
        "a-file",
        "under-a-file",
        "empty",
        "dot",
        "parent-of-cwd",
        "folder-of-other-files",
        "other-file-deep",
    ],
)
def test_an_unusable_out_is_refused_before_any_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any, arg: str, message: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    make(work)
    before = tree(tmp_path)
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", arg)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert "error: --out: " in res.output and message in res.output, res.output
    assert "fifo" not in res.output.split("error:")[0]  # refused before replaying
    assert tree(tmp_path) == before  # nothing written, nothing removed


def test_an_out_that_cannot_be_written_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Path.mkdir

    def refuse(self: Path, *args: Any, **kw: Any) -> None:
        if ".tmp-" in self.name:
            raise PermissionError(13, "Permission denied", str(self))
        real(self, *args, **kw)

    monkeypatch.setattr(Path, "mkdir", refuse)
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", tmp_path / "o")
    assert res.exit_code == 2, res.output
    assert "error: --out: " in res.output and "cannot write there: Permission denied" in res.output


def test_an_out_on_a_read_only_file_system_is_an_input_error(tmp_path: Path) -> None:
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", "/proc/fairshare-out")
    assert res.exit_code == 2, res.output
    assert "error: --out: /proc/fairshare-out: cannot write there" in res.output


# --- one run per folder ----------------------------------------------------------------------


def test_a_rerun_replaces_the_whole_folder_and_explain_reads_only_the_new_run(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert invoke("compare", *WORKLOAD, "--policies", "fairshare,fifo", "--out", out).exit_code == 0
    assert (out / "fairshare").is_dir()
    res = invoke("compare", *WORKLOAD, "--policies", "fifo", "--out", out)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["complete.json", "fifo", "report.html"]
    marker = json.loads((out / "complete.json").read_text())
    files = marker.pop("files")
    assert marker == {
        "fairshare_output": "output",
        "command": "compare",
        "folders": ["fifo"],
        "report": "report.html",
    }
    assert sorted(files) == ["fifo/complete.json", "report.html"]  # with their sizes and SHA-256
    assert hidden_siblings(out) == []
    res = invoke("explain", "--out", out, "--job", "product-debug-000000")
    assert res.exit_code == 0 and "(" + str(out / "fifo") + ")" in res.output
    assert str(out / "fairshare") not in res.output


def test_a_compare_output_can_take_a_scenario_run_and_back(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    assert invoke("replay", *WORKLOAD, "--policy-name", "fifo", "--out", out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["complete.json", "fifo"]
    assert json.loads((out / "complete.json").read_text())["command"] == "replay"


def test_a_folder_that_only_looks_like_an_output_is_refused(tmp_path: Path) -> None:
    """Replay-like files without the markers of a complete run (an older fairshare's, or the
    user's own) are not known to be ours: refused, left as they are (issue 19)."""
    out = tmp_path / "o"
    (out / "s" / "fifo").mkdir(parents=True)
    for name in ("events.jsonl", "metrics.json", "cluster.json", "policy.yaml"):
        (out / "s" / "fifo" / name).write_text("{}")
    (out / "report.html").write_text("<html>")
    before = tree(out)
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out)
    assert res.exit_code == 2, res.output
    assert "report.html, which is not a fairshare output" in res.output
    assert tree(out) == before


def test_each_replay_folder_lists_its_files_with_size_and_hash(tmp_path: Path) -> None:
    import hashlib

    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    folder = out / "eight-gpu" / "fifo"
    marker = json.loads((folder / "complete.json").read_text())
    assert marker["fairshare_output"] == "replay" and marker["policy"] == "fifo"
    assert set(marker["files"]) == {
        "cluster.json",
        "events.jsonl",
        "decisions.jsonl",
        "metrics.json",
        "series.json",
        "policy.yaml",
    }
    for name, entry in marker["files"].items():
        data = (folder / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# --- failures in the middle ------------------------------------------------------------------


def test_a_crash_while_writing_leaves_the_previous_output_and_no_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fairshare.report import html

    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    before = tree(out)

    def boom(*args: Any, **kw: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(html, "write_report", boom)
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare,fifo", "--out", out)
    assert res.exit_code != 0 and isinstance(res.exception, RuntimeError)
    assert tree(out) == before
    assert hidden_siblings(out) == []


def test_an_input_error_during_the_replays_leaves_the_previous_output(tmp_path: Path) -> None:
    """An exception that expired before the epoch is found when the replay starts: exit 2, and
    the half-written run is removed."""
    out = tmp_path / "o"
    assert invoke("compare", *WORKLOAD, "--policies", "fifo", "--out", out).exit_code == 0
    before = tree(out)
    cluster = yaml.safe_load((EX / "cluster.yaml").read_text())
    cluster["epoch"] = "2026-12-10T00:00:00Z"
    (tmp_path / "late.yaml").write_text(yaml.safe_dump(cluster))
    args: list[str | Path] = [
        "--policy",
        EX / "policy.yaml",
        "--cluster",
        tmp_path / "late.yaml",
        "--workload",
        EX / "workload.csv",
    ]
    res = invoke("compare", *args, "--policies", "fifo", "--out", out)
    assert res.exit_code == 2, res.output
    assert "expires at or before the epoch" in res.output
    assert tree(out) == before
    assert hidden_siblings(out) == []


def test_the_swap_without_an_atomic_exchange_gives_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(staging, "_exchange", lambda a, b: False)
    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    assert (
        invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare", "--out", out).exit_code == 0
    )
    assert sorted(p.name for p in (out / "eight-gpu").iterdir()) == ["fairshare"]
    assert hidden_siblings(out) == []


def test_leftovers_of_a_killed_run_are_removed_or_restored_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "o"
    dead = 2**22 + 12345  # above the default pid_max: no process has it
    (tmp_path / f".o.tmp-{dead}-abcd0123" / "x").mkdir(parents=True)
    # killed between the two renames of a swap without exchange: OUT is missing, the old one hidden
    old = tmp_path / f".o.old-{dead}-ef012345"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", old).exit_code == 0
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare", "--out", out)
    assert res.exit_code == 0, res.output
    assert hidden_siblings(out) == []
    assert sorted(p.name for p in (out / "eight-gpu").iterdir()) == ["fairshare"]


# --- signals ----------------------------------------------------------------------------------


def _cli(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"]
)
def test_an_interrupt_exits_130_or_143_and_leaves_the_previous_output(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    before = tree(out)
    proc = _cli(
        ["compare", "--scenario", "normal", "--policies", "fairshare,fifo", "--out", str(out)], tmp_path
    )
    # wait until the replays run (the staging folder exists), then interrupt
    deadline = time.monotonic() + 60
    while not hidden_siblings(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert tree(out) == before
    assert hidden_siblings(out) == []


# --- the kill test ----------------------------------------------------------------------------


class KillBench:
    """Two complete outputs of the same OUT (previous: fifo; new: fairshare and fifo), and a way to
    kill the new run at a chosen instant and judge what is left."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.out = tmp_path / "o"
        self.prev = tmp_path / "prev"
        self.new = tmp_path / "new"
        for folder, policies in ((self.prev, "fifo"), (self.new, "fairshare,fifo")):
            assert invoke("compare", *WORKLOAD, "--policies", policies, "--out", folder).exit_code == 0
        self.prev_tree, self.new_tree = tree(self.prev), tree(self.new)
        began = time.monotonic()
        self._run(None, 0.0)
        self.duration = time.monotonic() - began
        assert tree(self.out) == self.new_tree

    def _run(self, sig: signal.Signals | None, after: float) -> tuple[int, str]:
        if self.out.exists():
            shutil.rmtree(self.out)
        shutil.copytree(self.prev, self.out)
        proc = _cli(["compare", *WORKLOAD, "--policies", "fairshare,fifo", "--out", str(self.out)], self.tmp)
        if sig is not None:
            time.sleep(after)
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err

    def kill_at(self, sig: signal.Signals, fraction: float) -> str:
        code, err = self._run(sig, self.duration * fraction)
        left = tree(self.out)
        assert left in (self.prev_tree, self.new_tree), "OUT mixes two runs: " + ", ".join(sorted(left))
        if sig == signal.SIGTERM:
            # 143 once the command runs; -15 when it came before Python had started the command
            # (nothing written yet); 0 when the run had finished
            assert code in (0, 143, -signal.SIGTERM), err
            assert hidden_siblings(self.out) == []  # SIGTERM cleans up
        else:
            assert code in (0, -signal.SIGKILL), err
        assert "Traceback" not in err
        self.check(left is self.prev_tree or left == self.prev_tree)
        return "previous" if left == self.prev_tree else "new"

    def check(self, previous: bool) -> None:
        """The independent checker passes on every replay folder left, and explain reads them."""
        policy = yaml.safe_load((EX / "policy.yaml").read_text())
        cluster = yaml.safe_load((EX / "cluster.yaml").read_text())
        for name in ["fifo"] if previous else ["fairshare", "fifo"]:
            scratch = self.tmp / f"check-{name}"
            if scratch.exists():
                shutil.rmtree(scratch)
            shutil.copytree(self.out / name, scratch)
            checked = run_checker(scratch, policy, cluster)
            assert checked.returncode == 0, checked.stdout[-2000:]
        res = invoke("explain", "--out", self.out, "--job", "product-debug-000000")
        assert res.exit_code == 0, res.output

    def next_run_cleans_up(self) -> None:
        code, err = self._run(None, 0.0)
        assert code == 0, err
        assert hidden_siblings(self.out) == []
        assert tree(self.out) == self.new_tree


def _instants(n: int, seed: int) -> list[tuple[signal.Signals, float]]:
    """n kills, alternately SIGKILL and SIGTERM, spread at random over one run's duration (the
    run's length varies with the machine's load: a kill may come after it has finished too)."""
    rng = random.Random(seed)
    sigs = [signal.SIGKILL, signal.SIGTERM]
    return [(sigs[i % 2], (i + rng.random()) / n) for i in range(n)]


def test_compare_killed_at_random_instants_leaves_a_complete_output(tmp_path: Path) -> None:
    bench = KillBench(tmp_path)
    seen = [bench.kill_at(sig, f) for sig, f in _instants(4, seed=9)]
    assert "previous" in seen  # the instants reach into the run (a kill before the swap)
    bench.next_run_cleans_up()


@pytest.mark.slow
def test_compare_killed_at_many_random_instants_leaves_a_complete_output(tmp_path: Path) -> None:
    bench = KillBench(tmp_path)
    seen = [bench.kill_at(sig, f) for sig, f in _instants(14, seed=int(os.environ.get("KILL_SEED", "19")))]
    seen += [bench.kill_at(sig, 3.0) for sig in (signal.SIGKILL, signal.SIGTERM)]  # after the end
    assert {"previous", "new"} <= set(seen)
    bench.next_run_cleans_up()


def test_an_out_that_cannot_be_replaced_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E.g. OUT is a mount point: the swap fails; the previous output stays, the new one is removed."""
    import errno

    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    before = tree(out)

    def busy(stage: Path, target: Path) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy", str(target))

    monkeypatch.setattr(staging, "_swap", busy)
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare", "--out", out)
    assert res.exit_code == 2, res.output
    assert f"error: --out: {out}: cannot be replaced: Device or resource busy" in res.output
    assert tree(out) == before
    assert hidden_siblings(out) == []


def test_an_interrupt_lost_in_a_finalizer_is_raised_again_and_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal's exception raised inside a finalizer is swallowed by Python ("Exception
    ignored"); the handler remembered it, so the output is not swapped in and the command ends 143."""
    import gc

    from fairshare import interrupts

    class Finalized:
        def __del__(self) -> None:
            interrupts._handler(signal.SIGTERM, None)  # as if SIGTERM arrived right here

    with interrupts.handled():
        Finalized()
        gc.collect()
        assert interrupts.received() == signal.SIGTERM
        assert "Terminated" not in capsys.readouterr().err  # kept off the terminal
        with pytest.raises(interrupts.Terminated):
            interrupts.check()
    assert interrupts.received() == signal.SIGTERM  # until the next command starts

    out = tmp_path / "o"
    assert invoke("compare", "--scenario", "eight-gpu", "--policies", "fifo", "--out", out).exit_code == 0
    before = tree(out)

    from fairshare.report import html

    real = html.write_report

    def write_then_lose_a_signal(*args: Any, **kw: Any) -> None:
        real(*args, **kw)
        Finalized()
        gc.collect()

    monkeypatch.setattr(html, "write_report", write_then_lose_a_signal)
    res = invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare", "--out", out)
    assert res.exit_code == 143, res.output
    assert tree(out) == before
    assert hidden_siblings(out) == []
