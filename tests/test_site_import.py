"""`fairshare import slurm` end to end on the dev cluster's real output (tests/data/slurm-site): the
site folder it writes (/work/coord/site-contract.md), what it skips and says, and that
`fairshare check` accepts the folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from fairshare.cli import main

DATA = Path(__file__).parent / "data" / "slurm-site"
FILES = ["cluster.yaml", "history.csv", "import.json", "incumbent.yaml", "policy.yaml", "workload.csv"]


def _import(out: Path, *extra: str, sacct: str = "sacct-duplicates.txt", **files: str) -> Result:
    src = {"assoc": "assoc-dump.cfg", "config": "config.txt", "nodes": "nodes.txt", **files}
    args = ["import", "slurm", "--sacct", str(DATA / sacct), "--out", str(out)]
    for k, v in src.items():
        if v:
            args += [f"--{k}", str(DATA / v)]
    return CliRunner().invoke(main, [*args, *extra])


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imp") / "site"
    res = _import(out)
    assert res.exit_code == 0, res.output
    return out


def test_the_site_folder_holds_the_contract_files(site: Path) -> None:
    assert sorted(p.name for p in site.iterdir() if p.name != "complete.json") == FILES


def test_what_was_skipped_is_counted_and_said(tmp_path: Path) -> None:
    res = _import(tmp_path / "site")
    assert res.exit_code == 0, res.output
    assert "imported 40 of 42 jobs" in res.output
    assert "skipped 1: cancelled before it started (cancelled_before_start)" in res.output
    assert "skipped 1: asked for no GPU (fairshare schedules GPUs) (no_gpus)" in res.output
    summary = json.loads((tmp_path / "site" / "import.json").read_text())
    assert summary["jobs"] == {
        "read": 42,
        "imported": 40,
        "skipped": {"cancelled_before_start": 1, "no_gpus": 1},
    }
    assert summary["format"] == 1 and summary["anonymized"] is False
    assert summary["nodes"] == {"n1": "a100-000", "n2": "a100-001", "n3": "a100-002", "n4": "a100-003"}
    assert summary["sources"]["sacct"]["form"] == "sacct -P, ISO times"
    assert summary["sources"]["assoc"]["form"] == "sacctmgr dump"


def test_steps_are_counted_when_the_file_has_them(tmp_path: Path) -> None:
    res = _import(tmp_path / "site", sacct="sacct-steps.txt")
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "site" / "import.json").read_text())
    rows = (DATA / "sacct-steps.txt").read_text().splitlines()[1:]
    steps = sum(1 for row in rows if "." in row.split("|")[0])  # 123.batch, 123.extern, 123.0
    assert steps == 40
    assert summary["steps_skipped"] == steps
    assert f"{steps} job steps skipped" in res.output
    assert summary["jobs"]["imported"] == 40


def test_workload_and_history_of_the_requeued_array_het_and_gang_jobs(site: Path) -> None:
    work = {r["job_id"]: r for r in _rows(site / "workload.csv")}
    hist = _rows(site / "history.csv")
    header = "job_id,submit,group,user,class,gpus,nodes,gpu_type,cpus,mem_gb,work,estimate"
    assert list(_rows(site / "workload.csv")[0]) == header.split(",")
    assert {"32_0", "32_3", "34+0", "34+1", "31", "36"} <= set(work)
    assert "33" not in work and "37" not in work
    assert (work["31"]["gpus"], work["31"]["nodes"], work["31"]["group"]) == ("16", "2", "research")
    assert work["32_1"]["estimate"] == "86400"
    requeued = [h for h in hist if h["job_id"] == "36"]
    assert [h["end_reason"] for h in requeued] == ["requeued", "finished"]
    # work = the final run's elapsed
    assert float(work["36"]["work"]) == pytest.approx(float(requeued[1]["end"]) - float(requeued[1]["start"]))
    gang = [h for h in hist if h["job_id"] == "31"]
    assert len(gang[0]["nodes"].split("|")) == 2
    assert {h["end_reason"] for h in hist if h["job_id"] == "42"} == {"timeout"}
    assert {h["end_reason"] for h in hist if h["job_id"] == "41"} == {"cancelled"}
    starts = [(float(h["start"]), h["job_id"]) for h in hist]
    assert starts == sorted(starts)


def test_policy_cluster_and_incumbent(site: Path) -> None:
    policy = yaml.safe_load((site / "policy.yaml").read_text())
    assert [(g["name"], g["share"]) for g in policy["tree"]] == [
        ("platform", 20.0),
        ("product", 50.0),
        ("research", 30.0),
    ]
    assert sorted(policy["classes"]) == ["debug", "eval", "train"]
    assert policy["gpu_rates"] == {"a100": 1.0} and policy["window"] == "7d"
    cluster = yaml.safe_load((site / "cluster.yaml").read_text())
    assert cluster["pools"] == [
        {"name": "a100", "count": 4, "gpus": 8, "gpu_type": "a100", "cpus": 16, "mem_gb": 62.5}
    ]
    assert cluster["epoch"].endswith(":00Z")
    inc = yaml.safe_load((site / "incumbent.yaml").read_text())
    assert (
        inc["weight_fairshare"] == 10000
        and inc["decay_half_life"] == "7d"
        and inc["slurm_version"] == "22.05.8"
    )


def test_check_accepts_the_site_folder_and_flags_what_people_must_fill(site: Path) -> None:
    policy, cluster, workload = (str(site / n) for n in ("policy.yaml", "cluster.yaml", "workload.csv"))
    res = CliRunner().invoke(main, ["check", policy, "--cluster", cluster, "--workload", workload])
    assert res.exit_code == 0, res.output
    assert "workload" in res.output and "40 jobs" in res.output
    assert "review date" in res.output and "owner TODO" in res.output


def test_the_same_files_give_byte_identical_folders(site: Path, tmp_path: Path) -> None:
    res = _import(tmp_path / "again")
    assert res.exit_code == 0
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (site / name).read_bytes(), name


@pytest.mark.parametrize(
    "files, same",
    [
        ({"assoc": "assoc.txt"}, True),
        ({"config": "slurm.conf", "nodes": "slurm.conf"}, True),
        ({"config": "", "nodes": "slurm.conf"}, False),
    ],
    ids=["show-assoc", "slurm-conf-as-config-and-nodes", "no-config"],
)
def test_other_forms_of_the_inputs_give_the_same_workload(
    site: Path, tmp_path: Path, files: dict[str, str], same: bool
) -> None:
    res = _import(tmp_path / "s", **files)
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s" / "workload.csv").read_bytes() == (site / "workload.csv").read_bytes()
    inc = (tmp_path / "s" / "incumbent.yaml").read_text()
    assert (
        inc.split("slurm_version")[0] == (site / "incumbent.yaml").read_text().split("slurm_version")[0]
    ) is same


def test_epoch_time_file_gives_the_same_folder(site: Path, tmp_path: Path) -> None:
    assert _import(tmp_path / "s", sacct="sacct-epoch.txt").exit_code == 0
    for name in ("workload.csv", "history.csv", "cluster.yaml", "policy.yaml"):
        assert (tmp_path / "s" / name).read_bytes() == (site / name).read_bytes(), name


def test_anonymize_replaces_users_and_accounts_stably(tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert _import(tmp_path / name, "--anonymize").exit_code == 0
    text = "".join((tmp_path / "a" / n).read_text() for n in ("workload.csv", "policy.yaml", "import.json"))
    for real in ("product", "research", "platform", "root"):
        assert real not in text
    assert (tmp_path / "a" / "workload.csv").read_bytes() == (tmp_path / "b" / "workload.csv").read_bytes()
    assert json.loads((tmp_path / "a" / "import.json").read_text())["anonymized"] is True


def test_a_bad_row_is_one_error_line_and_nothing_is_written(tmp_path: Path) -> None:
    lines = (DATA / "sacct-duplicates.txt").read_text().splitlines()
    cells = lines[5].split("|")
    cells[7] = "soon"  # Start
    lines[5] = "|".join(cells)
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "site"
    args = ["import", "slurm", "--sacct", str(bad), "--nodes", str(DATA / "nodes.txt"), "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"error: {bad}: line 6, column 8 (Start): 'soon' is not a time "
        "(ISO such as 2026-10-01T08:00:00, or epoch seconds)"
    ]
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["bad.txt"]
    res = CliRunner().invoke(main, [*args, "--skip-bad"])
    assert res.exit_code == 0, res.output
    assert "skipped 1: a bad row (--skip-bad) (bad_row)" in res.output
    assert json.loads((out / "import.json").read_text())["jobs"]["skipped"]["bad_row"] == 1


def test_an_earlier_import_is_replaced_but_a_foreign_folder_is_not(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert _import(out).exit_code == 0
    assert _import(out).exit_code == 0
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    res = _import(foreign)
    assert res.exit_code == 2 and "not a fairshare output" in res.output
    assert (foreign / "notes.txt").read_text() == "keep"


def test_user_leaves_map_each_user_association(tmp_path: Path) -> None:
    assert _import(tmp_path / "s", "--leaves", "user").exit_code == 0
    policy = yaml.safe_load((tmp_path / "s" / "policy.yaml").read_text())
    assert [c["name"] for c in policy["tree"][0]["children"]] == ["root"]
    assert policy["slurm"]["accounts"]["platform/root"] == "platform"
    groups = {r["group"] for r in _rows(tmp_path / "s" / "workload.csv")}
    assert groups == {"platform/root", "product/root", "research/root"}


def test_live_runs_the_four_commands_and_keeps_their_output(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--live on a host whose sacct/sacctmgr/scontrol print the dev cluster's captured output (the
    real commands are exercised by the slurm_cluster tests of the as-run side)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    outputs = {
        "sacct": "sacct-epoch.txt",
        "sacctmgr": "assoc-dump.cfg",
        "scontrol": 'nodes.txt" ; [ "$1" = show ] && [ "$2" = config ] && file="config.txt',
    }
    for name, data in outputs.items():
        script = bin_dir / name
        script.write_text(
            f'#!/bin/sh\necho "{name} $* SLURM_TIME_FORMAT=$SLURM_TIME_FORMAT" >> {log}\n'
            f'file="{data}"\ncat "{DATA}/$file"\n'
        )
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    out = tmp_path / "live"
    res = CliRunner().invoke(main, ["import", "slurm", "--live", "-S", "2026-12-01", "--out", str(out)])
    assert res.exit_code == 0, res.output
    calls = log.read_text().splitlines()
    assert [c.split()[0] for c in calls] == ["sacct", "sacctmgr", "scontrol", "scontrol"]
    assert "-X -D -P" in calls[0] and "-S 2026-12-01" in calls[0] and "SLURM_TIME_FORMAT=%s" in calls[0]
    assert sorted(p.name for p in (out / "sources").iterdir()) == [
        "assoc.txt",
        "config.txt",
        "nodes.txt",
        "sacct.txt",
    ]
    assert (out / "workload.csv").read_bytes() == (site / "workload.csv").read_bytes()
    assert json.loads((out / "import.json").read_text())["span"]["start"] == "2026-12-01T00:00:00Z"


NESTED_DUMP = """\
Cluster - 'fairshare':Fairshare=1
Parent - 'root'
Account - 'ml':Fairshare=60
Account - 'ops':Fairshare=40
Parent - 'ml'
Account - 'vision':Fairshare=3
Account - 'nlp':Fairshare=parent
User - 'alice':Fairshare=2
User - 'bob':Fairshare=5
Parent - 'vision'
User - 'carol':Fairshare=1
"""
NESTED_SACCT = """\
JobID|Account|User|Submit|Start|End|State|AllocTRES|NNodes|Timelimit|NodeList
1|ml|alice|2026-10-01T00:00:00|2026-10-01T00:00:05|2026-10-01T01:00:00|COMPLETED|gres/gpu=1|1|UNLIMITED|n1
2|vision|carol|2026-10-01T00:00:10|2026-10-01T00:00:15|2026-10-01T01:00:00|FAILED|gres/gpu=8|1|60|n2
3|gone|dave|2026-10-01T00:00:10|2026-10-01T00:00:15|2026-10-01T01:00:00|COMPLETED|gres/gpu=8|1|60|n3
4|ops|erin|2026-10-01T00:00:20|2026-10-01T00:00:25|Unknown|RUNNING|gres/gpu=3,node=2|2|60|n[3-4]
5|ops|erin|2026-10-01T00:00:20|2026-10-01T00:00:25|Unknown|RUNNING|gres/gpu=2|1|60|n9
6|ops|erin|2026-10-01T00:00:30|2026-10-01T00:01:00|Unknown|RUNNING|gres/gpu=2|1|60|n4
"""


def test_a_nested_account_tree_and_the_jobs_it_cannot_place(tmp_path: Path) -> None:
    (tmp_path / "assoc.cfg").write_text(NESTED_DUMP)
    (tmp_path / "h.txt").write_text(NESTED_SACCT)
    out = tmp_path / "site"
    args = ["import", "slurm", "--sacct", str(tmp_path / "h.txt"), "--assoc", str(tmp_path / "assoc.cfg")]
    res = CliRunner().invoke(
        main, [*args, "--nodes", str(DATA / "nodes.txt"), "--out", str(out), "-E", "2026-10-01T02:00"]
    )
    assert res.exit_code == 0, res.output
    policy = yaml.safe_load((out / "policy.yaml").read_text())

    def shape(nodes: list[dict[str, object]]) -> list[object]:
        return [(n["name"], n["share"], shape(n.get("children", []))) for n in nodes]  # type: ignore[arg-type]

    # ml has jobs and sub-accounts: a leaf of its own name, its share its users' (2 + 5)
    assert shape(policy["tree"]) == [
        ("ml", 60.0, [("nlp", 1.0, []), ("vision", 3.0, []), ("ml", 7.0, [])]),
        ("ops", 40.0, []),
    ]
    assert "Fairshare=parent on nlp: taken as share 1" in res.output
    summary = json.loads((out / "import.json").read_text())
    assert summary["jobs"]["skipped"] == {"ran_on_unknown_node": 1, "uneven_gang": 1, "unknown_account": 1}
    assert summary["accounts"] == {"ml": "ml/ml", "nlp": "ml/nlp", "ops": "ops", "vision": "ml/vision"}
    work = _rows(out / "workload.csv")
    assert [(w["job_id"], w["group"], w["estimate"], w["work"]) for w in work] == [
        ("1", "ml/ml", "", "3595"),
        ("2", "ml/vision", "3600", "3585"),
        ("6", "ops", "3600", "7140"),  # still running: its work so far, to the span's end
    ]
    hist = [(h["job_id"], h["end"], h["end_reason"], h["nodes"]) for h in _rows(out / "history.csv")]
    assert hist == [
        ("1", "3600", "finished", "a100-000"),
        ("2", "3600", "failed", "a100-001"),
        ("6", "7200", "running", "a100-003"),
    ]
    assert summary["span"]["end"] == "2026-10-01T02:00:00Z"
