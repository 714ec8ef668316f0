"""Issue 9, class 6: smaller surprises. Emoji names draw without a matplotlib warning; untracked
CPUs and memory (0) are said; gzip input is read; invisible bidirectional controls and control
characters are refused in names; a deadline before its job's submit and a past review date warn;
`check` without a cluster says it judges dates against today."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import job, tiny_cluster, tiny_policy
from test_inputs import POLICY, WORKLOAD, assert_input_error, edit, run, run_check, write_inputs


def test_emoji_and_other_scripts_in_group_names_draw_without_a_warning(tmp_path: Path) -> None:
    policy = tiny_policy(tree=[{"name": "🚀 launch", "share": 50}, {"name": "研究", "share": 50}])
    jobs = [job(f"j{i}", i * 60.0, ["🚀 launch", "研究"][i % 2], "train", 8, 3600.0) for i in range(6)]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy, allow_unicode=True), encoding="utf-8")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(tiny_cluster()), encoding="utf-8")
    (tmp_path / "w.jsonl").write_text("".join(json.dumps(j) + "\n" for j in jobs), encoding="utf-8")
    args = ["compare", "--policy", "p.yaml", "--cluster", "c.yaml", "--workload", "w.jsonl", "--out", "o"]
    res = subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    for noise in ("Glyph", "UserWarning", "site-packages", "Traceback"):
        assert noise not in res.stderr, res.stderr
    assert "🚀 launch" in (tmp_path / "o" / "report.html").read_text(encoding="utf-8")


def test_a_pool_without_cpus_or_memory_is_said_to_not_track_them(tmp_path: Path) -> None:
    f = write_inputs(tmp_path)
    res = run_check(f)
    assert res.exit_code == 0, res.output
    assert "note: pool a100 gives no cpus or mem_gb (0 = not tracked)" in res.output
    assert "note: pool h100" not in res.output


def test_a_gzip_policy_is_read_and_gzip_of_binary_is_named(tmp_path: Path) -> None:
    p = tmp_path / "policy.yaml.gz"
    p.write_bytes(gzip.compress(POLICY.encode()))
    assert run("check", p).exit_code == 0
    p.write_bytes(gzip.compress(b"\xff\xfe\x00binary"))
    assert_input_error(
        run("check", p), str(p), "line 1, column 1", "gzip-compressed, but what it holds is not UTF-8 text"
    )


def test_a_binary_file_is_not_utf8_text(tmp_path: Path) -> None:
    f = write_inputs(tmp_path)
    f.workload.write_bytes(b"job_id,submit,group,class,gpus,work\nj1,\xff\xfe")
    assert_input_error(run_check(f), str(f.workload), "line 2, column 4", "not UTF-8 text (the byte 0xff)")


RLO = "\u202e"


@pytest.mark.parametrize(
    ("which", "old", "new", "at", "message"),
    [
        ("policy", "name: serving", f"name: 'serv{RLO}ing'", "tree[0].children[0].name", "U+202E"),
        ("policy", "owner: a@x", f"owner: 'a{RLO}@x'", "tree[0].owner", "RIGHT-TO-LEFT OVERRIDE"),
        ("policy", "  debug:", f"  'de{RLO}bug':", "classes['de\\u202ebug']", "U+202E"),
        ("policy", "H100: 1.0", "'H1\u200f00': 1.0", "gpu_rates['H1\\u200f00']", "U+200F"),
        (
            "policy",
            "name: serving",
            'name: "serv\\ting"',  # in YAML's double quotes, a backslash-t is a tab
            "tree[0].children[0].name",
            "control character U+0009",
        ),
        ("workload", "j1,", f"j{RLO}1,", "line 2, column 1 (job_id)", "U+202E"),
        ("workload", "j1,", '"j\n1",', "line 2, column 1 (job_id)", "a quoted cell runs from line 2"),
    ],
    ids=["group-name", "owner", "class-name", "gpu-type", "tab-in-name", "job-id", "newline-in-job-id"],
)
def test_invisible_controls_in_names_are_refused(
    tmp_path: Path, which: str, old: str, new: str, at: str, message: str
) -> None:
    if which == "policy":
        f = write_inputs(tmp_path, policy=edit(POLICY, old, new))
        path = f.policy
    else:
        f = write_inputs(tmp_path, workload=edit(WORKLOAD, old, new))
        path = f.workload
    res = run_check(f)
    assert_input_error(res, str(path), at, message)


def test_a_user_with_a_control_character_is_refused_in_json_lines(tmp_path: Path) -> None:
    row = {"job_id": "j1", "submit": 0, "group": "product/serving", "class": "eval", "gpus": 8, "work": 60}
    f = write_inputs(
        tmp_path, workload=json.dumps({**row, "user": "bo\u0000b"}) + "\n", workload_name="w.jsonl"
    )
    assert_input_error(run_check(f), str(f.workload), "line 1, key user", "control character U+0000")


def test_emoji_with_joiners_are_names(tmp_path: Path) -> None:
    f = write_inputs(tmp_path, policy=edit(POLICY, "name: serving", "name: '👩\u200d🔬 serving'"))
    f.workload.write_text(WORKLOAD.replace("product/serving", "product/👩\u200d🔬 serving"), encoding="utf-8")
    assert run_check(f).exit_code == 0


def test_a_deadline_before_submit_warns_once_with_the_count(tmp_path: Path) -> None:
    text = "job_id,submit,group,class,gpus,work,deadline\n"
    for jid, deadline in (("a", 50), ("b", 500), ("c", 7)):
        text += f"{jid},100,product/serving,eval,1,60,{deadline}\n"
    f = write_inputs(tmp_path, workload=text)
    res = run_check(f)
    assert res.exit_code == 0, res.output
    warnings = [line for line in res.output.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {f.workload}: line 2, column 7 (deadline): the deadline is 50s before the job's "
        "submit (deadlines are absolute times on the replay clock, not durations): it cannot be met "
        "(1 more job(s) too)"
    ]


def test_a_past_review_date_warns_in_check_and_in_compare(tmp_path: Path) -> None:
    f = write_inputs(tmp_path, policy=edit(POLICY, "owner: a@x", "owner: a@x\n    review: 1900-01-01"))
    res = run("check", f.policy, "--cluster", f.cluster)
    assert res.exit_code == 0, res.output
    expected = f"warning: {f.policy}: tree[0].review: the review date 1900-01-01 of product is past"
    assert expected + " (before the cluster's epoch, 2026-12-01)" in res.output
    res = run(
        "compare",
        "--policy",
        f.policy,
        "--cluster",
        f.cluster,
        "--workload",
        f.workload,
        "--out",
        tmp_path / "o",
    )
    assert res.exit_code == 0, res.output
    assert expected + " (before the epoch, 2026-12-01)" in res.output


def test_check_without_a_cluster_says_it_judges_dates_against_today(tmp_path: Path) -> None:
    f = write_inputs(tmp_path)
    res = run("check", f.policy)
    assert res.exit_code == 0, res.output
    today = dt.datetime.now(dt.UTC).date()
    assert f"expiry and review dates are judged against today, {today}" in res.output
    res = run("check", f.policy, "--cluster", f.cluster)
    assert "judged against today" not in res.output


def test_check_without_dates_says_nothing_about_today(tmp_path: Path) -> None:
    policy = yaml.safe_load(POLICY)
    policy.pop("exceptions")
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    res = run("check", tmp_path / "p.yaml")
    assert res.exit_code == 0 and "today" not in res.output, res.output
