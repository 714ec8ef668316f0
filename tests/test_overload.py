"""Issue 20's mechanisms on tiny replays: a requeued run goes first once it has waited
`requeue_first_after` (half of `requeue_within` by default), and reservations by estimates (jobs
that end before a reservation's expected start may use its GPUs; the reserved nodes are those
expected to be ready soonest)."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import events_of, job, replay, tiny_cluster, tiny_policy

H = 3600.0


def _starts(evs: list[dict[str, Any]]) -> list[tuple[str, float]]:
    return [(e["job"], e["t"]) for e in evs if e["type"] == "start"]


def _drained_once() -> dict[str, Any]:
    return tiny_cluster(
        nodes=1, maintenance=[{"nodes": ["n-000"], "start": "1000s", "deadline": "1000s", "end": "2000s"}]
    )


# a0 runs alone, a drain preempts it at t=1000; five new 8-GPU jobs of its team (3 h each) arrive
# meanwhile. Least attained service puts them first (a0 has run); the requeue boost puts a0 first
# once it has waited requeue_first_after (half of requeue_within by default).
REQUEUE = [job("a0", 0, "a", "train", 8, 10 * H)] + [
    job(f"a{i}", 500 + i, "a", "train", 8, 3 * H) for i in range(1, 6)
]


@pytest.mark.parametrize(
    ("scheduling", "restart_after"),
    [
        ({"requeue_within": "4h"}, "a1"),
        ({"requeue_within": "0s"}, "a5"),
        ({"requeue_within": "4h", "requeue_first_after": "0s"}, None),
        ({"requeue_within": "20h", "requeue_first_after": "5h"}, "a2"),
        ({"requeue_within": "20h"}, "a4"),
    ],
    ids=[
        "boost-after-2h-restarts-after-the-running-job",
        "boost-off-waits-for-every-new-job",
        "boost-at-once-restarts-when-the-drain-ends",
        "boost-after-5h-restarts-after-two-new-jobs",
        "boost-after-10h-restarts-after-four-new-jobs",
    ],
)
def test_a_requeued_run_goes_first_once_it_waited_requeue_first_after(
    scheduling: dict[str, str], restart_after: str | None
) -> None:
    evs = events_of(replay(tiny_policy(scheduling=scheduling), _drained_once(), REQUEUE))
    starts = _starts(evs)
    assert [e["reason"] for e in evs if e["type"] == "preempt"] == ["drain"]
    order = [j for j, _ in starts if j != "a0"]
    restart = [t for j, t in starts if j == "a0"][1]
    assert order == ["a1", "a2", "a3", "a4", "a5"]
    if restart_after is None:  # first in its leaf when the drain ends, ahead of a1
        assert restart == 2000.0
        return
    prev = starts[[j for j, _ in starts].index(restart_after)][1]
    # a0 restarts as soon as the job before it ends (3 h of work + 1 min startup)
    assert restart == pytest.approx(prev + 3 * H + 60)


def test_the_requeue_bound_is_the_metrics_bound_and_counts_the_waits_above_it() -> None:
    out = replay(tiny_policy(scheduling={"requeue_within": "4h"}), _drained_once(), REQUEUE)
    rq = out.result.metrics["requeue"]
    assert rq["bound_s"] == 4 * H and rq["requeues"] == 1 and rq["above_bound"] == 0
    off = replay(tiny_policy(scheduling={"requeue_within": "0s"}), _drained_once(), REQUEUE)
    rq = off.result.metrics["requeue"]
    assert rq["bound_s"] == 7 * 86400.0 and rq["max_s"] > 4 * 3 * H  # behind four 3-hour jobs


# One 8-GPU node, one team: r1 (4 GPUs, 2 h) and r2 (4 GPUs, 10 h) run; g (8 GPUs) waits and gets
# the node reserved (expected start: r2's estimated end). When r1 ends, `short` (1 GPU, 1 h) ends
# before that and may use the reserved GPUs; `long` (2 GPUs, 20 h) may not.
BACKFILL = [
    job("r1", 0, "a", "train", 4, 2 * H),
    job("r2", 0, "a", "train", 4, 10 * H),
    job("g", 60, "a", "train", 8, 1 * H),
    job("long", 120, "a", "train", 2, 20 * H),
    job("short", 180, "a", "train", 1, 1 * H),
]


@pytest.mark.parametrize(
    ("backfill", "short_starts_at_r1_end"),
    [(True, True), (False, False)],
    ids=["backfill-uses-the-reserved-gpus-until-the-expected-start", "without-backfill-they-stay-idle"],
)
def test_a_job_ending_before_a_reservations_expected_start_may_use_its_gpus(
    backfill: bool, short_starts_at_r1_end: bool
) -> None:
    policy = tiny_policy(scheduling={"reservation_backfill": backfill, "gang_reserve_after": "0s"})
    evs = events_of(replay(policy, tiny_cluster(nodes=1), BACKFILL))
    t = {j: ts for j, ts in reversed(_starts(evs))}  # first start of each
    r1_end = next(e["t"] for e in evs if e["type"] == "finish" and e["job"] == "r1")
    r2_end = next(e["t"] for e in evs if e["type"] == "finish" and e["job"] == "r2")
    assert (t["short"] == r1_end) is short_starts_at_r1_end
    assert t["g"] == r2_end  # the reservation's job is not delayed
    assert t["long"] >= t["g"]  # it would have ended after the expected start
    assert not [e for e in evs if e["type"] == "preempt"]


# The same node and reservation; two 1-GPU jobs of the same team queue behind each other (one
# queue: same leaf, same shape), the 20-hour one submitted first. The ordered walk drops the queue
# when its head cannot end before the expected start; the backfill step still reaches the 1-hour
# job behind it, which starts on the reserved GPUs when r1 ends.
@pytest.mark.parametrize(
    "first",
    ["long", "short"],
    ids=["short-job-behind-a-long-one-in-its-queue", "short-job-at-the-head-of-its-queue"],
)
def test_a_short_job_behind_a_long_one_in_its_queue_backfills_the_reserved_gpus(first: str) -> None:
    jobs = [
        *BACKFILL[:3],
        job("long", 120 if first == "long" else 180, "a", "train", 1, 20 * H),
        job("short", 180 if first == "long" else 120, "a", "train", 1, 1 * H),
    ]
    policy = tiny_policy(scheduling={"gang_reserve_after": "0s"})
    evs = events_of(replay(policy, tiny_cluster(nodes=1), jobs))
    t = {j: ts for j, ts in reversed(_starts(evs))}
    r1_end = next(e["t"] for e in evs if e["type"] == "finish" and e["job"] == "r1")
    r2_end = next(e["t"] for e in evs if e["type"] == "finish" and e["job"] == "r2")
    assert t["short"] == r1_end
    assert t["g"] == r2_end and t["long"] >= t["g"]


# ---------------------------------------------------------------- the bound's exemption
def _overload(steps: list[tuple[str, float, Any]]) -> dict[str, Any]:
    """Feed an Overload (bound 1000 s) a sequence of (what, t, arg) steps, then finalize at t=1e4.
    what: "sample" (arg: team a over-served?), "preempt" / "start" (arg: job)."""
    from fairshare.replay.overload import Overload

    o = Overload(1000.0)
    for what, t, arg in steps:
        if what == "sample":
            o.sample(t, {"a": arg})
        elif what == "preempt":
            o.preempted(arg, t)
        else:
            o.started(arg, "a/x", t)
    requeue: dict[str, Any] = o.finalize(1e4, {"j": "a/x", "k": "a/x"}, ["a"])["requeue"]
    assert o.finalize(1e4, {"j": "a/x", "k": "a/x"}, ["a"])["requeue"] == requeue  # finalize reads only
    return requeue


@pytest.mark.parametrize(
    ("steps", "exempt"),
    [
        ([("sample", 0, False), ("preempt", 50, "j"), ("sample", 100, True), ("sample", 200, True),
          ("start", 2000, "j")], 1),
        ([("preempt", 50, "j"), ("sample", 100, True), ("sample", 150, False), ("sample", 200, True),
          ("start", 2000, "j")], 0),
        ([("sample", 100, True), ("preempt", 150, "j"), ("start", 2000, "j")], 0),
        ([("sample", 100, False), ("preempt", 100, "j"), ("start", 2000, "j")], 0),
        ([("preempt", 50, "j"), ("sample", 100, True)], 1),
        ([("preempt", 50, "j"), ("sample", 100, False)], 0),
        ([("preempt", 50, "j"), ("preempt", 60, "k"), ("sample", 100, True), ("start", 150, "j"),
          ("sample", 200, False), ("start", 3000, "k")], 1),
    ],
    ids=["over-served-throughout", "dipped-once", "no-sample-in-the-span",
         "not-over-served-at-the-preemption", "censored-over-served", "censored-not-over-served",
         "one-of-two"],
)  # fmt: skip
def test_a_requeue_wait_is_exempt_only_if_its_team_was_over_served_at_every_sample_of_it(
    steps: list[tuple[str, float, Any]], exempt: int
) -> None:
    rq = _overload(steps)
    assert rq["exempt"] == exempt and rq["teams"]["a"]["exempt"] == exempt
    assert rq["not_exempt"]["requeues"] == rq["requeues"] - exempt
    assert rq["not_exempt"]["above_bound"] <= rq["above_bound"]


def test_only_the_over_served_teams_requeue_waits_are_exempt_from_the_bound() -> None:
    """Team b runs on the whole cluster while a is idle (owed all of it: no debt). a's jobs arrive
    while b's runs are protected: b keeps more than it is owed until their protection ends (window
    debt < 0), then a takes a run, and b's requeue wait passes while b is over-served over the
    window: exempt. A drain's requeue of a team alone (owed everything) is not; nor is b's when
    a arrives after b's protection (b over its share for an instant only)."""
    b_jobs = [job(f"b{i}", 0, "b", "train", 8, 30 * H) for i in range(2)]
    jobs = b_jobs + [job(f"a{i}", 600, "a", "train", 8, 20 * H) for i in range(2)]
    rq = replay(tiny_policy(), tiny_cluster(nodes=2), jobs).result.metrics["requeue"]
    assert rq["requeues"] >= 1 and rq["teams"]["b"]["requeues"] == rq["requeues"]
    assert rq["exempt"] == rq["teams"]["b"]["exempt"] >= 1
    assert rq["not_exempt"]["requeues"] == rq["requeues"] - rq["exempt"]
    late = b_jobs + [job(f"a{i}", 2 * H, "a", "train", 8, 20 * H) for i in range(2)]
    rq = replay(tiny_policy(), tiny_cluster(nodes=2), late).result.metrics["requeue"]
    assert rq["requeues"] >= 1 and rq["exempt"] == 0
    drained = replay(tiny_policy(), _drained_once(), REQUEUE).result.metrics["requeue"]
    assert drained["requeues"] == 1 and drained["exempt"] == 0
    assert drained["not_exempt"]["max_s"] == drained["max_s"]
