"""`fairshare audit export` then `fairshare explain --out EXPORT --job ID` explains every job of a
demo run (issue 18: it said "no job ... in this replay" for every job), and the exported events
follow the replay's format (FORMATS.md)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from fairshare.cli import main
from fairshare.report.explain import explain
from fairshare.service.storage.store import Store

from .live_helpers import ManualClock, make_loop, small_scenario
from .test_loop import run


def test_export_then_explain_explains_every_job_of_a_demo_run(tmp_path: Path) -> None:
    clock = ManualClock()
    url = f"sqlite:///{tmp_path}/fs.db"
    with Store.open(url, clock) as store:
        loop = make_loop(store, small_scenario(jobs=30), clock)
        run(loop, clock, 12 * 3600, step=600)
        assert loop.backend is not None
        loop.backend.submit(
            "api-1", {"group": "ops", "class": "debug", "gpus": 1, "estimate": 600.0}, clock.t
        )
        run(loop, clock, 1200, step=600)
        e = loop.engine
        assert e is not None
        jobs = sorted(e.info)
        loop._reset()
    out = tmp_path / "export"
    res = CliRunner().invoke(
        main, obj={"clock": clock}, args=["audit", "export", "--db", url, "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "end"
    assert {ev["type"] for ev in events} <= {"submit", "start", "preempt", "finish", "end"}
    submitted = {ev["job"] for ev in events if ev["type"] == "submit"}
    assert set(jobs) <= submitted and "api-1" in submitted
    for ev in events:
        if ev["type"] == "start":
            assert all(isinstance(n, str) and n for n in ev["alloc"]), ev  # node names, not indexes
    assert len(jobs) > 20
    for jid in jobs:
        text = explain(out, jid)
        assert text.startswith(f"job {jid} (") and "timeline:" in text, text
    shown = CliRunner().invoke(main, args=["explain", "--out", str(out), "--job", "api-1"])
    assert shown.exit_code == 0 and "job api-1" in shown.output, shown.output
