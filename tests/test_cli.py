"""The command line: output layout, exit codes, gates, explain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fairshare.cli import main

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
FILES = ["cluster.json", "events.jsonl", "metrics.json", "policy.yaml", "decisions.jsonl"]


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def test_compare_scenario_writes_one_folder_per_policy_and_one_report(tmp_path: Path) -> None:
    code, out = invoke("compare", "--scenario", "eight-gpu", "--out", str(tmp_path))
    assert code == 0, out
    for policy in ("fairshare", "slurm-multifactor", "priority-labels", "fifo"):
        for f in FILES:
            assert (tmp_path / "eight-gpu" / policy / f).is_file()
        m = json.loads((tmp_path / "eight-gpu" / policy / "metrics.json").read_text())
        assert m["policy"] == policy and m["scenario"] == "eight-gpu"
    assert (tmp_path / "report.html").is_file()
    assert "fairshare" in out and "priority-labels" in out and "Wait to start" in out
    assert "slurm-multifactor" in out  # the incumbent is in the main job by default


def test_compare_workload_writes_policy_folders_directly_under_out(tmp_path: Path) -> None:
    code, out = invoke(
        "compare",
        "--policy",
        str(EX / "policy.yaml"),
        "--cluster",
        str(EX / "cluster.yaml"),
        "--workload",
        str(EX / "workload.csv"),
        "--policies",
        "fifo",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out
    assert (tmp_path / "fifo" / "events.jsonl").is_file()
    assert (tmp_path / "fifo" / "policy.yaml").read_text() == (EX / "policy.yaml").read_text()


def test_require_gates_exits_1_when_a_fairshare_gate_fails(tmp_path: Path) -> None:
    policy = yaml.safe_load((EX / "policy.yaml").read_text())
    policy["gates"]["lost_work_pct"] = 0.0  # fairshare preempts in this workload, so this fails
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    args = [
        "compare",
        "--policy",
        str(tmp_path / "p.yaml"),
        "--cluster",
        str(EX / "cluster.yaml"),
        "--workload",
        str(EX / "workload.csv"),
        "--policies",
        "fairshare",
        "--out",
        str(tmp_path / "o"),
    ]
    code, out = invoke(*args, "--require-gates")
    assert code == 1
    assert "gate failed: workload: fairshare lost_work_pct" in out
    code, _ = invoke(*args)
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compare", "--scenario", "nope", "--out", "x"], "unknown scenario"),
        (
            ["compare", "--scenario", "eight-gpu", "--policies", "fifo,lottery", "--out", "x"],
            "unknown policy",
        ),
        (["compare", "--out", "x"], "give --scenario, or all of --policy, --cluster and --workload"),
        (["explain", "--out", "nowhere", "--job", "j"], "no events.jsonl"),
    ],
    ids=["unknown-scenario", "unknown-policy", "missing-inputs", "explain-no-output"],
)
def test_bad_arguments_exit_2_with_a_clear_message(
    tmp_path: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = invoke(*args)
    assert code == 2
    assert message in out
    assert "Traceback" not in out
    assert not (tmp_path / "x").exists()


def test_explain_shows_decisions_with_evidence_and_why_the_job_waited(tmp_path: Path) -> None:
    invoke("compare", "--scenario", "eight-gpu", "--policies", "fairshare", "--out", str(tmp_path))
    folder = tmp_path / "eight-gpu" / "fairshare"
    events = [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines()]
    victim = next(e for e in events if e["type"] == "preempt" and e["reason"] == "fair_share")
    code, out = invoke("explain", "--out", str(tmp_path), "--job", victim["job"])
    assert code == 0, out
    assert f"preempt (fair_share, by {victim['by']}" in out
    assert "victim_priority=" in out and "preemptor_priority=" in out
    assert "why it waited:" in out
    code, out = invoke("explain", "--out", str(folder), "--job", victim["by"])
    assert "made for this job" in out  # the preemption decision is listed under the preemptor too


def test_scenarios_lists_every_builtin_scenario() -> None:
    code, out = invoke("scenarios")
    assert code == 0
    for name in (
        "normal",
        "small-burst",
        "large-training",
        "maintenance-drain",
        "idle-return",
        "label-inflation",
        "eight-gpu",
    ):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
