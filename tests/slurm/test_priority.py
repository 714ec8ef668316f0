"""The priority setter: Slurm starts jobs in fairshare's order, with as few updates as possible."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.slurm.fake_client import COMPUTED_PRIORITY, FakeSlurm
from fairshare.slurm.priority import (
    Band,
    JobPriority,
    ResetIncomplete,
    apply_priorities,
    in_band,
    plan_priorities,
    priorities_of,
    reset_priorities,
)
from fairshare.slurm.slurm_errors import SlurmUnavailable

BAND = Band(1_000_000, 1_000_000_000, 1000)


def pending(*prios: int) -> dict[int, JobPriority]:
    return {i + 1: JobPriority(p, False, True) for i, p in enumerate(prios)}


def after(current: dict[int, JobPriority], plan_target: dict[int, int]) -> dict[int, JobPriority]:
    return {j: JobPriority(plan_target.get(j, c.priority), c.held, c.pending) for j, c in current.items()}


def assert_orders(order: list[int], target: dict[int, int], band: Band) -> None:
    values = [target[j] for j in order]
    assert all(a > b for a, b in itertools.pairwise(values)), values
    assert all(v in band for v in values)


def test_first_plan_sets_every_job_spaced_by_the_step_around_the_band_centre() -> None:
    plan = plan_priorities([3, 1, 2], pending(10_000, 10_000, 10_000), BAND)
    assert plan.updates == ((3, 500_501_000), (1, 500_500_000), (2, 500_499_000))
    assert plan.kept == () and plan.skipped == ()


def test_an_unchanged_order_needs_no_update() -> None:
    cur = pending(10_000, 10_000, 10_000)
    first = plan_priorities([3, 1, 2], cur, BAND)
    again = plan_priorities([3, 1, 2], after(cur, dict(first.target)), BAND)
    assert again.updates == () and again.kept == (3, 1, 2)


def test_a_new_job_fits_between_two_others_without_renumbering() -> None:
    cur = pending(10_000, 10_000, 10_000)
    cur = after(cur, dict(plan_priorities([1, 2, 3], cur, BAND).target))
    cur[4] = JobPriority(10_000, False, True)  # Slurm's computed value, below the band
    plan = plan_priorities([1, 4, 2, 3], cur, BAND)
    assert plan.updates == ((4, 500_500_500),)
    assert plan.kept == (1, 2, 3)


def test_moving_one_job_to_the_front_changes_only_that_job() -> None:
    cur = after(pending(1, 1, 1, 1), dict(plan_priorities([1, 2, 3, 4], pending(1, 1, 1, 1), BAND).target))
    plan = plan_priorities([4, 1, 2, 3], cur, BAND)
    assert [j for j, _ in plan.updates] == [4]
    assert_orders([4, 1, 2, 3], dict(plan.target), BAND)


def test_held_unknown_and_running_jobs_are_skipped_with_the_reason() -> None:
    cur = {
        1: JobPriority(0, True, True),
        2: JobPriority(10_000, False, True),
        3: JobPriority(10_000, False, False),
        5: JobPriority(600_000_000, False, True),  # in the band but not in the order
    }
    plan = plan_priorities([1, 2, 3, 4], cur, BAND)
    assert [j for j, _ in plan.updates] == [2]
    assert [(j, r.split(" ")[0]) for j, r in plan.skipped] == [(1, "held"), (3, "not"), (4, "unknown")]
    assert plan.strays == (5,)


def test_bad_orders_and_bands() -> None:
    with pytest.raises(ValueError, match="job 1 appears twice"):
        plan_priorities([1, 2, 1], pending(1, 1), BAND)
    with pytest.raises(ValueError, match="holds at most 3 jobs"):
        plan_priorities([1, 2, 3, 4], pending(1, 1, 1, 1), Band(10, 12))
    with pytest.raises(ValueError, match="need 1 <= low < high"):
        Band(5, 5)


def test_a_band_just_big_enough_still_orders() -> None:
    band = Band(10, 13, step=1000)
    plan = plan_priorities([4, 2, 1, 3], pending(1, 1, 1, 1), band)
    assert_orders([4, 2, 1, 3], dict(plan.target), band)


def min_updates_brute_force(order: list[int], cur: dict[int, JobPriority], band: Band) -> int:
    """Fewest jobs to change: the largest subset whose current priorities can stay."""
    n = len(order)
    prios = [cur[j].priority for j in order]
    for keep_count in range(n, -1, -1):
        for keep in itertools.combinations(range(n), keep_count):
            ok = all(prios[i] in band for i in keep)
            bounds = [(-1, band.high + 1), *((i, prios[i]) for i in keep), (n, band.low - 1)]
            for (a, pa), (b, pb) in itertools.pairwise(bounds):
                ok = ok and pa - pb >= b - a
            if ok:
                return n - keep_count
    raise AssertionError("unreachable")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=7),
    st.randoms(use_true_random=False),
)
def test_plans_order_strictly_within_the_band_with_the_fewest_updates(
    offsets: list[int], rnd: object
) -> None:
    band = Band(100, 160, step=7)
    cur = {i + 1: JobPriority(90 + o, False, True) for i, o in enumerate(offsets)}  # some below the band
    order = list(cur)
    rnd.shuffle(order)  # type: ignore[attr-defined]
    plan = plan_priorities(order, cur, band)
    assert_orders(order, dict(plan.target), band)
    assert len(plan.updates) == min_updates_brute_force(order, cur, band)
    assert {j for j, _ in plan.updates} | set(plan.kept) == set(order)
    assert all(cur[j].priority != p for j, p in plan.updates)


# --------------------------------------------------------------------------- on the fake Slurm


def test_slurm_starts_jobs_in_the_planned_order() -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    blockers = [fake.submit("product", 8) for _ in range(4)]
    fake.schedule()
    queued = [fake.submit(a, 8) for a in ("product", "research", "platform")]
    order = [queued[2], queued[0], queued[1]]  # not submit order
    results = apply_priorities(fake, plan_priorities(order, priorities_of(fake.read_jobs()), BAND))
    assert all(r.ok for r in results) and len(results) == 3
    started = []
    for b in blockers[:3]:
        fake.finish(b)
        started += fake.schedule(backfill=False)
    assert started == order


def test_a_job_vanishing_or_held_between_read_and_write_is_a_result() -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    a, b, c = (fake.submit("product", 8) for _ in range(3))
    plan = plan_priorities([a, b, c], priorities_of(fake.read_jobs()), BAND)

    def meanwhile() -> None:  # between the read and the first write
        fake.forget(b)
        fake.hold(c)

    fake.before_write(meanwhile)
    results = apply_priorities(fake, plan)
    assert [(r.job_id, r.outcome) for r in results] == [(a, "applied"), (b, "vanished"), (c, "held")]
    # the next cycle, from fresh reads, only sees a (placed) and c (held, skipped)
    again = plan_priorities([a, c], priorities_of(fake.read_jobs()), BAND)
    assert again.updates == () and [j for j, _ in again.skipped] == [c]


def test_release_resets_the_priority_so_the_next_plan_places_the_job_again() -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    a, b = fake.submit("product", 8), fake.submit("product", 8)
    apply_priorities(fake, plan_priorities([a, b], priorities_of(fake.read_jobs()), BAND))
    fake.hold(b)
    fake.release(b)
    cur = priorities_of(fake.read_jobs())
    assert cur[b].priority == COMPUTED_PRIORITY
    assert plan_priorities([a, b], cur, BAND).updates == ((b, cur[a].priority - 1000),)


def test_controller_down_mid_apply_raises_and_the_next_cycle_completes() -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    jobs = [fake.submit("product", 8) for _ in range(3)]
    plan = plan_priorities(jobs, priorities_of(fake.read_jobs()), BAND)
    fake.fail_next("set_priority", SlurmUnavailable(("scontrol",), 1, "Unexpected message received"))
    with pytest.raises(SlurmUnavailable):
        apply_priorities(fake, plan)
    again = plan_priorities(jobs, priorities_of(fake.read_jobs()), BAND)
    assert len(again.updates) == 3
    assert all(r.ok for r in apply_priorities(fake, again))
    assert plan_priorities(jobs, priorities_of(fake.read_jobs()), BAND).updates == ()


# --------------------------------------------------------------------------- rolling back


def test_reset_gives_jobs_back_their_computed_priority() -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    jobs = [fake.submit("product", 8) for _ in range(3)]
    held = fake.submit("product", 8, hold=True)
    apply_priorities(fake, plan_priorities(jobs[:2], priorities_of(fake.read_jobs()), BAND))
    placed = in_band(priorities_of(fake.read_jobs()), BAND)
    assert placed == tuple(jobs[:2])
    results = reset_priorities(fake, placed)
    assert [r.outcome for r in results] == ["applied", "applied"]
    now = priorities_of(fake.read_jobs())
    assert [now[j].priority for j in jobs] == [COMPUTED_PRIORITY] * 3
    assert now[held].held  # a user's hold is not touched
    assert in_band(now, BAND) == ()


def test_a_reset_interrupted_after_a_hold_names_the_job_to_release() -> None:
    fake = FakeSlurm.dev(lambda: 0.0)
    job = fake.submit("product", 8)
    fake.set_priority(job, 600_000_000)
    fake.fail_next("release", SlurmUnavailable(("scontrol", "release"), 1, "Unexpected message received"))
    with pytest.raises(ResetIncomplete, match=f"scontrol release {job}") as info:
        reset_priorities(fake, [job])
    assert info.value.held == (job,)
