"""Same inputs and seed give byte-identical outputs, across processes and hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fairshare.runner import inputs_from_scenario, run_policy
from fairshare.scenarios import SCENARIOS


def _compare(out: Path, env_seed: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": env_seed}
    subprocess.run(
        [sys.executable, "-m", "fairshare.cli", "compare", "--scenario", "eight-gpu", "--out", str(out)],
        check=True,
        env=env,
        capture_output=True,
    )


def test_compare_is_byte_identical_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    _compare(tmp_path / "a", "1")
    _compare(tmp_path / "b", "4242")
    for policy in ("fairshare", "fifo", "priority-labels"):
        for name in ("events.jsonl", "metrics.json", "decisions.jsonl"):
            a = (tmp_path / "a" / "eight-gpu" / policy / name).read_bytes()
            b = (tmp_path / "b" / "eight-gpu" / policy / name).read_bytes()
            assert a == b, f"{policy}/{name} differs"
    assert (tmp_path / "a" / "report.html").read_bytes() == (tmp_path / "b" / "report.html").read_bytes()


def test_a_different_seed_gives_different_arrivals() -> None:
    a = run_policy(inputs_from_scenario(SCENARIOS["eight-gpu"](1)), "fairshare").events
    b = run_policy(inputs_from_scenario(SCENARIOS["eight-gpu"](2)), "fairshare").events
    assert a != b


def test_two_replays_in_one_process_share_no_state() -> None:
    inputs = inputs_from_scenario(SCENARIOS["eight-gpu"](1))
    first = run_policy(inputs, "fairshare")
    run_policy(inputs_from_scenario(SCENARIOS["small-burst"](3)), "fairshare")
    again = run_policy(inputs, "fairshare")
    assert first.events == again.events
    assert first.result.metrics == again.result.metrics
