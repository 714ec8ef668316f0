"""Forecast of the next execution opportunity (engine.forecast) and its accuracy in a replay."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from conftest import events_of, job, make_inputs, tiny_cluster, tiny_policy
from fairshare.cli import main
from fairshare.engine.forecast import forecast_starts
from fairshare.replay.results import ReplayOutput
from fairshare.replay.runner import run_strategy
from fairshare.replay.sim import Simulator


def _queue(estimate_factor: float = 1.0) -> list[dict[str, object]]:
    """One 8-GPU node, filled for an hour by a; b's job arrives at 10 s and must wait for it."""
    return [
        job("fill", 0.0, "a", "train", 8, 3600.0, estimate=3600.0 * estimate_factor),
        job("next", 10.0, "b", "train", 8, 600.0, estimate=600.0 * estimate_factor),
        job("last", 20.0, "a", "train", 8, 600.0, estimate=600.0 * estimate_factor),
    ]


def _first_start(out: ReplayOutput, jid: str) -> float:
    return float(next(e["t"] for e in events_of(out) if e["type"] == "start" and e["job"] == jid))


def test_with_true_estimates_and_no_new_arrivals_the_forecast_is_the_start() -> None:
    inputs = make_inputs(tiny_policy(), tiny_cluster(nodes=1, gpus=8), _queue())
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, "fairshare")
    assert sim.run(until=20.0) is None
    before = copy.deepcopy(sim.engine)
    starts = forecast_starts(sim.engine, ["next", "last"])
    # fill: startup 60 s + 3600 s -> ends at 3660; next runs 60 + 600 -> 4320; last starts then
    assert starts == {"next": 3660.0, "last": 4320.0}
    # the engine was not touched: its queues, runs, ledger and timers are as before
    assert sim.engine.timers == before.timers and sim.engine.t == before.t
    assert list(sim.engine.pending.jobs) == list(before.pending.jobs)
    assert sim.engine.ledger.sums.tolist() == before.ledger.sums.tolist()
    out = sim.run()
    assert (_first_start(out, "next"), _first_start(out, "last")) == (3660.0, 4320.0)


def test_overstated_estimates_make_the_forecast_late_and_the_replay_measures_it() -> None:
    # users declare twice the true run time: the scheduler expects fill to end at 60 + 7200
    inputs = make_inputs(tiny_policy(), tiny_cluster(nodes=1, gpus=8), _queue(2.0))
    out = run_strategy(inputs, "fairshare", forecast=3)
    fc = out.result.metrics["forecast"]
    assert fc["sampled_every"] == 1
    # fill started at once (not sampled: it never waited); next and last were forecast on arrival
    assert fc["all"]["jobs"] == 2 and fc["all"]["no_forecast"] == 0
    # next: forecast 7260, actual 3660 -> 3600 s early; last: forecast 7260 + 60 + 1200 = 8520, actual 4320
    assert fc["all"]["error_p50_s"] < 0 and fc["all"]["within_10min_pct"] == 0.0
    records = [json.loads(d) for d in out.decisions if '"decision":"forecast"' in d]
    assert [(r["job"], r["start_at"]) for r in records] == [("next", 7260.0), ("last", 8520.0)]


def test_asking_for_forecasts_changes_no_event_and_no_other_metric() -> None:
    jobs = [job(f"j{i}", 30.0 * i, "ab"[i % 2], "train", 4 + 4 * (i % 2), 1800.0 + 97 * i) for i in range(24)]
    inputs = make_inputs(tiny_policy(), tiny_cluster(nodes=2, gpus=8), jobs)
    plain, asked = run_strategy(inputs, "fairshare"), run_strategy(inputs, "fairshare", forecast=10)
    assert asked.events == plain.events
    metrics = dict(asked.result.metrics)
    assert metrics.pop("forecast")["all"]["jobs"] > 0
    assert metrics == plain.result.metrics
    assert [d for d in asked.decisions if '"decision":"forecast"' not in d] == plain.decisions


def test_explain_shows_the_forecast_and_the_actual_start(tmp_path: Path) -> None:
    policy, cluster = tmp_path / "policy.yaml", tmp_path / "cluster.yaml"
    policy.write_text(yaml.safe_dump(tiny_policy()))
    cluster.write_text(yaml.safe_dump(tiny_cluster(nodes=1, gpus=8)))
    workload = tmp_path / "w.jsonl"
    workload.write_text("".join(json.dumps(j) + "\n" for j in _queue()))
    runner = CliRunner()
    args = ["--policy", str(policy), "--cluster", str(cluster), "--workload", str(workload)]
    res = runner.invoke(
        main, ["compare", *args, "--policies", "fairshare", "--forecast", "3", "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["explain", "--out", str(tmp_path / "o" / "fairshare"), "--job", "next"])
    assert res.exit_code == 0, res.output
    assert "forecast at t=10.0: start at t=3660.0; it started at t=3660.0 (on time)" in res.output
