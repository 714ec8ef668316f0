"""The victim search's capacity arithmetic (core/victims.py): GPUs held for another job's
reservation are not freeable for the searching job, even when the reservation holds more GPUs
than the node has free (Tentative.avail stops at 0; the search must not)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from fairshare.core.model import Node
from fairshare.core.placement import FreeIndex, Shape, Tentative
from fairshare.core.victims import _cheapest_on_node, could_free


def _pass(free: list[int], held: dict[int, tuple[int, str]]) -> Any:
    nodes = [Node(f"n{i}", "p", 8, "g", 64.0, 512.0, "b0") for i in range(len(free))]
    index = FreeIndex(nodes)
    for i, f in enumerate(free):
        index.set_free(i, f)
    view = Tentative(index)
    for i, (gpus, holder) in held.items():
        view.hold([i], gpus, holder)
    return SimpleNamespace(s=SimpleNamespace(index=index), view=view)


def _run(job: str, alloc: tuple[tuple[int, int], ...]) -> Any:
    return SimpleNamespace(alloc=alloc, job=SimpleNamespace(id=job))


# node 0: 0 free, 8 held for job X; a run of 4 GPUs on it could be taken
CASES = [
    # (free, held, job, runs, shape per node, could free?)
    pytest.param(
        [0, 0], {0: (8, "X")}, "J", [("r", ((0, 4),))], 4, False, id="held-for-another-not-freeable"
    ),
    pytest.param([0, 0], {0: (8, "J")}, "J", [("r", ((0, 4),))], 4, True, id="held-for-itself-is-freeable"),
    pytest.param([4, 0], {0: (4, "X")}, "J", [("r", ((0, 4),))], 4, True, id="free-beyond-the-hold-counts"),
    pytest.param([0, 0], {}, "J", [("r", ((0, 4),))], 4, True, id="no-hold"),
    pytest.param([0, 0], {0: (8, "X")}, "J", [("r", ((0, 4),)), ("s", ((1, 4),))], 4, True, id="other-node"),
]


@pytest.mark.parametrize(("free", "held", "job", "runs", "per", "expected"), CASES)
def test_could_free_counts_reserved_gpus_as_taken_by_their_holder(
    free: list[int],
    held: dict[int, tuple[int, str]],
    job: str,
    runs: list[tuple[str, tuple[tuple[int, int], ...]]],
    per: int,
    expected: bool,
) -> None:
    p = _pass(free, held)
    job_req = cast(Any, SimpleNamespace(id=job))
    assert could_free(p, Shape(None, per, 1), job_req, [_run(j, a) for j, a in runs]) is expected


@pytest.mark.parametrize(
    ("held", "expected"),
    [
        pytest.param({0: (8, "X")}, None, id="held-for-another-takes-no-victims-there"),
        pytest.param({}, (5.0, 0, ["r"]), id="free-node-takes-the-cheapest"),
    ],
)
def test_cheapest_on_a_node_reserved_for_another_job_frees_nothing(
    held: dict[int, tuple[int, str]], expected: tuple[float, int, list[str]] | None
) -> None:
    p = _pass([0], held)
    r = _run("r", ((0, 4),))
    got = _cheapest_on_node(p, cast(Any, SimpleNamespace(id="J")), Shape(None, 4, 1), 0, [(5.0, "r", r)])
    assert (None if got is None else (got[0], got[1], [v.job.id for v in got[2]])) == expected
