"""Input formats: the registry, the Philly and Alibaba openb loaders on small synthetic files, and the
real traces (which must be present: they live in ../shared/traces or $FAIRSHARE_TRACES, never in the
project; when they are missing these tests fail and say where they looked)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import run_checker, tiny_policy
from fairshare.errors import InputError
from fairshare.inputs.cluster import cluster_from_dict
from fairshare.inputs.formats import (
    CLUSTER_FORMATS,
    TRACES,
    WORKLOAD_FORMATS,
    LoadedWorkload,
    TraceOptions,
    WorkloadFormat,
    get_cluster_format,
    get_workload_format,
    round_gpus,
    trace_file,
    traces_root,
    workload_format,
)
from fairshare.inputs.formats.openb import RATES, OpenbCluster, OpenbPods
from fairshare.inputs.formats.philly import WINDOW_CLUSTER, PhillyFormat
from fairshare.inputs.workload import jobs_from_dicts
from fairshare.replay.outputs import write_replay
from fairshare.replay.runner import dump_policy, inputs_from_sources, inputs_from_trace, run_strategy

ROOT = Path(__file__).resolve().parent.parent

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:10:00,600.0,1,600.0,teamA
2017-10-01 00:00:00,100.0,16,1600.0,teamB
2017-10-01 00:05:00,50000.0,3,150000.0,teamA
2017-10-01 00:05:00,2.0,12,24.0,teamB
2017-10-01 00:20:00,3600.0,2,7200.0,teamC
"""

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,96000,393216,8,G2
n1,96000,393216,8,G2
n2,32000,131072,4,V100M16
n3,32000,262144,0,
n4,104000,524288,2,T4
"""

POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
PODS = (
    POD_HEADER
    + """creation_time,deletion_time,scheduled_time
p0,4000,8192,1,500,,BE,Running,100,1100,100
p1,8000,16384,2,1000,V100M16|T4,LS,Running,50,5050,60
p2,2000,4096,0,0,,LS,Running,10,3610,10
p3,16000,32768,8,1000,nan,Guaranteed,Pending,200,500,
p4,1000,1024,1,1000,,Burstable,Failed,0,10,5
"""
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def philly(tmp_path: Path, text: str = PHILLY, **options: Any) -> Any:
    return inputs_from_sources(
        write(tmp_path, "philly.csv", text), workload_format="philly", options=TraceOptions(**options)
    )


def openb(tmp_path: Path, pods: str = PODS, **options: Any) -> Any:
    write(tmp_path, "openb_node_list_gpu_node.csv", NODES)
    return inputs_from_sources(
        write(tmp_path, "pods.csv", pods), workload_format="openb", options=TraceOptions(**options)
    )


def raises(fn: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(InputError) as info:
        fn(*args, **kw)
    return str(info.value)


# ---------------------------------------------------------------- registry


def test_builtin_formats_are_registered_by_name() -> None:
    assert {"native", "philly", "openb"} <= set(WORKLOAD_FORMATS)
    assert {"native", "openb"} <= set(CLUSTER_FORMATS)
    assert get_workload_format("philly").name == "philly"
    assert get_cluster_format("openb").name == "openb"
    assert set(TRACES) == {"philly", "openb"}


def test_unknown_format_names_the_known_ones() -> None:
    msg = raises(get_workload_format, "slurm")
    assert "unknown workload format" in msg and "philly" in msg and "openb" in msg
    msg = raises(get_cluster_format, "k8s")
    assert "unknown cluster format" in msg and "openb" in msg


@pytest.fixture
def tiny_format() -> Iterator[str]:
    @workload_format
    class Tiny(WorkloadFormat):
        """One job a line: `<group> <gpus> <seconds>`."""

        name = "tiny-test"
        description = "test format"

        def read(self, path: Path, options: TraceOptions) -> LoadedWorkload:
            lines = path.read_text().split()
            recs = [
                {
                    "job_id": f"t{i}",
                    "submit": 0,
                    "group": g,
                    "class": "train",
                    "gpus": int(n),
                    "work": float(w),
                }
                for i, (g, n, w) in enumerate(zip(lines[::3], lines[1::3], lines[2::3], strict=True))
            ]
            return LoadedWorkload(
                str(path), lambda p, t, c: jobs_from_dicts(recs, p, t, c, where=str(path)), summary=("tiny",)
            )

    try:
        yield Tiny.name
    finally:
        del WORKLOAD_FORMATS[Tiny.name]


def test_a_new_format_is_one_decorated_class(tmp_path: Path, tiny_format: str) -> None:
    assert tiny_format in WORKLOAD_FORMATS
    with pytest.raises(ValueError, match="already registered"):
        workload_format(type(WORKLOAD_FORMATS[tiny_format]))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(tiny_policy()))
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump({"pools": [{"name": "n", "count": 1, "gpus": 8, "gpu_type": "H100"}]})
    )
    inputs = inputs_from_sources(
        write(tmp_path, "w.txt", "a 2 60 b 1 30"),
        workload_format=tiny_format,
        policy=tmp_path / "p.yaml",
        cluster=tmp_path / "c.yaml",
    )
    assert [j.id for j in inputs.jobs] == ["t0", "t1"] and inputs.notes == ("tiny",)
    msg = raises(inputs_from_sources, tmp_path / "w.txt", workload_format=tiny_format)
    assert "no default cluster" in msg and "--cluster" in msg


def test_window_options_are_refused_by_the_native_format() -> None:
    ex = ROOT / "examples"
    msg = raises(
        inputs_from_sources,
        ex / "workload.csv",
        policy=ex / "policy.yaml",
        cluster=ex / "cluster.yaml",
        options=TraceOptions(round_gpus=True),
    )
    assert "native workload format takes none of them" in msg


def test_native_format_delegates_to_the_workload_loader() -> None:
    ex = ROOT / "examples"
    inputs = inputs_from_sources(
        ex / "workload.csv", policy=ex / "policy.yaml", cluster=ex / "cluster.yaml", cluster_format="native"
    )
    assert len(inputs.jobs) == 359


@pytest.mark.parametrize(
    ("gpus", "rounded"),
    [(1, 1), (2, 2), (3, 4), (5, 8), (8, 8), (9, 16), (12, 16), (16, 16), (17, 24), (100, 104), (128, 128)],
)
def test_round_gpus_to_powers_of_two_then_multiples_of_8(gpus: int, rounded: int) -> None:
    assert round_gpus(gpus) == rounded


# ---------------------------------------------------------------- Philly (synthetic)


def test_philly_jobs_in_stable_submit_order_rebased_with_ids_from_rows(tmp_path: Path) -> None:
    inputs = philly(tmp_path)
    jobs = inputs.jobs
    # row 1 first; rows 2 and 3 tie at 00:05 and keep file order; then rows 0 and 4
    assert [j.id for j in jobs] == ["philly-1", "philly-2", "philly-3", "philly-0", "philly-4"]
    assert [j.submit for j in jobs] == [0.0, 300.0, 300.0, 600.0, 1200.0]
    assert [j.seq for j in jobs] == [0, 1, 2, 3, 4]
    assert {j.request.cls for j in jobs} == {"train"}
    assert [j.request.group for j in jobs] == ["teamB", "teamA", "teamB", "teamA", "teamC"]
    assert jobs[0].work == 100.0 and jobs[1].work == 50000.0
    assert inputs.cluster.epoch.isoformat() == "2017-10-01T00:00:00+00:00"


def test_philly_jobs_over_8_gpus_are_gangs_of_8_gpu_nodes(tmp_path: Path) -> None:
    by = {j.id: j for j in philly(tmp_path).jobs}
    assert (by["philly-1"].request.gpus, by["philly-1"].request.nodes, by["philly-1"].request.per_node) == (
        16,
        2,
        8,
    )
    assert (by["philly-3"].request.gpus, by["philly-3"].request.nodes) == (12, 2)  # unrounded: 6 per node
    assert (by["philly-2"].request.gpus, by["philly-2"].request.nodes) == (3, 1)


def test_philly_default_policy_shares_are_team_gpu_hours_and_cluster_is_40x8(tmp_path: Path) -> None:
    inputs = philly(tmp_path, first=1)  # a window: the whole trace gets the larger default cluster
    policy = yaml.safe_load(inputs.policy_text)
    assert [(g["name"], g["share"]) for g in policy["tree"]] == [("teamA", 42), ("teamC", 2), ("teamB", 1)]
    assert set(policy["classes"]) == {"train"}
    train = inputs.policy.classes["train"]
    assert (train.protected, train.resumable, train.checkpoint) == (
        1800.0,
        True,
        1800.0,
    )
    assert policy["gpu_rates"] == {"gpu": 1.0}
    assert len(inputs.cluster.nodes) == 40 and inputs.cluster.total_gpus() == 320
    assert len({n.block for n in inputs.cluster.nodes}) == 4
    assert inputs.policy_text.startswith("# The philly loader's default policy")


def test_the_whole_trace_gets_the_800_gpu_default_cluster(tmp_path: Path) -> None:
    inputs = philly(tmp_path)
    assert len(inputs.cluster.nodes) == 100 and inputs.cluster.total_gpus() == 800
    assert len({n.block for n in inputs.cluster.nodes}) == 10


def test_the_example_window_cluster_file_is_the_default_cluster() -> None:
    data = yaml.safe_load((ROOT / "examples" / "philly-window-cluster.yaml").read_text())
    assert data == WINDOW_CLUSTER


def test_philly_rounding_and_clipping(tmp_path: Path) -> None:
    inputs = philly(tmp_path, round_gpus=True, clip=(10.0, 3600.0))
    by = {j.id: j for j in inputs.jobs}
    assert (by["philly-2"].request.gpus, by["philly-3"].request.gpus, by["philly-3"].request.nodes) == (
        4,
        16,
        2,
    )
    assert by["philly-2"].work == 3600.0 and by["philly-3"].work == 10.0 and by["philly-0"].work == 600.0
    assert any("2 jobs' GPUs rounded up" in n for n in inputs.notes)
    assert any("2 run times clipped to [10s, 1h]" in n for n in inputs.notes)


def test_philly_window_slices_submit_order_and_rebases(tmp_path: Path) -> None:
    inputs = philly(tmp_path, first=1, count=2)
    assert [(j.id, j.submit) for j in inputs.jobs] == [("philly-2", 0.0), ("philly-3", 0.0)]
    assert inputs.cluster.epoch.isoformat() == "2017-10-01T00:05:00+00:00"
    # shares come from the whole file, not the window
    assert [g.name for g in inputs.policy.tree] == ["teamA", "teamC", "teamB"]
    kept = philly(tmp_path, first=1, count=2, rebase=False)
    assert [j.submit for j in kept.jobs] == [300.0, 300.0]
    assert [j.id for j in philly(tmp_path, first=3).jobs] == ["philly-0", "philly-4"]
    msg = raises(philly, tmp_path, first=5)
    assert "starts at 5 but the trace has only 5 jobs" in msg


@pytest.mark.parametrize(
    ("row", "at", "message"),
    [
        ("yesterday,600.0,1,600.0,teamA", "line 3, column 1 (timestamp)", "YYYY-mm-dd HH:MM:SS"),
        ("2017-10-01 00:10:00,abc,1,600.0,teamA", "line 3, column 2 (duration)", "expected a number"),
        ("2017-10-01 00:10:00,0,1,0,teamA", "line 3, column 2 (duration)", "must be > 0"),
        ("2017-10-01 00:10:00,600.0,0,0,teamA", "line 3, column 3 (num_gpus)", "must be >= 1"),
        ("2017-10-01 00:10:00,600.0,1.5,900,teamA", "line 3, column 3 (num_gpus)", "whole number"),
        ("2017-10-01 00:10:00,600.0,1,600.0,", "line 3, column 5 (cluster)", "team"),
        ("2017-10-01 00:10:00,600.0,1,600.0", "line 3", "expected 5 cells, got 4"),
    ],
    ids=["timestamp", "duration", "zero-duration", "zero-gpus", "fraction-gpus", "no-team", "short-row"],
)
def test_philly_errors_name_file_line_and_column(tmp_path: Path, row: str, at: str, message: str) -> None:
    text = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,1,1,1,teamA\n" + row + "\n"
    msg = raises(philly, tmp_path, text)
    assert msg.startswith(f"{tmp_path / 'philly.csv'}: {at}: "), msg
    assert message in msg


def test_philly_missing_column_and_empty_file(tmp_path: Path) -> None:
    msg = raises(philly, tmp_path, "timestamp,duration,num_gpus\n2017-10-01 00:00:00,1,1\n")
    assert "line 1: missing column(s) 'cluster'" in msg
    msg = raises(philly, tmp_path, "")
    assert "empty file" in msg
    msg = raises(philly, tmp_path, "timestamp,duration,num_gpus,gpu_time,cluster\n\n")
    assert "the trace has no jobs" in msg


def test_philly_blank_lines_and_quoted_cells_keep_line_numbers(tmp_path: Path) -> None:
    text = (
        'timestamp,duration,num_gpus,gpu_time,cluster\n\n"2017-10-01 00:00:00",1,1,1,"teamA"\n\nbad,1,1,1,a\n'
    )
    msg = raises(philly, tmp_path, text)
    assert ": line 5, column 1 (timestamp): " in msg
    text = "timestamp,duration,num_gpus,gpu_time,cluster\n\n2017-10-01 00:00:00,1,1,1,teamA\n\n"
    text += "2017-10-01,1,0,1,a\n"
    assert ": line 5, column 3 (num_gpus): " in raises(philly, tmp_path, text)


def test_philly_with_your_own_policy_and_cluster_errors_name_the_trace_cell(tmp_path: Path) -> None:
    trace = write(tmp_path, "philly.csv", PHILLY)
    policy = tiny_policy(
        tree=[{"name": "teamA", "share": 1}, {"name": "teamB", "share": 1}], gpu_rates={"H100": 1}
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump({"pools": [{"name": "n", "count": 1, "gpus": 8, "gpu_type": "H100"}]})
    )
    msg = raises(
        inputs_from_sources,
        trace,
        workload_format="philly",
        policy=tmp_path / "p.yaml",
        cluster=tmp_path / "c.yaml",
    )
    assert f"{trace}: line 3, column 3 (num_gpus): " in msg and "fits no pool" in msg  # 16 GPUs on one node
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump({"pools": [{"name": "n", "count": 4, "gpus": 8, "gpu_type": "H100"}]})
    )
    msg = raises(
        inputs_from_sources,
        trace,
        workload_format="philly",
        policy=tmp_path / "p.yaml",
        cluster=tmp_path / "c.yaml",
    )
    assert f"{trace}: line 6, column 5 (cluster): no group 'teamC'" in msg
    policy["classes"] = {"debug": policy["classes"]["debug"]}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    msg = raises(
        inputs_from_sources,
        trace,
        workload_format="philly",
        policy=tmp_path / "p.yaml",
        cluster=tmp_path / "c.yaml",
    )
    assert "Philly jobs are of class 'train'" in msg


def test_philly_default_policy_with_your_cluster_rates_every_type_1(tmp_path: Path) -> None:
    trace = write(tmp_path, "philly.csv", PHILLY)
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump(
            {
                "pools": [
                    {"name": "a", "count": 4, "gpus": 8, "gpu_type": "V100"},
                    {"name": "b", "count": 2, "gpus": 8, "gpu_type": "P100"},
                ]
            }
        )
    )
    inputs = inputs_from_sources(trace, workload_format="philly", cluster=tmp_path / "c.yaml")
    assert inputs.policy.gpu_rates == {"P100": 1.0, "V100": 1.0}
    assert len(inputs.jobs) == 5


def test_policy_dump_quotes_names_that_read_as_numbers() -> None:
    text = dump_policy(
        {
            "tree": [
                {"name": "6214e9", "share": 1},
                {"name": "103959", "share": 2},
                {"name": "ee9e8c", "share": 3},
            ]
        }
    )
    assert '"6214e9"' in text and '"103959"' in text and "name: ee9e8c" in text
    assert [g["name"] for g in yaml.safe_load(text)["tree"]] == ["6214e9", "103959", "ee9e8c"]


# ---------------------------------------------------------------- openb (synthetic)


def test_openb_cluster_pools_by_node_shape_without_cpu_only_nodes(tmp_path: Path) -> None:
    src = OpenbCluster().read(write(tmp_path, "nodes.csv", NODES))
    pools = src.spec["pools"]
    assert [(p["name"], p["count"], p["gpus"], p["gpu_type"]) for p in pools] == [
        ("G2-8g-96c-384g", 2, 8, "G2"),
        ("V100M16-4g-32c-128g", 1, 4, "V100M16"),
        ("T4-2g-104c-512g", 1, 2, "T4"),
    ]
    assert pools[0]["cpus"] == 96 and pools[0]["mem_gb"] == 384
    assert any("1 nodes without GPUs left out" in s for s in src.summary)
    cluster = cluster_from_dict(src.spec, src.where)
    assert cluster.total_gpus() == 22 and len(cluster.nodes) == 4


def test_openb_cluster_errors_name_line_and_column(tmp_path: Path) -> None:
    bad = NODES.replace("n4,104000,524288,2,T4", "n4,104000,524288,2,")
    msg = raises(OpenbCluster().read, write(tmp_path, "nodes.csv", bad))
    assert ": line 6, column 5 (model): " in msg and "needs a GPU model" in msg
    bad = NODES.replace("n2,32000", "n2,lots")
    msg = raises(OpenbCluster().read, write(tmp_path, "nodes.csv", bad))
    assert ": line 4, column 2 (cpu_milli): expected a number" in msg


def test_openb_pods_shared_gpus_specs_qos_classes_and_cpu_only_pods(tmp_path: Path) -> None:
    inputs = openb(tmp_path)
    by = {j.id: j for j in inputs.jobs}
    assert [j.id for j in inputs.jobs] == ["p4", "p2", "p1", "p0", "p3"]  # by creation time
    assert (
        by["p0"].request.gpus == 1 and by["p0"].request.cls == "BE" and by["p0"].request.group == "BE"
    )  # 500 milli -> 1 GPU
    assert by["p0"].request.cpus == 4.0 and by["p0"].request.mem_gb == 8.0 and by["p0"].work == 1000.0
    assert (
        by["p1"].request.gpu_types == ("V100M16", "T4")
        and by["p1"].work == 4990.0
        and by["p1"].submit == 50.0
    )
    assert (
        by["p3"].request.gpu_types is None and by["p3"].request.gpus == 8 and by["p3"].work == 300.0
    )  # pending
    assert by["p4"].work == 5.0 and by["p4"].request.cls == "Burstable"
    # CPU-only p2 (2 CPUs, 4 GiB): no GPU; pending charge = its dominant share on the cheapest pool:
    # G2 max(2/12, 4/48), V100M16 max(2/8, 4/32), T4 max(2/52, 4/256), each times the type's rate
    dominant = {"G2": 2 / 12, "V100M16": 2 / 8, "T4": 2 / 52}
    assert by["p2"].request.gpus == 0
    assert by["p2"].request.charge == pytest.approx(min(RATES[t] * d for t, d in dominant.items()))
    assert {j.request.nodes for j in inputs.jobs} == {1}
    classes = inputs.policy.classes
    assert classes["BE"].resumable and not classes["LS"].resumable and classes["LS"].protected == 7200.0
    assert inputs.policy.gpu_rates == {t: RATES[t] for t in ("G2", "T4", "V100M16")}
    assert {g.name for g in inputs.policy.tree} == {"BE", "LS", "Guaranteed", "Burstable"}
    notes = "\n".join(inputs.notes)
    assert "1 pods share a fraction of one GPU" in notes and "one whole GPU" in notes
    assert "1 CPU-only pods hold no GPU and are charged by their dominant CPU or memory share" in notes
    assert "2 CPUs and 4 GiB requested" in notes


def test_openb_cpu_only_totals_are_in_the_loader_stats(tmp_path: Path) -> None:
    write(tmp_path, "openb_node_list_gpu_node.csv", NODES)
    loaded = OpenbPods().read(write(tmp_path, "pods.csv", PODS), TraceOptions())
    s = loaded.stats
    assert (s["gpu_pods"], s["cpu_only_pods"], s["shared_gpu_pods"]) == (4, 1, 1)
    assert (s["cpu_only_cpus"], s["cpu_only_mem_gb"], s["cpu_only_cpu_h"], s["cpu_only_mem_gb_h"]) == (
        2,
        4,
        2,
        4,
    )


def test_openb_window_and_rounding(tmp_path: Path) -> None:
    assert [j.id for j in openb(tmp_path, first=2, count=2).jobs] == ["p1", "p0"]
    assert [j.submit for j in openb(tmp_path, first=2, count=2).jobs] == [0.0, 50.0]
    pods = PODS.replace("p1,8000,16384,2,1000", "p1,8000,16384,3,1000")
    assert {j.id: j.request.gpus for j in openb(tmp_path, pods, round_gpus=True).jobs}["p1"] == 4


def test_openb_unknown_gpu_spec_names_the_cell(tmp_path: Path) -> None:
    msg = raises(openb, tmp_path, PODS.replace("V100M16|T4", "V100M16|H100"))
    assert f"{tmp_path / 'pods.csv'}: line 3, column 6 (gpu_spec): unknown GPU type 'H100'" in msg


def test_openb_bad_times_name_the_cell(tmp_path: Path) -> None:
    msg = raises(
        openb,
        tmp_path,
        PODS.replace(
            "p0,4000,8192,1,500,,BE,Running,100,1100,100", "p0,4000,8192,1,500,,BE,Running,100,50,100"
        ),
    )
    assert ": line 2, column 10 (deletion_time): the pod is deleted (50) before it was created (100)" in msg
    msg = raises(openb, tmp_path, PODS.replace(",BE,Running,100,", ",,Running,100,"))
    assert ": line 2, column 7 (qos): " in msg


def test_openb_without_the_node_list_asks_for_a_cluster(tmp_path: Path) -> None:
    msg = raises(
        inputs_from_sources,
        write(tmp_path, "pods.csv", PODS),
        workload_format="openb",
        options=TraceOptions(),
    )
    assert "openb_node_list_gpu_node.csv" in msg and "--cluster" in msg


# ---------------------------------------------------------------- trace locations


def test_traces_root_env_then_cwd_then_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSHARE_TRACES", str(tmp_path / "t"))
    assert traces_root()[0] == tmp_path / "t"
    msg = raises(trace_file, "philly")
    assert str(tmp_path / "t" / "philly" / "philly.csv") in msg and "FAIRSHARE_TRACES" in msg
    monkeypatch.delenv("FAIRSHARE_TRACES")
    (tmp_path / "shared" / "traces").mkdir(parents=True)
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert traces_root()[0] == Path("..") / "shared" / "traces"
    assert "unknown trace" in raises(trace_file, "borg")


# ---------------------------------------------------------------- the real traces


def real_trace(name: str) -> Path:
    """The real trace file; fail (not skip) with a clear message when it is absent."""
    root, how = traces_root()
    path = root / TRACES[name].workload
    if not path.is_file():
        pytest.fail(
            f"real trace {name!r} is missing: {path} ({how}). These tests read the public traces where "
            "they are (never copied into the project): set FAIRSHARE_TRACES to the folder holding "
            "philly/ and alibaba-openb/ (CI always has them)."
        )
    return path


def test_real_philly_full_load_has_82247_jobs_of_15_teams() -> None:
    real_trace("philly")
    inputs = inputs_from_trace("philly")
    assert len(inputs.jobs) == 82_247
    assert len(inputs.policy.tree) == 15 and len({j.request.group for j in inputs.jobs}) == 15
    assert inputs.jobs[0].submit == 0.0
    assert all(a.submit <= b.submit for a, b in zip(inputs.jobs, inputs.jobs[1:], strict=False))
    gangs = [j for j in inputs.jobs if j.request.gpus > 8]
    assert len(gangs) == 7 + 199 + 7 + 67 + 6 + 3 and all(
        j.request.per_node == 8 or j.request.gpus == 12 for j in gangs
    )
    assert max(j.request.gpus for j in inputs.jobs) == 128
    assert inputs.cluster.epoch.isoformat() == "2017-09-04T10:30:41+00:00"


def test_real_philly_benchmark_window_has_16000_jobs_from_t0() -> None:
    path = real_trace("philly")
    options = TraceOptions(first=20_000, count=16_000, round_gpus=True, clip=(1.0, 86_400.0))
    loaded = PhillyFormat().read(path, options)
    assert loaded.stats["jobs"] == 16_000 and loaded.stats["teams"] == 15
    inputs = inputs_from_trace("philly", options=options)
    assert len(inputs.jobs) == 16_000 and inputs.jobs[0].submit == 0.0
    assert all(1.0 <= j.work <= 86_400.0 for j in inputs.jobs)
    assert {j.request.gpus for j in inputs.jobs} <= {1, 2, 4, 8, 16}
    assert inputs.cluster.epoch.isoformat() == "2017-10-10T06:54:45+00:00"


def test_real_openb_cluster_has_1213_nodes_and_6212_gpus() -> None:
    pods = real_trace("openb")
    src = OpenbCluster().read(pods.parent / "openb_node_list_gpu_node.csv")
    cluster = cluster_from_dict(src.spec, src.where)
    assert len(cluster.nodes) == 1_213 and cluster.total_gpus() == 6_212
    assert set(cluster.gpu_types) == {"G2", "T4", "P100", "V100M16", "V100M32", "A10", "G3"}
    assert set(cluster.gpu_types) <= set(RATES)


def test_real_openb_pods_load_with_qos_classes_and_cpu_only_pods_counted() -> None:
    path = real_trace("openb")
    loaded = OpenbPods().read(path, TraceOptions())
    s = loaded.stats
    assert (s["pods_in_file"], s["gpu_pods"], s["cpu_only_pods"]) == (8_152, 7_064, 1_088)
    assert s["shared_gpu_pods"] == 3_078
    inputs = inputs_from_trace("openb")
    assert len(inputs.jobs) == 8_152  # CPU-only pods too, with no GPU
    assert sum(1 for j in inputs.jobs if j.request.gpus == 0) == 1_088
    assert {j.request.cls for j in inputs.jobs} == {"LS", "BE", "Burstable", "Guaranteed"}
    assert len(inputs.cluster.nodes) == 1_213


def _replay_and_check(
    tmp_path: Path, inputs: Any, cluster_spec: dict[str, Any], policy: str = "fairshare"
) -> None:
    """Invariants of the replay output, checked by the independent checker: no node over
    capacity, whole gangs, no start on drained nodes, no preemption inside a protected window,
    every finished job did exactly its work, metrics recomputed from events.jsonl agree."""
    out = run_strategy(inputs, policy)
    folder = tmp_path / policy
    write_replay(folder, inputs.cluster, inputs.policy_text, out)
    res = run_checker(folder, yaml.safe_load(inputs.policy_text), cluster_spec)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert out.result.metrics["jobs"]["finished"] == len(inputs.jobs)


def test_real_philly_first_2000_jobs_replay_and_pass_the_checker(tmp_path: Path) -> None:
    path = real_trace("philly")
    options = TraceOptions(count=2_000)
    inputs = inputs_from_trace("philly", options=options)
    loaded = PhillyFormat().read(path, options)
    assert loaded.default_cluster is not None
    _replay_and_check(tmp_path, inputs, loaded.default_cluster().spec)


def test_real_openb_first_500_pods_replay_and_pass_the_checker(tmp_path: Path) -> None:
    path = real_trace("openb")
    inputs = inputs_from_trace("openb", options=TraceOptions(count=500))
    spec = OpenbCluster().read(path.parent / "openb_node_list_gpu_node.csv").spec
    _replay_and_check(tmp_path, inputs, spec)


@pytest.mark.slow
def test_real_philly_benchmark_window_replays_and_passes_the_checker(tmp_path: Path) -> None:
    path = real_trace("philly")
    options = TraceOptions(first=20_000, count=16_000, round_gpus=True, clip=(1.0, 86_400.0))
    inputs = inputs_from_trace("philly", options=options)
    loaded = PhillyFormat().read(path, options)
    assert loaded.default_cluster is not None
    _replay_and_check(tmp_path, inputs, loaded.default_cluster().spec)


@pytest.mark.slow
def test_real_openb_all_pods_replay_and_pass_the_checker(tmp_path: Path) -> None:
    path = real_trace("openb")
    inputs = inputs_from_trace("openb")
    spec = OpenbCluster().read(path.parent / "openb_node_list_gpu_node.csv").spec
    _replay_and_check(tmp_path, inputs, spec)


def test_philly_repeat_places_copies_back_to_back_at_the_same_rate(tmp_path: Path) -> None:
    one = philly(tmp_path, first=1)
    three = philly(tmp_path, first=1, repeat=3)
    assert len(three.jobs) == 3 * len(one.jobs)
    submits = [j.submit for j in one.jobs]
    span = submits[-1] - submits[0]
    period = span * len(submits) / (len(submits) - 1)
    by_id = {j.id: j for j in three.jobs}
    for j in one.jobs:
        assert by_id[f"{j.id}-r2"].submit == pytest.approx(j.submit + 2 * period)
        assert by_id[f"{j.id}-r1"].work == j.work and by_id[f"{j.id}-r1"].request.group == j.request.group


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fairshare", "slurm-multifactor", "priority-labels", "fifo"])
def test_real_traces_hold_the_replay_invariants_under_every_policy(tmp_path: Path, policy: str) -> None:
    philly_path = real_trace("philly")
    options = TraceOptions(first=20_000, count=4_000, round_gpus=True, clip=(1.0, 86_400.0))
    loaded = PhillyFormat().read(philly_path, options)
    assert loaded.default_cluster is not None
    _replay_and_check(
        tmp_path / "philly",
        inputs_from_trace("philly", options=options),
        loaded.default_cluster().spec,
        policy,
    )
    openb_path = real_trace("openb")
    spec = OpenbCluster().read(openb_path.parent / "openb_node_list_gpu_node.csv").spec
    _replay_and_check(tmp_path / "openb", inputs_from_trace("openb"), spec, policy)
