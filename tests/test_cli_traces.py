"""The command line on traces: `replay`, `compare --trace`, `--workload-format`, `--cluster-format`, the
Philly window options, and clear errors (exit 2). Tests on the real traces fail, saying where they
looked, when the traces are absent (set FAIRSHARE_TRACES; CI always has them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from fairshare.cli import main
from fairshare.inputs.formats import TRACES, traces_root
from test_formats import NODES, PHILLY, PODS

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
FILES = ["cluster.json", "events.jsonl", "metrics.json", "policy.yaml", "decisions.jsonl"]


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args), env=env)
    return res.exit_code, res.output


@pytest.fixture
def real_traces() -> Path:
    root, how = traces_root()
    for t in TRACES.values():
        if not (root / t.workload).is_file():
            pytest.fail(
                f"real trace missing: {root / t.workload} ({how}). Set FAIRSHARE_TRACES to the folder "
                "holding philly/ and alibaba-openb/ (the traces are read where they are; CI always has them)."
            )
    return root


def test_replay_trace_philly_writes_one_policy_folder(tmp_path: Path, real_traces: Path) -> None:
    code, out = invoke("replay", "--trace", "philly", "--jobs", "0:300", "--out", str(tmp_path))
    assert code == 0, out
    for f in FILES:
        assert (tmp_path / "fairshare" / f).is_file()
    assert not (tmp_path / "report.html").exists()
    m = json.loads((tmp_path / "fairshare" / "metrics.json").read_text())
    assert m["jobs"]["submitted"] == 300 and m["scenario"] == "philly" and m["policy"] == "fairshare"
    assert "philly: 82,247 jobs of 15 teams" in out and "replaying jobs 0:300" in out
    assert "40 nodes x 8 GPUs in 4 blocks" in out and f"wrote {tmp_path / 'fairshare'}" in out
    assert (tmp_path / "fairshare" / "policy.yaml").read_text().startswith("# The philly loader's default")


def test_replay_policy_name_chooses_the_strategy(tmp_path: Path, real_traces: Path) -> None:
    code, out = invoke(
        "replay", "--trace", "philly", "--jobs", "100:300", "--policy-name", "fifo", "--out", str(tmp_path)
    )
    assert code == 0, out
    assert (tmp_path / "fifo" / "events.jsonl").is_file() and not (tmp_path / "fairshare").exists()


def test_compare_trace_philly_window_with_rounding_and_clipping(tmp_path: Path, real_traces: Path) -> None:
    code, out = invoke(
        "compare",
        "--trace",
        "philly",
        "--jobs",
        "20000:20400",
        "--round-gpus",
        "--clip-duration",
        "1s:24h",
        "--policies",
        "fairshare,fifo",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out
    for policy in ("fairshare", "fifo"):
        events = (tmp_path / policy / "events.jsonl").read_text().splitlines()
        submits = [json.loads(e) for e in events if '"submit"' in e]
        assert len(submits) == 400 and submits[0]["t"] == 0.0
        assert all(1.0 <= s["work"] <= 86400.0 for s in submits)
    assert (tmp_path / "report.html").is_file()
    assert "run times clipped to [1s, 1d]" in out


def test_compare_trace_philly_with_the_example_window_cluster(tmp_path: Path, real_traces: Path) -> None:
    code, out = invoke(
        "compare",
        "--trace",
        "philly",
        "--jobs",
        ":200",
        "--cluster",
        str(EX / "philly-window-cluster.yaml"),
        "--policies",
        "fairshare",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out
    nodes = json.loads((tmp_path / "fairshare" / "cluster.json").read_text())
    assert len(nodes) == 40 and {n["block"] for n in nodes} == {f"philly-b{k}" for k in range(4)}


def test_replay_trace_openb_reports_cpu_only_and_shared_gpu_pods(tmp_path: Path, real_traces: Path) -> None:
    code, out = invoke("replay", "--trace", "openb", "--jobs", "0:300", "--out", str(tmp_path))
    assert code == 0, out
    assert "1,088 CPU-only pods hold no GPU and are charged by their dominant CPU or memory share" in out
    assert "3,078 pods share a fraction of one GPU" in out
    assert "1,213 GPU nodes, 6,212 GPUs" in out
    nodes = json.loads((tmp_path / "fairshare" / "cluster.json").read_text())
    assert len(nodes) == 1213 and sum(n["gpus"] for n in nodes) == 6212


def test_workload_format_reads_any_copy_of_a_trace(tmp_path: Path) -> None:
    (tmp_path / "copy.csv").write_text(PHILLY)
    code, out = invoke(
        "replay",
        "--workload",
        str(tmp_path / "copy.csv"),
        "--workload-format",
        "philly",
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0, out
    m = json.loads((tmp_path / "out" / "fairshare" / "metrics.json").read_text())
    assert m["jobs"]["finished"] == 5 and set(m["groups"]) == {"teamA", "teamB", "teamC"}


def test_openb_workload_and_cluster_formats_from_any_folder(tmp_path: Path) -> None:
    (tmp_path / "pods.csv").write_text(PODS)
    (tmp_path / "nodes.csv").write_text(NODES)
    code, out = invoke(
        "compare",
        "--workload",
        str(tmp_path / "pods.csv"),
        "--workload-format",
        "openb",
        "--cluster",
        str(tmp_path / "nodes.csv"),
        "--cluster-format",
        "openb",
        "--policies",
        "fairshare,fifo",
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0, out
    events = [
        json.loads(x) for x in (tmp_path / "out" / "fairshare" / "events.jsonl").read_text().splitlines()
    ]
    submits = {e["job"]: e for e in events if e["type"] == "submit"}
    assert set(submits) == {"p0", "p1", "p2", "p3", "p4"} and submits["p1"]["gpu_types"] == ["V100M16", "T4"]
    assert submits["p2"]["gpus"] == 0  # CPU-only
    starts = {e["job"]: e for e in events if e["type"] == "start"}
    assert all(n.startswith(("V100M16-", "T4-")) for n in starts["p1"]["alloc"])


def test_trace_missing_is_exit_2_naming_the_path_and_the_variable(tmp_path: Path) -> None:
    code, out = invoke(
        "compare", "--trace", "philly", "--out", str(tmp_path / "x"), env={"FAIRSHARE_TRACES": str(tmp_path)}
    )
    assert code == 2
    assert str(tmp_path / "philly" / "philly.csv") in out and "FAIRSHARE_TRACES" in out
    assert "Traceback" not in out and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trace", "borg"], "unknown trace (known: philly, openb)"),
        (["--trace", "philly", "--jobs", "10"], "expected FIRST:END"),
        (["--trace", "philly", "--jobs", "30:20"], "expected 0 <= FIRST < END"),
        (["--trace", "philly", "--clip-duration", "1s"], "MIN:MAX"),
        (["--trace", "philly", "--clip-duration", "1h:1m"], "MAX is below MIN"),
        (["--trace", "philly", "--clip-duration", "soon:1h"], "expected a duration"),
        (["--trace", "philly", "--workload", "w.csv"], "use either --trace or --workload"),
        (["--trace", "philly", "--cluster-format", "openb"], "give the cluster file with --cluster"),
        (["--workload", "w.csv", "--workload-format", "slurm"], "unknown workload format"),
        (
            ["--policy", "p", "--cluster", "c", "--workload", "w", "--round-gpus"],
            "native workload format takes none of them",
        ),
        (["--workload", "w.csv"], "give --scenario, or all of --policy, --cluster and --workload"),
        (["--scenario", "normal", "--trace", "philly"], "use either --scenario"),
    ],
    ids=[
        "unknown-trace",
        "jobs-no-colon",
        "jobs-backwards",
        "clip-no-colon",
        "clip-backwards",
        "clip-bad-duration",
        "trace-and-workload",
        "cluster-format-alone",
        "unknown-workload-format",
        "window-on-native",
        "workload-alone",
        "scenario-and-trace",
    ],
)
def test_bad_trace_arguments_exit_2_with_a_clear_message(
    tmp_path: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.csv").write_text(PHILLY)
    for command in ("compare", "replay"):
        if command == "replay" and "--scenario" in args:
            continue
        code, out = invoke(command, *args, "--out", "x")
        assert code == 2, out
        assert message in out, out
        assert "Traceback" not in out
        assert not (tmp_path / "x").exists()


def test_window_past_the_end_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "copy.csv").write_text(PHILLY)
    code, out = invoke(
        "replay",
        "--workload",
        str(tmp_path / "copy.csv"),
        "--workload-format",
        "philly",
        "--jobs",
        "7:9",
        "--out",
        str(tmp_path / "x"),
    )
    assert code == 2 and "starts at 7 but the trace has only 5 jobs" in out


def test_help_lists_formats_and_traces() -> None:
    code, out = invoke("compare", "--help", env={**os.environ, "COLUMNS": "200"})
    assert code == 0
    assert "philly, openb" in out and "--workload-format" in out and "--jobs FIRST:END" in out
    code, out = invoke("replay", "--help", env={**os.environ, "COLUMNS": "200"})
    assert code == 0 and "--policy-name" in out
