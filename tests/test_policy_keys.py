"""Issue 10's scheduling keys on tiny inputs: Slurm's main scheduler and backfill, the order within
a leaf, the preemption budget, the fast lane, several reservations per pass, and the keys' rules."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from conftest import events_of, job, make_inputs, replay, tiny_cluster, tiny_policy
from fairshare.core import Knobs, Node, TreeIndex, decide, get_strategy
from fairshare.engine import EngineSetup, EngineState
from fairshare.errors import InputError
from fairshare.inputs.scenarios import SCENARIOS
from fairshare.replay.runner import inputs_from_scenario, run_strategy
from fairshare.replay.sim import Simulator
from test_engine import Group, request

H = 3600.0


def starts(evs: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in evs:
        if e["type"] == "start":
            out.setdefault(e["job"], e["t"])
    return out


# ---------------------------------------------------------------------- the faithful incumbent
def _blocked_partition() -> list[dict[str, Any]]:
    # one 8-GPU node, one group (equal fair share: priority by age). A (4 GPUs) runs until 1060
    # (startup 60 s + 1000 s); B (8 GPUs) waits for it; C (4 GPUs, limit 460 s) fits before B's
    # reserved start; D (4 GPUs, 5,060 s) would delay B.
    return [
        job("A", 0, "a", "train", 4, 1000),
        job("B", 1, "a", "train", 8, 100),
        job("C", 2, "a", "train", 4, 400),
        job("D", 3, "a", "train", 4, 5000),
    ]


def test_slurm_blocks_behind_its_top_job_and_backfills_only_what_delays_no_reservation() -> None:
    out = replay(tiny_policy(), tiny_cluster(nodes=1), _blocked_partition(), "slurm-multifactor")
    s = starts(events_of(out))
    # the main scheduler starts nothing behind B; the backfill cycle after the one at t=1 (B's
    # arrival) is due at 31 s: C ends (31 + 460 = 491) before B's reserved start, D would not
    assert s == {"A": 0.0, "C": 31.0, "B": 1060.0, "D": 1220.0}
    decisions = [json.loads(d) for d in out.decisions]
    c = next(d for d in decisions if d["decision"] == "start" and d["job"] == "C")
    assert c["phase"] == "backfill" and c["backfill"]["planned_end"] == 491.0
    b = next(d for d in decisions if d["decision"] == "start" and d["job"] == "B")
    assert b["phase"] == "main"


def test_the_first_fit_variant_lets_d_delay_b() -> None:
    out = replay(tiny_policy(), tiny_cluster(nodes=1), _blocked_partition(), "slurm-multifactor-firstfit")
    s = starts(events_of(out))
    assert s["C"] == 2.0 and s["D"] == 462.0  # any job that fits starts
    assert s["B"] == 462.0 + 5060.0  # B waits for D


def test_backfill_plans_with_the_estimate_not_the_run_time() -> None:
    # C declares 2,000 s (it runs 400 s): by its estimate it would delay B, so it waits like D
    jobs = _blocked_partition()
    jobs[2] = {**jobs[2], "estimate": 2000}
    s = starts(events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs, "slurm-multifactor")))
    assert s["B"] == 1060.0 and s["C"] == 1220.0


# ---------------------------------------------------------------------- order within a leaf
def _engine(order: str) -> EngineState:
    tree = TreeIndex.build([Group("a", 50), Group("b", 50)])
    node = Node("n-000", "n", 8, "H100", 64.0, 512.0, "n-b0")
    knobs = Knobs(leaf_order=order)
    return EngineState(
        EngineSetup(tree, knobs, {"H100": 1.0}, (node,), 7 * 86400.0), get_strategy("fairshare")
    )


def _leaf_queue(e: EngineState) -> list[str]:
    return [jid for qk in e.pending.by_leaf[1] for _, jid in e.pending.queues[qk]]


@pytest.mark.parametrize(
    ("order", "expected"),
    [("submit", ["j1", "j2", "j3"]), ("las", ["j2", "j3", "j1"]), ("shortest", ["j3", "j1", "j2"])],
)
def test_a_leaf_orders_its_jobs_by_leaf_order(order: str, expected: list[str]) -> None:
    e = _engine(order)
    e.begin(0.0)
    e.submit(request("j1", "a", 1, 0.0, 8, estimate=5000.0))
    e.started("j1", ((0, 8),), 8.0)
    e.submit(request("j2", "a", 1, 1.0, 8, estimate=4000.0))
    e.submit(request("j3", "a", 1, 2.0, 8, estimate=100.0))
    e.begin(100.0)
    e.preempted("j1", "drain", None, 0.0, kept=3000.0)  # ran 100 s x 8 GPUs; 2,000 s of estimate left
    assert e.states["j1"].attained == 800.0 and e.states["j1"].preemptions == 1
    assert _leaf_queue(e) == expected


def test_leaf_order_is_fairshares_only() -> None:
    tree = TreeIndex.build([Group("a", 50), Group("b", 50)])
    node = Node("n-000", "n", 8, "H100", 64.0, 512.0, "n-b0")
    setup = EngineSetup(tree, Knobs(leaf_order="shortest"), {"H100": 1.0}, (node,), 7 * 86400.0)
    e = EngineState(setup, get_strategy("fifo"))
    e.submit(request("j1", "a", 1, 0.0, 8, estimate=5000.0))
    e.submit(request("j2", "a", 1, 1.0, 8, estimate=10.0))
    assert _leaf_queue(e) == ["j1", "j2"]


# ---------------------------------------------------------------------- budget, fast lane
def _max_preemptions(scheduling: dict[str, Any]) -> int:
    data = SCENARIOS["idle-return"](1)
    policy = {**data.policy, "scheduling": scheduling}
    out = run_strategy(inputs_from_scenario(dataclasses.replace(data, policy=policy)), "fairshare")
    count: dict[str, int] = {}
    for e in events_of(out):
        if e["type"] == "preempt":
            count[e["job"]] = count.get(e["job"], 0) + 1
    return max(count.values(), default=0)


def test_the_preemption_budget_bounds_preemptions_per_job() -> None:
    assert _max_preemptions({"flip_guard": "0s", "preempt_budget": 0}) > 1
    assert _max_preemptions({"flip_guard": "0s", "preempt_budget": 1}) == 1


def _own_backlog() -> list[dict[str, Any]]:
    # group a fills the node with eight 10-hour training runs; its debug job arrives past their
    # protection (30 min) and nothing else wants the node: no fair-share victim exists
    return [job(f"t{i}", 0, "a", "train", 1, 10 * H) for i in range(8)] + [
        job("dbg", H, "a", "debug", 1, 600)
    ]


def test_the_fast_lane_takes_a_no_larger_run_of_its_own_group() -> None:
    out = replay(tiny_policy(), tiny_cluster(nodes=1), _own_backlog())
    evs = events_of(out)
    assert starts(evs)["dbg"] == H
    pre = [e for e in evs if e["type"] == "preempt"]
    assert len(pre) == 1 and pre[0]["by"] == "dbg" and pre[0]["reason"] == "fair_share"
    record = next(json.loads(d) for d in out.decisions if '"decision":"preempt"' in d)
    assert record["fast_lane_preemption"] is True


def test_without_the_fast_lane_the_debug_job_waits_for_its_groups_backlog() -> None:
    pol = tiny_policy(scheduling={"fast_classes": []})
    evs = events_of(replay(pol, tiny_cluster(nodes=1), _own_backlog()))
    assert starts(evs)["dbg"] > 10 * H and not [e for e in evs if e["type"] == "preempt"]


def test_the_fast_lane_never_takes_a_larger_run() -> None:
    jobs = [job("big", 0, "a", "train", 8, 10 * H), job("dbg", H, "a", "debug", 1, 600)]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs))
    assert starts(evs)["dbg"] > 10 * H


# ---------------------------------------------------------------------- reservations
@pytest.mark.parametrize(("cap", "reserving"), [(0, 2), (1, 1)])
def test_each_waiting_job_reserves_unless_capped(cap: int, reserving: int) -> None:
    # four nodes full of a's runs; a's 16-GPU gang and 8-GPU job wait past gang_reserve_after
    # (30 min): with no cap each holds nodes of its own, with max_reservations 1 only the first
    pol = tiny_policy(scheduling={"max_reservations": cap})
    jobs = [job(f"a{i}", 0, "a", "train", 8, 10 * H) for i in range(4)]
    jobs += [job("g1", 10, "a", "train", 16, H), job("g2", 20, "a", "train", 8, H)]
    inputs = make_inputs(pol, tiny_cluster(nodes=4), jobs)
    sim = Simulator(inputs.policy, inputs.tree, inputs.cluster, inputs.jobs, "fairshare")
    assert sim.run(until=2 * H) is None
    d = decide(sim.engine.snapshot(), sim.strategy)
    held = [h.evidence["reserved_nodes"] for h in d.holds if "reserved_nodes" in h.evidence]
    assert len(held) == reserving
    assert len({n for nodes in held for n in nodes}) == sum(map(len, held)) == [2, 3][reserving - 1]


# ---------------------------------------------------------------------- the keys
def test_defaults_resolve_against_the_policy() -> None:
    knobs = make_inputs(tiny_policy(window="3d"), tiny_cluster(), []).policy.knobs()
    assert knobs.flip_guard == 3 * 86400.0 and knobs.fast_classes == ("debug",)
    assert (knobs.requeue_within, knobs.requeue_first_after) == (3 * 86400.0, 1.5 * 86400.0)
    set_within = tiny_policy(window="3d", scheduling={"requeue_within": "10h"})
    assert make_inputs(set_within, tiny_cluster(), []).policy.knobs().requeue_first_after == 5 * H
    assert (knobs.leaf_order, knobs.preempt_budget, knobs.max_reservations) == ("las", 3, 0)
    assert knobs.requeue_reserve_gpus == 8
    assert knobs.requeue_first_when_backlogged == 86400.0
    short = tiny_policy(window="1d")  # 1 d is not shorter than requeue_first_after (12 h): off
    assert make_inputs(short, tiny_cluster(), []).policy.knobs().requeue_first_when_backlogged == 0
    no_bound = tiny_policy(scheduling={"requeue_within": "0s"})
    assert make_inputs(no_bound, tiny_cluster(), []).policy.knobs().requeue_first_when_backlogged == 0
    backlog = tiny_policy(scheduling={"requeue_first_when_backlogged": "1d"})
    assert make_inputs(backlog, tiny_cluster(), []).policy.knobs().requeue_first_when_backlogged == 86400.0
    assert (knobs.bf_interval, knobs.bf_window, knobs.bf_resolution, knobs.bf_max_job_test) == (
        30.0,
        86400.0,
        60.0,
        500,
    )
    no_debug = tiny_policy()
    del no_debug["classes"]["debug"]
    assert make_inputs(no_debug, tiny_cluster(), []).policy.knobs().fast_classes == ()


@pytest.mark.parametrize(
    ("scheduling", "message"),
    [
        ({"fast_classes": ["interactive"]}, "no class 'interactive'"),
        ({"leaf_order": "class"}, "leaf_order"),
        ({"preempt_budget": -1}, "preempt_budget"),
        ({"preempt_budget": 2.5}, "preempt_budget"),
        ({"bf_resolution": "0s"}, "bf_resolution"),
        ({"bf_max_job_test": 0}, "bf_max_job_test"),
        ({"requeue_first_after": "8d"}, "requeue_first_after: .*longer than requeue_within"),
        ({"requeue_within": "1h", "requeue_first_after": "2h"}, "requeue_first_after"),
        ({"requeue_first_after": "-1s"}, "requeue_first_after"),
        (
            {"requeue_first_when_backlogged": "4d"},
            "requeue_first_when_backlogged: .*no effect: a requeued run goes first after requeue_first_after",
        ),
        (
            {"requeue_within": "0s", "requeue_first_when_backlogged": "1h"},
            "requeue_first_when_backlogged: .*no effect: requeue_within is 0s",
        ),
        ({"requeue_first_when_backlogged": "-1d"}, "requeue_first_when_backlogged"),
        ({"requeue_first_when_backlogged": "soon"}, "requeue_first_when_backlogged"),
        ({"requeue_reserve_gpus": -1}, "requeue_reserve_gpus"),
        ({"requeue_reserve_gpus": 8.5}, "requeue_reserve_gpus"),
        ({"requeue_reserve_gpus": True}, "requeue_reserve_gpus"),
    ],
)
def test_bad_keys_are_input_errors(scheduling: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        make_inputs(tiny_policy(scheduling=scheduling), tiny_cluster(), [])


@pytest.mark.parametrize(
    ("guard", "preempts"),
    [
        ("7d", [(3 * H, "B1", "deadline", "D")]),
        ("0s", [(3 * H, "A1", "deadline", "D"), (3 * H + 10, "B1", "fair_share", "A1")]),
    ],
)
def test_a_deadline_job_takes_its_own_teams_run_first_under_the_flip_guard(
    guard: str, preempts: list[tuple[float, str, str, str]]
) -> None:
    # a and b each run 4 of the node's 8 GPUs since t=0 (the same lost work: ties go to A1); b's
    # deadline job D is urgent at 3 h. With the guard on it takes its own team's run: no share
    # moves between teams. With the guard off it takes A1, and A1 takes B1 back 10 s later (the
    # requeue pass): a flip-flop.
    jobs = [
        job("A1", 0, "a", "train", 4, 10 * H),
        job("B1", 0, "b", "train", 4, 10 * H),
        job("D", 3 * H, "b", "eval", 4, H, deadline=4 * H + 300),
    ]
    pol = tiny_policy(scheduling={"flip_guard": guard})
    pre = [e for e in events_of(replay(pol, tiny_cluster(nodes=1), jobs)) if e["type"] == "preempt"]
    assert [(e["t"], e["job"], e["reason"], e["by"]) for e in pre] == preempts
