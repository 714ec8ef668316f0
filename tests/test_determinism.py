"""Same inputs and seed give byte-identical outputs, across processes and hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_scenario, run_strategy


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
    a = run_strategy(inputs_from_scenario(SCENARIOS["eight-gpu"](1)), "fairshare").events
    b = run_strategy(inputs_from_scenario(SCENARIOS["eight-gpu"](2)), "fairshare").events
    assert a != b


def test_two_replays_in_one_process_share_no_state() -> None:
    inputs = inputs_from_scenario(SCENARIOS["eight-gpu"](1))
    first = run_strategy(inputs, "fairshare")
    run_strategy(inputs_from_scenario(SCENARIOS["small-burst"](3)), "fairshare")
    again = run_strategy(inputs, "fairshare")
    assert first.events == again.events
    assert first.result.metrics == again.result.metrics


def test_outputs_are_utf8_and_identical_whatever_the_locale(tmp_path: Path) -> None:
    """Non-ASCII names go to the outputs as UTF-8 under an ASCII locale too (no crash, same bytes)."""
    import yaml

    from conftest import tiny_cluster, tiny_policy

    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(tiny_policy()), encoding="utf-8")
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(tiny_cluster(nodes=1)), encoding="utf-8")
    (tmp_path / "jobs.csv").write_text(
        "job_id,submit,group,user,class,gpus,work\njöb-1,0,a,zoë,train,8,3600\njob-2,10,b,bob,train,8,3600\n",
        encoding="utf-8",
    )
    outs = {}
    for name, env in (
        ("utf8", {"LC_ALL": "C.UTF-8"}),
        ("ascii", {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}),
    ):
        out = tmp_path / name
        args = ["replay", "--policy", "policy.yaml", "--cluster", "cluster.yaml", "--workload", "jobs.csv"]
        subprocess.run(
            [sys.executable, "-m", "fairshare.cli", *args, "--out", str(out)],
            check=True,
            cwd=tmp_path,
            env={**os.environ, **env},
            capture_output=True,
        )
        outs[name] = out / "fairshare"
    for file in ("events.jsonl", "decisions.jsonl", "metrics.json"):
        assert (outs["utf8"] / file).read_bytes() == (outs["ascii"] / file).read_bytes(), file
    assert "jöb-1" in (outs["ascii"] / "events.jsonl").read_text(encoding="utf-8")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_output_file_is_byte_identical_across_hash_seeds_locales_and_time_zones(tmp_path: Path) -> None:
    """The whole output folder (replay files, complete.json markers, report.html) of a workload
    with dated exceptions, maintenance and an epoch, under three environments."""
    ex = Path(__file__).resolve().parent.parent / "examples"
    envs = {
        "a": {"PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8", "TZ": "UTC"},
        "b": {"PYTHONHASHSEED": "12345", "LC_ALL": "C", "TZ": "Pacific/Kiritimati", "PYTHONUTF8": "0"},
        "c": {"PYTHONHASHSEED": "random", "LC_ALL": "de_DE.UTF-8", "TZ": "America/St_Johns"},
    }
    trees = {}
    for name, env in envs.items():
        out = tmp_path / name
        args = ["--policy", str(ex / "policy.yaml"), "--cluster", str(ex / "cluster.yaml")]
        args += ["--workload", str(ex / "workload.csv"), "--policies", "fairshare,fifo", "--out", str(out)]
        subprocess.run(
            [sys.executable, "-m", "fairshare.cli", "compare", *args],
            check=True,
            env={**os.environ, **env},
            capture_output=True,
        )
        trees[name] = _tree(out)
    assert "complete.json" in trees["a"] and "fairshare/complete.json" in trees["a"]
    assert trees["a"] == trees["b"] == trees["c"]
