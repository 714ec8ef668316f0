"""Execution contracts of one run: overheads, progress, checkpoints, hangs, lost work — the
scheduler's side from the request (fairshare.core.contract) and the replay's truth
(fairshare.replay.truth).

FORMATS.md "Runs and progress", "Protection", "Hangs". Expected values by hand, arithmetic alongside.
"""

from __future__ import annotations

import dataclasses

import pytest

from conftest import a_request
from fairshare.core import contract
from fairshare.core.contract import latest_start, overhead_of, remaining
from fairshare.inputs.workload import Job
from fairshare.replay.truth import (
    RunPlan,
    hangs_in_run,
    kept_on_preempt,
    lost_gpu_s,
    plan_run,
    run_progress,
)

# A resumable 8-GPU training job: 1000 s of work, 60 s startup, 30 s restore, checkpoint every 100 s
# of progress, protected 600 s.
REQUEST = a_request(
    group="research",
    user="u",
    estimate=1000.0,
    checkpoint=100.0,
    startup=60.0,
)
TRAIN = Job(REQUEST, work=1000.0, stall_after=None)
# The same job, not resumable (checkpoint 0 as resolved by the workload loader).
EVAL = Job(dataclasses.replace(REQUEST, id="j2", cls="eval", resumable=False, checkpoint=0.0), 1000.0, None)


def job(**changes: object) -> Job:
    """TRAIN with some request fields or truth (`work`, `stall_after`) changed."""
    truth = {k: changes.pop(k) for k in ("work", "stall_after") if k in changes}
    request = dataclasses.replace(REQUEST, **changes)  # type: ignore[arg-type]
    return dataclasses.replace(TRAIN, request=request, **truth)  # type: ignore[arg-type]


# --- overheads and plan_run
def test_overhead_startup_on_first_start_restore_on_resumable_restart() -> None:
    assert overhead_of(TRAIN.request, restarted=False) == 60.0  # first start: startup
    assert overhead_of(TRAIN.request, restarted=True) == 30.0  # resumable restart: restore
    assert overhead_of(EVAL.request, restarted=False) == 60.0  # first start: startup
    assert overhead_of(EVAL.request, restarted=True) == 60.0  # non-resumable restart starts over: startup


@pytest.mark.parametrize(
    ("the_job", "t0", "kept", "restarted", "expected"),
    [
        # first start at 100: overhead 60, finish 100 + 60 + 1000 = 1160, protected to 100 + 600 = 700
        (TRAIN, 100.0, 0.0, False, RunPlan(60.0, 1160.0, None, 700.0)),
        # resumable restart at 2000 with 300 kept: restore 30, finish 2000 + 30 + (1000 - 300) = 2730,
        # protected to 2000 + 600 = 2600 (the overhead counts inside the protected window)
        (TRAIN, 2000.0, 300.0, True, RunPlan(30.0, 2730.0, None, 2600.0)),
        # non-resumable restart at 2000 (kept is always 0): startup 60, from zero: 2000 + 60 + 1000 = 3060
        (EVAL, 2000.0, 0.0, True, RunPlan(60.0, 3060.0, None, 2600.0)),
    ],
    ids=["first_start_pays_startup", "resumable_restart_pays_restore", "non_resumable_restart_from_zero"],
)
def test_plan_run(the_job: Job, t0: float, kept: float, restarted: bool, expected: RunPlan) -> None:
    assert plan_run(the_job, t0, kept, restarted, stall_done=False) == expected


# --- progress
@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (100.0, 0.0),  # inside the overhead: max(0, 0 - 60)
        (130.0, 0.0),  # still inside: max(0, 30 - 60)
        (160.0, 0.0),  # overhead just done
        (410.0, 250.0),  # 310 - 60
    ],
)
def test_run_progress_starts_after_the_overhead(t: float, expected: float) -> None:
    assert run_progress(TRAIN, t0=100.0, t=t, overhead=60.0, kept=0.0, stall_done=False) == (expected, False)


# --- checkpoints
@pytest.mark.parametrize(
    ("progress", "kept", "expected"),
    [
        (0.0, 0.0, 0.0),  # nothing done
        (99.0, 0.0, 0.0),  # before the first checkpoint
        (100.0, 0.0, 100.0),  # exactly at the first checkpoint
        (300.0, 0.0, 300.0),  # exactly at a multiple: 3 * 100
        (299.9999, 0.0, 200.0),  # just before it: floor(2.999999) * 100
        (350.0, 0.0, 300.0),  # between: floor(3.5) * 100
        (100.0, 900.0, 100.0),  # reaches the end exactly: min(100, 1000 - 900)
        (100.0, 950.0, 50.0),  # capped at the work left: min(100, 1000 - 950)
    ],
    ids=[
        "zero",
        "before_first",
        "at_first",
        "at_multiple",
        "just_before_multiple",
        "between",
        "at_work_end",
        "capped_at_work_left",
    ],
)
def test_kept_on_preempt_resumable(progress: float, kept: float, expected: float) -> None:
    assert kept_on_preempt(TRAIN, progress, kept) == pytest.approx(expected)


def test_kept_on_preempt_non_resumable_is_zero() -> None:
    assert kept_on_preempt(EVAL, 350.0, 0.0) == 0.0
    assert kept_on_preempt(job(resumable=True, checkpoint=0.0), 350.0, 0.0) == 0.0  # no checkpoint: nothing


# --- lost work
@pytest.mark.parametrize(
    ("the_job", "run", "expected"),  # run = (t0, t, overhead, kept before the run)
    [
        # run 0..410, progress 410 - 60 = 350, checkpoint keeps 300: lost (410 - 300) * 8 = 880
        (TRAIN, (0.0, 410.0, 60.0, 0.0), 880.0),
        # at a checkpoint: progress 460 - 60 = 400, keeps 400: lost (460 - 400) * 8 = 480 (the startup)
        (TRAIN, (0.0, 460.0, 60.0, 0.0), 480.0),
        # preempted during the startup: progress 0, lost the whole run 50 * 8 = 400
        (TRAIN, (0.0, 50.0, 60.0, 0.0), 400.0),
        # restart at 1000 with 300 kept, restore 30; at 1230 progress 200, keeps 200:
        # lost (230 - 200) * 8 = 240
        (TRAIN, (1000.0, 1230.0, 30.0, 300.0), 240.0),
        # non-resumable: the whole run is lost: 410 * 8 = 3280
        (EVAL, (0.0, 410.0, 60.0, 0.0), 3280.0),
    ],
    ids=[
        "resumable_between_checkpoints",
        "resumable_at_checkpoint",
        "during_overhead",
        "resumable_restart",
        "non_resumable_whole_run",
    ],
)
def test_lost_gpu_s(the_job: Job, run: tuple[float, float, float, float], expected: float) -> None:
    t0, t, overhead, kept = run
    assert lost_gpu_s(the_job, t0, t, overhead, kept, False) == pytest.approx(expected)
    # the scheduler's estimate from the request agrees while the run has not hung
    assert contract.lost_gpu_s(the_job.request, t0, t, overhead, None) == pytest.approx(expected)


# --- hangs
HANGS = job(stall_after=550.0)  # hangs once total progress reaches 550 (work 1000)


def test_hanging_job_plans_a_stall_not_a_finish() -> None:
    assert hangs_in_run(HANGS, kept=0.0, stall_done=False)
    # first start at 0: startup 60, progress reaches 550 at 60 + 550 = 610
    assert plan_run(HANGS, 0.0, 0.0, False, False) == RunPlan(60.0, None, 610.0, 600.0)
    # restart at 1000 with 500 kept: restore 30, 50 more progress -> stall at 1000 + 30 + 50 = 1080
    assert plan_run(HANGS, 1000.0, 500.0, True, False) == RunPlan(30.0, None, 1080.0, 1600.0)


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (300.0, (240.0, False)),  # 300 - 60 = 240 < 550
        (609.0, (549.0, False)),  # 609 - 60 = 549 < 550
        (610.0, (550.0, True)),  # reaches stall_after: stops
        (5000.0, (550.0, True)),  # holds the GPUs without progress: still 550
    ],
)
def test_run_progress_stops_at_stall_after(t: float, expected: tuple[float, bool]) -> None:
    assert run_progress(HANGS, t0=0.0, t=t, overhead=60.0, kept=0.0, stall_done=False) == expected


def test_run_progress_stall_counts_kept_progress() -> None:
    # restart with 500 kept: the run makes only 550 - 500 = 50 before it hangs
    progress = run_progress(HANGS, t0=1000.0, t=2000.0, overhead=30.0, kept=500.0, stall_done=False)
    assert progress == (50.0, True)


def test_hung_job_preempted_keeps_its_last_checkpoint() -> None:
    # hung since 610 with progress 550; preempted at 2000: keeps floor(5.5)*100 = 500 of the run,
    # lost = (2000 - 0 - 500) * 8 = 12000 GPU-s (charged all along, run length counts)
    progress, reached = run_progress(HANGS, 0.0, 2000.0, 60.0, 0.0, False)
    assert (progress, reached) == (550.0, True)
    assert kept_on_preempt(HANGS, progress, 0.0) == 500.0
    assert lost_gpu_s(HANGS, 0.0, 2000.0, 60.0, 0.0, False) == pytest.approx(12000.0)
    # the scheduler, told the run hung at 610, estimates the same loss without knowing stall_after
    assert contract.lost_gpu_s(HANGS.request, 0.0, 2000.0, 60.0, 610.0) == pytest.approx(12000.0)
    # not told of the hang, it would believe the run progressed all along: 1900 kept, lost 800
    assert contract.lost_gpu_s(HANGS.request, 0.0, 2000.0, 60.0, None) == pytest.approx(800.0)


@pytest.mark.parametrize("stall_after", [1000.0, 2000.0], ids=["equal_to_work", "above_work"])
def test_job_whose_stall_after_is_at_least_its_work_does_not_hang(stall_after: float) -> None:
    j = job(stall_after=stall_after)
    assert not hangs_in_run(j, kept=0.0, stall_done=False)
    # finishes normally: 0 + 60 + 1000 = 1060
    assert plan_run(j, 0.0, 0.0, False, False) == RunPlan(60.0, 1060.0, None, 600.0)
    # progress is never reported as a hang, even at the finish instant (60 + 1000)
    assert run_progress(j, 0.0, 1060.0, 60.0, 0.0, False) == (1000.0, False)
    assert run_progress(j, 0.0, 500.0, 60.0, 0.0, False) == (440.0, False)


def test_after_stall_done_the_job_does_not_hang_again() -> None:
    # preempted after hanging with 500 kept; the next runs run to completion
    assert not hangs_in_run(HANGS, kept=500.0, stall_done=True)
    # restart at 3000: restore 30, finish 3000 + 30 + (1000 - 500) = 3530
    assert plan_run(HANGS, 3000.0, 500.0, True, True) == RunPlan(30.0, 3530.0, None, 3600.0)
    # progress goes past stall_after: at 3300, 3300 - 3000 - 30 = 270 (kept + 270 = 770 > 550)
    assert run_progress(HANGS, 3000.0, 3300.0, 30.0, 500.0, True) == (270.0, False)


def test_non_resumable_hang_restarts_from_zero_and_does_not_hang_again() -> None:
    j = dataclasses.replace(EVAL, stall_after=550.0)
    assert plan_run(j, 0.0, 0.0, False, False) == RunPlan(60.0, None, 610.0, 600.0)  # 60 + 550
    # after a no_progress preemption it keeps nothing: lost (2000 - 0) * 8 = 16000
    assert lost_gpu_s(j, 0.0, 2000.0, 60.0, 0.0, False) == pytest.approx(16000.0)
    # restart at 3000: startup again, from zero, no hang: 3000 + 60 + 1000 = 4060
    assert plan_run(j, 3000.0, 0.0, True, True) == RunPlan(60.0, 4060.0, None, 3600.0)


# --- deadlines by the estimate
def test_remaining_and_latest_start_use_the_estimate_not_the_work() -> None:
    # declared 3000 s although the truth is 1000 s; deadline 10,000
    j = job(estimate=3000.0, deadline=10_000.0)
    assert j.work == 1000.0
    # first start: startup 60 + 3000 = 3060; latest start 10,000 - 3060 = 6940
    assert remaining(j.request, restarted=False, kept=0.0) == 3060.0
    assert latest_start(j.request, restarted=False, kept=0.0) == 6940.0
    # restarted with 500 kept: restore 30 + 3000 - 500 = 2530; latest 7470
    assert remaining(j.request, restarted=True, kept=500.0) == 2530.0
    assert latest_start(j.request, restarted=True, kept=500.0) == 7470.0


PROTECTION = [
    # (asked, class default, class cap) -> (window, capped)
    ("the class default", None, 900.0, 1800.0, (900.0, False)),
    ("asked below the cap", 600.0, 900.0, 1800.0, (600.0, False)),
    ("asked at the cap", 1800.0, 900.0, 1800.0, (1800.0, False)),
    ("asked over the cap", 3600.0, 900.0, 1800.0, (1800.0, True)),
    ("a default over its cap", None, 3600.0, 1800.0, (1800.0, True)),
    ("no protection asked", 0.0, 900.0, 1800.0, (0.0, False)),
]


@pytest.mark.parametrize(
    ("asked", "default", "cap", "expected"),
    [row[1:] for row in PROTECTION],
    ids=[row[0] for row in PROTECTION],
)
def test_protection_is_the_window_asked_or_the_class_default_cut_to_the_cap(
    asked: float | None, default: float, cap: float, expected: tuple[float, bool]
) -> None:
    assert contract.protection(asked, default, cap) == expected


def test_a_run_is_protected_until_its_start_plus_its_window() -> None:
    job = a_request(protected=900.0)
    assert contract.protected_until(100.0, job) == 1000.0
