"""Issue 9, class 2: parser and depth failures, and one rule for the type of every value.

Impossible unquoted dates, deep nesting, alias bombs and huge integers used to escape the YAML
loader as ValueError or RecursionError; CSV records spanning lines were reported at their last
line; JSON Lines values were coerced unevenly and duplicate keys silently dropped. Each is now an
input error naming the file and the line and column (or key path); exit code 2.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fairshare.inputs.limits import MAX_TREE_DEPTH, MAX_YAML_DEPTH
from test_formats import PHILLY, philly, raises
from test_inputs import CLUSTER, POLICY, WORKLOAD, assert_input_error, edit, run, run_check, write_inputs


@pytest.mark.parametrize(
    ("which", "old", "new", "at", "message"),
    [
        ("policy", "expires: 2026-12-15", "expires: 2026-12-32", "line 20, column 54", "is not a date"),
        ("policy", "owner: a@x", "owner: a@x\n    review: 2027-02-30", "line 7, column 13", "is not a date"),
        (
            "cluster",
            "epoch: 2026-12-01T00:00:00Z",
            "epoch: 2026-02-30T00:00:00Z",
            "line 6, column 8",
            "is not a date",
        ),
        ("policy", "window: 7d", "window: 1" + "0" * 5000, "line 1, column 9", "not a number"),
        ("policy", "share: 40", "share: 1" + "0" * 5000 + ".5", "line 5, column 12", ""),
    ],
    ids=["expires-dec-32", "review-feb-30", "epoch-feb-30", "int-5000-digits", "float-5000-digits"],
)
def test_an_impossible_value_in_yaml_is_reported_at_its_line_and_column(
    tmp_path: Path, which: str, old: str, new: str, at: str, message: str
) -> None:
    base = POLICY if which == "policy" else CLUSTER
    f = write_inputs(tmp_path, **{which: edit(base, old, new)})
    res = run("check", f.policy, "--cluster", f.cluster)
    path = f.policy if which == "policy" else f.cluster
    if new.endswith(".5"):  # a float of 5,000 digits is read (as inf): refused as not finite
        assert_input_error(res, str(path), "tree[0].share", "finite")
    else:
        assert_input_error(res, str(path), at, message)


def test_the_quoted_and_unquoted_impossible_date_both_get_a_clean_error(tmp_path: Path) -> None:
    for text in ("review: 2027-02-30", "review: '2027-02-30'"):
        f = write_inputs(tmp_path, policy=edit(POLICY, "owner: a@x", f"owner: a@x\n    {text}"))
        res = run("check", f.policy)
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert "2027-02-30" in res.output or "date" in res.output


def _nested_flow(levels: int) -> str:
    node = "{name: leaf, share: 1}"
    for i in range(levels - 1):
        node = f"{{name: g{i}, share: 1, children: [{node}]}}"
    return f"window: 7d\ngpu_rates: {{H100: 1}}\nclasses: {{c: {{}}}}\ntree: [{node}]\n"


@pytest.mark.parametrize(
    ("levels", "at", "message"),
    [
        (MAX_TREE_DEPTH, None, None),
        (MAX_TREE_DEPTH + 1, "tree[0]" + ".children[0]" * MAX_TREE_DEPTH, "more than 16 levels"),
        (40, "line 4, column", f"nested more than {MAX_YAML_DEPTH} levels deep"),
        (1000, "line 4, column", f"nested more than {MAX_YAML_DEPTH} levels deep"),
    ],
    ids=["16-levels-ok", "17-levels", "40-levels", "1000-levels"],
)
def test_a_deep_policy_tree_is_refused_without_a_recursion_error(
    tmp_path: Path, levels: int, at: str | None, message: str | None
) -> None:
    (tmp_path / "p.yaml").write_text(_nested_flow(levels))
    res = run("check", tmp_path / "p.yaml")
    if at is None:
        assert res.exit_code == 0, res.output
        return
    assert "RecursionError" not in res.output
    if at.endswith("column"):  # the column is where the 65th level opens
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert f"error: {tmp_path / 'p.yaml'}: {at} " in res.output and (message or "") in res.output
    else:
        assert_input_error(res, str(tmp_path / "p.yaml"), at, message or "")


def test_a_deep_tree_given_as_data_is_refused_before_pydantic_recurses() -> None:
    from fairshare.errors import InputError
    from fairshare.inputs._validation import validate
    from fairshare.inputs.policy import Policy

    node: dict[str, object] = {"name": "leaf", "share": 1}
    for i in range(3000):
        node = {"name": f"g{i}", "share": 1, "children": [node]}
    with pytest.raises(InputError, match="more than 16 levels"):
        validate(Policy, {"tree": [node], "classes": {"c": {}}}, "data")


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["window: 7d", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    (tmp_path / "p.yaml").write_text("\n".join(lines) + "\n")
    res = run("check", tmp_path / "p.yaml")
    assert_input_error(res, str(tmp_path / "p.yaml"), "", "aliases")


def test_a_self_referencing_alias_is_refused(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("window: 7d\na: &a [*a]\n")
    res = run("check", tmp_path / "p.yaml")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output


# --- CSV records that span lines -------------------------------------------------------------

# columns: job_id=1 submit=2 group=3 class=4 gpus=5 nodes=6 gpu_type=7 work=8 label=9
QUOTED_NEWLINE = WORKLOAD.replace(
    "j2,60,research/arch,train,16,2,H100,7200,\n", 'j2,60,"research\narch",train,16,2,H100,7200,\n'
)
UNTERMINATED = WORKLOAD.replace("j2,60,research/arch,", 'j2,60,"research/arch,')


@pytest.mark.parametrize(
    ("text", "at"),
    [(QUOTED_NEWLINE, "line 3, column 3 (group)"), (UNTERMINATED, "line 3, column 3 (group)")],
    ids=["quoted-newline", "unterminated-quote"],
)
def test_a_csv_record_spanning_lines_is_reported_at_its_first_line(
    tmp_path: Path, text: str, at: str
) -> None:
    f = write_inputs(tmp_path, workload=text)
    assert_input_error(run_check(f), str(f.workload), at, 'a quote (") that is never closed')


def test_rows_after_a_multiline_record_keep_their_own_line_numbers(tmp_path: Path) -> None:
    """A bad cell after a record that spans lines: its error names its own physical line."""
    text = "job_id,submit,group,class,gpus,work,user\n"
    text += "j1,0,product/serving,eval,8,3600,bob\n"
    text += "j2,0,product/serving,eval,x,3600,bob\n"
    f = write_inputs(tmp_path, workload=text)
    assert_input_error(run_check(f), str(f.workload), "line 3, column 5 (gpus)", "expected a number")


@pytest.mark.parametrize(
    ("text", "at"),
    [
        (PHILLY.replace("teamB\n", '"team\nB"\n', 1), "line 3, column 5 (cluster)"),
        (PHILLY.replace(",teamB\n", ',"teamB\n', 1), "line 3, column 5 (cluster)"),
    ],
    ids=["quoted-newline", "unterminated-quote"],
)
def test_a_trace_record_spanning_lines_is_reported_at_its_first_line(
    tmp_path: Path, text: str, at: str
) -> None:
    msg = raises(philly, tmp_path, text)
    assert f"philly.csv: {at}: a quoted cell runs from line 3" in msg, msg


# --- JSON Lines: one type rule, duplicate keys, nesting ---------------------------------------

JOB = {"job_id": "j1", "submit": 0, "group": "product/serving", "class": "train", "gpus": 8, "work": 3600}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("gpus", "8", None),
        ("gpus", 8.0, None),
        ("gpus", 8.5, "expected a whole number"),
        ("gpus", True, "expected a number, got True"),
        ("gpus", [8], "expected a single value"),
        ("work", "1h", "expected a number"),
        ("submit", {"t": 0}, "expected a single value"),
        ("job_id", 17, "expected text (a JSON string)"),
        ("group", True, "expected text"),
        ("label", None, None),
        ("resumable", "yes", None),
        ("resumable", 2, "expected true or false"),
    ],
    ids=[
        "gpus-string",
        "gpus-2.0",
        "gpus-8.5",
        "gpus-true",
        "gpus-list",
        "work-duration-text",
        "submit-object",
        "job-id-number",
        "group-bool",
        "label-null",
        "resumable-yes",
        "resumable-2",
    ],
)
def test_json_lines_values_follow_the_csv_rule(
    tmp_path: Path, key: str, value: object, message: str | None
) -> None:
    """A JSON value is read as the same text in a CSV cell would be, and its JSON type must fit the
    key: numbers (or text holding one) for numbers, strings for text, true/false for booleans."""
    job = {**JOB, key: value}
    f = write_inputs(tmp_path, workload=json.dumps(job) + "\n", workload_name="jobs.jsonl")
    res = run_check(f)
    if message is None:
        assert res.exit_code == 0, res.output
    else:
        assert_input_error(res, str(f.workload), f"line 1, key {key}", message)


@pytest.mark.parametrize(
    ("line", "at", "message"),
    [
        ('{"job_id": "j1", "gpus": 8, "gpus": 4}', "line 1", "duplicate key 'gpus'"),
        ("[" * 100_000 + "]" * 100_000, "line 1", "nested too deeply"),
        ('{"job_id": ' + "1" * 5000 + "}", "line 1", "not valid JSON"),
        ('{"job_id": "j1"', "line 1, column 16", "not valid JSON"),
        ("[1, 2]", "line 1", "expected a JSON object"),
    ],
    ids=["duplicate-key", "deep-nesting", "5000-digit-int", "truncated", "not-an-object"],
)
def test_bad_json_lines_are_errors_at_their_line(tmp_path: Path, line: str, at: str, message: str) -> None:
    f = write_inputs(tmp_path, workload=line + "\n", workload_name="jobs.jsonl")
    assert_input_error(run_check(f), str(f.workload), at, message)


def test_yaml_and_csv_follow_the_same_rule_for_whole_numbers_and_booleans(tmp_path: Path) -> None:
    """gpus: "8" and 8.0 are 8 in the cluster YAML as in the workload; true is never a number."""
    for gpus, ok in (("'8'", True), ("8.0", True), ("true", False), ("8.5", False)):
        f = write_inputs(tmp_path, cluster=edit(CLUSTER, "gpus: 8,", f"gpus: {gpus},"))
        res = run("check", f.policy, "--cluster", f.cluster)
        assert (res.exit_code == 0) is ok, (gpus, res.output)
        assert "Traceback" not in res.output


def test_a_gzip_workload_is_read_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    f = write_inputs(tmp_path)
    gz = tmp_path / "jobs.csv.gz"
    gz.write_bytes(gzip.compress(WORKLOAD.encode()))
    res = run("check", f.policy, "--cluster", f.cluster, "--workload", gz)
    assert res.exit_code == 0 and "3 jobs" in res.output, res.output
    gz.write_bytes(gzip.compress(WORKLOAD.encode())[:40])
    assert_input_error(
        run("check", f.policy, "--cluster", f.cluster, "--workload", gz), str(gz), "", "damaged gzip"
    )
    gzl = tmp_path / "jobs.jsonl.gz"
    gzl.write_bytes(gzip.compress((json.dumps(JOB) + "\n").encode()))
    res = run("check", f.policy, "--cluster", f.cluster, "--workload", gzl)
    assert res.exit_code == 0 and "1 jobs" in res.output, res.output
