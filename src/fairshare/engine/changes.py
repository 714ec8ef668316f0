"""The typed values a serving engine's changes hand to `EngineState`: a new policy's state
(`PolicyState`, computed by engine/reconfigure.py) and a new node set's (`NodesState`, computed by
engine/nodes.py), each from the state's public reads; `EngineState.adopt_policy` and
`EngineState.adopt_nodes` take them in. What the driver gets back to carry out and audit:
`Reconfigured` and `NodeChange`.

The rules live in reconfigure.py and nodes.py, which read the state; the state adopts what they
computed and derives the rest itself. This module imports neither side, so the state never imports
the rules and no module assigns the state's members but the state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.model import Node
from ..core.snapshot import PendingQueues, RunView
from ..core.strategies import Strategy
from .demand import Demand
from .fleet import Fleet
from .ledger import DecayLedger, Ledger
from .setup import EngineSetup


@dataclass(frozen=True)
class Reconfigured:
    """What a reconfigure did to jobs, for the driver to carry out and audit: the pending jobs
    cancelled, (job, reason); the running jobs whose leaf is gone, (job, path charged or None)."""

    rejected: tuple[tuple[str, str], ...] = ()
    detached: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class NodeChange:
    """What a node change does, by index: nodes new to the engine (a changed node's new index
    too), nodes out of service from now, nodes back in service. `nodes`: the engine's nodes after."""

    nodes: tuple[Node, ...]
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    returned: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.returned)


@dataclass(frozen=True, eq=False)
class PolicyState:
    """A new policy's engine state at the engine's instant (engine/reconfigure.py's rules).
    `node_rates`: every node's GPU rate when the rates changed, else None; `wakes`: the timers to
    set, in order, (instant, kind) with no payload; `forget`: the jobs the new policy cancelled."""

    setup: EngineSetup
    strategy: Strategy
    rates: dict[str, float]
    node_rates: list[float] | None
    demand: Demand
    pending: PendingQueues
    fast_q: list[tuple[int, str]]
    deadline_q: list[tuple[float, int, str]]
    deadline_entry: dict[str, tuple[float, int, str]]
    running: dict[str, RunView]
    by_leaf: dict[int, dict[str, RunView]]
    detached: dict[str, int]
    ledger: Ledger
    decay: DecayLedger | None
    victims_at: list[float]
    took_from: dict[tuple[int, int], float]
    shares: list[float]
    wakes: tuple[tuple[float, str], ...]
    forget: tuple[str, ...]
    outcome: Reconfigured


@dataclass(frozen=True, eq=False)
class NodesState:
    """A new node set's engine state at the engine's instant (engine/nodes.py's rules)."""

    change: NodeChange
    fleet: Fleet
    demand: Demand
    pending: PendingQueues
