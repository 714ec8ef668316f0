"""Loading policy, cluster and workload files (FORMATS.md "Inputs") through the real CLI.

Every bad input must end with exit code 2 and one line `error: <file>: <where>: <message>` naming the
file and the key path (`tree[0].children[1].share`) or the CSV place (`line 3, column 6 (nodes)`); no
traceback; and `compare` must not write (or touch) anything in its output folder.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fairshare.cli import main
from fairshare.core.tree import TreeIndex
from fairshare.inputs.cluster import load_cluster
from fairshare.inputs.policy import load_policy, resolve_exceptions
from fairshare.inputs.workload import load_workload

POLICY = """\
window: 7d
gpu_rates: {H100: 1.0, A100: 0.6}
tree:
  - name: product
    share: 40
    owner: a@x
    children:
      - {name: serving, share: 1}
      - {name: eval, share: 1}
  - name: research
    share: 60
    children:
      - {name: arch, share: 3}
      - {name: data, share: 1}
classes:
  debug: {protected: 15m, max_protected: 15m, resumable: true, checkpoint: 5m, restore: 30s}
  train: {protected: 30m, max_protected: 2h, resumable: true, checkpoint: 30m, restore: 2m}
  eval: {protected: 1h, max_protected: 2h, resumable: false, deadline: 4h}
exceptions:
  - {group: research/arch, extra_share: 10, expires: 2026-12-15, approver: b@x, reason: launch}
"""

CLUSTER = """\
pools:
  - {name: h100, count: 4, gpus: 8, gpu_type: H100, cpus: 224, mem_gb: 2048, nodes_per_block: 2}
  - {name: a100, count: 2, gpus: 4, gpu_type: A100}
maintenance:
  - {nodes: [h100-001], start: 1h, deadline: 2h, end: 3h}
epoch: 2026-12-01T00:00:00Z
"""

# columns: job_id=1 submit=2 group=3 class=4 gpus=5 nodes=6 gpu_type=7 work=8 label=9
WORKLOAD = """\
job_id,submit,group,class,gpus,nodes,gpu_type,work,label
j1,0,product/serving,eval,8,,,3600,high
j2,60,research/arch,train,16,2,H100,7200,
j3,120,research/data,debug,2,,A100,600,low
"""

WORKLOAD_JSONL = """\
{"job_id": "j1", "submit": 0, "group": "product/serving", "class": "eval", "gpus": 8, "work": 3600, "label": "high"}
{"job_id": "j2", "submit": 60, "group": "research/arch", "class": "train", "gpus": 16, "nodes": 2, "gpu_type": "H100", "work": 7200}
{"job_id": "j3", "submit": 120, "group": "research/data", "class": "debug", "gpus": 2, "gpu_type": "A100", "work": 600, "label": "low"}
"""  # noqa: E501

NAMES = {"policy": "policy.yaml", "cluster": "cluster.yaml", "workload": "jobs.csv"}


@dataclass(frozen=True)
class Files:
    policy: Path
    cluster: Path
    workload: Path

    def path(self, which: str) -> Path:
        p: Path = getattr(self, which)
        return p


def write_inputs(
    tmp_path: Path,
    *,
    policy: str = POLICY,
    cluster: str = CLUSTER,
    workload: str = WORKLOAD,
    workload_name: str = "jobs.csv",
) -> Files:
    files = Files(tmp_path / "policy.yaml", tmp_path / "cluster.yaml", tmp_path / workload_name)
    files.policy.write_text(policy, encoding="utf-8")
    files.cluster.write_text(cluster, encoding="utf-8")
    files.workload.write_text(workload, encoding="utf-8")
    return files


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def run_check(f: Files) -> Result:
    return run("check", f.policy, "--cluster", f.cluster, "--workload", f.workload)


def run_compare(f: Files, out: Path) -> Result:
    return run(
        "compare",
        "--policy",
        f.policy,
        "--cluster",
        f.cluster,
        "--workload",
        f.workload,
        "--out",
        out,
        "--policies",
        "fifo",
    )


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"test bug: {old!r} must occur exactly once"
    return text.replace(old, new)


def assert_input_error(result: Result, file_name: str, at: str, message: str) -> None:
    """Exit 2, one `error: <file>: <at>: <message>` line naming the file and place; no traceback."""
    out = result.output
    assert result.exit_code == 2, out
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    line = errors[0]
    prefix = f"{file_name}: {at}: " if at else f"{file_name}: "
    assert prefix in line, f"expected {prefix!r} in {line!r}"
    assert message in line.split(prefix, 1)[1], f"expected {message!r} in {line!r}"


@dataclass(frozen=True)
class Bad:
    file: str  # which file the edit goes into: policy, cluster or workload
    old: str | None  # the exact text to replace (None: replace the whole file by `new`)
    new: str
    at: str  # the key path or CSV place the error must name ("" for the whole file)
    message: str  # a fragment of the message
    workload_name: str = "jobs.csv"
    error_in: str | None = None  # the file named by the error, when not the edited one


def J(jsonl: str, at: str, message: str) -> Bad:  # table shorthand for a JSONL case
    return Bad("workload", None, jsonl, at, message, workload_name="jobs.jsonl")


GOOD_ROW = '"job_id": "j1", "submit": 0, "group": "product/serving", "class": "eval", "gpus": 8'

CASES = [
    # ---- policy: keys and tree
    pytest.param(
        Bad("policy", "window: 7d", "windw: 7d", "windw", "unknown key 'windw'"), id="policy-unknown-top-key"
    ),
    pytest.param(
        Bad("policy", "window: 7d", "windw: 7d", "windw", "did you mean 'window'"),
        id="policy-unknown-key-suggests",
    ),
    pytest.param(
        Bad(
            "policy",
            "restore: 2m}",
            "restore: 2m, preemptible: true}",
            "classes.train.preemptible",
            "unknown key 'preemptible'",
        ),
        id="class-unknown-key",
    ),
    pytest.param(
        Bad(
            "policy",
            "{name: eval, share: 1}",
            "{name: eval, share: 1, weight: 2}",
            "tree[0].children[1].weight",
            "unknown key 'weight'",
        ),
        id="tree-unknown-key",
    ),
    pytest.param(
        Bad(
            "policy",
            "{name: eval, share: 1}",
            "{name: eval, share: 0}",
            "tree[0].children[1].share",
            "share must be > 0, got 0",
        ),
        id="share-zero",
    ),
    pytest.param(
        Bad("policy", "share: 60", "share: -5", "tree[1].share", "share must be > 0, got -5"),
        id="share-negative",
    ),
    pytest.param(
        Bad("policy", "share: 60", "share: lots", "tree[1].share", "expected a number, got 'lots'"),
        id="share-not-a-number",
    ),
    pytest.param(
        Bad(
            "policy",
            "{name: eval, share: 1}",
            "{name: eval}",
            "tree[0].children[1].share",
            "required key 'share' is missing",
        ),
        id="share-missing",
    ),
    pytest.param(
        Bad(
            "policy",
            "{name: data, share: 1}",
            "{name: arch, share: 1}",
            "tree[1].children[1].name",
            "duplicate sibling name 'arch'",
        ),
        id="duplicate-sibling",
    ),
    pytest.param(
        Bad(
            "policy",
            "- name: research",
            "- name: product",
            "tree[1].name",
            "duplicate sibling name 'product'",
        ),
        id="duplicate-top-level",
    ),
    pytest.param(
        Bad(
            "policy",
            "{name: data, share: 1}",
            "{name: data/x, share: 1}",
            "tree[1].children[1].name",
            "may not contain '/'",
        ),
        id="group-name-with-slash",
    ),
    pytest.param(
        Bad(
            "policy",
            "tree:\n  - name: product",
            "tree: product\nx:\n  - name: product",
            "tree",
            "expected a list",
        ),
        id="tree-not-a-list",
    ),
    # ---- policy: classes
    pytest.param(
        Bad(
            "policy",
            "protected: 15m, max_protected: 15m",
            "protected: 20m, max_protected: 15m",
            "classes.debug",
            "protected (20m) is above max_protected (15m)",
        ),
        id="protected-above-max",
    ),
    pytest.param(
        Bad("policy", "checkpoint: 5m, ", "", "classes.debug", "resumable: true needs checkpoint > 0"),
        id="resumable-without-checkpoint",
    ),
    pytest.param(
        Bad(
            "policy",
            "checkpoint: 5m",
            "checkpoint: 0",
            "classes.debug",
            "resumable: true needs checkpoint > 0",
        ),
        id="resumable-zero-checkpoint",
    ),
    pytest.param(
        Bad(
            "policy",
            "restore: 30s",
            "restore: 15x",
            "classes.debug.restore",
            "expected a duration such as 30m or 1d2h",
        ),
        id="class-bad-duration",
    ),
    pytest.param(
        Bad("policy", "restore: 30s", "restore: -30", "classes.debug.restore", "cannot be negative"),
        id="class-negative-duration",
    ),
    pytest.param(
        Bad(
            "policy",
            "resumable: false",
            "resumable: maybe",
            "classes.eval.resumable",
            "expected true or false, got 'maybe'",
        ),
        id="class-resumable-not-bool",
    ),
    pytest.param(
        Bad(
            "policy",
            "  eval: {protected",
            "  eval: [protected",
            "line 18, column 74",
            "not valid YAML: did not find expected ',' or ']'",
        ),
        id="yaml-syntax-unclosed",
    ),
    pytest.param(
        Bad("policy", "  - name: research", "\t- name: research", "line 10, column 1", "not valid YAML"),
        id="yaml-syntax-tab",
    ),
    pytest.param(
        Bad(
            "policy", "window: 7d\n", "window: 7d\nwindow: 8d\n", "line 2, column 1", "duplicate key 'window'"
        ),
        id="yaml-duplicate-key",
    ),
    pytest.param(
        Bad("policy", "  train: {", "  debug: {", "line 17, column 3", "duplicate key 'debug'"),
        id="yaml-duplicate-class",
    ),
    pytest.param(Bad("policy", None, "- window: 7d\n", "", "expected a mapping"), id="policy-not-a-mapping"),
    pytest.param(Bad("policy", None, "", "", "empty"), id="policy-empty-file"),
    pytest.param(
        Bad("policy", "window: 7d", "window: 0", "window", "the rolling window must be longer than 0"),
        id="window-zero",
    ),
    pytest.param(
        Bad("policy", "A100: 0.6", "A100: -1", "gpu_rates.A100", "must be > 0"), id="gpu-rate-negative"
    ),
    # ---- policy: exceptions
    pytest.param(
        Bad("policy", "expires: 2026-12-15, ", "", "exceptions[0].expires", "every exception must expire"),
        id="exception-without-expiry",
    ),
    pytest.param(
        Bad(
            "policy",
            "expires: 2026-12-15",
            "expires: null",
            "exceptions[0].expires",
            "every exception must expire",
        ),
        id="exception-null-expiry",
    ),
    pytest.param(
        Bad("policy", "expires: 2026-12-15", "expires: someday", "exceptions[0].expires", "expected a date"),
        id="exception-bad-expiry",
    ),
    pytest.param(
        Bad("policy", "expires: 2026-12-15", "expires: -5", "exceptions[0].expires", "cannot be negative"),
        id="exception-negative-expiry",
    ),
    pytest.param(
        Bad(
            "policy",
            "group: research/arch",
            "group: research/vision",
            "exceptions[0].group",
            "no group 'research/vision' in the tree",
        ),
        id="exception-unknown-group",
    ),
    pytest.param(
        Bad(
            "policy",
            "extra_share: 10",
            "extra_share: 0",
            "exceptions[0].extra_share",
            "extra_share must be > 0",
        ),
        id="exception-zero-extra-share",
    ),
    pytest.param(
        Bad(
            "cluster",
            "epoch: 2026-12-01T00:00:00Z",
            "epoch: 2026-12-15T00:00:00Z",
            "exceptions[0].expires",
            "expires at or before the epoch",
            error_in="policy",
        ),
        id="exception-expires-at-epoch",
    ),
    pytest.param(
        Bad(
            "cluster",
            "epoch: 2026-12-01T00:00:00Z",
            "epoch: 2027-03-01",
            "exceptions[0].expires",
            "expires at or before the epoch",
            error_in="policy",
        ),
        id="exception-expired-before-epoch",
    ),
    # ---- cluster
    pytest.param(
        Bad("cluster", "gpu_type: A100", "gpu_type: V100", "pools[1].gpu_type", "GPU type 'V100' is unknown"),
        id="unknown-gpu-type",
    ),
    pytest.param(
        Bad(
            "cluster",
            "nodes_per_block: 2",
            "nodes_per_blocks: 2",
            "pools[0].nodes_per_blocks",
            "did you mean 'nodes_per_block'",
        ),
        id="cluster-unknown-key",
    ),
    pytest.param(
        Bad("cluster", "count: 2", "count: 0", "pools[1].count", "must be >= 1, got 0"), id="pool-count-zero"
    ),
    pytest.param(
        Bad("cluster", "gpus: 4,", "gpus: 4.5,", "pools[1].gpus", "expected a whole number, got 4.5"),
        id="pool-gpus-fractional",
    ),
    pytest.param(
        Bad("cluster", "name: a100", "name: h100", "pools[1].name", "duplicate pool name 'h100'"),
        id="duplicate-pool",
    ),
    pytest.param(
        Bad("cluster", "name: a100", "name: a 100", "pools[1].name", "letters, digits"),
        id="pool-name-characters",
    ),
    pytest.param(
        Bad(
            "cluster",
            "[h100-001]",
            "[h100-001, h100-009]",
            "maintenance[0].nodes[1]",
            "no node named 'h100-009'",
        ),
        id="drain-unknown-node",
    ),
    pytest.param(
        Bad("cluster", "end: 3h", "end: 3x", "maintenance[0].end", "expected a duration"), id="drain-bad-time"
    ),
    pytest.param(
        Bad("cluster", "end: 3h", "end: 1h", "maintenance[0].end", "must end after its deadline"),
        id="drain-ends-before-deadline",
    ),
    pytest.param(
        Bad("cluster", "start: 1h, ", "", "maintenance[0].start", "required key 'start' is missing"),
        id="drain-without-start",
    ),
    pytest.param(
        Bad("cluster", "epoch: 2026-12-01T00:00:00Z", "epoch: next tuesday", "epoch", "expected a date"),
        id="epoch-bad",
    ),
    pytest.param(
        Bad(
            "cluster",
            "epoch: 2026-12-01T00:00:00Z",
            "epoch: 2026-12-01\nhorizon: 0",
            "horizon",
            "after t = 0",
        ),
        id="horizon-zero",
    ),
    pytest.param(Bad("cluster", None, "pools: []\n", "pools", "must not be empty"), id="no-pools"),
    # ---- workload CSV rows
    pytest.param(
        Bad(
            "workload",
            "16,2,H100",
            "16,3,H100",
            "line 3, column 6 (nodes)",
            "16 GPUs do not divide evenly over 3 nodes",
        ),
        id="gpus-not-divisible",
    ),
    pytest.param(
        Bad("workload", "2,,A100", "12,,A100", "line 4, column 5 (gpus)", "fits no pool"), id="fits-no-pool"
    ),
    pytest.param(
        Bad("workload", "16,2,H100", "16,8,H100", "line 3, column 6 (nodes)", "8 nodes"),
        id="too-many-nodes-for-pool",
    ),
    pytest.param(
        Bad("workload", ",600,low", ",-600,low", "line 4, column 8 (work)", "must be > 0"), id="work-negative"
    ),
    pytest.param(
        Bad("workload", ",600,low", ",0,low", "line 4, column 8 (work)", "must be > 0"), id="work-zero"
    ),
    pytest.param(
        Bad("workload", ",3600,high", ",,high", "line 2, column 8 (work)", "a value is required"),
        id="work-empty",
    ),
    pytest.param(
        Bad(
            "workload",
            None,
            "job_id,submit,group,class,gpus\nj1,0,product/serving,eval,8\n",
            "line 1",
            "required column 'work' is missing",
        ),
        id="work-column-missing",
    ),
    pytest.param(
        Bad("workload", "j2,60,", "j2,soon,", "line 3, column 2 (submit)", "expected a number, got 'soon'"),
        id="submit-not-a-number",
    ),
    pytest.param(
        Bad("workload", "j2,60,", "j2,-60,", "line 3, column 2 (submit)", "must be >= 0"),
        id="submit-negative",
    ),
    pytest.param(
        Bad(
            "workload",
            "0,product/serving",
            "0,product",
            "line 2, column 3 (group)",
            "not a leaf: jobs are charged to leaves (under it: product/serving, product/eval)",
        ),
        id="group-not-a-leaf",
    ),
    pytest.param(
        Bad(
            "workload",
            "research/data",
            "research/vision",
            "line 4, column 3 (group)",
            "no group 'research/vision' in the policy tree",
        ),
        id="group-unknown",
    ),
    pytest.param(
        Bad(
            "workload",
            "research/data",
            "research/dta",
            "line 4, column 3 (group)",
            "no group 'research/dta' in the policy tree; did you mean 'research/data'?",
        ),
        id="group-misspelt",
    ),
    pytest.param(
        Bad("workload", "eval,8,", "serve,8,", "line 2, column 4 (class)", "unknown class 'serve'"),
        id="class-unknown",
    ),
    pytest.param(
        Bad("workload", "j3,120", "j1,120", "line 4, column 1 (job_id)", "duplicate job_id 'j1'"),
        id="duplicate-job-id",
    ),
    pytest.param(
        Bad("workload", "16,2,H100", "16,2,H200", "line 3, column 7 (gpu_type)", "unknown GPU type 'H200'"),
        id="gpu-type-not-in-cluster",
    ),
    pytest.param(
        Bad("workload", ",3600,high", ",3600,urgent", "line 2, column 9 (label)", "one of high, medium, low"),
        id="label-unknown",
    ),
    pytest.param(
        Bad("workload", "eval,8,", "eval,0,", "line 2, column 5 (gpus)", "whole number >= 1"), id="gpus-zero"
    ),
    pytest.param(
        Bad("workload", "eval,8,", "eval,2.5,", "line 2, column 5 (gpus)", "whole number >= 1"),
        id="gpus-fractional",
    ),
    pytest.param(
        Bad(
            "workload",
            "work,label\n",
            "work,label,priority\n",
            "line 1, column 10 (priority)",
            "unknown column 'priority'",
        ),
        id="unknown-csv-column",
    ),
    pytest.param(
        Bad("workload", "work,label\n", "work,gpus\n", "line 1, column 9 (gpus)", "duplicate column 'gpus'"),
        id="duplicate-csv-column",
    ),
    pytest.param(
        Bad("workload", ",3600,high", ",3600,high,extra", "line 2", "expected 9 cells, got 10"),
        id="wrong-cell-count",
    ),
    pytest.param(
        Bad("workload", None, "job_id,submit,group,class,gpus,work\n", "", "no jobs"), id="empty-workload"
    ),
    pytest.param(Bad("workload", None, "", "line 1", "empty file"), id="empty-workload-file"),
    pytest.param(
        Bad(
            "workload",
            None,
            "job_id,submit,group,class,gpus,work,protected\nj1,0,product/serving,train,8,60,15x\n",
            "line 2, column 7 (protected)",
            "expected a duration",
        ),
        id="workload-bad-duration",
    ),
    pytest.param(
        Bad(
            "workload",
            None,
            "job_id,submit,group,class,gpus,work,resumable\nj1,0,product/serving,eval,8,60,true\n",
            "line 2, column 7 (resumable)",
            "checkpoint",
        ),
        id="workload-resumable-without-checkpoint",
    ),
    pytest.param(
        Bad(
            "workload",
            None,
            "job_id,submit,group,class,gpus,gpu_type,work,cpus\nj1,0,product/serving,eval,8,H100,60,2000\n",
            "line 2, column 8 (cpus)",
            "fits no pool",
        ),
        id="workload-too-many-cpus",
    ),
    pytest.param(
        Bad(
            "workload",
            None,
            "job_id,submit,group,class,gpus,gpu_type,work,mem_gb\nj1,0,product/serving,eval,8,H100,60,9000\n",
            "line 2, column 8 (mem_gb)",
            "fits no pool",
        ),
        id="workload-too-much-memory",
    ),
    # ---- workload JSON Lines
    pytest.param(
        J('{"job_id": "j1" "submit": 0}\n', "line 1, column 17", "not valid JSON"), id="jsonl-bad-json"
    ),
    pytest.param(J("[1, 2]\n", "line 1", "expected a JSON object"), id="jsonl-not-an-object"),
    pytest.param(
        J("{" + GOOD_ROW + "}\n", "line 1, key work", "required key is missing"), id="jsonl-missing-work"
    ),
    pytest.param(
        J(
            "{" + GOOD_ROW + ', "work": 60, "priority": 1}\n',
            "line 1, key priority",
            "unknown column 'priority'",
        ),
        id="jsonl-unknown-key",
    ),
    pytest.param(
        J(
            "{" + GOOD_ROW.replace('"gpus": 8', '"gpus": "eight"') + ', "work": 60}\n',
            "line 1, key gpus",
            "expected a number, got 'eight'",
        ),
        id="jsonl-gpus-not-a-number",
    ),
    pytest.param(
        J(
            "{" + GOOD_ROW + ', "work": 60}\n{' + GOOD_ROW + ', "work": 60}\n',
            "line 2, key job_id",
            "duplicate job_id 'j1'",
        ),
        id="jsonl-duplicate-job-id",
    ),
]


def _bad_files(tmp_path: Path, case: Bad) -> tuple[Files, str]:
    texts = {"policy": POLICY, "cluster": CLUSTER, "workload": WORKLOAD}
    base = texts[case.file]
    texts[case.file] = case.new if case.old is None else edit(base, case.old, case.new)
    files = write_inputs(
        tmp_path,
        policy=texts["policy"],
        cluster=texts["cluster"],
        workload=texts["workload"],
        workload_name=case.workload_name,
    )
    named = files.path(case.error_in or case.file).name
    return files, named


@pytest.mark.parametrize("case", CASES)
def test_check_rejects_bad_input(tmp_path: Path, case: Bad) -> None:
    files, named = _bad_files(tmp_path, case)
    assert_input_error(run_check(files), named, case.at, case.message)


@pytest.mark.parametrize("case", CASES)
def test_compare_rejects_bad_input_and_writes_nothing(tmp_path: Path, case: Bad) -> None:
    files, named = _bad_files(tmp_path, case)
    out = tmp_path / "out"
    result = run_compare(files, out)
    assert_input_error(result, named, case.at, case.message)
    assert not out.exists() or not any(out.iterdir())


def test_bad_input_keeps_earlier_results(tmp_path: Path) -> None:
    """A compare that fails on input leaves a previous output folder exactly as it was."""
    out = tmp_path / "out"
    (tmp_path / "good").mkdir()
    good = write_inputs(tmp_path / "good")
    assert run_compare(good, out).exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    files = write_inputs(tmp_path, workload=edit(WORKLOAD, "j2,60,", "j2,soon,"))
    assert_input_error(run_compare(files, out), "jobs.csv", "line 3, column 2 (submit)", "expected a number")
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before


def test_policy_errors_alone(tmp_path: Path) -> None:
    """`check POLICY` without a cluster still reports policy errors with their key path."""
    files = write_inputs(tmp_path, policy=edit(POLICY, "share: 60", "share: 0"))
    assert_input_error(run("check", files.policy), "policy.yaml", "tree[1].share", "share must be > 0")


@pytest.mark.parametrize(
    ("which", "at", "message"),
    [
        pytest.param("policy", "", "file not found", id="policy"),
        pytest.param("cluster", "", "file not found", id="cluster"),
        pytest.param("workload", "", "file not found", id="workload"),
    ],
)
def test_missing_files(tmp_path: Path, which: str, at: str, message: str) -> None:
    files = write_inputs(tmp_path)
    files.path(which).unlink()
    assert_input_error(run_check(files), NAMES[which], at, message)


def test_unreadable_inputs_are_input_errors(tmp_path: Path) -> None:
    files = write_inputs(tmp_path)
    files.workload.write_bytes(WORKLOAD.replace("product/serving", "product/s\xe9rving").encode("latin-1"))
    assert_input_error(run_check(files), "jobs.csv", "", "UTF-8")
    files.policy.write_bytes(POLICY.replace("a@x", "\xe9@x").encode("latin-1"))
    assert_input_error(run("check", files.policy), "policy.yaml", "", "UTF-8")
    (tmp_path / "dir").mkdir()
    files = write_inputs(tmp_path / "dir")
    files.workload.unlink()
    files.workload.mkdir()
    result = run_check(files)
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "jobs.csv" in result.output


def test_csv_with_byte_order_mark(tmp_path: Path) -> None:
    """A CSV saved by a spreadsheet starts with a BOM; the first column is still `job_id`."""
    files = write_inputs(tmp_path)
    files.workload.write_bytes(b"\xef\xbb\xbf" + WORKLOAD.encode())
    result = run_check(files)
    assert result.exit_code == 0, result.output


def test_real_process_prints_no_traceback(tmp_path: Path) -> None:
    files = write_inputs(tmp_path, workload=edit(WORKLOAD, "16,2,H100", "16,3,H100"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fairshare.cli",
            "check",
            str(files.policy),
            "--cluster",
            str(files.cluster),
            "--workload",
            str(files.workload),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip() == (
        f"error: {files.workload}: line 3, column 6 (nodes): 16 GPUs do not divide evenly over 3 nodes"
    )


# ---------------------------------------------------------------- positive cases


def test_valid_trio_passes_check(tmp_path: Path) -> None:
    files = write_inputs(tmp_path)
    result = run_check(files)
    assert result.exit_code == 0, result.output
    out = result.output
    for path, pct in (
        ("product", "40.00%"),
        ("serving", "20.00%"),
        ("eval", "20.00%"),
        ("research", "60.00%"),
        ("arch", "45.00%"),
        ("data", "15.00%"),
    ):
        line = next(x for x in out.splitlines() if x.strip().startswith(path + " "))
        assert pct in line, line
    assert "cluster" in out and "6 nodes, 40 GPUs" in out
    assert "3 jobs" in out
    assert "error" not in out and "warning" not in out
    assert out.rstrip().endswith("ok")


def test_valid_trio_compare_writes_output(tmp_path: Path) -> None:
    files = write_inputs(tmp_path)
    out = tmp_path / "out"
    result = run_compare(files, out)
    assert result.exit_code == 0, result.output
    assert (out / "fifo" / "events.jsonl").is_file()
    assert (out / "report.html").is_file()


def test_date_and_duration_exceptions_resolve(tmp_path: Path) -> None:
    policy = edit(
        POLICY,
        "reason: launch}\n",
        "reason: launch}\n"
        "  - {group: product/eval, extra_share: 5, expires: 10d}\n"
        "  - {group: product, extra_share: 5, expires: '2026-12-02T12:00:00Z'}\n",
    )
    files = write_inputs(tmp_path, policy=policy)
    assert run_check(files).exit_code == 0
    pol = load_policy(files.policy)
    tree = TreeIndex.build(pol.tree)
    cl = load_cluster(files.cluster, pol)
    assert cl.epoch == dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    resolved = resolve_exceptions(pol, tree, cl.epoch, str(files.policy), strict=True)
    assert [(r.group, r.expires_t) for r in resolved] == [
        ("research/arch", 14 * 86400.0),
        ("product/eval", 10 * 86400.0),
        ("product", 1.5 * 86400.0),
    ]
    assert [tree.paths[r.node] for r in resolved] == ["research/arch", "product/eval", "product"]


def test_jsonl_loads_the_same_jobs_as_csv(tmp_path: Path) -> None:
    files = write_inputs(tmp_path)
    jsonl = tmp_path / "jobs.jsonl"
    jsonl.write_text(WORKLOAD_JSONL, encoding="utf-8")
    pol = load_policy(files.policy)
    tree = TreeIndex.build(pol.tree)
    cl = load_cluster(files.cluster, pol)
    from_csv = load_workload(files.workload, pol, tree, cl)
    from_jsonl = load_workload(jsonl, pol, tree, cl)
    assert from_csv == from_jsonl
    assert [j.id for j in from_csv] == ["j1", "j2", "j3"]
    j1, j2, j3 = from_csv
    assert (
        j1.request.nodes,
        j1.request.gpu_types,
        j1.request.label,
        j1.request.deadline,
        j1.request.resumable,
    ) == (
        1,
        None,
        "high",
        4 * 3600.0,
        False,
    )
    assert (j2.request.nodes, j2.request.gpu_types, j2.request.label, j2.request.checkpoint) == (
        2,
        ("H100",),
        "medium",
        1800.0,
    )
    assert j3.request.gpu_types == ("A100",)
    assert j3.request.charge == pytest.approx(2 * 0.6)
    result = run("check", files.policy, "--cluster", files.cluster, "--workload", jsonl)
    assert result.exit_code == 0, result.output
    assert "3 jobs" in result.output


def test_check_policy_alone_only_warns_about_past_expiry(tmp_path: Path) -> None:
    files = write_inputs(tmp_path, policy=edit(POLICY, "expires: 2026-12-15", "expires: 2020-01-01"))
    result = run("check", files.policy)
    assert result.exit_code == 0, result.output
    assert "warning: " in result.output
    warning = next(x for x in result.output.splitlines() if x.startswith("warning: "))
    assert "policy.yaml: exceptions[0].expires" in warning
    assert "research/arch" in warning
    assert result.output.rstrip().endswith("ok")
    # in a replay (the cluster's epoch is after the expiry) the same file is an error
    assert_input_error(run_check(files), "policy.yaml", "exceptions[0].expires", "at or before the epoch")
    out = tmp_path / "out"
    assert_input_error(
        run_compare(files, out), "policy.yaml", "exceptions[0].expires", "at or before the epoch"
    )
    assert not out.exists() or not any(out.iterdir())


def test_default_epoch_accepts_future_dated_exception(tmp_path: Path) -> None:
    """Without `epoch` the replay clock starts 1970-01-01; a dated exception lies far after it."""
    files = write_inputs(tmp_path, cluster=edit(CLUSTER, "epoch: 2026-12-01T00:00:00Z\n", ""))
    result = run_check(files)
    assert result.exit_code == 0, result.output


def test_jsonl_and_csv_rows_agree_on_errors(tmp_path: Path) -> None:
    """The same bad value is reported with its line in both formats."""
    files = write_inputs(tmp_path)
    jsonl = tmp_path / "jobs.jsonl"
    jsonl.write_text(WORKLOAD_JSONL.replace('"nodes": 2', '"nodes": 3'), encoding="utf-8")
    result = run("check", files.policy, "--cluster", files.cluster, "--workload", jsonl)
    assert_input_error(result, "jobs.jsonl", "line 2, key nodes", "16 GPUs do not divide evenly over 3 nodes")
    assert json.loads(WORKLOAD_JSONL.splitlines()[1])["nodes"] == 2


@pytest.mark.parametrize(
    ("columns", "row", "nodes"),
    [
        pytest.param("gpus,gpu_type", "8,H100", 1, id="gpus-alone-one-node"),
        pytest.param("gpus,gpu_type,cpus", "8,H100,300", 2, id="cpus-need-two-nodes"),
        pytest.param("gpus,gpu_type,mem_gb", "8,H100,5000", 4, id="memory-needs-four-nodes"),
        pytest.param("gpus,gpu_type,cpus,nodes", "8,H100,200,1", 1, id="given-nodes-kept"),
    ],
)
def test_default_gang_size_is_the_fewest_nodes_that_hold_gpus_cpus_and_memory(
    tmp_path: Path, columns: str, row: str, nodes: int
) -> None:
    # h100 nodes: 8 GPUs, 224 CPUs, 2048 GB. 300 CPUs need 2 nodes (150 each); 5000 GB need 4
    # (1250 each; 3 nodes do not divide 8 GPUs evenly)
    files = write_inputs(tmp_path)
    files.workload.write_text(
        f"job_id,submit,group,class,work,{columns}\nj1,0,product/serving,train,60,{row}\n"
    )
    pol = load_policy(files.policy)
    (job,) = load_workload(files.workload, pol, TreeIndex.build(pol.tree), load_cluster(files.cluster, pol))
    assert job.request.nodes == nodes
