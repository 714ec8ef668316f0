"""fairshare sweep: variants of the policy and cluster on the same arrivals (docs/decisions.md)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fairshare.errors import InputError
from fairshare.sweep.decide import pareto
from fairshare.sweep.run import LocalExecutor, Task
from fairshare.sweep.spec import Change, Variant, apply, grid, number_variants, parse_vary, variants_file

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
FILES = [
    "--policy",
    str(EX / "policy.yaml"),
    "--cluster",
    str(EX / "cluster.yaml"),
    "--workload",
    str(EX / "workload.csv"),
]
POLICY: dict[str, Any] = yaml.safe_load((EX / "policy.yaml").read_text())
CLUSTER: dict[str, Any] = yaml.safe_load((EX / "cluster.yaml").read_text())


def fairshare(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one(key: str, value: str) -> Variant:
    c = Change(key, value)
    return Variant("v01", f"{key}={value}", (c,), (c,))


# --- key paths and values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "where", "expected"),
    [
        ("window", "3d", ("policy", "window"), "3d"),
        ("policy.window", "14d", ("policy", "window"), "14d"),
        ("classes.train.protected", "90m", ("policy", "classes", "train", "protected"), "90m"),
        ("classes.train.restore", "5m", ("policy", "classes", "train", "restore"), "5m"),
        ("tree.research.share", "50", ("policy", "tree", 2, "share"), 50),
        ("tree[0].share", "+5", ("policy", "tree", 0, "share"), 45),
        ("gpu_rates.H100", "0.5", ("policy", "gpu_rates", "H100"), 0.5),
        ("cluster.pools.node.count", "+2", ("cluster", "pools", 0, "count"), 3),
        ("cluster.pools[0].gpus", "4", ("cluster", "pools", 0, "gpus"), 4),
        ("scheduling.requeue_delay", "1m", ("policy", "scheduling", "requeue_delay"), "1m"),
    ],
    ids=lambda x: str(x) if isinstance(x, str) else None,
)
def test_a_change_sets_the_value_at_its_key_path(
    key: str, value: str, where: tuple[Any, ...], expected: Any
) -> None:
    policy, cluster = apply(one(key, value), POLICY, CLUSTER)
    node: Any = {"policy": policy, "cluster": cluster}
    for part in where:
        node = node[part]
    assert node == expected
    assert yaml.safe_load((EX / "policy.yaml").read_text()) == POLICY, "the base must not change"


@pytest.mark.parametrize(
    ("changes", "protected", "cap"),
    [
        ((("classes.train.protected", "4h"),), "4h", "4h"),
        ((("classes.train.protected", "90m"),), "90m", "2h"),
        ((("classes.train.protected", "4h"), ("classes.train.max_protected", "3h")), "4h", "3h"),
    ],
    ids=["raised", "below-the-cap", "cap-set-too"],
)
def test_a_protection_above_the_class_cap_raises_the_cap_unless_the_cap_is_set(
    changes: tuple[tuple[str, str], ...], protected: str, cap: str
) -> None:
    cs = tuple(Change(k, v) for k, v in changes)
    policy, _ = apply(Variant("v01", "x", cs, cs), POLICY, CLUSTER)
    assert (policy["classes"]["train"]["protected"], policy["classes"]["train"]["max_protected"]) == (
        protected,
        cap,
    )


def test_a_tree_node_is_found_by_its_path() -> None:
    base = {"tree": [{"name": "a", "share": 1, "children": [{"name": "b", "share": 2}]}]}
    policy, _ = apply(one("tree.a/b.share", "7"), base, {})
    assert policy["tree"][0]["children"][0]["share"] == 7


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("cluster.pools.gpu.count", "+1", "no entry named 'gpu' (known: node)"),
        ("tree.nobody.share", "1", "no entry named 'nobody'"),
        ("tree[9].share", "1", "index 9 is out of range (3 entries)"),
        ("window", "+1", "is relative, but the base value is '7d', not a number"),
        ("classes.train.protected.x", "1", "holds a value, not keys"),
        ("nosuchkey", "1", "the base file has no 'nosuchkey' here"),
    ],
    ids=[
        "unknown-pool",
        "unknown-group",
        "index-out-of-range",
        "relative-on-text",
        "into-a-value",
        "unknown-key",
    ],
)
def test_a_bad_change_names_the_variant_and_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        apply(one(key, value), POLICY, CLUSTER)
    assert err.value.where == "variant v01 (" + f"{key}={value})"
    assert err.value.at == key
    assert message in err.value.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("window", "expected KEY=V1,V2"),
        ("=3d", "expected KEY=V1,V2"),
        ("window=3d,,7d", "an empty value"),
        ("window=3d,3d", "a value is given twice"),
        ("a..b=1", "not a key path"),
    ],
)
def test_a_malformed_vary_is_refused_before_any_file_is_read(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_vary(text)
    assert message in err.value.message


def test_a_grid_is_every_combination_the_last_option_fastest() -> None:
    combos = grid([("window", ("3d", "7d")), ("cluster.pools.node.count", ("+0", "+1"))])
    assert [name for name, _ in combos] == [
        "window=3d,cluster.pools.node.count=+0",
        "window=3d,cluster.pools.node.count=+1",
        "window=7d,cluster.pools.node.count=+0",
        "window=7d,cluster.pools.node.count=+1",
    ]
    with pytest.raises(InputError, match="varied twice"):
        grid([("window", ("3d",)), ("window", ("7d",))])


def test_the_base_combination_is_not_run_twice_and_noop_changes_do_not_count() -> None:
    combos = grid([("window", ("3d", "7d")), ("cluster.pools.node.count", ("+0", "+1"))])
    variants = number_variants(combos, POLICY, CLUSTER)
    assert [v.id for v in variants] == ["base", "v01", "v02", "v04"]
    assert "window=7d,cluster.pools.node.count=+0" in variants[0].name
    v04 = variants[-1]
    assert [c.key for c in v04.effective] == ["cluster.pools.node.count"]
    assert v04.decisions == ("capacity",)


def test_a_variants_file_lists_named_combinations() -> None:
    data = [{"name": "long window", "set": {"window": "14d"}}, {"set": {"cluster.pools.node.count": 2}}]
    combos = variants_file(data, "v.yaml")
    assert combos[0][0] == "long window"
    assert combos[1] == ("cluster.pools.node.count=2", (Change("cluster.pools.node.count", "2"),))
    with pytest.raises(InputError) as err:
        variants_file([{"set": {"window": ["3d"]}}], "v.yaml")
    assert (err.value.where, err.value.at) == ("v.yaml", "[0].set.window")


@pytest.mark.parametrize(
    ("points", "front"),
    [
        ([("a", 1, 1), ("b", 2, 2)], ("a",)),
        ([("a", 1, 2), ("b", 2, 1)], ("a", "b")),
        ([("a", 1, 1), ("b", 1, 1)], ("a", "b")),
        ([("a", 1, 3), ("b", 2, 2), ("c", 3, 1), ("d", 3, 3)], ("a", "b", "c")),
    ],
    ids=["dominated", "trade-off", "ties", "staircase"],
)
def test_the_pareto_front_holds_the_undominated_points(points: Any, front: tuple[str, ...]) -> None:
    assert pareto(points) == front


# --- the executor --------------------------------------------------------------------------------


def test_a_crashed_task_is_retried_and_bad_input_is_not(tmp_path: Path) -> None:
    counter = tmp_path / "attempts"

    def launcher(argv: Any) -> list[str]:
        # argv[0]: the exit code of the first attempts, argv[1]: how many attempts fail
        code, fails = argv
        script = (
            "import pathlib,sys;p=pathlib.Path(sys.argv[1]);n=int(p.read_text() or 0) if p.exists() else 0;"
            "p.write_text(str(n+1));sys.exit(int(sys.argv[2]) if n < int(sys.argv[3]) else 0)"
        )
        return [sys.executable, "-c", script, str(counter), code, fails]

    ex = LocalExecutor(1, retries=2, launcher=launcher)
    heard: list[str] = []
    [crashed] = ex.run([Task("a", ("3", "2"), tmp_path / "a.log")], lambda o: heard.append(o.task.id))
    assert crashed.attempts == [3, 3, 0] and crashed.ok and heard == ["a"]
    counter.unlink()
    [bad] = ex.run([Task("b", ("2", "5"), tmp_path / "b.log")], lambda o: None)
    assert bad.attempts == [2] and not bad.ok
    counter.unlink()
    [gave_up] = ex.run([Task("c", ("1", "5"), tmp_path / "c.log")], lambda o: None)
    assert gave_up.attempts == [1, 1, 1] and not gave_up.ok
    assert (tmp_path / "c.log").read_text().count("$ fairshare 1 5") == 3


# --- end to end ----------------------------------------------------------------------------------

VARY = ["--vary", "window=3d,7d", "--vary", "cluster.pools.node.count=+0,+1"]


def _sweep(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return fairshare(
        "sweep", *FILES, *VARY, "--policies", "fairshare,fifo", "--workers", "2", "--out", str(out), *extra
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "out"
    r = _sweep(out)
    assert r.returncode == 0, r.stderr
    return out


def test_each_variant_is_byte_identical_to_its_compare_run_alone(swept: Path, tmp_path: Path) -> None:
    spec = orjson.loads((swept / "sweep.json").read_bytes())
    assert [v["id"] for v in spec["variants"]] == ["base", "v01", "v02", "v04"]
    for vid, cmd in spec["commands"].items():
        argv = shlex.split(cmd)[1:]
        alone = tmp_path / vid
        argv[argv.index("--out") + 1] = str(alone)
        r = fairshare(*argv)
        assert r.returncode == 0, r.stderr
        for policy in ("fairshare", "fifo"):
            for name in ("events.jsonl", "decisions.jsonl", "metrics.json", "policy.yaml"):
                assert (alone / policy / name).read_bytes() == (swept / vid / policy / name).read_bytes(), (
                    vid,
                    name,
                )


def test_the_decision_report_names_the_gates_the_pareto_front_and_the_levers(swept: Path) -> None:
    summary = orjson.loads((swept / "summary.json").read_bytes())
    rows = {(s["variant"], s["policy"]): s for s in summary["summaries"]}
    assert set(rows) == {(v, p) for v in ("base", "v01", "v02", "v04") for p in ("fairshare", "fifo")}
    # one more node: nobody waits on this workload
    assert rows[("v04", "fairshare")]["wait_p90_s"] == 0 < rows[("base", "fairshare")]["wait_p90_s"]
    assert not rows[("base", "fifo")]["gates_pass"] and rows[("base", "fairshare")]["gates_pass"]
    assert summary["recommended"] in summary["passing"]
    page = (swept / "report.html").read_text()
    for text in (
        "The five decisions",
        "What capacity buys, what policy buys",
        "Pareto front",
        "<svg",
        "Reproduce a variant",
    ):
        assert text in page
    assert "window=3d" in page and "cluster.pools.node.count=+1" in page
    assert "http://" not in page.replace("http://www.w3.org", "")


def test_a_bad_variant_stops_the_sweep_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = fairshare("sweep", *FILES, "--vary", "window=3d,30m", "--out", str(out))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert "variant v02 (window=30m): policy: window:" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vary", "cluster.pools.gpu.count=+1"], "no entry named 'gpu'"),
        (["--vary", "window"], "--vary: window: expected KEY=V1,V2"),
        ([], "give --vary"),
        (["--vary", "window=3d", "--policies", "fairshare,nope"], "unknown policy"),
    ],
    ids=["unknown-pool", "no-values", "nothing-varied", "unknown-policy"],
)
def test_bad_sweep_input_is_one_error_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    r = fairshare("sweep", *FILES, *args, "--out", str(tmp_path / "o"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    assert message in r.stderr


def test_a_folder_holding_other_files_or_another_sweep_is_refused(swept: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    r = _sweep(other)
    assert r.returncode == 2 and "is not empty" in r.stderr
    assert (other / "notes.txt").read_text() == "mine"
    r = _sweep(other, "--resume")
    assert r.returncode == 2 and "holds no sweep" in r.stderr
    r = fairshare("sweep", *FILES, "--vary", "window=5d", "--out", str(swept), "--resume")
    assert r.returncode == 2 and "holds another sweep" in r.stderr


@pytest.mark.slow
def test_a_killed_sweep_resumes_where_it_stopped_and_ends_as_an_uninterrupted_one(
    swept: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fairshare.cli",
            "sweep",
            *FILES,
            *VARY,
            "--policies",
            "fairshare,fifo",
            "--workers",
            "1",
            "--out",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / "base" / "complete.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    done = [v for v in ("base", "v01", "v02", "v04") if (out / v / "complete.json").exists()]
    assert "base" in done and len(done) < 4
    stamps = {v: (out / v / "fairshare" / "events.jsonl").stat().st_mtime_ns for v in done}
    r = _sweep(out, "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming: {len(done)} of 4 variants already complete" in r.stderr
    for v in done:  # kept, not rerun
        assert (out / v / "fairshare" / "events.jsonl").stat().st_mtime_ns == stamps[v]
    for v in ("base", "v01", "v02", "v04"):
        for p in ("fairshare", "fifo"):
            assert (out / v / p / "events.jsonl").read_bytes() == (
                swept / v / p / "events.jsonl"
            ).read_bytes()
    leftovers = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_no_process_of_the_sweep_outlives_it(swept: Path) -> None:
    # the sweep above ran to the end; its compare children were waited for
    out = subprocess.run(["pgrep", "-f", f"--out {swept}/"], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "", out.stdout
    assert os.path.exists(swept / "report.html")


def test_a_sweep_of_a_site_folder_runs_each_variant_as_compare_from_its_own_site_folder(
    tmp_path: Path,
) -> None:
    site = ROOT / "tests" / "data" / "site_small"
    out = tmp_path / "out"
    r = fairshare(
        "sweep",
        "--from",
        str(site),
        "--vary",
        "window=3d",
        "--policies",
        "as-run,fairshare",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    spec = orjson.loads((out / "sweep.json").read_bytes())
    cmd = shlex.split(spec["commands"]["v01"])
    assert cmd[cmd.index("--from") + 1] == str(out.resolve() / "inputs" / "v01")
    variant = out / "inputs" / "v01"
    for name in ("workload.csv", "history.csv", "incumbent.yaml"):
        assert (variant / name).read_bytes() == (site / name).read_bytes()
    assert yaml.safe_load((variant / "policy.yaml").read_text())["window"] == "3d"
    alone = tmp_path / "alone"
    cmd[cmd.index("--out") + 1] = str(alone)
    assert fairshare(*cmd[1:]).returncode == 0
    for policy in ("as-run", "fairshare"):
        assert (alone / policy / "events.jsonl").read_bytes() == (
            out / "v01" / policy / "events.jsonl"
        ).read_bytes()
    r = fairshare(
        "sweep",
        "--from",
        str(site),
        "--trace",
        "philly",
        "--vary",
        "window=3d",
        "--out",
        str(tmp_path / "o2"),
    )
    assert r.returncode == 2 and "--from" in r.stderr and r.stderr.count("\n") == 1
