"""`fairshare slurm check`: each setting ok or wrong with its fix; exit 1 when a required one is wrong."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main
from fairshare.inputs.policy import Policy, load_policy
from fairshare.slurm import slurm_cli
from fairshare.slurm.check import (
    CheckReport,
    SlurmNotReady,
    check_config,
    check_permission,
    require_ready,
    run_check,
)
from fairshare.slurm.fake_client import FakeSlurm, dev_config
from fairshare.slurm.model import Association, Gres, Qos
from fairshare.slurm.parse import parse_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "slurm-policy.yaml"
DATA = Path(__file__).parent / "data"


@pytest.fixture
def policy() -> Policy:
    return load_policy(EXAMPLE)


def statuses(findings: list, item: str) -> list[str]:  # type: ignore[type-arg]
    return [f.status for f in findings if f.item == item]


def test_the_dev_clusters_recorded_config_passes(policy: Policy) -> None:
    findings = check_config(parse_config((DATA / "config.txt").read_text()), policy)
    assert [f.item for f in findings if f.status != "ok"] == []


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [
        ("PriorityType", "priority/basic", "PriorityType=priority/multifactor"),
        ("PreemptType", "preempt/qos", "PreemptType=preempt/none"),
        ("PreemptMode", "REQUEUE", "PreemptMode=OFF"),
        ("JobRequeue", "0", "JobRequeue=1"),
        ("SelectType", "select/linear", "SelectType=select/cons_tres"),
        ("GresTypes", "(null)", "GresTypes=gpu"),
        ("AccountingStorageType", "accounting_storage/none", "accounting_storage/slurmdbd"),
        ("AccountingStorageEnforce", "limits", "AccountingStorageEnforce=associations"),
        ("AccountingStorageTRES", "cpu,mem", "add gres/gpu"),
        ("PriorityWeightFairShare", "2000000", "lower the PriorityWeight"),
    ],
)
def test_each_required_setting_is_reported_wrong_with_its_fix(
    policy: Policy, key: str, value: str, fix: str
) -> None:
    findings = check_config(dev_config(**{key: value}), policy)
    wrong = [f for f in findings if f.status == "wrong"]
    assert len(wrong) == 1, wrong
    assert fix in wrong[0].fix


def test_recommended_settings_warn_without_failing(policy: Policy) -> None:
    config = dev_config(
        SchedulerType="sched/builtin", SchedulerParameters="enable_user_top", SLURM_VERSION="23.11.1"
    )
    findings = check_config(config, policy)
    assert {f.item for f in findings if f.status == "warn"} == {
        "SchedulerType",
        "SchedulerParameters",
        "SLURM_VERSION",
    }
    assert not [f for f in findings if f.status == "wrong"]


def test_requeue_is_not_required_when_the_policy_never_preempts(policy: Policy) -> None:
    calm = policy.model_copy(
        update={"scheduling": policy.scheduling.model_copy(update={"preemption": "none"})}
    )
    assert statuses(check_config(dev_config(JobRequeue="0"), calm), "JobRequeue") == ["info"]


def test_permission_needs_root_slurm_user_or_an_operator() -> None:
    config = dev_config()
    assert check_permission("root", 0, None, config).status == "ok"
    assert check_permission("slurm", 64030, None, config).status == "ok"
    assert check_permission("ops", 1000, "Operator", config).status == "ok"
    f = check_permission("bob", 1002, "None", config)
    assert f.status == "wrong" and f.fix == "sacctmgr -i modify user bob set adminlevel=operator"


def test_accounts_qos_and_gpu_types_against_the_policy(policy: Policy) -> None:
    fake = FakeSlurm.dev(lambda: 0.0, accounts=("product", "research", "ops"))
    fake.qos = [Qos("normal", 0, (), "cluster", ()), Qos("low", 0, ("x",), "requeue", ())]
    fake.nodes["n4"] = dataclasses.replace(fake.nodes["n4"], gres=(Gres("gpu", "h100", 8),))
    report = run_check(fake, policy, user=("root", 0))
    by = {f.item: f for f in report.findings}
    assert by["account platform"].status == "wrong"
    assert by["account platform"].fix.startswith("sacctmgr -i add account platform parent=root fairshare=20")
    assert by["account ops"].status == "info" and "maps to no leaf" in by["account ops"].why
    assert by["gpu type h100"].status == "wrong" and "add h100 to gpu_rates" in by["gpu type h100"].fix
    assert by["gpu type a100"].status == "ok"
    assert by["qos low"].status == "info"
    assert not report.ok and {f.item for f in report.wrong} == {"account platform", "gpu type h100"}
    assert "2 wrong" in report.text().splitlines()[-1]


def test_require_ready_is_what_serve_calls(policy: Policy) -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    assert require_ready(fake, policy).ok
    fake.config["PreemptType"] = "preempt/qos"
    with pytest.raises(SlurmNotReady, match=r"\(PreemptType\)") as info:
        require_ready(fake, policy)
    assert isinstance(info.value.report, CheckReport)


def test_sub_accounts_of_a_leaf_are_ok(policy: Policy) -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    fake.associations.append(Association("fairshare", "research-interns", None, "research", "1", (), None))
    by = {f.item: f for f in run_check(fake, policy, user=("root", 0)).findings}
    assert by["account research-interns"].status == "ok"
    assert "charged to leaf research" in by["account research-interns"].value


# --------------------------------------------------------------------------- the command


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    f = FakeSlurm.dev(lambda: 0.0)
    monkeypatch.setattr(slurm_cli, "_backend", lambda timeout: f)
    return f


def test_cli_check_ok_exits_0(fake: FakeSlurm) -> None:
    r = CliRunner().invoke(main, ["slurm", "check", "--policy", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("cluster fairshare (Slurm 22.05.8), policy")
    assert "0 wrong" in r.output and "fairshare can drive this cluster" in r.output


def test_cli_check_wrong_exits_1_with_the_fix(fake: FakeSlurm) -> None:
    fake.config["JobRequeue"] = "0"
    r = CliRunner().invoke(main, ["slurm", "check", "--policy", str(EXAMPLE)])
    assert r.exit_code == 1
    assert "WRONG  JobRequeue" in r.output and "fix: JobRequeue=1 in slurm.conf" in r.output
    r = CliRunner().invoke(main, ["slurm", "check", "--policy", str(EXAMPLE), "--json"])
    data = json.loads(r.output)
    assert r.exit_code == 1 and data["ok"] is False and data["counts"]["wrong"] == 1


def test_cli_check_unreachable_slurm_exits_2_naming_the_command(fake: FakeSlurm) -> None:
    fake.down = True
    r = CliRunner().invoke(main, ["slurm", "check", "--policy", str(EXAMPLE)])
    assert r.exit_code == 2
    assert r.output.startswith("error: `scontrol show config` could not reach Slurm (exit code 1)")
    assert "Unable to contact slurm controller" in r.output


def test_cli_check_bad_policy_exits_2(tmp_path: Path, fake: FakeSlurm) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(EXAMPLE.read_text().replace("default_class: train", "default_class: nope"))
    r = CliRunner().invoke(main, ["slurm", "check", "--policy", str(bad)])
    assert r.exit_code == 2 and "slurm.default_class: unknown class 'nope'" in r.output


def test_cli_jobs_lists_mapped_and_skipped_jobs(fake: FakeSlurm) -> None:
    fake.submit("research", 8, 2, comment="fairshare:protect=3h", qos="debug")
    fake.submit("ops", 1)
    r = CliRunner().invoke(main, ["slurm", "jobs", "--policy", str(EXAMPLE)])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0] == "4 nodes, 32 GPUs (32 free on schedulable nodes)"
    assert lines[1].split()[:5] == ["pending", "1", "research", "debug", "8"]
    assert "protected 15m" in lines[1]
    assert "capped to 15m" in lines[2]
    assert lines[3].startswith("skipped       2 (pending): account 'ops' maps to no leaf")


def test_cli_reset_priorities_lists_then_resets(fake: FakeSlurm) -> None:
    a, b = fake.submit("product", 8), fake.submit("research", 8)
    fake.set_priority(a, 600_000_000)
    r = CliRunner().invoke(main, ["slurm", "reset-priorities", "--policy", str(EXAMPLE)])
    assert r.exit_code == 0 and r.output.splitlines() == [
        f"1 pending job(s) with a priority in [1000000, 1000000000]: {a}",
        "run again with --yes to reset them",
    ]
    assert fake.read_jobs()[0].priority == 600_000_000
    r = CliRunner().invoke(main, ["slurm", "reset-priorities", "--policy", str(EXAMPLE), "--yes"])
    assert r.exit_code == 0 and r.output.splitlines()[-1] == "reset 1 job(s)"
    assert [(j.job_id, j.priority) for j in fake.read_jobs()] == [(a, 10_000), (b, 10_000)]
