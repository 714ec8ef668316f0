"""The README's examples run: every `$ fairshare ...` line in a console block, in order, and every
shown output line (other than `...`) appears in the real output in the same order."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _blocks() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    return [b.strip("\n").splitlines() for b in re.findall(r"```console\n(.*?)```", text, flags=re.S)]


def test_readme_has_console_examples() -> None:
    assert len(_blocks()) >= 4


def test_readme_console_examples_run_and_print_what_they_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for block in _blocks():
        commands: list[tuple[str, list[str]]] = []
        for line in block:
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
        for command, shown in commands:
            argv = shlex.split(command)
            assert argv[0] == "fairshare"
            res = runner.invoke(main, argv[1:], catch_exceptions=False, env={**os.environ, "COLUMNS": "200"})
            assert res.exit_code == 0, f"{command}\n{res.output}"
            out_lines = res.output.splitlines()
            pos = 0
            for want in shown:
                if want.strip() == "...":
                    continue
                while pos < len(out_lines) and out_lines[pos].rstrip() != want.rstrip():
                    pos += 1
                assert pos < len(out_lines), f"{command}: expected line not printed (in order): {want!r}"
                pos += 1
