"""Turning the core's order of pending jobs into Slurm priorities, changing as few as possible.

fairshare owns a band of priorities [priority_min, priority_max] above every priority Slurm
computes itself (`slurm check` verifies it), so Slurm's scheduler and backfill follow the order:
the first job of the order gets the highest value. New values are spaced `priority_step` apart,
so a job inserted later usually fits between two others without renumbering them.

Minimal changes: a job keeps its current priority when it is already inside the band, in the
right order relative to the other kept jobs, and leaves enough integers around it for the jobs
that must go between. With q_i = p_i + i (position i, priority p_i), kept jobs a < b need
p_a - p_b >= b - a, i.e. q_a >= q_b: the kept set is a longest non-increasing subsequence of q.

Slurm facts (22.05, verified): an admin-set priority sticks across recalculation, requeue and a
controller restart; a held job has priority 0 and refuses a new one (`Job is in held state`),
and release resets it to Slurm's computed value (below the band), so a held job is skipped here
and placed on the first cycle after its release. Priority 0 would hold a job: never used.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .client import SlurmBackend
from .model import ActionResult, SlurmJob


class JobPriority(NamedTuple):
    priority: int
    held: bool
    pending: bool


def priorities_of(jobs: Iterable[SlurmJob]) -> dict[int, JobPriority]:
    return {j.job_id: JobPriority(j.priority, j.held, j.pending) for j in jobs}


@dataclass(frozen=True)
class Band:
    low: int
    high: int
    step: int = 1000

    def __post_init__(self) -> None:
        if not 1 <= self.low < self.high:
            raise ValueError(f"priority band: need 1 <= low < high, got [{self.low}, {self.high}]")
        if self.step < 1:
            raise ValueError(f"priority band: step must be >= 1, got {self.step}")

    def __contains__(self, p: object) -> bool:
        return isinstance(p, int) and self.low <= p <= self.high


@dataclass(frozen=True)
class PriorityPlan:
    updates: tuple[tuple[int, int], ...]  # (job, new priority), first of the order first
    kept: tuple[int, ...]  # ordered jobs whose priority already fits
    skipped: tuple[tuple[int, str], ...]  # (job, reason): held, not pending, unknown
    strays: tuple[int, ...]  # pending jobs inside the band that are not in the order
    target: Mapping[int, int]  # the priority every placed job has after the updates


def _keep(seq: Sequence[int], prios: Sequence[int], band: Band) -> set[int]:
    """Positions to keep: the longest subsequence with non-increasing q_i = p_i + i among jobs
    whose priority is in the band with room for the jobs before and after them."""
    n = len(seq)
    cand = [
        i
        for i in range(n)
        if prios[i] in band and band.high - prios[i] >= i and prios[i] - band.low >= n - 1 - i
    ]
    # longest non-increasing subsequence of q == longest non-decreasing of -q (patience sorting)
    tails: list[int] = []  # -q at the end of the best subsequence of each length
    tail_at: list[int] = []  # its position
    back: dict[int, int | None] = {}
    for i in cand:
        key = -(prios[i] + i)
        k = bisect.bisect_right(tails, key)
        back[i] = tail_at[k - 1] if k > 0 else None
        if k == len(tails):
            tails.append(key)
            tail_at.append(i)
        else:
            tails[k] = key
            tail_at[k] = i
    keep: set[int] = set()
    cur = tail_at[-1] if tail_at else None
    while cur is not None:
        keep.add(cur)
        cur = back[cur]
    return keep


def plan_priorities(order: Sequence[int], current: Mapping[int, JobPriority], band: Band) -> PriorityPlan:
    """Priorities that make Slurm start `order[0]` first, then `order[1]`, ...

    `current` is what Slurm reports now (priorities_of(backend.read_jobs())). Jobs of the order
    that are held, not pending or unknown to Slurm are skipped with the reason.
    """
    seen: set[int] = set()
    seq: list[int] = []
    skipped: list[tuple[int, str]] = []
    for job in order:
        if job in seen:
            raise ValueError(f"order: job {job} appears twice")
        seen.add(job)
        cur = current.get(job)
        if cur is None:
            skipped.append((job, "unknown to Slurm (finished or removed)"))
        elif cur.held:
            skipped.append((job, "held (Slurm refuses a priority; placed after its release)"))
        elif not cur.pending:
            skipped.append((job, "not pending"))
        else:
            seq.append(job)
    n = len(seq)
    if n > band.high - band.low + 1:
        raise ValueError(
            f"priority band [{band.low}, {band.high}] holds at most {band.high - band.low + 1} jobs, got {n}"
        )
    prios = [current[j].priority for j in seq]
    keep = sorted(_keep(seq, prios, band))
    target: dict[int, int] = {seq[i]: prios[i] for i in keep}
    # fill the gaps between kept jobs (and the band's ends)
    bounds = [-1, *keep, n]
    for a, b in itertools.pairwise(bounds):
        gap = list(range(a + 1, b))
        if not gap:
            continue
        m = len(gap)
        upper = prios[a] if a >= 0 else None  # exclusive
        lower = prios[b] if b < n else None  # exclusive
        if upper is not None and lower is not None:
            values = [upper - ((k + 1) * (upper - lower)) // (m + 1) for k in range(m)]
        elif lower is not None:  # above the first kept job
            step = min(band.step, (band.high - lower) // m)
            values = [lower + step * (m - k) for k in range(m)]
        elif upper is not None:  # below the last kept job
            step = min(band.step, (upper - band.low) // m)
            values = [upper - step * (k + 1) for k in range(m)]
        else:  # nothing kept: centre the order in the band
            step = max(1, min(band.step, (band.high - band.low) // (m + 1)))
            top = min(band.high, (band.low + band.high) // 2 + step * (m - 1) // 2)
            top = max(top, band.low + step * (m - 1))
            values = [top - step * k for k in range(m)]
        for i, v in zip(gap, values, strict=True):
            target[seq[i]] = v
    updates = tuple((j, target[j]) for j in seq if target[j] != current[j].priority)
    kept = tuple(j for j in seq if target[j] == current[j].priority)
    strays = tuple(
        sorted(
            j for j, c in current.items() if c.pending and not c.held and c.priority in band and j not in seen
        )
    )
    return PriorityPlan(updates, kept, tuple(skipped), strays, target)


def apply_priorities(backend: SlurmBackend, plan: PriorityPlan) -> list[ActionResult]:
    """Set the planned priorities, first of the order first. A job that vanished or was held since
    the read gives that result; a systemic failure (controller down, timeout) raises, and the
    next cycle's plan, made from fresh reads, completes the work."""
    return [backend.set_priority(job, prio) for job, prio in plan.updates]


def in_band(current: Mapping[int, JobPriority], band: Band) -> tuple[int, ...]:
    """Pending, unheld jobs whose priority fairshare set (it lies in the band)."""
    return tuple(sorted(j for j, c in current.items() if c.pending and not c.held and c.priority in band))


class ResetIncomplete(Exception):
    """A reset stopped after holding jobs it could not release: they must be released by hand."""

    def __init__(self, held: Sequence[int], cause: Exception) -> None:
        self.held = tuple(held)
        ids = " ".join(map(str, held))
        super().__init__(f"{cause}; still held by the reset, release them with: scontrol release {ids}")


def reset_priorities(backend: SlurmBackend, jobs: Sequence[int]) -> list[ActionResult]:
    """Give jobs back Slurm's computed priority (rolling fairshare back): `scontrol hold` then
    `release`, because release resets an admin-set priority to the computed value. A job the
    reset held and could not release is named in ResetIncomplete."""
    out = []
    for job in jobs:
        held = backend.hold(job)
        if not held.ok:
            out.append(held)
            continue
        try:
            out.append(backend.release(job))
        except Exception as exc:
            raise ResetIncomplete([job], exc) from exc
    return out
