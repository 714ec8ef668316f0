"""What an engine is built from (`EngineSetup`) and its JSON form, for the journal's `reconfigure`
record (a new policy applied to a running engine, fairshare.engine.reconfigure)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.model import Knobs, Node, ResolvedException
from ..core.tree import TreeIndex


@dataclass(frozen=True)
class EngineSetup:
    """What an engine is built from: the policy's tree, knobs, GPU rates, window and exceptions
    (placed on the driver's clock) and the cluster's nodes, in the order node indexes refer to.
    `classes`: the policy's job classes when the driver knows them (a reconfigure cancels the
    pending jobs of a class no longer in it); None: any class."""

    tree: TreeIndex
    knobs: Knobs
    gpu_rates: Mapping[str, float]
    nodes: tuple[Node, ...]
    window: float
    exceptions: tuple[ResolvedException, ...] = ()
    classes: frozenset[str] | None = None

    def as_json(self) -> dict[str, Any]:
        tree = self.tree
        return {
            "tree": [[p, s] for p, s in zip(tree.paths, tree.share, strict=True)],
            "knobs": {k: list(v) if isinstance(v, tuple) else v for k, v in _fields(self.knobs).items()},
            "gpu_rates": dict(self.gpu_rates),
            "nodes": [node_json(n) for n in self.nodes],
            "window": self.window,
            "exceptions": [_fields(e) for e in self.exceptions],
            "classes": None if self.classes is None else sorted(self.classes),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> EngineSetup:
        knobs: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in dict(data["knobs"]).items()
        }
        nodes = tuple(node_of_json(n) for n in data["nodes"])
        classes = data.get("classes")
        return EngineSetup(
            tree=tree_of_paths([(str(p), float(s)) for p, s in data["tree"]]),
            knobs=Knobs(**knobs),
            gpu_rates={str(k): float(v) for k, v in dict(data["gpu_rates"]).items()},
            nodes=nodes,
            window=float(data["window"]),
            exceptions=tuple(ResolvedException(**dict(e)) for e in data.get("exceptions", ())),
            classes=None if classes is None else frozenset(str(c) for c in classes),
        )


def node_json(n: Node) -> dict[str, Any]:
    """A node as the journal stores it (FORMATS.md's node columns and its pool)."""
    return n.as_json() | {"pool": n.pool}


def node_of_json(n: Mapping[str, Any]) -> Node:
    return Node(
        str(n["node"]),
        str(n.get("pool", "")),
        int(n["gpus"]),
        str(n["gpu_type"]),
        float(n["cpus"]),
        float(n["mem_gb"]),
        str(n["block"]),
    )


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@dataclass(frozen=True)
class _Spec:
    name: str
    share: float
    children: list[_Spec]


def tree_of_paths(nodes: Sequence[tuple[str, float]]) -> TreeIndex:
    """The TreeIndex of (path, share) pairs in depth-first order (TreeIndex.paths, TreeIndex.share)."""
    top: list[_Spec] = []
    by_path: dict[str, _Spec] = {}
    for path, share in nodes:
        parent, _, name = path.rpartition("/")
        spec = _Spec(name, share, [])
        (by_path[parent].children if parent else top).append(spec)
        by_path[path] = spec
    return TreeIndex.build(top)
