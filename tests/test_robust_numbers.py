"""Issue 9, class 1: every number has a documented range (fairshare.inputs.limits), checked at load.

Each case is a value that used to pass, crash, hang or exhaust memory; now `check` (and so
`compare`) refuses it at once: exit code 2, one line naming the file and the key path or line and
column, no traceback, within a second or two. The shipped inputs stay within the limits.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fairshare.inputs import limits
from fairshare.inputs.cluster import load_cluster
from fairshare.inputs.policy import load_policy
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_files, inputs_from_scenario
from test_inputs import CLUSTER, POLICY, WORKLOAD, assert_input_error, edit, run, run_check, write_inputs

ROOT = Path(__file__).resolve().parent.parent
SECONDS = 5.0  # each bad input is refused well within this (the hangs took minutes or forever)

POLICY_CASES = [
    # (id, old text, new text, key path, message)
    ("share-inf", "share: 40", "share: .inf", "tree[0].share", "expected a finite number"),
    ("share-nan", "share: 40", "share: .nan", "tree[0].share", "expected a finite number"),
    ("share-1e308", "share: 40", "share: 1e308", "tree[0].share", "between 1e-06 and 1e+12"),
    ("share-1e-300", "share: 40", "share: 1e-300", "tree[0].share", "between 1e-06 and 1e+12"),
    ("share-ratio", "share: 40", "share: 1e11", "tree[0].children[0].share", "within a factor of 1e+09"),
    ("share-bool", "share: 40", "share: yes", "tree[0].share", "expected a number, got True"),
    ("extra-share-huge", "extra_share: 10", "extra_share: 1e13", "exceptions[0].extra_share", "1e+12"),
    ("window-huge", "window: 7d", "window: 100000w", "window", "at most 10 years"),
    ("window-tiny", "window: 7d", "window: 1e-300", "window", "at least 1h"),
    ("window-inf", "window: 7d", "window: .inf", "window", "finite"),
    ("rate-zero", "H100: 1.0", "H100: 0", "gpu_rates.H100", "must be > 0"),
    ("rate-huge", "H100: 1.0", "H100: 1e9", "gpu_rates.H100", "between 0.001 and 1000"),
    ("protected-huge", "{protected: 15m", "{protected: 1e12", "classes.debug.protected", "10 years"),
    ("checkpoint-inf", "checkpoint: 5m,", "checkpoint: .inf,", "classes.debug.checkpoint", "finite"),
    (
        "gate-pct",
        "exceptions:",
        "gates: {lost_work_pct: 1e400}\nexceptions:",
        "gates.lost_work_pct",
        "finite",
    ),
    (
        "gate-over-100",
        "exceptions:",
        "gates: {deadline_met_pct: 101}\nexceptions:",
        "gates.deadline_met_pct",
        "<= 100",
    ),
    (
        "decay-period-zero",
        "exceptions:",
        "scheduling: {decay_period: 0}\nexceptions:",
        "scheduling.decay_period",
        "at least 1s",
    ),
    (
        "max-age-zero",
        "exceptions:",
        "scheduling: {priority_max_age: 0}\nexceptions:",
        "scheduling.priority_max_age",
        "longer than 0",
    ),
    (
        "weight-huge",
        "exceptions:",
        "scheduling: {weight_age: 1e30}\nexceptions:",
        "scheduling.weight_age",
        "the limit",
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "at", "message"), [c[1:] for c in POLICY_CASES], ids=[c[0] for c in POLICY_CASES]
)
def test_a_policy_number_out_of_range_is_refused_at_load(
    tmp_path: Path, old: str, new: str, at: str, message: str
) -> None:
    f = write_inputs(tmp_path, policy=edit(POLICY, old, new))
    began = time.monotonic()
    res = run("check", f.policy)
    assert time.monotonic() - began < SECONDS
    assert_input_error(res, str(f.policy), at, message)


CLUSTER_CASES = [
    ("gpus-1e11", "gpus: 8,", "gpus: 100000000000,", "pools[0].gpus", "<= 1,024"),
    ("gpus-float", "gpus: 8,", "gpus: 8.5,", "pools[0].gpus", "whole number"),
    ("count-1e7", "count: 4,", "count: 10000000,", "pools[0].count", "<= 100,000"),
    ("count-bool", "count: 4,", "count: true,", "pools[0].count", "expected a number"),
    ("cpus-inf", "cpus: 224,", "cpus: .inf,", "pools[0].cpus", "finite"),
    ("mem-huge", "mem_gb: 2048,", "mem_gb: 1e30,", "pools[0].mem_gb", "<= 1,000,000"),
    (
        "total-nodes",
        "count: 2, gpus: 4",
        "count: 99999, gpus: 4",
        "pools",
        "100,003 nodes in all, more than the limit of 100,000",
    ),
    (
        "horizon-far",
        "epoch: 2026",
        "horizon: 100000d\nepoch: 2026",
        "horizon",
        "more than the limit of 10 years",
    ),
    ("drain-far", "start: 1h,", "start: 4000d,", "maintenance[0].start", "more than the limit of 10 years"),
    ("epoch-year-1", "epoch: 2026-12-01T00:00:00Z", "epoch: 0001-01-01", "epoch", "1970 to 2199"),
    ("epoch-number", "epoch: 2026-12-01T00:00:00Z", "epoch: 1700000000", "epoch", "expected a date"),
]


@pytest.mark.parametrize(
    ("old", "new", "at", "message"), [c[1:] for c in CLUSTER_CASES], ids=[c[0] for c in CLUSTER_CASES]
)
def test_a_cluster_number_out_of_range_is_refused_at_load(
    tmp_path: Path, old: str, new: str, at: str, message: str
) -> None:
    f = write_inputs(tmp_path, cluster=edit(CLUSTER, old, new))
    began = time.monotonic()
    res = run("check", f.policy, "--cluster", f.cluster)
    assert time.monotonic() - began < SECONDS
    assert_input_error(res, str(f.cluster), at, message)


# columns: job_id=1 submit=2 group=3 class=4 gpus=5 nodes=6 gpu_type=7 work=8 label=9
ROW = "j1,0,product/serving,eval,8,,,3600,high"
WORKLOAD_CASES = [
    ("gpus-1e30", "eval,8,", "eval,1000000000000000000000000000000,", "line 2, column 5 (gpus)", "at most"),
    ("gpus-1e8", "eval,8,", "eval,100000000,", "line 2, column 5 (gpus)", "fits no pool"),
    ("submit-1e18", "j1,0,", "j1,1e18,", "line 2, column 2 (submit)", "at most 10 years"),
    ("submit-inf", "j1,0,", "j1,inf,", "line 2, column 2 (submit)", "finite"),
    ("work-huge", ",,3600,high", ",,1e12,high", "line 2, column 8 (work)", "at most 10 years"),
    ("nodes-huge", "eval,8,,", "eval,8,1000000,", "line 2, column 6 (nodes)", "at most 100,000"),
    ("work-nan", ",,3600,high", ",,nan,high", "line 2, column 8 (work)", "finite"),
]


@pytest.mark.parametrize(
    ("old", "new", "at", "message"), [c[1:] for c in WORKLOAD_CASES], ids=[c[0] for c in WORKLOAD_CASES]
)
def test_a_workload_number_out_of_range_is_refused_at_load(
    tmp_path: Path, old: str, new: str, at: str, message: str
) -> None:
    f = write_inputs(tmp_path, workload=WORKLOAD.replace(ROW, edit(ROW, old, new)))
    began = time.monotonic()
    res = run_check(f)
    assert time.monotonic() - began < SECONDS
    assert_input_error(res, str(f.workload), at, message)


def test_a_job_of_many_gpus_is_judged_in_time_bounded_by_the_cluster(tmp_path: Path) -> None:
    """The default gang size used to try every k up to the job's GPUs (10^8 GPUs took 5.6 s)."""
    row = edit(ROW, "eval,8,", f"eval,{limits.MAX_JOB_GPUS},")
    f = write_inputs(tmp_path, workload=WORKLOAD.replace(ROW, row))
    began = time.monotonic()
    res = run_check(f)
    assert time.monotonic() - began < 2.0
    assert_input_error(res, str(f.workload), "line 2, column 5 (gpus)", "fits no pool")


def test_a_workload_of_more_jobs_than_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_JOBS", 2)
    f = write_inputs(tmp_path)
    assert_input_error(run_check(f), str(f.workload), "line 4", "more than 2 jobs in one workload")


def test_a_tree_of_too_many_groups_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_GROUPS", 5)  # the real limit is 100,000 (a slow file to parse)
    f = write_inputs(tmp_path)
    assert_input_error(run("check", f.policy), str(f.policy), "tree", "more than 5 groups")


# --- the limits reject nothing shipped ---------------------------------------------------------


def test_the_limits_accept_every_builtin_scenario() -> None:
    for name, make in SCENARIOS.items():
        inputs = inputs_from_scenario(make(1))
        assert inputs.jobs, name


def test_the_limits_accept_the_examples() -> None:
    ex = ROOT / "examples"
    load_policy(ex / "policy.yaml")
    load_cluster(ex / "philly-window-cluster.yaml")
    inputs = inputs_from_files(ex / "policy.yaml", ex / "cluster.yaml", ex / "workload.csv")
    assert len(inputs.jobs) == 359


def test_every_limit_is_in_the_readme_and_in_docs_formats() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    formats = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    names = [n for n in vars(limits) if n.isupper() and n != "YEAR"]
    for n in names:
        assert n in formats, f"docs/formats.md does not document {n}"
    assert "## Limits and bad input" in readme
    for value in ("100,000", "1,024", "10 years", "10^9", "2,000,000"):
        assert value in readme, value


@pytest.mark.parametrize(
    ("gpus", "message"),
    [("99999989", "must be at most 100,000"), ("1" + "0" * 30, "must be at most 102,400,000")],
    ids=["prime-1e8", "1e30"],
)
def test_a_trace_job_of_many_gpus_is_judged_at_once(tmp_path: Path, gpus: str, message: str) -> None:
    """Philly gangs of 8-GPU nodes: a prime number of GPUs used to count nodes up one by one
    (99,999,989 GPUs make a gang of as many 1-GPU nodes, more than a cluster can have)."""
    from test_formats import PHILLY, philly, raises

    text = PHILLY.replace("600.0,1,600.0,teamA", f"600.0,{gpus},600.0,teamA", 1)
    began = time.monotonic()
    msg = raises(philly, tmp_path, text)
    assert time.monotonic() - began < SECONDS
    assert "philly.csv: line 2, column 3 (num_gpus): " in msg and message in msg, msg


def test_an_openb_node_of_too_many_gpus_names_its_line(tmp_path: Path) -> None:
    from test_formats import NODES, raises, write

    write(
        tmp_path, "openb_node_list_gpu_node.csv", NODES.replace("n2,32000,131072,4,", "n2,32000,131072,4096,")
    )
    from fairshare.inputs.formats import get_cluster_format

    msg = raises(get_cluster_format("openb").read, tmp_path / "openb_node_list_gpu_node.csv")
    assert "line 4, column 4 (gpu): must be at most 1,024 GPUs per node" in msg, msg
