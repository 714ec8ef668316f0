"""The budget tree flattened for the core: arrays indexed by node id, parents before children."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


class TreeSpec(Protocol):
    """A node of the policy file's tree (fairshare.inputs.policy.GroupNode has these)."""

    @property
    def name(self) -> str: ...
    @property
    def share(self) -> float: ...
    @property
    def children(self) -> Sequence[TreeSpec]: ...


@dataclass(frozen=True)
class TreeIndex:
    """The budget tree flattened: node i has `paths[i]`, `parent[i]` (-1 at top), `children[i]`.

    Nodes are in depth-first order so parents come before children. Static fraction of a node is
    `share / sum(sibling shares) x parent's fraction`; the top level sums to 1.
    """

    paths: tuple[str, ...]
    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    share: tuple[float, ...]
    static_frac: tuple[float, ...]
    depth: tuple[int, ...]
    top: tuple[int, ...]
    leaves: tuple[int, ...]
    leaf_ancestors: tuple[tuple[int, ...], ...]  # per node id: for a leaf, itself and its ancestors
    _sides: dict[tuple[int, int], tuple[int, int]] = field(
        default_factory=dict, compare=False, repr=False
    )  # memo of sides(); the tree itself never changes

    def __deepcopy__(self, memo: dict[int, object]) -> TreeIndex:
        return self  # the tree never changes: copies of an engine state share it

    def sides(self, a: int, b: int) -> tuple[int, int]:
        """For two leaves a != b: the children of their lowest common ancestor on a's and b's side
        (two top-level groups when the LCA is the root)."""
        hit = self._sides.get((a, b))
        if hit is None:
            depth, parent = self.depth, self.parent
            x, y = a, b
            while depth[x] > depth[y]:
                x = parent[x]
            while depth[y] > depth[x]:
                y = parent[y]
            while parent[x] != parent[y]:
                x, y = parent[x], parent[y]
            hit = self._sides[(a, b)] = (x, y)
        return hit

    @staticmethod
    def build(tree: Sequence[TreeSpec]) -> TreeIndex:
        paths: list[str] = []
        parent: list[int] = []
        children: list[list[int]] = []
        share: list[float] = []
        frac: list[float] = []
        depth: list[int] = []

        def walk(nodes: Sequence[TreeSpec], prefix: str, up: int, f: float, d: int) -> list[int]:
            total = sum(n.share for n in nodes)
            ids = []
            for n in nodes:
                i = len(paths)
                ids.append(i)
                paths.append(f"{prefix}/{n.name}" if prefix else n.name)
                parent.append(up)
                children.append([])
                share.append(n.share)
                frac.append(f * n.share / total)
                depth.append(d)
                children[i] = walk(n.children, paths[i], i, frac[i], d + 1)
            return ids

        top = walk(tree, "", -1, 1.0, 0)
        leaves = tuple(i for i in range(len(paths)) if not children[i])
        anc: list[tuple[int, ...]] = []
        for i in range(len(paths)):
            chain = [i]
            while parent[chain[-1]] >= 0:
                chain.append(parent[chain[-1]])
            anc.append(tuple(chain))
        return TreeIndex(
            paths=tuple(paths),
            parent=tuple(parent),
            children=tuple(tuple(c) for c in children),
            share=tuple(share),
            static_frac=tuple(frac),
            depth=tuple(depth),
            top=tuple(top),
            leaves=leaves,
            leaf_ancestors=tuple(anc),
        )

    def index(self) -> dict[str, int]:
        return {p: i for i, p in enumerate(self.paths)}
