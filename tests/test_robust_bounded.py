"""Issue 19, input side: every input is read through one bounded reader, limits hold while the file
streams, and every input error is one line at the right place.

Special files (FIFOs, devices, a symlink to /dev/zero) are refused before any open that could block;
a file over the size cap, a gzip that expands past it and an over-long line are refused at once;
a workload one row over the job limit is refused at that row without reading further; YAML control
characters, CSV quotes that never close, JSON Lines line numbers and lone surrogates are named at
their line and column. The YAML reader built on libyaml's events gives exactly `yaml.safe_load`'s
data, and the quick path for plain workload rows builds exactly the jobs the full path builds.
"""

from __future__ import annotations

import gzip
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from fairshare.core.tree import TreeIndex
from fairshare.errors import InputError
from fairshare.inputs import _yaml, limits
from fairshare.inputs._quick import Quick, QuickReader
from fairshare.inputs._validation import read_text
from fairshare.inputs.cluster import load_cluster
from fairshare.inputs.policy import load_policy
from fairshare.inputs.rows import Row
from fairshare.inputs.workload import _divisors, load_workload
from test_inputs import POLICY, WORKLOAD, Files, assert_input_error, run, run_check, write_inputs

BOUND_S = 10.0  # a special file must be refused at once: a blocking open would hit this instead


@contextmanager
def bounded(seconds: float = BOUND_S) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the body blocks, e.g. opening a FIFO."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"blocked for more than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _fifo(f: Files, which: str) -> tuple[Path, str]:
    p = f.path(which)
    p.unlink()
    os.mkfifo(p)
    return p, "is a named pipe (FIFO), not a regular file"


def _zero_link(f: Files, which: str) -> tuple[Path, str]:
    p = f.path(which)
    p.unlink()
    p.symlink_to("/dev/zero")
    return p, "is a character device, not a regular file"


def _folder(f: Files, which: str) -> tuple[Path, str]:
    p = f.path(which)
    p.unlink()
    p.mkdir()
    return p, "is a folder, not a file"


def _missing(f: Files, which: str) -> tuple[Path, str]:
    p = f.path(which)
    p.unlink()
    return p, "file not found"


SPECIAL: dict[str, Callable[[Files, str], tuple[Path, str]]] = {
    "fifo": _fifo,
    "symlink-to-dev-zero": _zero_link,
    "folder": _folder,
    "missing": _missing,
}


@pytest.mark.parametrize("which", ["policy", "cluster", "workload"])
@pytest.mark.parametrize("kind", list(SPECIAL))
def test_a_special_file_as_any_input_is_refused_at_once_in_one_line(
    tmp_path: Path, kind: str, which: str
) -> None:
    f = write_inputs(tmp_path)
    path, message = SPECIAL[kind](f, which)
    with bounded():
        assert_input_error(run_check(f), str(path), "", message)


@pytest.mark.parametrize(
    "args", [("check", "/dev/zero"), ("check", "/dev/null")], ids=["dev-zero", "dev-null"]
)
def test_a_device_named_directly_is_refused(args: tuple[str, ...]) -> None:
    with bounded():
        assert_input_error(run(*args), args[1], "", "is a character device, not a regular file")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("x" * 5000 + ".yaml", "the path name is too long for the system"),
        ("nofolder/policy.yaml", "file not found"),
    ],
    ids=["too-long", "missing-folder"],
)
def test_a_path_name_the_os_refuses_is_one_error_line(tmp_path: Path, name: str, message: str) -> None:
    path = str(tmp_path / name)
    assert_input_error(run("check", path), path, "", message)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a\0b.yaml", "the path name cannot be used: it contains a NUL character"),
        ("\ud800.yaml", "the path name cannot be used: surrogates not allowed"),
        ("x" * 5000, "the path name is too long for the system"),
    ],
    ids=["nul", "lone-surrogate", "too-long"],
)
def test_the_reader_turns_a_refused_path_name_into_an_input_error(
    tmp_path: Path, name: str, message: str
) -> None:
    path = tmp_path / name
    with pytest.raises(InputError) as err:
        read_text(path)
    assert err.value.where == str(path)
    assert message in err.value.message


@pytest.mark.parametrize(
    ("which", "content", "cap", "message"),
    [
        ("policy", POLICY.encode(), 100, "bytes, more than the limit of 100 bytes for one input file"),
        ("workload", WORKLOAD.encode() * 20, 1000, "bytes, more than the limit of 1,000 bytes"),
        ("workload", gzip.compress(WORKLOAD.encode() + b"\n" * 5000), 1000, "expands to more than"),
        ("cluster", gzip.compress(b"pools: []\n" + b"#" * 100_000), 10_000, "expands to more than"),
    ],
    ids=["policy-over-cap", "workload-over-cap", "gzip-workload-expands", "gzip-cluster-expands"],
)
def test_an_input_over_the_size_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str, content: bytes, cap: int, message: str
) -> None:
    f = write_inputs(tmp_path)
    f.path(which).write_bytes(content)
    monkeypatch.setenv("FAIRSHARE_MAX_INPUT_BYTES", str(cap))
    res = run_check(f)
    assert_input_error(res, str(f.path(which)), "", message)
    assert "FAIRSHARE_MAX_INPUT_BYTES" in res.output


def test_a_bad_size_cap_setting_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRSHARE_MAX_INPUT_BYTES", "lots")
    assert_input_error(
        run_check(write_inputs(tmp_path)), "FAIRSHARE_MAX_INPUT_BYTES", "'lots'", "whole number"
    )


def test_a_line_longer_than_the_limit_is_refused_without_reading_on(tmp_path: Path) -> None:
    long_line = "j9," + "9" * (limits.MAX_LINE_BYTES + 10) + "\n"
    f = write_inputs(tmp_path, workload=WORKLOAD + long_line)
    assert_input_error(run_check(f), str(f.workload), "line 5", "longer than 1,048,576 bytes")


@pytest.mark.parametrize(
    ("name", "row", "limit_line"),
    [
        ("jobs.csv", "j{i},0,product/serving,eval,1,,,60,\n", "line 5"),
        (
            "jobs.jsonl",
            '{{"job_id": "j{i}", "submit": 0, "group": "product/serving", "class": "eval", "gpus": 1, '
            '"work": 60}}\n',
            "line 4",
        ),
    ],
    ids=["csv", "jsonl"],
)
def test_the_job_limit_is_enforced_while_streaming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, row: str, limit_line: str
) -> None:
    """One row past the limit is refused at that row: the broken bytes after it are never read."""
    monkeypatch.setattr(limits, "MAX_JOBS", 3)
    header = WORKLOAD.splitlines(keepends=True)[0] if name.endswith(".csv") else ""
    text = header + "".join(row.format(i=i) for i in range(4))
    f = write_inputs(tmp_path, workload=text, workload_name=name)
    with f.workload.open("ab") as out:
        out.write(b"\xff\xfe not UTF-8, never reached\n")
    assert_input_error(run_check(f), str(f.workload), limit_line, "more than 3 jobs in one workload")


def test_the_yaml_value_limit_is_enforced_while_streaming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_yaml, "MAX_YAML_VALUES", 50)
    text = POLICY + "# filler\n" + "".join(f"x{i}: {i}\n" for i in range(100))
    f = write_inputs(tmp_path, policy=text)
    res = run_check(f)
    assert_input_error(res, str(f.policy), "line 16, column 10", "more than 50 values")


@pytest.mark.parametrize(
    ("which", "text", "at", "message"),
    [
        ("policy", POLICY.replace("owner: a@x", "owner: a\x01x"), "line 6, column 13", "U+0001"),
        ("policy", POLICY.replace("window: 7d", "window: 7d\x7f"), "line 1, column 11", "U+007F"),
        ("cluster", "pools:\n  - {name: h\x1b100}\n", "line 2, column 13", "U+001B"),
        (
            "policy",
            POLICY.replace("owner: a@x", 'owner: "a\\ud800"'),
            "line 6, column 16",
            "invalid Unicode character escape",
        ),
        (
            "policy",
            POLICY.replace("name: serving", 'name: "s\\udfff"'),
            "line 8, column 20",
            "invalid Unicode character escape",
        ),
        ("policy", POLICY.replace("owner: a@x", "owner: " + "a" * 300), "tree[0].owner", "300 characters"),
    ],
    ids=[
        "control-in-value",
        "delete-char",
        "escape-in-cluster",
        "surrogate-owner",
        "surrogate-name",
        "long-name",
    ],
)
def test_yaml_text_problems_are_named_at_their_place(
    tmp_path: Path, which: str, text: str, at: str, message: str
) -> None:
    f = write_inputs(tmp_path, **{which: text})
    assert_input_error(run_check(f), str(f.path(which)), at, message)


@pytest.mark.parametrize(
    ("workload", "at", "message"),
    [
        (WORKLOAD + 'j4,0,"product/serving,eval,1,,,60,\n', "line 5, column 3 (group)", "never closed"),
        (
            WORKLOAD + 'j4,0,"product/serving,eval,1,,,60,\n' + "x" * 140_000 + "\n",
            "line 5, column 3 (group)",
            "field larger than field limit",
        ),
        (WORKLOAD + "j4,0,product/serving,eval,1,,,60,\x00\n", "line 5, column 9 (label)", "label"),
        (WORKLOAD.replace("j3,", "j\ud7ff\x01,"), "line 4, column 1 (job_id)", "U+0001"),
        (WORKLOAD + "j5,0,product/serving,eval,1,,,60,high,extra\n", "line 5", "expected 9 cells, got 10"),
    ],
    ids=["unclosed-quote-at-end", "unclosed-quote-runs-long", "nul-in-label", "control-in-id", "extra-cell"],
)
def test_csv_errors_name_line_and_column(tmp_path: Path, workload: str, at: str, message: str) -> None:
    f = write_inputs(tmp_path, workload=workload)
    assert_input_error(run_check(f), str(f.workload), at, message)


def test_a_non_utf8_byte_is_named_at_its_line_and_column(tmp_path: Path) -> None:
    f = write_inputs(tmp_path)
    f.workload.write_bytes(WORKLOAD.encode() + b"j4,0,pro\xffduct/serving,eval,1,,,60,\n")
    assert_input_error(run_check(f), str(f.workload), "line 5, column 9", "not UTF-8 text (the byte 0xff)")
    f.policy.write_bytes(POLICY.encode().replace(b"owner: a@x", b"owner: a\xc3x"))
    assert_input_error(run_check(f), str(f.policy), "line 6, column 13", "not UTF-8 text (the byte 0xc3)")


ROW = '{{"job_id": "{id}", "submit": 0, "group": "product/serving", "class": "eval", "gpus": 1, "work": 60}}'


@pytest.mark.parametrize(
    "separator",
    ["\u2028", "\u2029", "\x0c", "\x1c", "\x85", "\r"],
    ids=[
        "line-separator",
        "paragraph-separator",
        "form-feed",
        "file-separator",
        "next-line",
        "carriage-return",
    ],
)
def test_json_lines_errors_are_on_the_right_line_whatever_the_text_holds(
    tmp_path: Path, separator: str
) -> None:
    """Only '\\n' ends a line: a line holding only a U+2028 or a form feed (blank, so skipped) used
    to count as two, and every later line number was one too high (line 5 reported as 6)."""
    rows = [ROW.format(id="j0"), separator, ROW.format(id="j1"), ROW.format(id="j2")]
    rows.append(ROW.format(id="j9").replace('"gpus": 1', '"gpus": "many"'))
    f = write_inputs(tmp_path, workload="\n".join(rows) + "\n", workload_name="jobs.jsonl")
    assert_input_error(run_check(f), str(f.workload), "line 5, key gpus", "expected a number, got 'many'")


@pytest.mark.parametrize(
    ("line", "at", "message"),
    [
        (ROW.format(id="j\\ud800"), "line 1, key job_id", "lone surrogate U+D800"),
        (ROW.format(id="j\\u0007"), "line 1, key job_id", "U+0007"),
        (ROW.format(id="j" * 300), "line 1, key job_id", "300 characters"),
    ],
    ids=["surrogate-id", "bell-in-id", "long-id"],
)
def test_json_lines_text_problems_are_named(tmp_path: Path, line: str, at: str, message: str) -> None:
    f = write_inputs(tmp_path, workload=line + "\n", workload_name="jobs.jsonl")
    assert_input_error(run_check(f), str(f.workload), at, message)


YAML_DOCS = {
    "scalars": "a: 1\nb: 1.5\nc: true\nd: ~\ne: '2'\nf: 2027-01-31\ng: 2027-01-31T10:00:00Z\n"
    "h: 0x1F\ni: 1_000\n",
    "yes-no": "a: yes\nb: No\nc: on\nd: off\ne: .inf\nf: -.Inf\ng: 1e3\nh: '1e3'\n",
    "anchors": "base: &b {x: 1, y: [1, 2]}\nother: *b\nlist: [*b, *b]\n",
    "merge": "base: &b {x: 1, y: 2}\nm: {<<: *b, y: 3, z: 4}\nn: {<<: [*b, {x: 9, w: 5}]}\n",
    "nested": "a:\n  - b: [1, {c: d}]\n  - !!str 5\n  - !!int '7'\n  - !!float 1\n",
    "block-text": "a: |\n  line one\n  line two\nb: >\n  folded\n  text\n",
    "unicode": 'ключ: значение\n🚀: "\\u00e9"\n',
    "empty-values": "a:\nb: []\nc: {}\nd: ''\n",
}


@pytest.mark.parametrize("text", list(YAML_DOCS.values()), ids=list(YAML_DOCS))
def test_the_event_reader_gives_what_safe_load_gives(text: str) -> None:
    got = _yaml.load(text, "t.yaml")
    want = yaml.safe_load(text)
    assert got == want
    assert repr(got) == repr(want)  # same types and key order too


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\na: 2\n", "duplicate key 'a' (first given at line 1)"),
        ("a: *nope\n", "found undefined alias"),
        ("a: 1\n---\nb: 2\n", "expected a single document"),
        ("a: " + "[" * 70 + "]" * 70 + "\n", "nested more than 64 levels deep"),
        ("a: !!python/object:os.system x\n", "is not supported here"),
        ("a: !!set {x}\n", "is not supported here"),
        ("a: 2027-02-30\n", "is not a date"),
    ],
    ids=[
        "duplicate-key",
        "undefined-alias",
        "two-documents",
        "too-deep",
        "python-tag",
        "set-tag",
        "bad-date",
    ],
)
def test_the_event_reader_refuses_what_the_rules_refuse(text: str, message: str) -> None:
    from fairshare.inputs._validation import parse_yaml

    with pytest.raises(InputError) as err:
        parse_yaml(text, "t.yaml")
    assert message in str(err.value)
    assert str(err.value).startswith("t.yaml: line ")


@pytest.mark.parametrize(
    ("n", "low", "high", "want"),
    [
        (12, 1, 12, [1, 2, 3, 4, 6, 12]),
        (12, 3, 5, [3, 4]),
        (9973, 1, 9973, [1, 9973]),
        (1, 1, 1, [1]),
        (36, 7, 100, [9, 12, 18, 36]),
    ],
    ids=["all", "window", "prime", "one", "square"],
)
def test_gang_sizes_are_the_divisors_in_range(n: int, low: int, high: int, want: list[int]) -> None:
    assert _divisors(n, low, high) == want


QUICK_WORKLOADS = {
    "plain": WORKLOAD,
    "required-only": "job_id,submit,group,class,gpus,work\nj1,0,product/serving,eval,8,60\n"
    "j2,5,research/arch,train,16,600\nj3,5,research/data,debug,3,1e3\nj4, 7 ,research/data,debug,2.0,60\n",
    "every-column": "job_id,submit,group,user,class,gpus,nodes,gpu_type,cpus,mem_gb,work,estimate,label,"
    "deadline,protected,resumable,checkpoint,stall_after\n"
    "j1,0,product/serving,ann,eval,8,1,H100,16,64,600,900,high,7200,90m,no,,\n"
    "j2,30,research/arch,bob,train,16,2,H100|A100,,,3600,,Low,100,2h,yes,10m,1800\n"
    "j3,60,research/data,,debug,4,,A100,8,,60,120,,,,true,1m,\n"
    "j4,90,research/data, cy ,train,2,,,, 100 ,60,,medium,90, 1h ,,,\n",
    "mixed-optional": "job_id,submit,group,class,gpus,work,estimate,user\nj1,0,product/serving,eval,8,60,,\n"
    "j2,5,research/arch,train,4,600,300,ann\nj3,1,research/data,debug,1,60, ,\n",
}


@pytest.mark.parametrize("text", list(QUICK_WORKLOADS.values()), ids=list(QUICK_WORKLOADS))
def test_the_quick_path_builds_exactly_the_jobs_of_the_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    f = write_inputs(tmp_path, workload=text)
    policy = load_policy(f.policy)
    tree = TreeIndex.build(policy.tree)
    cluster = load_cluster(f.cluster, policy)
    read = QuickReader.read
    taken: list[bool] = []

    def counted(self: QuickReader, row: Row) -> Quick | None:
        q = read(self, row)
        taken.append(q is not None)
        return q

    monkeypatch.setattr(QuickReader, "read", counted)
    quick = load_workload(f.workload, policy, tree, cluster)
    assert all(taken), taken  # every row of these went the quick way
    monkeypatch.setattr(QuickReader, "read", lambda self, row: None)
    full = load_workload(f.workload, policy, tree, cluster)
    assert quick == full


def test_check_reports_the_first_capped_job_as_before(tmp_path: Path) -> None:
    text = (
        "job_id,submit,group,class,gpus,work,protected\nj1,50,product/serving,eval,1,60,5h\n"
        "j0,10,product/serving,eval,1,60,3h\nj2,0,research/data,debug,1,60,\n"
    )
    res = run_check(write_inputs(tmp_path, workload=text))
    assert res.exit_code == 0, res.output
    assert "workload" in res.output and ": 3 jobs" in res.output
    assert (
        "note: 2 job(s) asked for more protection than their class's max_protected and were capped "
        "(first: j0, to 2h)" in res.output
    )
