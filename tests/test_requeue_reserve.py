"""`scheduling.requeue_reserve_gpus` (issue 20) at the core: a long-waiting requeued run of at
least that many GPUs reserves in its team's turn, and its leaf's later jobs wait for it.

Each case builds a small engine state by hand (no replay) and calls the core's `decide` once at
NOW. Two 8-GPU nodes, teams a and b (50/50); every run is protected for days, so no search finds
a victim. Node 0 runs b's B1 and a's a2 (4 GPUs each, estimated to end at 20 h); node 1 runs a's
a3 (7 GPUs, estimated to end at 30 h), one GPU free. a's A0 (8 GPUs) was preempted at 1000 s and
requeued (it goes first in its leaf at once: requeue_first_after 0s); its search at 8900 s found no
victims, so at NOW it is in the preemption backoff. At NOW b (owed 8, runs 4: first in the
fair-share walk) asks for 8 GPUs (B8), which fail; a's A1 (1 GPU, 50 h) was submitted at 8950 s.

Without the rule A0 is skipped (a shape at least as large failed in the pass and it may not
search again yet) and A1 takes node 1's free GPU: a team at or above its share gets its GPUs through
its small jobs while its whole-node run waits. With it, A0 reserves the node expected to be ready
soonest (node 0) and A1 waits behind it."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.core import Knobs, decide, get_strategy
from fairshare.core.snapshot import Decisions
from hand_engine import hand_engine, run, submit

H = 3600.0
NOW = 9000.0
LONG = 100 * H  # a protection no search outlasts


def _decide(**knobs: Any) -> Decisions:
    e = hand_engine({"a": 50.0, "b": 50.0}, Knobs(**knobs))
    e.begin(0.0)
    run(e, "A0", "a", 8, 10 * H, LONG, 0)
    e.settle()
    e.begin(1000.0)
    e.preempted("A0", "drain", None, 0.0, 0.0)
    run(e, "B1", "b", 4, 20 * H - 1000.0, LONG, 0)
    run(e, "a2", "a", 4, 20 * H - 1000.0, LONG, 0)
    run(e, "a3", "a", 7, 30 * H - 1000.0, LONG, 1)
    e.settle()
    e.begin(8900.0)
    e.settle()
    e.apply(decide(e.snapshot(), e.strategy))  # A0 alone waits: it searches, finds nothing
    assert e.states["A0"].preempt_retry_at > NOW  # in backoff at NOW
    e.begin(8950.0)
    submit(e, "A1", "a", 1, 50 * H, LONG)
    e.settle()
    e.begin(NOW)
    submit(e, "B8", "b", 8, H, LONG)
    e.settle()
    return decide(e.snapshot(), get_strategy("fairshare"))


BASE = {"requeue_within": 4 * H, "requeue_first_after": 0.0}


@pytest.mark.parametrize(
    ("knobs", "reserves"),
    [
        ({**BASE, "requeue_reserve_gpus": 8}, True),
        ({**BASE, "requeue_reserve_gpus": 1}, True),
        ({**BASE, "requeue_reserve_gpus": 0}, False),
        ({**BASE, "requeue_reserve_gpus": 16}, False),
        ({**BASE, "requeue_within": 5 * H, "requeue_reserve_gpus": 8}, False),
        ({**BASE, "requeue_first_after": 3 * H, "requeue_reserve_gpus": 8}, False),
    ],
    ids=[
        "8-gpu-run-waiting-half-the-bound-reserves-and-its-leaf-waits",
        "any-size-from-1-gpu",
        "off",
        "run-smaller-than-the-threshold",
        "waited-less-than-half-the-bound",
        "not-first-in-its-leaf-yet",
    ],
)
def test_a_long_waiting_requeued_run_reserves_in_its_teams_turn_and_its_leaf_waits(
    knobs: dict[str, Any], reserves: bool
) -> None:
    d = _decide(**knobs)
    assert not d.preempts
    holds = {h.job: h for h in d.holds}
    assert holds["B8"].reason == "no_victims"  # b went first and its 8 GPUs failed
    if reserves:
        assert d.starts == ()
        assert holds["A0"].evidence["requeue_reserve"] is True
        assert holds["A0"].evidence["reserved_nodes"] == ["n-000"]  # ready soonest (20 h)
        assert holds["A1"].reason == "reserved" and holds["A1"].evidence["behind"] == "A0"
    else:
        assert [(s.job, s.alloc) for s in d.starts] == [("A1", ((1, 1),))]
        assert "A0" not in holds  # skipped: no reservation, no search
