"""The operator's commands over the live API (issue 18): status, jobs, jobs explain, exception
grant/list/end, policy diff; an API refusal is one error line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fairshare.cli import main

from .live_helpers import Live


def cli(live: Live, *args: str, who: str = "admin") -> tuple[int, str, str]:
    runner = CliRunner()
    res = runner.invoke(main, [*args, "--token", live.secrets[who]], obj={"http": live.client})
    return res.exit_code, res.stdout, res.stderr


def test_status_jobs_and_explain_read_the_api(live: Live) -> None:
    code, out, _ = cli(live, "status")
    assert code == 0 and "loop: writer (healthy)" in out and "queue:" in out, out
    code, out, _ = cli(live, "jobs", "--state", "pending", "--group", "ml")
    assert code == 0, out
    shown = [line.split()[1] for line in out.splitlines()[1:-1]]
    api = live.get("viewer", "/api/jobs?state=pending&group=ml").json()["jobs"]
    assert shown == [j["id"] for j in api] and shown, out  # the queue's order, filtered
    code, out, _ = cli(live, "jobs", "explain", shown[0])
    assert code == 0 and out.startswith(f"{shown[0]} waits") and "#" in out, out
    code, _, err = cli(live, "jobs", "explain", "nonesuch")
    assert code == 2 and err.startswith("error: GET /api/jobs/nonesuch/explain: HTTP 404"), err


def test_exceptions_granted_listed_and_ended_and_refusals(live: Live) -> None:
    code, out, _ = cli(live, "exception", "grant", "ml/nlp", "--extra-share", "5", "--expires-in", "2d",
                       "--reason", "paper")  # fmt: skip
    assert code == 0 and out.startswith("exception ") and "ml/nlp +5" in out, out
    ex_id = out.split()[1].rstrip(":")
    code, out, _ = cli(live, "exception", "list")
    assert code == 0 and "ml/nlp" in out and "paper" in out
    code, out, _ = cli(live, "exception", "end", ex_id)
    assert code == 0 and f"exception {ex_id} ended" in out
    code, _, err = cli(live, "exception", "grant", "ml/nlp", "--extra-share", "1e16", "--expires-in", "2d",
                       "--reason", "x")  # fmt: skip
    assert code == 2 and "extra_share" in err and "1,000,000,000,000" in err, err
    code, _, err = cli(live, "exception", "list", who="nlp")
    assert code == 0
    code, _, err = cli(live, "exception", "grant", "ops", "--extra-share", "1", "--expires-in", "1d",
                       "--reason", "x", who="viewer")  # fmt: skip
    assert code == 2 and "HTTP 403" in err


@pytest.mark.parametrize(
    ("change", "expect"),
    [("share", "~ ops: share 40 -> 45"), ("leaf", "+ ml/audio (share 10)"), ("window", "~ window: 7d -> 14d"),
     ("class", "- classes.eval")],
    ids=["share", "leaf", "window", "class"],
)  # fmt: skip
def test_policy_diff_says_what_a_push_would_change(
    live: Live, tmp_path: Path, change: str, expect: str
) -> None:
    text = live.get("viewer", "/api/policy").json()["text"]
    data = yaml.safe_load(text)
    if change == "share":
        data["tree"][1]["share"] = 45
    elif change == "leaf":
        data["tree"][0]["children"].append({"name": "audio", "share": 10})
    elif change == "window":
        data["window"] = "14d"
    else:
        del data["classes"]["eval"]
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, _ = cli(live, "policy", "diff", str(f))
    assert code == 0 and out.strip() == expect, out


def test_the_audit_record_of_a_policy_change_lists_what_changed(live: Live) -> None:
    data = yaml.safe_load(live.get("viewer", "/api/policy").json()["text"])
    data["tree"][1]["share"] = 45
    data["window"] = "14d"
    r = live.client.put(
        "/api/policy", headers=live.h("admin"), json={"text": yaml.safe_dump(data), "note": "n"}
    )
    assert r.status_code in (200, 201), r.text
    records = live.get("admin", "/api/decisions?kind=policy_version&order=desc&limit=1").json()["decisions"]
    assert records[0]["evidence"]["changes"] == ["~ ops: share 40 -> 45", "~ window: 7d -> 14d"]
