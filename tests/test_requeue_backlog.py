"""`scheduling.requeue_first_when_backlogged` (issue 20; engine/requeue.py): a requeued run goes
first in its leaf at once when the leaf's oldest never-started waiting job has waited that long,
else when it first has, and at `requeue_first_after` at the latest.

Each case builds an engine state by hand (no replay): two 8-GPU nodes, teams a and b. a's run R
starts at 0 and is preempted at P; a's fresh jobs (never started) wait from their submit times.
Going first is `JobState.requeue_boost`, set by a timer at the instant it is due."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from conftest import a_request
from fairshare.core import Knobs
from fairshare.engine import EngineState
from fairshare.engine.serving import ServingState
from hand_engine import hand_engine, run

H = 3600.0
D = 86400.0
P = 10 * H  # R's preemption
KNOBS: dict[str, Any] = {
    "requeue_within": 7 * D,
    "requeue_first_after": 3.5 * D,
    "requeue_first_when_backlogged": D,
}


def _fresh(e: EngineState, jid: str, group: str, at: float, label: str = "medium") -> None:
    """A job of `group` submitted at `at` (the engine's clock is moved there)."""
    e.begin(at)
    e.submit(
        a_request(
            id=jid, group=group, leaf=e.tree.paths.index(group), submit=at, seq=len(e.states), label=label
        )
    )
    e.settle()


def _preempt_r(e: EngineState) -> None:
    e.begin(P)
    e.preempted("R", "fair_share", None, 0.0, 0.0)
    e.settle()


def _engine(**knobs: Any) -> EngineState:
    e = hand_engine({"a": 50.0, "b": 50.0}, Knobs(**{**KNOBS, **knobs}))
    e.begin(0.0)
    run(e, "R", "a", 8, 100 * H, H, 0)
    e.settle()
    return e


def _boosted_at(e: EngineState, until: float) -> float | None:
    """Step the engine's own timers up to `until`; when R first went first (None: not by then)."""
    while True:
        if e.states["R"].requeue_boost:
            return e.t
        nxt = e.next_time()
        if nxt is None or nxt > until:
            return None
        e.begin(nxt)
        e.settle()


@pytest.mark.parametrize(
    ("before", "after", "knobs", "expected"),
    [
        ((0.0,), (), {}, P + 18 * H),
        ((0.0,), (), {"requeue_first_when_backlogged": 8 * H}, P),
        ((5 * H, 0.5 * H), (), {"requeue_first_when_backlogged": 9.5 * H}, P),
        ((), (P + 2 * H,), {}, P + 30 * H),
        ((8 * H,), (P + H,), {}, P + 24 * H),
        ((), (), {}, P + 3.5 * D),
        ((0.0,), (), {"requeue_first_when_backlogged": 0.0}, P + 3.5 * D),
        (
            (),
            (P + 2 * H,),
            {"requeue_first_after": 0.5 * D, "requeue_first_when_backlogged": 0.45 * D},
            P + 0.5 * D,
        ),
    ],
    ids=[
        "goes-first-at-the-first-check-after-the-oldest-fresh-job-reaches-the-setting",
        "backlog-older-than-the-setting-at-the-preemption-goes-first-at-once",
        "the-oldest-of-several-fresh-jobs-counts",
        "no-backlog-at-the-preemption-a-later-arrival-counts-from-its-submit",
        "a-later-arrival-does-not-delay-an-older-backlog",
        "no-backlog-ever-goes-first-at-requeue-first-after",
        "off-goes-first-at-requeue-first-after",
        "requeue-first-after-comes-sooner",
    ],
)
def test_a_requeued_run_goes_first_when_its_leaf_is_backlogged(
    before: tuple[float, ...], after: tuple[float, ...], knobs: dict[str, Any], expected: float
) -> None:
    e = _engine(**knobs)
    for i, at in enumerate(sorted(before)):
        _fresh(e, f"f{i}", "a", at)
    _preempt_r(e)
    for i, at in enumerate(after):
        _fresh(e, f"g{i}", "a", at)
    assert _boosted_at(e, 8 * D) == pytest.approx(expected)


def test_the_check_moves_to_the_next_oldest_fresh_job_when_the_oldest_starts() -> None:
    e = _engine()
    _fresh(e, "old", "a", H)
    _fresh(e, "young", "a", 6 * H)
    _preempt_r(e)  # checks at 16, 22, 28, 34 h; the oldest fresh job (1 h) reaches 1 d at 25 h
    assert _boosted_at(e, 20 * H) is None
    e.begin(20 * H)
    e.started("old", ((1, 8),), 8.0)  # it starts before: the next oldest reaches 1 d at 30 h
    e.settle()
    assert _boosted_at(e, 33.9 * H) is None
    assert _boosted_at(e, 8 * D) == pytest.approx(34 * H)


def test_another_teams_backlog_does_not_count() -> None:
    e = _engine()
    _fresh(e, "b-old", "b", 0.0)
    _preempt_r(e)
    assert _boosted_at(e, 3 * D) is None  # a's own leaf has no fresh job: b's wait is not a's
    assert _boosted_at(e, 8 * D) == pytest.approx(P + 3.5 * D)


def test_labels_do_not_change_the_backlog_measure() -> None:
    """Labels split a leaf's queues; the oldest fresh job is found across them all."""
    by_label = {}
    for labels in (("medium", "medium"), ("low", "high"), ("high", "low")):
        e = _engine()
        _fresh(e, "x", "a", H, labels[0])
        _fresh(e, "y", "a", 2 * H, labels[1])
        _preempt_r(e)
        by_label[labels] = _boosted_at(e, 8 * D)
    assert list(by_label.values()) == pytest.approx([28 * H] * 3)  # x reaches 1 d at 25 h


def test_a_new_preemption_cancels_the_earlier_check() -> None:
    e = _engine()
    _fresh(e, "old", "a", 0.0)
    _preempt_r(e)
    e.begin(12 * H)
    e.started("R", ((0, 8),), 8.0)  # R runs again before its check at 1 d
    e.settle()
    e.begin(23 * H)
    e.preempted("R", "fair_share", None, 0.0, 0.0)  # the oldest fresh job has waited 23 h
    e.settle()
    assert _boosted_at(e, 28.9 * H) is None  # the first preemption's checks ended when R ran
    assert _boosted_at(e, 8 * D) == pytest.approx(29 * H)


def test_the_fresh_index_is_the_pending_jobs_that_never_started_after_any_sequence() -> None:
    """The class of defect: an index kept beside the queues drifts from them. A random sequence of
    submits, starts, preemptions, finishes and cancels; after each step the per-leaf index equals
    the never-started pending jobs, oldest first."""
    rng = random.Random(7)
    hand = hand_engine({"a": 50.0, "b": 30.0, "c": 20.0}, Knobs(**KNOBS), nodes=4)
    e = ServingState(hand.setup, hand.strategy)  # its policy and node changes rebuild the queues
    t, free = 0.0, {i: 8 for i in range(4)}
    where: dict[str, int] = {}
    for step in range(400):
        t += rng.choice((0.0, 60.0, 600.0))
        e.begin(t)
        op = rng.random()
        pending, running = sorted(e.pending.jobs), sorted(e.running)
        if op < 0.4 or not (pending or running):
            g = rng.choice("abc")
            e.submit(
                a_request(
                    id=f"j{step}",
                    group=g,
                    leaf=e.tree.paths.index(g),
                    submit=t,
                    gpus=1,
                    charge=1.0,
                    seq=len(e.states),
                    label=rng.choice(("low", "medium", "high")),
                )
            )
        elif op < 0.65 and pending:
            jid = rng.choice(pending)
            node = max(free, key=lambda i: (free[i], -i))
            if free[node]:
                e.started(jid, ((node, 1),), 1.0)
                free[node] -= 1
                where[jid] = node
        elif op < 0.8 and running:
            jid = rng.choice(running)
            e.preempted(jid, "fair_share", None, 0.0, 0.0)
            free[where.pop(jid)] += 1
        elif op < 0.9 and running:
            jid = rng.choice(running)
            e.finished(jid)
            free[where.pop(jid)] += 1
        elif op < 0.95 and pending:
            e.cancelled(rng.choice(pending))
        elif op < 0.975:
            order = rng.choice(("las", "submit", "shortest"))
            e.reconfigure(dataclasses.replace(e.setup, knobs=Knobs(**{**KNOBS, "leaf_order": order})))
        else:
            extra = len(e.nodes)
            e.set_nodes((*e.nodes, dataclasses.replace(e.nodes[0], name=f"n-{extra:03d}")))
        e.settle()
        expected: dict[int, list[tuple[float, int, str]]] = {}
        for jid, job in sorted(e.pending.jobs.items()):
            if e.states[jid].starts == 0:
                expected.setdefault(job.leaf, []).append((job.submit, job.seq, jid))
        assert {k: v for k, v in e.pending.fresh.items()} == {k: sorted(v) for k, v in expected.items()}, step
