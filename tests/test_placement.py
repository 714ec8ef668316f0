"""Free-GPU index, best-fit single nodes, gang packing, holds and hypothetical frees
(fairshare.core.placement).

DESIGN.md §2 "Placement" and the module docstring: single node = best fit (least leftover, ties lowest
index); a gang = k nodes of one type, the tightest block that holds it, else as few blocks as possible.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fairshare.core.model import Node
from fairshare.core.placement import Alloc, FreeIndex, Shape, Tentative, fits_with, place, type_ids


def pool(name: str, count: int, per_block: int, gpus: int = 8, gpu_type: str = "H100") -> list[Node]:
    """`count` nodes `<name>-000..`, `per_block` consecutive nodes per block `<name>-b<k>`."""
    return [
        Node(f"{name}-{i:03d}", name, gpus, gpu_type, 224.0, 2048.0, f"{name}-b{i // per_block}")
        for i in range(count)
    ]


def index_with_free(nodes: Sequence[Node], free: Sequence[int]) -> FreeIndex:
    """A FreeIndex whose node i has free[i] GPUs free (the rest taken)."""
    index = FreeIndex(nodes)
    for i, f in enumerate(free):
        index.take(i, nodes[i].gpus - f)
    return index


def single(gpus: int, types: tuple[int, ...] | None = None) -> Shape:
    return Shape(types, gpus, 1)


def gang(nodes: int, per_node: int = 8, types: tuple[int, ...] | None = None) -> Shape:
    return Shape(types, per_node, nodes)


def blocks_of(index: FreeIndex, alloc: Alloc) -> set[str]:
    return {index.nodes[i].block for i, _ in alloc}


# --- FreeIndex bookkeeping
MIXED = [*pool("h100", 3, 4), *pool("a100", 1, 4, gpus=4, gpu_type="A100")]  # nodes 0..2 H100x8, 3 A100x4


def test_free_index_initial_state() -> None:
    index = FreeIndex(MIXED)
    assert index.types == ("A100", "H100")  # sorted
    a100, h100 = index.type_id["A100"], index.type_id["H100"]
    assert index.free_of_type(h100) == 24  # 3 * 8
    assert index.free_of_type(a100) == 4
    assert index.total_free() == 28  # 24 + 4
    assert index.count_at_least(h100, 8) == 3
    assert index.count_at_least(a100, 5) == 0  # the A100 node has only 4
    assert index.count_at_least(h100, 9) == 0  # more than any node has


def test_free_index_take_give() -> None:
    index = FreeIndex(MIXED)
    h100 = index.type_id["H100"]
    index.take(0, 3)  # node 0: 8 - 3 = 5 free
    assert index.free[0] == 5
    assert index.free_of_type(h100) == 21  # 5 + 8 + 8
    assert index.count_at_least(h100, 6) == 2  # nodes 1, 2
    assert index.count_at_least(h100, 5) == 3  # node 0 too
    assert index.count_at_least(h100, 4.5) == 3  # a fraction rounds up: at least 5
    assert index.count_at_least(h100, 5.5) == 2  # at least 6
    index.give(0, 1)  # 5 + 1 = 6
    assert index.free[0] == 6
    assert index.free_of_type(h100) == 22  # 6 + 8 + 8
    assert index.count_at_least(h100, 6) == 3


def test_free_index_set_available_hides_and_restores_a_node() -> None:
    index = FreeIndex(MIXED)
    h100 = index.type_id["H100"]
    index.set_available(1, False)  # drained: takes no new work
    assert index.free_of_type(h100) == 16  # 8 + 8, node 1 not counted
    assert index.count_at_least(h100, 8) == 2
    assert index.total_free() == 20  # 16 + 4
    index.set_available(1, False)  # idempotent
    assert index.free_of_type(h100) == 16
    index.take(1, 2)  # a change while drained is remembered (node 1: 6 free) ...
    assert index.free[1] == 6
    assert index.free_of_type(h100) == 16  # ... but not counted
    index.set_available(1, True)
    assert index.free_of_type(h100) == 22  # 8 + 6 + 8
    assert index.count_at_least(h100, 7) == 2  # nodes 0, 2
    assert index.count_at_least(h100, 6) == 3


def test_type_ids() -> None:
    index = FreeIndex(MIXED)
    assert type_ids(index, None) == (0, 1)
    assert type_ids(index, ("H100",)) == (1,)
    assert type_ids(index, ("B300", "A100")) == (0,)  # a type the cluster lacks is ignored


# --- single node: best fit
SINGLE_CASES = {
    # free 8, 3, 5, 5: 4 GPUs -> least leftover is 5 (leftover 1), lowest index among the 5s: node 2
    "least_leftover_ties_lowest_index": ([8, 3, 5, 5], 4, 2),
    "exact_fit": ([8, 3, 5, 5], 3, 1),  # node 1 has exactly 3 (leftover 0)
    "only_the_big_node": ([8, 3, 5, 5], 6, 0),  # only node 0 has >= 6
    "full_node": ([8, 3, 5, 5], 8, 0),
    "does_not_fit": ([8, 3, 5, 5], 9, None),
    "nothing_free": ([0, 0, 0, 0], 1, None),
    "ties_lowest_index_full_nodes": ([8, 8, 8, 8], 2, 0),
}


@pytest.mark.parametrize(("free", "gpus", "expected"), SINGLE_CASES.values(), ids=SINGLE_CASES.keys())
def test_place_single_node_best_fit(free: list[int], gpus: int, expected: int | None) -> None:
    index = index_with_free(pool("h100", 4, 4), free)
    alloc = place(Tentative(index), "j", single(gpus))
    assert alloc == (None if expected is None else ((expected, gpus),))


def test_place_single_node_best_fit_across_types() -> None:
    # H100 nodes free 8, 5, 8; the A100 node (index 3) has 4: 4 GPUs of any type -> A100 (leftover 0)
    index = index_with_free(MIXED, [8, 5, 8, 4])
    assert place(Tentative(index), "j", single(4)) == ((3, 4),)
    # restricted to H100: node 1 (5 free, leftover 1)
    assert place(Tentative(index), "j", single(4, types=type_ids(index, ("H100",)))) == ((1, 4),)
    # restricted to A100 and asking 5: none
    assert place(Tentative(index), "j", single(5, types=type_ids(index, ("A100",)))) is None


def test_place_single_node_ties_between_overlay_and_index_nodes() -> None:
    # index: free 8, 8, 5, 8; the pass takes 3 on node 3 -> node 3 also has 5, but node 2 is lower
    index = index_with_free(pool("h100", 4, 4), [8, 8, 5, 8])
    view = Tentative(index)
    view.take(((3, 3),))
    assert place(view, "j", single(5)) == ((2, 5),)
    # and the other way round: the pass takes 3 on node 0 (8 - 3 = 5), node 0 wins the tie with node 2
    view = Tentative(index)
    view.take(((0, 3),))
    assert place(view, "j", single(5)) == ((0, 5),)


def test_drained_node_is_never_used() -> None:
    index = index_with_free(pool("h100", 4, 4), [8, 3, 5, 5])
    index.set_available(2, False)
    assert place(Tentative(index), "j", single(4)) == ((3, 4),)  # node 2 drained: next best is node 3
    index.set_available(3, False)
    assert place(Tentative(index), "j", single(4)) == ((0, 4),)  # only node 0 left with >= 4
    index.set_available(0, False)
    assert place(Tentative(index), "j", single(4)) is None
    # an overlay change on a drained node does not bring it back
    view = Tentative(index)
    view.give(((2, 3),))  # node 2 would have 8 free
    assert place(view, "j", single(4)) is None
    assert place(view, "j", gang(2, per_node=3)) is None  # only node 1 (3 free) takes work


# --- gangs
def test_gang_packs_into_the_tightest_block_that_holds_it() -> None:
    # blocks: b0 = nodes 0-3 (4 free), b1 = nodes 4-5 (2 free), b2 = nodes 6-9 (4 free)
    nodes = [*pool("h100", 4, 4), *pool("h200", 2, 2, gpu_type="H100"), *pool("h300", 4, 4, gpu_type="H100")]
    index = FreeIndex(nodes)
    view = Tentative(index)
    # a 2-node gang fits in every block; the tightest (fewest candidates) is b1: nodes 4, 5
    assert place(view, "g", gang(2)) == ((4, 8), (5, 8))
    # a 3-node gang fits in b0 and b2 (4 candidates each): the lower block id, b0: nodes 0, 1, 2
    assert place(view, "g", gang(3)) == ((0, 8), (1, 8), (2, 8))
    # a 4-node gang: b0 (tie with b2, lower id)
    assert place(view, "g", gang(4)) == ((0, 8), (1, 8), (2, 8), (3, 8))


def test_gang_spans_the_fewest_blocks_when_no_block_holds_it() -> None:
    # 4 blocks of 3 nodes; b0, b1, b2 have one free node each (nodes 0, 3, 6), b3 all three (9, 10, 11)
    nodes = pool("h100", 12, 3)
    index = index_with_free(nodes, [8, 0, 0, 8, 0, 0, 8, 0, 0, 8, 8, 8])
    alloc = place(Tentative(index), "g", gang(4))
    # the block with most candidates first (b3: 3 nodes), then one from b0: 2 blocks, not 4 in node order
    assert alloc == ((0, 8), (9, 8), (10, 8), (11, 8))
    assert blocks_of(index, alloc) == {"h100-b0", "h100-b3"}


def test_gang_within_a_block_uses_best_fit_nodes() -> None:
    # one block, free 8, 4, 6, 8: a 2 x 4 gang takes the nodes with the least leftover: 1 (4) and 2 (6)
    index = index_with_free(pool("h100", 4, 4), [8, 4, 6, 8])
    assert place(Tentative(index), "g", gang(2, per_node=4)) == ((1, 4), (2, 4))


def test_gang_needs_enough_nodes_each_with_its_share() -> None:
    # 16 GPUs free in total but no 2 nodes with 8 each: a 2 x 8 gang cannot be placed (fragmented)
    index = index_with_free(pool("h100", 4, 4), [8, 4, 4, 0])
    assert place(Tentative(index), "g", gang(2)) is None
    assert place(Tentative(index), "g", gang(2, per_node=4)) == ((1, 4), (2, 4))  # 4 + 4 leftover 0


def test_gang_runs_on_one_gpu_type_and_respects_allowed_types() -> None:
    # one free 8-GPU H100 node and one free 8-GPU A100 node: a 2-node gang cannot mix them
    nodes = [*pool("h100", 2, 2), *pool("a100", 2, 2, gpu_type="A100")]
    index = index_with_free(nodes, [8, 0, 8, 0])
    assert place(Tentative(index), "g", gang(2)) is None
    # with both A100 nodes free: any type -> A100 nodes 2, 3; restricted to H100 -> none
    index.give(3, 8)
    assert place(Tentative(index), "g", gang(2)) == ((2, 8), (3, 8))
    assert place(Tentative(index), "g", gang(2, types=type_ids(index, ("H100",)))) is None
    index.give(1, 8)  # now H100 has two as well
    assert place(Tentative(index), "g", gang(2, types=type_ids(index, ("H100",)))) == ((0, 8), (1, 8))


def test_gang_skips_drained_nodes() -> None:
    index = FreeIndex(pool("h100", 4, 4))
    index.set_available(1, False)
    assert place(Tentative(index), "g", gang(3)) == ((0, 8), (2, 8), (3, 8))
    index.set_available(2, False)
    assert place(Tentative(index), "g", gang(3)) is None


# --- the Tentative overlay
def test_tentative_overlay_does_not_mutate_the_index() -> None:
    index = FreeIndex(pool("h100", 2, 2))
    view = Tentative(index)
    first = place(view, "a", single(8))
    assert first == ((0, 8),)
    view.take(first)
    assert view.free(0) == 0 and index.free[0] == 8  # the pass sees it taken, the index does not
    assert place(view, "b", single(8)) == ((1, 8),)  # the next job goes elsewhere
    assert place(Tentative(index), "b", single(8)) == ((0, 8),)  # a fresh view still sees node 0 free
    assert view.total_avail() == 8  # 16 - 8
    assert index.total_free() == 16
    # a copy is independent of the original
    trial = view.copy()
    trial.take(((1, 8),))
    assert trial.total_avail() == 0 and view.total_avail() == 8
    assert view.free(1) == 8


def test_held_gpus_are_invisible_to_others_but_visible_to_the_holder() -> None:
    index = FreeIndex(pool("h100", 3, 3))
    view = Tentative(index)
    view.hold((0, 1), 8, "gang")
    assert view.avail(0, "other") == 0 and view.avail(0, "gang") == 8
    assert view.avail(0, None) == 0  # an anonymous query is not the holder
    assert view.total_avail("other") == 8  # 24 - 16 held
    assert view.total_avail("gang") == 24
    assert place(view, "other", single(8)) == ((2, 8),)
    assert place(view, "other", gang(2)) is None  # only node 2 is visible to others
    assert place(view, "gang", gang(2)) == ((0, 8), (1, 8))
    # a partial hold: node 0 holds 6 of its 8 -> others see 2
    view.release()
    view.hold((0,), 6, "gang")
    assert view.avail(0, "other") == 2
    assert place(view, "other", single(2)) == ((0, 2),)  # best fit: node 0 (2 left) before nodes 1, 2 (8)
    assert index.free == [8, 8, 8]  # holds never touch the index


def test_fits_with_hypothetically_freed_gpus() -> None:
    # nodes 0-3, all full except node 3 with 4 free; an 8-GPU job does not fit
    index = index_with_free(pool("h100", 4, 4), [0, 0, 0, 4])
    view = Tentative(index)
    assert place(view, "j", single(8)) is None
    # freeing 8 on node 1 (a victim's allocation) makes it fit there
    assert fits_with(view, "j", single(8), {1: 8}) == ((1, 8),)
    # freeing 4 on node 3 makes 8 there
    assert fits_with(view, "j", single(8), {3: 4}) == ((3, 8),)
    # freeing 4 on node 2 is futile (only 4 there)
    assert fits_with(view, "j", single(8), {2: 4}) is None
    # a 2 x 8 gang needs two freed nodes
    assert fits_with(view, "g", gang(2), {0: 8}) is None
    assert fits_with(view, "g", gang(2), {0: 8, 3: 4}) == ((0, 8), (3, 8))
    # the view itself is unchanged
    assert view.overlay == {} and index.free == [0, 0, 0, 4]
    assert place(view, "j", single(8)) is None


def test_fits_with_respects_holds_and_the_pass_overlay() -> None:
    index = FreeIndex(pool("h100", 2, 2))
    view = Tentative(index)
    view.take(((0, 8),))  # started earlier in this pass
    view.hold((1,), 8, "gang")
    # freeing 8 on node 0 makes room for another job; node 1 stays held
    assert fits_with(view, "j", single(8), {0: 8}) == ((0, 8),)
    assert fits_with(view, "j", single(8), {}) is None
    assert fits_with(view, "gang", single(8), {}) == ((1, 8),)
    assert view.free(0) == 0  # the overlay is not changed by the trial


# --- reservations: which nodes a waiting job holds
def _pass_on(index: FreeIndex) -> object:
    """A scheduling pass reduced to what choosing reserved nodes reads: the index and its view."""
    from types import SimpleNamespace

    from fairshare.core.scheduler import _Pass

    p = _Pass.__new__(_Pass)
    p.s = SimpleNamespace(index=index)  # type: ignore[assignment]
    p.view = Tentative(index)
    return p


@pytest.mark.parametrize(
    ("free", "taken_in_pass", "shape", "held"),
    [
        pytest.param([8, 4, 2], {}, single(8), (0,), id="fullest-node"),
        pytest.param([8, 4, 2], {0: 6}, single(8), (1,), id="a start earlier in the pass counts"),
        pytest.param([8, 8, 2], {0: 8}, gang(2), (1, 2), id="gang: the two fullest in the view"),
        pytest.param([8, 4, 4], {}, single(8), (0,), id="ties-lowest-index-first"),
    ],
)
def test_reservation_holds_the_nodes_with_most_free_gpus_in_the_pass_view(
    free: list[int], taken_in_pass: dict[int, int], shape: Shape, held: tuple[int, ...]
) -> None:
    index = index_with_free(pool("n", 3, 4), free)
    p = _pass_on(index)
    p.view.take(tuple(taken_in_pass.items()))  # type: ignore[attr-defined]
    assert p.view.most_free_nodes(shape) == held  # type: ignore[attr-defined]
