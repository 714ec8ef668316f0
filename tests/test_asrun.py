"""compare --from DIR (a site folder), the as-run column and fidelity against it (issue 17)."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from conftest import CHECKER
from fairshare.cli import main
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.fidelity import kendall, spearman
from fairshare.replay.runner import inputs_from_scenario

SITE = Path(__file__).resolve().parent / "data" / "site_small"
WORKLOAD_COLUMNS = (
    "job_id",
    "submit",
    "group",
    "user",
    "class",
    "gpus",
    "nodes",
    "gpu_type",
    "work",
    "estimate",
)


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def check(folder: Path) -> subprocess.CompletedProcess[str]:
    """The independent checker on one output folder, with the policy copy written beside it."""
    if not CHECKER.exists():
        pytest.fail(f"the independent checker is missing: {CHECKER}")
    return subprocess.run(
        [sys.executable, str(CHECKER), str(folder), "--policy", str(folder / "policy.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )


def copy_site(tmp: Path) -> Path:
    site = tmp / "site"
    shutil.copytree(SITE, site)
    return site


def history_from_events(events: Path, with_nodes: bool) -> str:
    """history.csv of what a replay did: one row per run, a preempted run `preempted`."""
    runs: dict[str, tuple[float, list[str]]] = {}
    rows: list[tuple[float, str, float, str, str]] = []
    for line in events.read_text().splitlines():
        e = json.loads(line)
        if e["type"] == "start":
            runs[e["job"]] = (e["t"], sorted(e["alloc"]))
        elif e["type"] in ("finish", "preempt"):
            t0, nodes = runs.pop(e["job"])
            reason = "finished" if e["type"] == "finish" else "preempted"
            rows.append((t0, e["job"], e["t"], reason, "|".join(nodes) if with_nodes else ""))
    assert not runs, "every run of the replay ended"
    rows.sort()
    body = "".join(f"{job},{t0!r},{t1!r},{reason},{nodes}\n" for t0, job, t1, reason, nodes in rows)
    return "job_id,start,end,end_reason,nodes\n" + body


def site_from_scenario(tmp: Path, name: str, incumbent: dict[str, Any] | None = None) -> Path:
    """A site folder holding a built-in scenario's arrivals, its classes reduced to Slurm's
    (no contract: no protection, overhead or checkpoints), and an empty history."""
    data = SCENARIOS[name](1)
    inputs = inputs_from_scenario(data)
    site = tmp / f"site-{name}"
    site.mkdir()
    policy = dict(data.policy)
    policy["classes"] = {c: {} for c in data.policy["classes"]}
    policy.pop("exceptions", None)
    (site / "policy.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    cluster = {k: v for k, v in data.cluster.items() if k not in ("maintenance", "horizon")}
    (site / "cluster.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    with (site / "workload.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(WORKLOAD_COLUMNS)
        for j in inputs.jobs:
            r = j.request
            types = "|".join(r.gpu_types) if r.gpu_types else ""
            w.writerow(
                [
                    r.id,
                    repr(r.submit),
                    r.group,
                    r.user or "",
                    r.cls,
                    r.gpus,
                    r.nodes,
                    types,
                    repr(j.work),
                    repr(r.estimate),
                ]
            )
    (site / "history.csv").write_text("job_id,start,end,end_reason,nodes\n")
    (site / "incumbent.yaml").write_text(yaml.safe_dump(incumbent or {"slurm_version": "23.11"}))
    return site


# ---------------------------------------------------------------------------------- as-run


def test_as_run_of_a_site_folder_passes_the_independent_checker(tmp_path: Path) -> None:
    code, out = invoke(
        "compare", "--from", str(SITE), "--policies", "as-run,fifo", "--out", str(tmp_path / "o")
    )
    assert code == 0, out
    res = check(tmp_path / "o" / "as-run")
    assert res.returncode == 0, res.stdout + res.stderr
    events = [json.loads(x) for x in (tmp_path / "o" / "as-run" / "events.jsonl").read_text().splitlines()]
    starts = {(e["job"], e["t"]) for e in events if e["type"] == "start"}
    history = list(csv.DictReader((SITE / "history.csv").open()))
    assert starts == {(r["job_id"], float(r["start"])) for r in history}  # every recorded run, as it ran
    for r in history:  # recorded nodes are kept
        if r["nodes"]:
            alloc = next(
                e["alloc"]
                for e in events
                if e["type"] == "start" and e["job"] == r["job_id"] and e["t"] == float(r["start"])
            )
            assert sorted(alloc) == r["nodes"].split("|")
    requeue = [e for e in events if e["type"] == "preempt"]
    assert [(e["job"], e["t"], e["recorded"]) for e in requeue] == [("102", 1000.0, "requeued")]
    m = json.loads((tmp_path / "o" / "as-run" / "metrics.json").read_text())
    assert m["policy"] == "as-run" and m["jobs"]["finished"] == 12 and "fidelity" not in m
    assert "fidelity" in json.loads((tmp_path / "o" / "fifo" / "metrics.json").read_text())
    code, out = invoke("explain", "--out", str(tmp_path / "o" / "as-run"), "--job", "102")
    assert code == 0 and "preempt (recorded: requeued" in out and "recorded no reasons" in out, out


@pytest.mark.parametrize(
    ("scenario", "strategy", "with_nodes"),
    [
        *[("eight-gpu", s, n) for s in ("fifo", "slurm-multifactor", "fairshare") for n in (True, False)],
        # 40 nodes of two GPU types, gangs: recorded nodes (placing them is not always possible)
        ("small-burst", "slurm-multifactor", True),
    ],
    ids=[
        *[
            f"eight-gpu-{s}-{'recorded-nodes' if n else 'placed'}"
            for s in ("fifo", "slurm-multifactor", "fairshare")
            for n in (True, False)
        ],
        "small-burst-slurm-multifactor-recorded-nodes",
    ],
)
def test_fidelity_against_an_as_run_of_the_strategys_own_replay_is_perfect(
    tmp_path: Path, scenario: str, strategy: str, with_nodes: bool
) -> None:
    site = site_from_scenario(tmp_path, scenario)
    code, out = invoke("replay", "--from", str(site), "--policy-name", strategy, "--out", str(tmp_path / "r"))
    assert code == 0, out
    (site / "history.csv").write_text(
        history_from_events(tmp_path / "r" / strategy / "events.jsonl", with_nodes)
    )
    code, out = invoke(
        "compare", "--from", str(site), "--policies", f"as-run,{strategy}", "--out", str(tmp_path / "c")
    )
    assert code == 0, out
    res = check(tmp_path / "c" / "as-run")
    assert res.returncode == 0, res.stdout
    f = json.loads((tmp_path / "c" / strategy / "metrics.json").read_text())["fidelity"]
    assert f["start_order"]["spearman"] == pytest.approx(1.0)
    assert f["start_order"]["kendall"] == pytest.approx(1.0)
    for table in ("sizes", "accounts"):
        for row in f[table].values():
            if row["jobs"]:
                assert row["p50_ratio"] == pytest.approx(1.0) and row["p90_ratio"] == pytest.approx(1.0)
    for row in f["accounts"].values():
        assert row["share_diff_points"] == pytest.approx(0.0, abs=1e-9)
    assert f["occupancy"]["diff_points"] == pytest.approx(0.0, abs=1e-9)
    assert f["makespan"]["ratio"] == pytest.approx(1.0)
    assert f["faithful"] and f["off"] == []
    if strategy == "fairshare":
        assert "fairshare is the proposal, not a model of what ran" in out
    else:
        assert f"Trust {strategy} as the model of this site's scheduler" in out


def test_as_run_is_measured_like_the_replay_it_was_recorded_from(tmp_path: Path) -> None:
    """Waits, share delivery and occupancy of as-run equal those of the replay whose events it
    records: the same metrics code measures both."""
    site = site_from_scenario(tmp_path, "eight-gpu")
    invoke("replay", "--from", str(site), "--policy-name", "fifo", "--out", str(tmp_path / "r"))
    (site / "history.csv").write_text(history_from_events(tmp_path / "r" / "fifo" / "events.jsonl", True))
    code, out = invoke(
        "compare", "--from", str(site), "--policies", "as-run,fifo", "--out", str(tmp_path / "c")
    )
    assert code == 0, out
    a = json.loads((tmp_path / "c" / "as-run" / "metrics.json").read_text())
    f = json.loads((tmp_path / "c" / "fifo" / "metrics.json").read_text())
    for key in ("classes", "groups", "occupancy", "fragmented_gpu_h", "sizes", "horizon_s"):
        assert _flat(a[key]) == pytest.approx(_flat(f[key])), key


def _flat(x: Any, prefix: str = "") -> dict[str, float | None]:
    if isinstance(x, dict):
        return {k: v for key, val in x.items() for k, v in _flat(val, f"{prefix}/{key}").items()}
    return {prefix: x}


# ---------------------------------------------------------------------------------- errors


def _edit(site: Path, name: str, old: str, new: str) -> None:
    text = (site / name).read_text()
    assert old in text
    (site / name).write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "history.csv",
            "101,0,1800",
            "999,0,1800",
            "history.csv: line 3, column 1 (job_id): job '999' is not in the workload",
        ),
        (
            "history.csv",
            "101,0,1800",
            "101,0,x",
            "history.csv: line 3, column 3 (end): expected seconds, got 'x'",
        ),
        (
            "history.csv",
            "103,120,720,finished",
            "103,120,100,finished",
            "line 5, column 3 (end): the run ends",
        ),
        (
            "history.csv",
            "103,120,720,finished",
            "103,120,720,done",
            "column 4 (end_reason): unknown end_reason 'done'",
        ),
        (
            "history.csv",
            "103,120,720,finished",
            "103,120,730,finished",
            "job 103's last run lasts 610 s, but the workload's work is 600 s",
        ),
        (
            "history.csv",
            "103,120,720,finished,a100-001",
            "103,120,720,finished,a100-009",
            "column 5 (nodes): no node 'a100-009'",
        ),
        (
            "history.csv",
            "103,120,720,finished,a100-001",
            "103,120,720,finished,h100-000",
            "job 103 may run on A100",
        ),
        (
            "history.csv",
            "103,120,720,finished,a100-001",
            "103,120,720,finished,a100-000",
            "which has 0 GPUs free then",
        ),
        ("history.csv", "101,0,1800", "101,0,1800,", "expected 5 cells, got 6"),
        (
            "history.csv",
            "105,720,1620,failed,a100-001",
            "105,60,960,failed,a100-001",
            "job 105 starts at 60, before its submit",
        ),
        (
            "history.csv",
            "102,60,1000,requeued",
            "102,60,1000,finished",
            "job 102's run ends finished, yet a later run follows",
        ),
        (
            "history.csv",
            "104,6000,7200,timeout,",
            "104,5000,6200,timeout,",
            "line 10: job 104 runs from 5000 to 6200 (8 GPUs on 2 node(s)), but the cluster",
        ),
        ("incumbent.yaml", "bf_interval: 30s", "bf_interval: soon", "incumbent.yaml: bf_interval"),
        ("incumbent.yaml", "weight_qos: 500", "weight_qos: -1", "incumbent.yaml: weight_qos"),
        ("incumbent.yaml", "bf_window: 1d", "bf_windows: 1d", "incumbent.yaml: bf_windows"),
    ],
    ids=[
        "unknown-job",
        "bad-number",
        "ends-before-start",
        "bad-reason",
        "last-run-not-work",
        "unknown-node",
        "wrong-gpu-type",
        "over-capacity",
        "cell-count",
        "before-submit",
        "finished-then-ran",
        "no-room-to-place",
        "incumbent-duration",
        "incumbent-negative-weight",
        "incumbent-unknown-key",
    ],
)
def test_a_bad_site_folder_is_one_error_line_naming_the_file_and_place(
    tmp_path: Path, name: str, old: str, new: str, message: str
) -> None:
    site = copy_site(tmp_path)
    _edit(site, name, old, new)
    code, out = invoke(
        "compare", "--from", str(site), "--policies", "as-run,fifo", "--out", str(tmp_path / "o")
    )
    assert code == 2, out
    assert message in out
    assert out.count("error:") == 1 and "Traceback" not in out
    assert not (tmp_path / "o").exists()  # nothing written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "as-run,fifo"], "history.csv: missing: a site folder holds"),
        (["--policies", "as-run", "--trace", "philly"], "--from: "),
        (
            ["--policies", "fifo", "--jobs", "0:5"],
            "give no --trace, --policy, --cluster, --workload or trace",
        ),
    ],
    ids=["missing-file", "with-other-inputs", "with-trace-options"],
)
def test_from_needs_the_whole_folder_and_nothing_else(tmp_path: Path, args: list[str], message: str) -> None:
    site = copy_site(tmp_path)
    (site / "history.csv").unlink()
    code, out = invoke("compare", "--from", str(site), *args, "--out", str(tmp_path / "o"))
    assert code == 2 and message in out, out


def test_as_run_without_a_history_is_an_error(tmp_path: Path) -> None:
    code, out = invoke(
        "compare", "--scenario", "eight-gpu", "--policies", "as-run,fifo", "--out", str(tmp_path)
    )
    assert code == 2 and "as-run is the recorded history: it needs a site folder" in out, out


# ---------------------------------------------------------------------------------- incumbent


def _mf_events(tmp: Path, scenario: str, incumbent: dict[str, Any], tag: str) -> str:
    (tmp / tag).mkdir()
    site = site_from_scenario(tmp / tag, scenario, incumbent)
    out_dir = tmp / tag / "o"
    code, out = invoke(
        "replay", "--from", str(site), "--policy-name", "slurm-multifactor", "--out", str(out_dir)
    )
    assert code == 0, out
    return (out_dir / "slurm-multifactor" / "events.jsonl").read_text()


@pytest.mark.parametrize(
    ("scenario", "changed"),
    [
        ("eight-gpu", {"weight_fairshare": 0, "weight_age": 10000}),
        ("eight-gpu", {"decay_half_life": "1h"}),
        ("eight-gpu", {"bf_max_job_test": 1}),
        ("eight-gpu", {"bf_interval": "30m"}),
        # a periodic pass matters where priorities reorder between events and the new top fits
        ("small-burst", {"sched_interval": "1m"}),
    ],
    ids=["weights", "half-life", "bf-max-job-test", "bf-interval", "sched-interval"],
)
def test_the_incumbents_settings_change_slurm_multifactors_decisions(
    tmp_path: Path, scenario: str, changed: dict[str, Any]
) -> None:
    base = _mf_events(tmp_path, scenario, {"slurm_version": "23.11"}, "base")
    other = _mf_events(tmp_path, scenario, {"slurm_version": "23.11", **changed}, "changed")
    assert base != other


def test_the_decay_phase_moves_slurm_multifactors_priority_changes(tmp_path: Path) -> None:
    # the same settings, the decay ticks 150 s later (a site whose slurmctld booted mid-period)
    knobs = {"slurm_version": "22.05", "decay_period": "5m", "decay_half_life": "1h", "sched_interval": "1m"}
    base = _mf_events(tmp_path, "small-burst", knobs, "base")
    assert base == _mf_events(tmp_path, "small-burst", {**knobs, "decay_phase": "300s"}, "whole-period")
    assert base != _mf_events(tmp_path, "small-burst", {**knobs, "decay_phase": "150s"}, "shifted")


def test_the_incumbents_settings_leave_the_other_strategies_alone(tmp_path: Path) -> None:
    outs = []
    for tag, inc in (("a", {}), ("b", {"weight_fairshare": 0, "bf_interval": "30m", "sched_interval": "1m"})):
        (tmp_path / tag).mkdir()
        site = site_from_scenario(tmp_path / tag, "eight-gpu", inc)
        code, out = invoke(
            "replay", "--from", str(site), "--policy-name", "fairshare", "--out", str(tmp_path / tag / "o")
        )
        assert code == 0, out
        outs.append((tmp_path / tag / "o" / "fairshare" / "events.jsonl").read_text())
    assert outs[0] == outs[1]


def test_the_report_lists_the_incumbent_settings_not_modelled(tmp_path: Path) -> None:
    code, out = invoke(
        "compare", "--from", str(SITE), "--policies", "as-run,slurm-multifactor", "--out", str(tmp_path)
    )
    assert code == 0, out
    report = (tmp_path / "report.html").read_text()
    assert "Incumbent settings not modelled" in report
    for key in ("PriorityFavorSmall", "PriorityWeightQOS", "bf_continue"):
        assert key in report and key in out
    assert "Fidelity: each model against what really ran" in report


# ---------------------------------------------------------------------------------- rank correlations


def _spearman_by_definition(x: list[float], y: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        return [sum(1 for b in v if b < a) + (sum(1 for b in v if b == a) + 1) / 2 for a in v]

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return float(num / den)


def _kendall_by_definition(x: list[float], y: list[float]) -> float:
    """tau-b from all pairs: (C - D) / sqrt((n0 - ties in x) (n0 - ties in y))."""
    n = len(x)
    c = d = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            sx, sy = (x[i] > x[j]) - (x[i] < x[j]), (y[i] > y[j]) - (y[i] < y[j])
            tx += sx == 0
            ty += sy == 0
            c += sx * sy > 0
            d += sx * sy < 0
    n0 = n * (n - 1) // 2
    return (c - d) / math.sqrt((n0 - tx) * (n0 - ty))


@pytest.mark.parametrize(
    ("x", "y", "rho", "tau"),
    [
        ([1, 2, 3, 4], [10, 20, 30, 40], 1.0, 1.0),
        ([1, 2, 3, 4], [40, 30, 20, 10], -1.0, -1.0),
        ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], 0.8, 0.6),  # 1 - 6*4/(5*24); (8 - 2) / 10
        ([1, 1, 2, 3], [1, 2, 2, 3], 3.75 / 4.5, 0.8),  # by hand: average ranks; C 4, D 0, ties 1 and 1
    ],
    ids=["same", "reversed", "two-swaps", "ties"],
)
def test_rank_correlations_match_hand_computed_values(
    x: list[float], y: list[float], rho: float, tau: float
) -> None:
    assert spearman(x, y) == pytest.approx(rho)
    assert kendall(x, y) == pytest.approx(tau)


@pytest.mark.parametrize("seed", range(6))
def test_rank_correlations_match_their_definitions_with_many_ties(seed: int) -> None:
    import random

    rng = random.Random(seed)
    n = rng.randint(3, 60)
    x = [float(rng.randint(0, 8)) for _ in range(n)]
    y = [float(rng.randint(0, 8)) for _ in range(n)]
    assert spearman(x, y) == pytest.approx(_spearman_by_definition(x, y))
    assert kendall(x, y) == pytest.approx(_kendall_by_definition(x, y))


def test_rank_correlations_are_none_when_one_side_is_constant() -> None:
    assert spearman([1, 1, 1], [1, 2, 3]) is None and kendall([1, 1, 1], [1, 2, 3]) is None


def test_a_requeued_run_of_no_time_is_left_out_and_counted(tmp_path: Path) -> None:
    site = copy_site(tmp_path)
    _edit(site, "history.csv", "101,0,1800,finished", "101,0,0,node_fail,\n101,0,1800,finished")
    code, out = invoke("compare", "--from", str(site), "--policies", "as-run", "--out", str(tmp_path / "o"))
    assert code == 0, out
    assert "history: 1 run(s) of no time that did not end their job left out" in out
    assert check(tmp_path / "o" / "as-run").returncode == 0
