"""Engine states built by hand for tests of the core's decisions (no replay): a flat tree of teams
on 8-GPU nodes, jobs submitted and started at the engine's clock as a driver reports them
(tests/test_reservation_rules.py, tests/test_requeue_reserve.py)."""

from __future__ import annotations

from collections.abc import Mapping

from conftest import a_request
from fairshare.core import Knobs, Node, TreeIndex, get_strategy
from fairshare.engine import EngineSetup, EngineState
from test_engine import Group


def hand_engine(shares: Mapping[str, float], knobs: Knobs | None = None, nodes: int = 2) -> EngineState:
    """fairshare's engine state on `nodes` 8-GPU nodes, one top-level team per entry of `shares`
    (in order: team i is leaf i)."""
    tree = TreeIndex.build([Group(name, share) for name, share in shares.items()])
    pool = tuple(Node(f"n-00{i}", "n", 8, "H100", 64.0, 512.0, "n-b0") for i in range(nodes))
    setup = EngineSetup(tree, knobs or Knobs(), {"H100": 1.0}, pool, 7 * 86400.0)
    return EngineState(setup, get_strategy("fairshare"))


def submit(e: EngineState, jid: str, group: str, gpus: int, estimate: float, protected: float) -> None:
    """A job of team `group` submitted now; more than 8 GPUs: a gang of whole nodes."""
    e.submit(
        a_request(
            id=jid,
            group=group,
            leaf=e.tree.paths.index(group),
            submit=e.t,
            gpus=gpus,
            nodes=max(1, gpus // 8),
            charge=float(gpus),
            seq=len(e.states),
            estimate=estimate,
            protected=protected,
        )
    )


def run(
    e: EngineState, jid: str, group: str, gpus: int, estimate: float, protected: float, node: int
) -> None:
    """A job submitted and started now on `node` (the driver reports it)."""
    submit(e, jid, group, gpus, estimate, protected)
    e.started(jid, ((node, gpus),), float(gpus))
