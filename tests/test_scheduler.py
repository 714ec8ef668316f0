"""Behaviour of the scheduling core on tiny, hand-built clusters (numbers worked out in comments)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import events_of, job, replay, tiny_cluster, tiny_policy

H = 3600.0


def by_type(evs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in evs if e["type"] == kind]


def first_start(evs: list[dict[str, Any]], jid: str) -> float | None:
    return next((e["t"] for e in evs if e["type"] == "start" and e["job"] == jid), None)


def test_under_served_group_preempts_a_loan_only_when_its_protected_window_ends() -> None:
    # One 8-GPU node; group a fills it with eight 1-GPU training runs at t=0 (protected 30 min).
    # Group b asks for 1 GPU at t=60: b is owed 1 GPU, a is owed 7 and holds 8 (one is a loan).
    # The loan is reclaimable only once protected, at t = 1800.
    jobs = [job(f"a{i}", 0, "a", "train", 1, 10 * H) for i in range(8)] + [
        job("b0", 60, "b", "debug", 1, 600)
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs))
    pre = by_type(evs, "preempt")
    assert len(pre) == 1
    assert pre[0]["t"] == 1800.0 and pre[0]["reason"] == "fair_share" and pre[0]["by"] == "b0"
    # train: startup 60 s, progress 1740 s < first checkpoint at 1800 s -> all 1800 GPU-s lost
    assert pre[0]["lost_gpu_s"] == pytest.approx(1800.0)
    assert first_start(evs, "b0") == 1800.0


def _pass_times(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the time of every scheduling pass (every call of the core) in the replays that follow."""
    from fairshare.core import scheduler
    from fairshare.replay import sim

    times: list[float] = []
    real = scheduler.decide

    def recording(snap: Any, strategy: Any, explain: bool = False) -> Any:
        times.append(snap.now)
        return real(snap, strategy, explain)

    monkeypatch.setattr(sim, "decide", recording)
    return times


def test_protection_end_gets_a_pass_only_when_the_run_could_be_a_victim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Eight runs of a fill the node at t=7 (protected until 1807, off the 5-min retry grid); a's
    # ninth job waits. a alone has demand: owed the whole node, it is not over-served, so nothing
    # can preempt its runs when their protection ends and no pass is spent at 1807.
    times = _pass_times(monkeypatch)
    alone = [job(f"a{i}", 7, "a", "train", 1, 10 * H) for i in range(9)]
    replay(tiny_policy(), tiny_cluster(nodes=1), alone)
    assert times and 1807.0 not in times
    # with b waiting since t=60, a holds a loan: the protection end is a pass, and b preempts in it
    times.clear()
    evs = events_of(
        replay(tiny_policy(), tiny_cluster(nodes=1), [*alone, job("b0", 60, "b", "debug", 1, 600)])
    )
    assert 1807.0 in times
    assert [(e["t"], e["by"]) for e in by_type(evs, "preempt")] == [(1807.0, "b0")]


@pytest.mark.parametrize("taker_group", ["a", "b"], ids=["same-group", "other-group"])
def test_label_backoff_ends_when_a_lower_label_run_leaves_protection(taker_group: str) -> None:
    # priority-labels may take a lower label's run from any group, its own included. H (high) finds
    # no victims at 1750 (L is protected until 1800) and backs off to the grid (2100); L's
    # protection end at 1800 ends the backoff whichever group H belongs to.
    jobs = [
        job("L", 0, "a", "train", 8, 10 * H, label="low"),
        job("H", 1750, taker_group, "train", 8, H, label="high"),
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs, "priority-labels"))
    assert [(p["t"], p["job"], p["by"]) for p in by_type(evs, "preempt")] == [(1800.0, "L", "H")]


@pytest.mark.parametrize("expires", ["1850s", "1849s"], ids=["same-instant", "one-second-before"])
def test_a_protection_end_is_judged_after_the_instants_other_events(expires: str) -> None:
    # a runs 20 of 24 GPUs and, with an exception, is owed all 20: b's 8-GPU B1 (4 GPUs free) finds
    # no victims and backs off. a's runs leave protection at 1850; when the exception expires at
    # that same instant, a is over-served by then and B1 must preempt at 1850, as it does when the
    # expiry comes a second earlier.
    pol = tiny_policy(exceptions=[{"group": "a", "extra_share": 250, "expires": expires}])
    jobs = [
        job("A1", 50, "a", "train", 8, 10 * H),
        job("A2", 50, "a", "train", 8, 10 * H),
        job("A3", 50, "a", "train", 4, 10 * H),
        job("B1", 100, "b", "train", 8, H),
    ]
    evs = events_of(replay(pol, tiny_cluster(nodes=3), jobs))
    assert [(p["t"], p["job"]) for p in by_type(evs, "preempt")] == [(1850.0, "A3")]
    assert first_start(evs, "B1") == 1850.0


def test_fifo_never_preempts_for_fairness() -> None:
    jobs = [job(f"a{i}", 0, "a", "train", 1, 10 * H) for i in range(8)] + [
        job("b0", 60, "b", "debug", 1, 600)
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs, "fifo"))
    assert by_type(evs, "preempt") == []
    assert first_start(evs, "b0") == pytest.approx(10 * H + 60)  # when the first a-run finishes


def test_victim_is_the_run_that_loses_least_work() -> None:
    # A 3-GPU node. a's runs start at 0, 40 min and 59 min; b wants 1 GPU at 2 h.
    # Lost if preempted at 7200 s (train: startup 60 s, checkpoint every 1800 s of progress):
    #   a0: run 7200, progress 7140 -> kept 5400 -> lost 1800
    #   a1: run 4800, progress 4740 -> kept 3600 -> lost 1200
    #   a2: run 3660, progress 3600 -> kept 3600 -> lost 60
    jobs = [
        job("a0", 0, "a", "train", 1, 20 * H),
        job("a1", 2400, "a", "train", 1, 20 * H),
        job("a2", 3540, "a", "train", 1, 20 * H),
        job("b0", 7200, "b", "debug", 1, 600),
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1, gpus=3), jobs))
    pre = by_type(evs, "preempt")
    assert [(p["job"], p["t"]) for p in pre][:1] == [("a2", 7200.0)]
    assert pre[0]["lost_gpu_s"] == pytest.approx(60.0)


@pytest.mark.parametrize(
    ("b_jobs", "victims"),
    [([1, 1], ["a1", "a0"]), ([2], ["a2"])],
    ids=["1-gpu-jobs-take-1-gpu-runs-though-the-2-gpu-run-loses-less", "a-2-gpu-job-takes-the-2-gpu-run"],
)
def test_fair_share_never_takes_a_run_larger_than_the_job_it_starts(
    b_jobs: list[int], victims: list[str]
) -> None:
    # A 4-GPU node: a's runs a0 (1 GPU, at 0), a1 (1 GPU, at 40 min), a2 (2 GPUs, at 59 min); b asks
    # for 2 GPUs at 2 h (owed 2 of 4). Lost if preempted then: a0 1800, a1 1200, a2 2 x 60 = 120
    # GPU-s. a2 loses least but holds 2 GPUs: 1-GPU jobs take a1 and then a0 instead (taking a2 for
    # b0 would have freed b1's GPU too; the rule gives that up so that no larger run must find a
    # hole its size again: docs/policy.md, issue 20); a 2-GPU job takes a2.
    jobs = [
        job("a0", 0, "a", "train", 1, 20 * H),
        job("a1", 2400, "a", "train", 1, 20 * H),
        job("a2", 3540, "a", "train", 2, 20 * H),
    ] + [job(f"b{k}", 7200, "b", "train", g, 600) for k, g in enumerate(b_jobs)]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1, gpus=4), jobs))
    pre = by_type(evs, "preempt")
    assert [(p["job"], p["t"]) for p in pre] == [(v, 7200.0) for v in victims]
    assert all(first_start(evs, f"b{k}") == 7200.0 for k in range(len(b_jobs)))


def test_no_futile_preemption_when_freed_capacity_cannot_place_the_job() -> None:
    # Two 8-GPU nodes: a holds node 0 with one 8-GPU run, b holds 4 GPUs of node 1. b then asks for
    # a 16-GPU gang (2 x 8): preempting a frees only node 0; node 1 keeps b's own run, so preempting
    # would not make the gang placeable and must not happen.
    jobs = [
        job("a0", 0, "a", "train", 8, 10 * H),
        job("b0", 0, "b", "train", 4, 10 * H),
        job("b1", 60, "b", "train", 16, H),
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=2), jobs))
    assert by_type(evs, "preempt") == []


def test_equal_groups_with_whole_node_jobs_do_not_preempt_each_other_back_and_forth() -> None:
    # One 8-GPU node, equal shares, every job needs the whole node. Each group is owed 4 GPUs;
    # taking the node from the other would leave the taker at 2x its owed and the victim at 0, so
    # the exchange condition forbids it both ways: runs alternate as they finish, none is preempted.
    jobs = [job(f"{g}{i}", i, g, "train", 8, 2 * H) for i in range(3) for g in ("a", "b")]
    out = replay(tiny_policy(), tiny_cluster(nodes=1), jobs)
    evs = events_of(out)
    assert by_type(evs, "preempt") == []
    assert out.result.metrics["jobs"]["finished"] == 6


def test_hung_job_is_charged_then_preempted_for_no_progress_and_resumes() -> None:
    # debug: checkpoint 5 min, restore 30 s, max_stall 10 min. It hangs at 600 s of progress,
    # is preempted at 600 + 600 = 1200 s keeping 600 s (two checkpoints), lost (1200 - 600) x 1 GPU.
    jobs = [job("h", 0, "a", "debug", 1, 3600, stall_after=600)]
    out = replay(tiny_policy(), tiny_cluster(nodes=1), jobs)
    evs = events_of(out)
    pre = by_type(evs, "preempt")
    assert [(p["t"], p["reason"], p["lost_gpu_s"]) for p in pre] == [(1200.0, "no_progress", 600.0)]
    # restarts after the requeue delay (10 s), pays restore 30 s, does the remaining 3000 s
    starts = [e["t"] for e in evs if e["type"] == "start"]
    assert starts == [0.0, 1210.0]
    fin = by_type(evs, "finish")[0]["t"]
    assert fin == pytest.approx(1210 + 30 + 3000)
    # charged while hung: delivered = 1 GPU x (1200 + 3030) s
    assert out.result.metrics["groups"]["a"]["delivered_gpu_h"] == pytest.approx((1200 + 3030) / 3600)


def test_deadline_job_preempts_past_protection_when_fair_share_would_make_it_late() -> None:
    # Group a (share 90) fills the node with eight 10-hour runs; b (share 10) submits a 1-hour,
    # non-resumable eval at t=60 with deadline 60 + 2 h. Fair share alone would not take from a
    # (taking 1 GPU would leave b above its 0.8-GPU owed share), so the deadline reservation must:
    # latest start = 7260 - 3600 = 3660; urgent 15 min before, at 2760 > a's protection (1800).
    pol = tiny_policy(tree=[{"name": "a", "share": 90}, {"name": "b", "share": 10}])
    jobs = [job(f"a{i}", 0, "a", "train", 1, 10 * H) for i in range(8)] + [job("e", 60, "b", "eval", 1, H)]
    fs = replay(pol, tiny_cluster(nodes=1), jobs)
    evs = events_of(fs)
    pre = by_type(evs, "preempt")
    assert (pre[0]["t"], pre[0]["reason"], pre[0]["by"]) == (2760.0, "deadline", "e")
    assert fs.result.metrics["deadlines"] == {"jobs": 1, "met": 1, "met_pct": 100.0}
    fifo = replay(pol, tiny_cluster(nodes=1), jobs, "fifo")
    assert fifo.result.metrics["deadlines"]["met"] == 0


def _gang_stream() -> list[dict[str, Any]]:
    # Four 8-GPU nodes. Group a streams 1-GPU, 20-minute jobs every minute for two days (~20 GPUs
    # busy, spread over every node) and submits a 32-GPU gang (the whole cluster) at 1 h. Same
    # group, so fair-share preemption cannot help: only the reservation stops the starvation.
    jobs = [job(f"s{i:05d}", 60.0 * i, "a", "debug", 1, 1200) for i in range(2 * 24 * 60)]
    jobs.append(job("gang", H, "a", "train", 32, 2 * H))
    return jobs


def test_large_gang_is_not_starved_by_a_stream_of_small_jobs() -> None:
    cluster = tiny_cluster(nodes=4, per_block=4, horizon="3d")
    fs = events_of(replay(tiny_policy(), cluster, _gang_stream()))
    fifo = events_of(replay(tiny_policy(), cluster, _gang_stream(), "fifo"))
    fs_wait = (first_start(fs, "gang") or 3 * 86400) - H
    fifo_wait = (first_start(fifo, "gang") or 3 * 86400) - H
    # reservation after 30 min of waiting; the held nodes empty within the 20-minute job length
    assert fs_wait <= 30 * 60 + 20 * 60 + 60
    assert fifo_wait >= 10 * fs_wait


def test_drain_preempts_at_its_deadline_and_nothing_starts_on_a_draining_node() -> None:
    cluster = tiny_cluster(
        nodes=2, maintenance=[{"nodes": ["n-000"], "start": "1h", "deadline": "2h", "end": "3h"}]
    )
    jobs = [job("long", 0, "a", "train", 8, 10 * H)] + [
        job(f"d{i}", 3600 + 60 * i, "b", "debug", 1, 600) for i in range(20)
    ]
    evs = events_of(replay(tiny_policy(), cluster, jobs))
    pre = by_type(evs, "preempt")
    assert [(p["job"], p["t"], p["reason"]) for p in pre] == [("long", 7200.0, "drain")]
    for e in by_type(evs, "start"):
        if H <= e["t"] < 3 * H:
            assert "n-000" not in e["alloc"]
    assert [e["type"] for e in evs if e.get("node") == "n-000"] == ["drain", "undrain"]


def test_priority_labels_lets_a_high_label_preempt_a_low_one_past_protection() -> None:
    jobs = [job(f"a{i}", 0, "a", "train", 1, 10 * H, label="low") for i in range(8)] + [
        job("b0", 60, "b", "debug", 1, 600, label="high")
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs, "priority-labels"))
    pre = by_type(evs, "preempt")
    assert [(p["t"], p["reason"], p["by"]) for p in pre] == [(1800.0, "label", "b0")]


def test_priority_labels_with_equal_labels_equals_fifo() -> None:
    jobs = [
        job(f"j{i}", 30.0 * i, "ab"[i % 2], ("debug", "train")[i % 3 == 0], 1 + (i % 4), 1800 + 97 * i)
        for i in range(60)
    ]
    a = replay(tiny_policy(), tiny_cluster(nodes=2), jobs, "fifo").events
    b = replay(tiny_policy(), tiny_cluster(nodes=2), jobs, "priority-labels").events
    assert a == b


def test_reservation_is_audited_once_when_it_is_made() -> None:
    import json

    cluster = tiny_cluster(nodes=4, per_block=4, horizon="3d")
    out = replay(tiny_policy(), cluster, _gang_stream())
    reserves = [r for r in map(json.loads, out.decisions) if r["decision"] == "reserve"]
    assert reserves[0]["job"] == "gang"
    assert reserves[0]["t"] == pytest.approx(H + 1800, abs=60)  # after gang_reserve_after (30 min)
    assert [r["job"] for r in reserves].count("gang") == 1  # logged when made, not on every pass


@pytest.mark.parametrize(
    ("extra", "pool_type", "expected"),
    [
        ({}, "H100", 2.0),  # 2 GPUs x rate 1.0
        ({}, "A100", 1.0),  # 2 GPUs x rate 0.5
        ({"cpus": 32}, "H100", 4.0),  # 32 cpus / (64 cpus / 8 GPUs) = 4 GPU-equivalents dominate
        ({"mem_gb": 384}, "H100", 6.0),  # 384 GB / (512 GB / 8) = 6
        ({"cpus": 32}, "A100", 2.0),  # dominant 4 x rate 0.5
    ],
    ids=["gpus", "gpu-rate", "cpu-dominant", "mem-dominant", "cpu-dominant-rated"],
)
def test_charge_is_the_dominant_resource_priced_at_the_gpu_type(
    extra: dict[str, Any], pool_type: str, expected: float
) -> None:
    cluster = tiny_cluster(nodes=1)
    cluster["pools"][0]["gpu_type"] = pool_type
    out = replay(tiny_policy(), cluster, [job("j", 0, "a", "debug", 2, 600, **extra)])
    evs = events_of(out)
    assert by_type(evs, "submit")[0]["charge"] == pytest.approx(expected)
    assert by_type(evs, "start")[0]["charge"] == pytest.approx(expected)
    assert out.result.metrics["groups"]["a"]["delivered_gpu_h"] == pytest.approx(expected * 600 / 3600)


def test_lost_work_per_group_adds_up_to_the_metric_in_gpu_hours() -> None:
    jobs = [job(f"a{i}", 0, "a", "train", 1, 10 * H) for i in range(8)] + [
        job("b0", 60, "b", "debug", 1, 600)
    ]
    res = replay(tiny_policy(), tiny_cluster(nodes=1), jobs).result
    assert res.lost_gpu_h["a"] == pytest.approx(0.5)  # 1800 GPU-s
    assert sum(res.lost_gpu_h.values()) == pytest.approx(res.metrics["lost_work_gpu_h"])


def test_protection_above_the_class_cap_is_capped_and_reported() -> None:
    # train: max_protected 2h; the job asks for 5h
    out = replay(tiny_policy(), tiny_cluster(nodes=1), [job("j", 0, "a", "train", 1, 600, protected="5h")])
    sub = by_type(events_of(out), "submit")[0]
    assert sub["protected"] == 2 * H and sub["protected_capped"] is True


def test_per_type_metrics_on_a_heterogeneous_fleet() -> None:
    # H100 node (8 GPUs) and A100 node (8 GPUs, rate 0.5). a's job may only use A100; b's any type.
    cluster = {
        "pools": [
            {"name": "h", "count": 1, "gpus": 8, "gpu_type": "H100"},
            {"name": "g", "count": 1, "gpus": 8, "gpu_type": "A100"},
        ]
    }
    jobs = [job("a0", 0, "a", "debug", 8, 3600, gpu_type="A100"), job("b0", 0, "b", "debug", 8, 3600)]
    m = replay(tiny_policy(), cluster, jobs).result.metrics
    assert m["gpu_types"]["A100"]["gpus"] == 8 and m["gpu_types"]["H100"]["gpus"] == 8
    assert m["gpu_types"]["A100"]["allocated_gpu_h"] == pytest.approx(8.0)  # a0: 8 GPUs x 1 h
    assert m["gpu_types"]["H100"]["allocated_gpu_h"] == pytest.approx(8.0)  # b0 lands on the H100 node
    # a is the only group with demand for A100 capacity (rate 0.5 x 8 = 4/s): owed 4 GPU-eq h, got 4
    assert m["groups"]["a"]["by_type"]["A100"]["delivered_gpu_h"] == pytest.approx(4.0)
    assert m["groups"]["a"]["by_type"]["A100"]["share_delivery"] == pytest.approx(1.0)
    assert m["groups"]["b"]["by_type"]["H100"]["delivered_gpu_h"] == pytest.approx(8.0)
    assert m["groups"]["a"]["by_type"]["H100"]["owed_gpu_h"] == 0.0  # a cannot use H100


def test_a_job_in_preemption_backoff_is_retried_even_if_nothing_else_happens() -> None:
    # a1, a2 (group a) hold the 8-GPU node for 10 h; b1 arrives at 1740, inside their protection:
    # no victims yet, so b1 backs off. The retry must get its own pass (grid of 5 min: 2100).
    jobs = [
        job("a1", 0, "a", "train", 4, 10 * H),
        job("a2", 0, "a", "train", 4, 10 * H),
        job("b1", 1740, "b", "train", 4, H),
    ]
    evs = events_of(replay(tiny_policy(), tiny_cluster(nodes=1), jobs))
    pre = by_type(evs, "preempt")
    assert pre and pre[0]["by"] == "b1" and 1800 <= pre[0]["t"] <= 1740 + 2 * 300


def test_deadline_preemption_is_not_starved_by_the_fairness_attempt_cap() -> None:
    # r1 past protection on n-000, r2 protected on n-001. Four infeasible 16-GPU deadline gangs
    # come first; d5 (8 GPUs) can still meet its deadline by preempting r1 at once.
    t = 3600.0
    jobs = [job("r1", 0, "a", "train", 8, 10 * H), job("r2", t - 600, "a", "train", 8, 10 * H)]
    jobs += [job(f"d{i}", t, "b", "eval", 16, 3 * 3600, deadline=t + 3 * 3600 + 300) for i in range(1, 5)]
    jobs.append(job("d5", t, "b", "eval", 8, H, deadline=t + 4200))
    pol = tiny_policy(classes={**tiny_policy()["classes"], "eval": {"protected": "10m", "resumable": False}})
    out = replay(pol, tiny_cluster(nodes=2), jobs)
    assert first_start(events_of(out), "d5") is not None
    d5_start = first_start(events_of(out), "d5")
    assert d5_start is not None and d5_start + H <= t + 4200


def test_a_failed_shape_does_not_stop_another_group_from_preempting() -> None:
    # Shares a 1, b 4, c 4 on one 8-GPU node; c holds it with two 4-GPU runs (past protection at
    # 1800). At 1850 a1 (2 GPUs) finds no victims: owed 1.6 of a's 2 GPUs of demand, taking a 4-GPU
    # run would leave c (4 / 6.4 owed) worse served than a (2 / 1.6), so a1 backs off. At 1900 b1
    # (4 GPUs) arrives: a1 goes first in the pass, fails again (its 2-GPU shape fails), and b1, whose
    # shape is larger, must still preempt: owed 3.56, b after (4 / 3.56) = c after (4 / 3.56).
    pol = tiny_policy(tree=[{"name": "a", "share": 1}, {"name": "b", "share": 4}, {"name": "c", "share": 4}])
    jobs = [
        job("c1", 0, "c", "train", 4, 10 * H),
        job("c2", 0, "c", "train", 4, 10 * H),
        job("a1", 1850, "a", "train", 2, H),
        job("b1", 1900, "b", "train", 4, H),
    ]
    out = replay(pol, tiny_cluster(nodes=1), jobs)
    assert [p["by"] for p in by_type(events_of(out), "preempt") if p["t"] == 1900.0] == ["b1"]
    at_1900 = [json.loads(d) for d in out.decisions if json.loads(d)["t"] == 1900.0]
    assert ("hold", "a1", "no_capacity") in [(d["decision"], d["job"], d.get("reason")) for d in at_1900]


def test_deadline_preemption_still_wakes_when_fair_share_preemption_is_off() -> None:
    pol = tiny_policy(scheduling={"preemption": "none"})
    jobs = [job("r1", 0, "a", "train", 8, 10 * H), job("d1", 600, "b", "eval", 1, H, deadline=5700)]
    out = replay(pol, tiny_cluster(nodes=1), jobs)
    assert [(p["reason"], p["t"]) for p in by_type(events_of(out), "preempt")] == [("deadline", 1800.0)]
    assert out.result.metrics["deadlines"]["met"] == 1


def test_a_replay_without_jobs_ends_at_zero_before_any_maintenance() -> None:
    cluster = tiny_cluster(
        nodes=1, maintenance=[{"nodes": ["n-000"], "start": "2h", "deadline": "2h", "end": "3h"}]
    )
    out = replay(tiny_policy(), cluster, [])
    assert events_of(out) == [{"t": 0.0, "type": "end"}]


@pytest.mark.parametrize(
    ("maintenance", "where", "message"),
    [
        (
            [{"nodes": ["n-000"], "start": "1h", "deadline": "2h", "end": "2h"}],
            "maintenance[0].end",
            "must end after its deadline",
        ),
        (
            [
                {"nodes": ["n-000"], "start": "1h", "deadline": "2h", "end": "5h"},
                {"nodes": ["n-001", "n-000"], "start": "90m", "deadline": "10h", "end": "11h"},
            ],
            "maintenance[1].nodes[1]",
            "overlapping maintenance windows",
        ),
    ],
    ids=["end-at-deadline", "overlapping-windows"],
)
def test_maintenance_that_could_not_be_honoured_is_rejected(
    maintenance: list[dict[str, Any]], where: str, message: str
) -> None:
    from fairshare.errors import InputError

    with pytest.raises(InputError) as err:
        replay(
            tiny_policy(), tiny_cluster(nodes=2, maintenance=maintenance), [job("j", 0, "a", "debug", 1, 60)]
        )
    assert err.value.at == where and message in err.value.message


def test_stall_after_zero_is_rejected() -> None:
    from fairshare.errors import InputError

    with pytest.raises(InputError) as err:
        replay(tiny_policy(), tiny_cluster(nodes=1), [job("j", 0, "a", "train", 1, 600, stall_after=0)])
    assert "stall_after" in err.value.at and "> 0" in err.value.message


# a leaf (node 2) under a parent (node 1); `over` lists which of them is over-served (used > owed)
@pytest.mark.parametrize(
    ("policy", "over", "urgent", "expected"),
    [
        ("fairshare", (), False, False),
        ("fairshare", (2,), False, True),
        ("fairshare", (1,), False, True),
        ("fairshare", (), True, True),
        ("fifo", (1, 2), True, False),
        ("priority-labels", (), False, True),
        ("slurm-multifactor", (1, 2), True, False),
    ],
    ids=[
        "fair-share-nobody-over-served",
        "fair-share-leaf-over-served",
        "fair-share-parent-over-served",
        "fair-share-urgent-deadline",
        "fifo-never",
        "labels-any-run",
        "multifactor-never",
    ],
)
def test_a_run_may_be_a_victim_only_under_its_policys_rule(
    policy: str, over: tuple[int, ...], urgent: bool, expected: bool
) -> None:
    from fairshare.core.scheduler import may_be_victim
    from fairshare.core.strategies import get_strategy

    owed = [4.0, 4.0, 4.0]
    used = [5.0 if i in over else 4.0 for i in range(3)]
    assert may_be_victim(get_strategy(policy), (2, 1), used, owed, urgent) is expected
