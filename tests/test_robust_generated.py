"""Issue 9, generated cases: hypothesis over the workload, policy and cluster schemas.

Each example is a small set of input files in which some values are replaced by edge values
(huge, tiny, infinite, negative, of the wrong type, impossible dates, control characters). The
command line must answer every one with exit code 0, or exit code 2 and one `error:` line naming
one of the files, within a time bound, and never a traceback. An input that loads is replayed
under every policy (an accepted value must not crash the replay either).

The default run tries a fixed set of examples (derandomized); the slow suite tries many more,
randomly, so that CI explores new cases.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import os
import re
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairshare.cli import main
from test_inputs import CLUSTER, POLICY, WORKLOAD

BOUND_S = 20.0  # per example: every input loads (or is refused) and replays in well under this
SLOW = os.environ.get("FAIRSHARE_SLOW") == "1"

EDGE_NUMBERS: list[Any] = [
    0,
    -0.0,
    1,
    -1,
    0.5,
    7,
    64,
    3600,
    1e-300,
    5e-324,
    1e-9,
    1e9,
    1e12,
    1e18,
    1e30,
    1e308,
    math.inf,
    -math.inf,
    math.nan,
    2**63,
    10**30,
]
EDGE_OTHER: list[Any] = [
    True,
    False,
    None,
    "",
    "1",
    "1e3",
    "abc",
    "1d",
    "-5m",
    "1e400",
    "2027-02-30",
    "7d\u202e",
    "a\nb",
    [],
    {},
    [1],
    {"a": 1},
    dt.date(1900, 1, 1),
    dt.date(2027, 1, 31),
]
# control and surrogate characters, very long text (issue 19): in every text field
EDGE_TEXT: list[Any] = [
    "a\x00b",
    "\x1b[31mred",
    "tab\there",
    "line\u2028sep",
    "next\x85line",
    "\ud800",
    "x\udfff",
    "\ufeffbom",
    "x" * 300,
    "y" * 20_000,
    "é" * 257,
]
# a fresh copy each time: the lists and dicts above are put into generated inputs, and a test that
# edits an input in place must not change the shared value (a later example saw a dict holding itself)
EDGE = st.sampled_from(EDGE_NUMBERS + EDGE_OTHER + EDGE_TEXT).map(copy.deepcopy)
TEXT_EDGE = st.sampled_from(EDGE_TEXT)

POLICY_PATHS: list[tuple[Any, ...]] = [
    ("window",),
    ("gpu_rates", "H100"),
    ("tree", 0, "share"),
    ("tree", 0, "children", 0, "share"),
    ("tree", 1, "children", 1, "share"),
    ("tree", 0, "name"),
    ("tree", 0, "review"),
    ("tree", 0, "children"),
    ("classes", "debug", "protected"),
    ("classes", "debug", "max_protected"),
    ("classes", "train", "checkpoint"),
    ("classes", "train", "restore"),
    ("classes", "train", "resumable"),
    ("classes", "eval", "deadline"),
    ("classes", "eval", "startup"),
    ("classes", "debug", "max_stall"),
    ("exceptions", 0, "extra_share"),
    ("exceptions", 0, "expires"),
    ("exceptions", 0, "group"),
    ("gates", "share_floor"),
    ("gates", "lost_work_pct"),
    ("scheduling", "decay_period"),
    ("scheduling", "decay_half_life"),
    ("scheduling", "requeue_delay"),
    ("scheduling", "preempt_backoff"),
    ("scheduling", "lookahead"),
    ("scheduling", "weight_age"),
    ("tree", 0, "owner"),
    ("tree", 0, "hypothesis"),
    ("tree", 1, "children", 0, "name"),
    ("exceptions", 0, "approver"),
    ("exceptions", 0, "reason"),
    ("scheduling", "fast_classes"),
]
CLUSTER_PATHS: list[tuple[Any, ...]] = [
    ("pools", 0, "count"),
    ("pools", 0, "gpus"),
    ("pools", 0, "cpus"),
    ("pools", 0, "mem_gb"),
    ("pools", 0, "nodes_per_block"),
    ("pools", 1, "gpus"),
    ("pools", 1, "gpu_type"),
    ("maintenance", 0, "start"),
    ("maintenance", 0, "deadline"),
    ("maintenance", 0, "end"),
    ("maintenance", 0, "nodes"),
    ("horizon",),
    ("epoch",),
    ("pools", 0, "name"),
    ("pools", 0, "gpu_type"),
]
COLUMNS = ["job_id", "submit", "group", "class", "gpus", "nodes", "gpu_type", "work", "label"]
EXTRA = [
    "cpus",
    "mem_gb",
    "estimate",
    "deadline",
    "protected",
    "resumable",
    "checkpoint",
    "stall_after",
    "user",
]


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set the value at `path`, creating missing sections; skipped when an earlier edit replaced
    a section on the way by a value that is not one."""
    for key in path[:-1]:
        if isinstance(data, dict):
            data = data.setdefault(key, {})
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return
    if isinstance(data, dict) or (
        isinstance(data, list) and isinstance(path[-1], int) and path[-1] < len(data)
    ):
        data[path[-1]] = value


@contextmanager
def _time_bound(seconds: float) -> Iterator[None]:
    """Fail an example that takes too long (a hang would otherwise block the suite)."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"an input took more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _judge(res: Result, files: list[Path]) -> None:
    out = res.output
    assert "Traceback" not in out, out
    assert res.exit_code in (0, 2), (res.exit_code, repr(res.exception), out[-2000:])
    if res.exit_code == 2:
        assert isinstance(res.exception, SystemExit), repr(res.exception)
        errors = [line for line in out.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, out
        assert any(errors[0].startswith(f"error: {f}: ") or errors[0] == f"error: {f}" for f in files) or (
            errors[0].startswith("error: --")
        ), errors[0]
        _line_inside(errors[0], files)


def _line_inside(error: str, files: list[Path]) -> None:
    """An error naming `line N` of a file names a line the file has (not one past its end)."""
    for f in files:
        if error.startswith(f"error: {f}: line "):
            n = int(re.match(r"\d+", error[len(f"error: {f}: line ") :]).group())  # type: ignore[union-attr]
            lines = f.read_bytes().count(b"\n") + 1
            assert 1 <= n <= lines, (error, lines)


def _run_files(tmp: Path, policy: str, cluster: str, workload: str, name: str = "jobs.csv") -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    files = [tmp / "policy.yaml", tmp / "cluster.yaml", tmp / name]
    for f, text in zip(files, (policy, cluster, workload), strict=True):
        f.write_text(text, encoding="utf-8", errors="surrogatepass")
    runner = CliRunner()
    began = time.monotonic()
    with _time_bound(BOUND_S):
        args = ["--policy", str(files[0]), "--cluster", str(files[1]), "--workload", str(files[2])]
        res = runner.invoke(main, ["check", str(files[0]), *args[2:]])
        _judge(res, files)
        if res.exit_code == 0:
            out = tmp / "out"
            res = runner.invoke(
                main, ["compare", *args, "--policies", "fairshare,fifo,slurm-multifactor", "--out", str(out)]
            )
            _judge(res, files)
    assert time.monotonic() - began < BOUND_S


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


SETTINGS = settings(
    max_examples=150 if SLOW else 20,
    derandomize=not SLOW,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(POLICY_PATHS), EDGE), min_size=1, max_size=3))
def test_generated_policies_load_or_are_refused_cleanly(tmp_path: Path, edits: list[tuple[Any, Any]]) -> None:
    policy = yaml.safe_load(POLICY)
    for path, value in edits:
        _set(policy, path, value)
    _run_files(tmp_path / f"p{time.monotonic_ns()}", _yaml(policy), CLUSTER, WORKLOAD)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(CLUSTER_PATHS), EDGE), min_size=1, max_size=3))
def test_generated_clusters_load_or_are_refused_cleanly(tmp_path: Path, edits: list[tuple[Any, Any]]) -> None:
    cluster = yaml.safe_load(CLUSTER)
    for path, value in edits:
        long = isinstance(value, int | float) and not isinstance(value, bool) and value > 30 * 86400
        # within the limits, a horizon of years replays years of waiting jobs: minutes, not a hang
        # (the time bound is per example); the limit itself is tested in test_robust_numbers
        _set(cluster, path, 1e30 if path == ("horizon",) and long else value)
    _run_files(tmp_path / f"c{time.monotonic_ns()}", POLICY, _yaml(cluster), WORKLOAD)


def _rows() -> st.SearchStrategy[list[dict[str, Any]]]:
    valid = {
        "job_id": st.sampled_from(["j1", "j2", "jöb", "🚀"]),
        "submit": st.sampled_from([0, 60, "120", 3600.5]),
        "group": st.sampled_from(["product/serving", "research/arch", "research/data"]),
        "class": st.sampled_from(["debug", "train", "eval"]),
        "gpus": st.sampled_from([1, 2, 8, 16, "4"]),
        "nodes": st.sampled_from([None, 1, 2]),
        "gpu_type": st.sampled_from([None, "H100", "A100", "H100|A100"]),
        "work": st.sampled_from([60, 3600, "7200", 0.5]),
        "label": st.sampled_from([None, "high", "low"]),
    }
    row = st.fixed_dictionaries(
        {k: st.one_of(v, EDGE) if k != "job_id" else st.one_of(v, TEXT_EDGE) for k, v in valid.items()},
        optional={k: EDGE for k in EXTRA},
    )
    return st.lists(row, min_size=1, max_size=4)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    text = str(v)
    if any(c in text for c in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


@SETTINGS
@given(_rows(), st.booleans())
def test_generated_workloads_load_or_are_refused_cleanly(
    tmp_path: Path, rows: list[dict[str, Any]], as_json: bool
) -> None:
    for i, r in enumerate(rows):  # unique ids, so other problems are found
        r["job_id"] = f"{r['job_id']}-{i}"
    if as_json:
        text = "".join(json.dumps(r, default=str) + "\n" for r in rows)
        name = "jobs.jsonl"
    else:
        columns = list(dict.fromkeys(k for r in rows for k in r))
        text = ",".join(columns) + "\n"
        text += "".join(",".join(_cell(r.get(c)) for c in columns) + "\n" for r in rows)
        name = "jobs.csv"
    _run_files(tmp_path / f"w{time.monotonic_ns()}", POLICY, CLUSTER, text, name)


@pytest.mark.parametrize(
    "value", EDGE_NUMBERS + EDGE_OTHER, ids=[repr(v)[:20] for v in EDGE_NUMBERS + EDGE_OTHER]
)
def test_every_edge_value_as_a_share_loads_or_is_refused_cleanly(tmp_path: Path, value: Any) -> None:
    """The edge values one by one in the one place that used to divide by zero (water-filling)."""
    policy = yaml.safe_load(POLICY)
    policy["tree"][0]["share"] = value
    policy["tree"][1]["share"] = value
    _run_files(tmp_path, _yaml(policy), CLUSTER, WORKLOAD)


# --- the shape of the error (issue 19): one line, the right file, the right line and column ------

GOOD_ROW = {"job_id": "j", "submit": 0, "group": "research/data", "class": "debug", "gpus": 1, "work": 60}
SHAPE_SETTINGS = settings(
    max_examples=100 if SLOW else 25,
    derandomize=not SLOW,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


def _check(files: list[Path]) -> Result:
    with _time_bound(BOUND_S):
        return CliRunner().invoke(
            main, ["check", str(files[0]), "--cluster", str(files[1]), "--workload", str(files[2])]
        )


def _one_error(res: Result) -> str:
    assert "Traceback" not in res.output, res.output
    assert res.exit_code == 2, (res.exit_code, res.output)
    errors = [line for line in res.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.output
    return errors[0]


@SHAPE_SETTINGS
@given(
    st.integers(min_value=1, max_value=30),
    st.data(),
    st.sampled_from(["job_id", "user"]),
    TEXT_EDGE,
    st.booleans(),
)
def test_a_bad_text_in_any_row_is_named_at_its_line_and_column(
    tmp_path: Path, n: int, data: st.DataObject, key: str, bad: str, as_json: bool
) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n - 1), label="bad row")
    rows = [dict(GOOD_ROW, job_id=f"j{i}", user="u") for i in range(n)]
    rows[k][key] = bad
    folder = tmp_path / f"s{time.monotonic_ns()}"
    folder.mkdir()
    files = [
        folder / "policy.yaml",
        folder / "cluster.yaml",
        folder / ("jobs.jsonl" if as_json else "jobs.csv"),
    ]
    files[0].write_text(POLICY)
    files[1].write_text(CLUSTER)
    if as_json:
        text = "".join(json.dumps(r) + "\n" for r in rows)
    else:
        columns = list(rows[0])
        text = ",".join(columns) + "\n" + "".join(",".join(_cell(r[c]) for c in columns) + "\n" for r in rows)
    files[2].write_text(text, encoding="utf-8", errors="surrogatepass")
    error = _one_error(_check(files))
    line = k + 1 if as_json else k + 2
    assert error.startswith(f"error: {files[2]}: line {line}"), (error, line)
    if "UTF-8" not in error:  # a surrogate written to CSV is a bad byte: named by line and column
        assert (f"key {key}" if as_json else f"({key})") in error, error


@SHAPE_SETTINGS
@given(
    st.data(),
    st.sampled_from(["\x00", "\x01", "\x08", "\x0b", "\x1b", "\x7f", "\x9f", "\ufffe"]),
    st.booleans(),
)
def test_a_control_character_in_yaml_is_named_at_its_line_and_column(
    tmp_path: Path, data: st.DataObject, char: str, in_cluster: bool
) -> None:
    text = CLUSTER if in_cluster else POLICY
    i = data.draw(st.integers(min_value=0, max_value=len(text) - 1), label="position")
    bad = text[:i] + char + text[i:]
    line = text.count("\n", 0, i) + 1
    column = i - (text.rfind("\n", 0, i) + 1) + 1
    folder = tmp_path / f"y{time.monotonic_ns()}"
    folder.mkdir()
    files = [folder / "policy.yaml", folder / "cluster.yaml", folder / "jobs.csv"]
    files[0].write_text(POLICY if in_cluster else bad)
    files[1].write_text(bad if in_cluster else CLUSTER)
    files[2].write_text(WORKLOAD)
    error = _one_error(_check(files))
    target = files[1] if in_cluster else files[0]
    assert error.startswith(f"error: {target}: line {line}, column {column}: "), (error, line, column)
    assert f"U+{ord(char):04X}" in error, error


def _make_special(path: Path, kind: str) -> str:
    """Turn `path` into a special file; the words the error must say."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        return "named pipe (FIFO)"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
        return "character device"
    if kind == "folder":
        path.mkdir()
        return "is a folder"
    if kind == "dangling-link":
        path.symlink_to(path.parent / "nowhere")
        return "file not found"
    path.write_bytes(b"#" * 5000)  # oversized, against a 4,000-byte cap
    return "more than the limit of 4,000 bytes"


@SHAPE_SETTINGS
@given(
    st.sampled_from([0, 1, 2]), st.sampled_from(["fifo", "dev-zero", "folder", "dangling-link", "oversized"])
)
def test_a_special_or_oversized_input_is_refused_at_once_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: int, kind: str
) -> None:
    folder = tmp_path / f"x{time.monotonic_ns()}"
    folder.mkdir()
    files = [folder / "policy.yaml", folder / "cluster.yaml", folder / "jobs.csv"]
    for f, text in zip(files, (POLICY, CLUSTER, WORKLOAD), strict=True):
        f.write_text(text)
    words = _make_special(files[which], kind)
    monkeypatch.setenv("FAIRSHARE_MAX_INPUT_BYTES", "4000")
    error = _one_error(_check(files))
    assert error.startswith(f"error: {files[which]}: "), error
    assert words in error, error
