"""The churn metrics (docs/formats.md "Churn, overhead and waits by team and size"): the definitions
on hand-made events, and metrics.json against an independent computation from events.jsonl
(benchmarks/policy.py) on replays of the built-in scenarios."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.churn import Churn
from fairshare.replay.outputs import write_replay
from fairshare.replay.runner import inputs_from_scenario, run_strategy

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_policy", ROOT / "benchmarks" / "policy.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _submit(t: float, job: str, group: str, gpus: int = 1, resumable: bool = True) -> dict[str, Any]:
    return {
        "t": t,
        "type": "submit",
        "job": job,
        "group": group,
        "class": "train",
        "gpus": gpus,
        "nodes": 1,
        "gpu_types": None,
        "resumable": resumable,
        "restore": 60.0,
        "startup": 10.0,
    }


def _write(folder: Path, events: list[dict[str, Any]], window: str = "7d", extra: str = "") -> None:
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / "policy.yaml").write_text(f"window: {window}\n{extra}")
    nodes = [{"node": "n0", "gpus": 2, "gpu_type": "g"}, {"node": "n1", "gpus": 1, "gpu_type": "g"}]
    (folder / "cluster.json").write_text(json.dumps(nodes))
    groups = {"a": {"share_delivery": 1.0}, "b/x": {"share_delivery": 0.5}, "b": {"share_delivery": 0.9}}
    (folder / "metrics.json").write_text(
        json.dumps(
            {
                "policy": "fairshare",
                "groups": groups,
                "delivery_overall": 0.95,
                "preemptions": 3,
                "occupancy": 0.5,
            }
        )
    )


EVENTS = [
    _submit(0, "a1", "a", gpus=2),
    _submit(0, "b1", "b/x"),
    _submit(0, "b2", "b/x", resumable=False),
    {"t": 0, "type": "start", "job": "a1", "alloc": {"n0": 2}},
    # b1 takes from team a: not a flip-flop (nothing before)
    {"t": 1000, "type": "preempt", "job": "a1", "reason": "fair_share", "by": "b1", "lost_gpu_s": 100.0},
    {"t": 1000, "type": "start", "job": "b1", "alloc": {"n0": 1}},
    # a1 takes back from team b 500 s later: a flip-flop (b took from a within W)
    {"t": 1500, "type": "preempt", "job": "b1", "reason": "fair_share", "by": "a1", "lost_gpu_s": 50.0},
    {"t": 1500, "type": "start", "job": "a1", "alloc": {"n0": 2}},  # restart: restore 60 s x 2 GPUs
    # a drain: never a flip-flop
    {"t": 2000, "type": "preempt", "job": "a1", "reason": "drain", "by": None, "lost_gpu_s": 0.0},
    {"t": 2000, "type": "start", "job": "b2", "alloc": {"n1": 1}},
    {"t": 3000, "type": "finish", "job": "b2"},
    {"t": 3000, "type": "start", "job": "b1", "alloc": {"n1": 1}},  # restore 60 s
    {"t": 3300, "type": "finish", "job": "b1"},
    {"t": 3300, "type": "start", "job": "a1", "alloc": {"n0": 2}},  # restore 60 s x 2, runs 100 s
    {"t": 3400, "type": "end"},
]


def test_preemptions_flip_flops_overheads_and_waits_from_hand_made_events(tmp_path: Path) -> None:
    _write(tmp_path / "r", EVENTS)
    m = bench.measure(tmp_path / "r")
    c = m["churn"]
    assert m["preemptions"] == 3 and c["preempted_jobs"] == 2
    assert c["preemptions_per_preempted_job"] == {"p50": 1.5, "p99": 1.99, "max": 2}
    assert c["flip_flops"] == 1 and c["flip_flop_pct"] == pytest.approx(100 / 3)
    # runs x GPUs: a1 1000x2, b1 500x1, a1 500x2, b2 1000x1, b1 300x1, a1 100x2
    alloc = 2000 + 500 + 1000 + 1000 + 300 + 200
    assert m["allocated_gpu_h"] == pytest.approx(alloc / 3600)
    restarts = 60 * 2 + 60 + 60 * 2  # a1 at 1500, b1 at 3000, a1 at 3300
    assert c["restore_startup_gpu_h"] == pytest.approx(restarts / 3600)
    assert c["first_startup_gpu_h"] == pytest.approx((10 * 2 + 10 + 10) / 3600)
    assert c["lost_plus_restore_pct"] == pytest.approx(100 * (150 + restarts) / alloc)
    # waits: a1 0, b1 1000, b2 2000; teams a (a1) and b (b1, b2); sizes 1 (b1, b2) and 2-4 (a1)
    assert m["wait"]["wait_p50_s"] == 1000
    assert m["teams"]["b"] == {"jobs": 2, "wait_p50_s": 1500.0, "wait_p90_s": 1900.0}
    assert m["sizes"] == {
        "1": {"jobs": 2, "wait_p50_s": 1500.0, "wait_p90_s": 1900.0},
        "2-4": {"jobs": 1, "wait_p50_s": 0.0, "wait_p90_s": 0.0},
    }
    assert m["share"]["lowest"] == 0.9 and m["share"]["lowest_group"] == "b"


@pytest.mark.parametrize(
    ("extra", "bound", "above"),
    [("", 7 * 86400.0, 0), ("scheduling: {requeue_within: 1000s}\n", 1000.0, 2)],
    ids=["bound-is-the-window", "requeue-within-1000s"],
)
def test_requeue_waits_idle_while_fit_and_makespan_from_hand_made_events(
    tmp_path: Path, extra: str, bound: float, above: int
) -> None:
    _write(tmp_path / "r", EVENTS, extra=extra)
    o = bench.measure(tmp_path / "r")["overload"]
    # requeue waits: a1 1000 -> 1500 and 2000 -> 3300 (team a), b1 1500 -> 3000 (team b)
    rq = o["requeue"]
    assert rq["bound_s"] == bound and rq["requeues"] == 3 and rq["above_bound"] == above
    assert (rq["p50_s"], rq["max_s"]) == (1300.0, 1500.0)
    assert rq["teams"]["a"]["requeues"] == 2 and rq["teams"]["a"]["max_s"] == 1300.0
    assert rq["teams"]["b"]["p90_s"] == 1500.0
    assert o["makespan_s"] == 3300.0
    # some job waits over [0, 3300); 3 GPUs (n0: 2, n1: 1); allocated 2, 1, 2, 1, 1 over the spans
    # 0-1000-1500-2000-3000-3300; idle GPUs a waiting single-node job fits on: 1, 2, 1, 2, 2
    w = o["waiting"]
    assert w["span_s"] == 3300.0
    assert w["occupancy"] == pytest.approx(4800 / 9900)
    assert w["idle_while_fit_gpu_h"] == pytest.approx(5100 / 3600)
    assert w["idle_while_fit_pct"] == pytest.approx(100 * 5100 / 9900)


def test_a_drained_node_s_idle_gpus_are_not_idle_while_fit(tmp_path: Path) -> None:
    ev = [
        _submit(0, "a1", "a", gpus=2),
        _submit(0, "b1", "b/x"),
        {"t": 0, "type": "start", "job": "a1", "alloc": {"n0": 2}},
        {"t": 100, "type": "drain", "node": "n1", "deadline": 100},
        {"t": 200, "type": "undrain", "node": "n1"},
        {"t": 300, "type": "finish", "job": "a1"},
        {"t": 300, "type": "start", "job": "b1", "alloc": {"n0": 1}},
        {"t": 400, "type": "end"},
    ]
    _write(tmp_path / "r", ev)
    w = bench.measure(tmp_path / "r")["overload"]["waiting"]
    # b1 waits [0, 300); n1's idle GPU counts except while drained [100, 200)
    assert w["span_s"] == 300.0 and w["idle_while_fit_gpu_h"] == pytest.approx(200 / 3600)
    assert w["occupancy"] == pytest.approx(600 / (3 * 100 + 2 * 100 + 3 * 100))


def test_the_recorder_counts_the_hand_made_events_alike() -> None:
    """replay/churn.Churn, fed what the simulator tells it, gives what the events give."""
    churn = Churn(window=7 * 86400.0)
    team = {"a1": "a", "b1": "b", "b2": "b"}
    overhead = {"a1": (10.0, 60.0), "b1": (10.0, 60.0), "b2": (10.0, 10.0)}  # startup, restore|startup
    started: set[str] = set()
    for e in EVENTS:
        if e["type"] == "start":
            first = e["job"] not in started
            started.add(e["job"])
            churn.started(
                e["job"], e["t"], sum(e["alloc"].values()), overhead[e["job"]][0 if first else 1], first
            )
        elif e["type"] == "finish":
            churn.stopped(e["job"], e["t"])
        elif e["type"] == "preempt":
            churn.stopped(e["job"], e["t"])
            churn.preempted(e["job"], e["t"], team[e["job"]], team[e["by"]] if e["by"] else None)
    alloc, lost = 5000.0, 150.0
    got = churn.finalize(3400.0, alloc, lost)
    assert got["flip_flops"] == 1 and got["preempted_jobs"] == 2
    assert got["preemptions_per_preempted_job"] == {"p50": 1.5, "p99": 1.99, "max": 2}
    assert got["restore_startup_gpu_h"] == pytest.approx(300 / 3600)
    assert got["lost_plus_restore_pct"] == pytest.approx(100 * 450 / alloc)


def test_a_reversal_outside_the_window_is_no_flip_flop(tmp_path: Path) -> None:
    ev = [
        _submit(0, "a1", "a"),
        _submit(0, "b1", "b/x"),
        {"t": 0, "type": "start", "job": "a1", "alloc": {"n0": 1}},
        {"t": 10, "type": "preempt", "job": "a1", "reason": "fair_share", "by": "b1", "lost_gpu_s": 0.0},
        {"t": 10, "type": "start", "job": "b1", "alloc": {"n0": 1}},
        {"t": 200, "type": "preempt", "job": "b1", "reason": "fair_share", "by": "a1", "lost_gpu_s": 0.0},
        {"t": 200, "type": "start", "job": "a1", "alloc": {"n0": 1}},
        {"t": 300, "type": "end"},
    ]
    _write(tmp_path / "r", ev, window="100s")
    assert bench.measure(tmp_path / "r")["churn"]["flip_flops"] == 0
    _write(tmp_path / "w", ev, window="190s")  # t - t' = 190 s <= W: a flip-flop
    assert bench.measure(tmp_path / "w")["churn"]["flip_flops"] == 1


OFF = {
    "leaf_order": "submit",
    "preempt_budget": 0,
    "flip_guard": "0s",
    "fast_classes": [],
    "max_reservations": 1,
}


@pytest.mark.parametrize(
    ("scenario", "strategy", "scheduling"),
    [
        ("normal", "fairshare", {}),
        ("idle-return", "fairshare", {}),
        ("idle-return", "fairshare", OFF),  # the old behaviour: many flip-flops
        ("small-burst", "priority-labels", {}),
        ("maintenance-drain", "fairshare", {}),
    ],
    ids=str,
)
def test_metrics_json_agrees_with_the_events(
    tmp_path: Path, scenario: str, strategy: str, scheduling: dict[str, Any]
) -> None:
    data = SCENARIOS[scenario](1)
    policy = {**data.policy, "scheduling": {**data.policy.get("scheduling", {}), **scheduling}}
    inputs = inputs_from_scenario(dataclasses.replace(data, policy=policy))
    out = run_strategy(inputs, strategy)
    write_replay(tmp_path / strategy, inputs.cluster, inputs.policy_text, out)
    m = bench.measure(tmp_path / strategy)
    assert m["metrics_agree"], (out.result.metrics["churn"], m["churn"])
    assert m["preemptions"] > 0
    if scheduling:
        assert m["churn"]["flip_flops"] > 0, "the old behaviour makes flip-flops in idle-return"


def test_the_requeue_tail_counts_the_teams_new_and_requeued_starts_during_a_long_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("requeue_tail", ROOT / "benchmarks" / "requeue_tail.py")
    assert spec is not None and spec.loader is not None
    tail = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "requeue_tail", tail)  # its dataclasses look their module up
    spec.loader.exec_module(tail)
    start = [{"t": t, "type": "start", "job": j, "alloc": {"n0": 1}} for t, j in ((0, "a1"), (0, "a2"))]
    ev = [
        _submit(0, "a1", "a"),
        _submit(0, "a2", "a"),
        _submit(10, "a3", "a"),
        _submit(10, "a4", "a", gpus=2),
    ]
    ev += [
        *start,
        {"t": 100, "type": "preempt", "job": "a1", "reason": "fair_share", "by": None, "lost_gpu_s": 0},
        {"t": 200, "type": "preempt", "job": "a2", "reason": "fair_share", "by": None, "lost_gpu_s": 0},
        {"t": 300, "type": "start", "job": "a3", "alloc": {"n0": 1}},  # new, 1 GPU: counted
        {"t": 400, "type": "start", "job": "a4", "alloc": {"n0": 2}},  # new, 2 GPUs: larger, not counted
        {"t": 900, "type": "start", "job": "a2", "alloc": {"n0": 1}},  # requeued later than a1
        {"t": 1500, "type": "start", "job": "a1", "alloc": {"n0": 1}},  # a1 waited 1400 s
    ]
    _write(tmp_path / "r", ev)
    _, waits, _ = tail._read(tmp_path / "r" / "events.jsonl")
    assert [(w.job, w.t1 - w.t0) for w in waits] == [("a2", 700.0), ("a1", 1400.0)]
    tail.main([str(tmp_path / "r"), "--bound", "1000s", "--first-after", "250s"])
    out = capsys.readouterr().out.splitlines()
    # one wait above 1000 s (a1); during it team a started a3 (new) and a2 (requeued); from 250 s
    # into it (t >= 350) only a2, preempted after a1
    assert out[0] == "2 requeue waits, 1 longer than 1000s"
    assert out[-1] == "a 1 | 1 | 1, 1 | 0, 1, 0"
