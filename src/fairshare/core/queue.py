"""The queue as every view shows it, and a waiting job's place in it (issue 18): the live API, the
dashboard, the live explain and the offline `fairshare explain --at` all take the place in line,
the place in the group's queue and the groups ahead from `queue_order` and `place_in_line`, so
they cannot disagree."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .tree import TreeIndex


class Queued(Protocol):
    """What the place in line reads of a job: its leaf (TreeIndex node id) and its GPUs."""

    @property
    def leaf(self) -> int: ...

    @property
    def gpus(self) -> int: ...


def queue_order(order: Sequence[str], pending: Iterable[str]) -> tuple[str, ...]:
    """The queue: the last pass's order of the jobs still pending, then pending jobs no pass has
    ordered yet (in arrival order, as `pending` iterates). Places in line and the jobs ahead of a
    job come from this one order."""
    waiting = dict.fromkeys(pending)
    queued = [j for j in order if j in waiting]
    seen = set(queued)
    return (*queued, *(j for j in waiting if j not in seen))


def places(queue: Sequence[str], jobs: Mapping[str, Queued]) -> dict[str, tuple[int, int]]:
    """Each queued job's place in the whole queue and in its group's (leaf's) queue, from 1."""
    out: dict[str, tuple[int, int]] = {}
    in_leaf: dict[int, int] = {}
    for k, j in enumerate(queue):
        leaf = jobs[j].leaf
        in_leaf[leaf] = in_leaf.get(leaf, 0) + 1
        out[j] = (k + 1, in_leaf[leaf])
    return out


@dataclass(frozen=True, slots=True)
class Ahead:
    """The jobs ahead of a waiting job under one side of the tree: `side` is the node (under the
    lowest common ancestor) that holds them, `mine` the waiting job's node at the same level."""

    side: int
    mine: int
    jobs: int
    gpus: int


@dataclass(frozen=True, slots=True)
class Place:
    position: int  # in the whole queue, from 1
    queue_length: int
    group_position: int  # in its leaf's queue, from 1
    group_queue_length: int
    same_group_ahead: int  # jobs of its own leaf ahead of it
    ahead: tuple[Ahead, ...]  # the other groups' jobs ahead, by side, most jobs first


def place_in_line(queue: Sequence[str], job: str, jobs: Mapping[str, Queued], tree: TreeIndex) -> Place:
    """A queued job's place: its position, its group's, and the jobs ahead of it by the side of the
    tree they come from (TreeIndex.sides). ValueError if `job` is not in `queue`."""
    i = queue.index(job)
    leaf = jobs[job].leaf
    same = 0
    by_side: dict[int, list[int]] = {}
    for other_id in queue[:i]:
        other = jobs[other_id]
        if other.leaf == leaf:
            same += 1
            continue
        mine, theirs = tree.sides(leaf, other.leaf)
        entry = by_side.setdefault(theirs, [mine, 0, 0])
        entry[1] += 1
        entry[2] += other.gpus
    ahead = sorted(
        (Ahead(side, e[0], e[1], e[2]) for side, e in by_side.items()), key=lambda a: -a.jobs
    )  # stable: sides with equal counts in the order their first job is ahead
    group_length = sum(1 for j in queue if jobs[j].leaf == leaf)
    return Place(i + 1, len(queue), same + 1, group_length, same, tuple(ahead))
