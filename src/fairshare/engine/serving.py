"""The engine state a live driver uses: EngineState plus the two changes only a live cluster makes
while it is served, a new policy version (`reconfigure`; the rules: engine/reconfigure.py) and a
new set of nodes (`set_nodes`; the rules: engine/nodes.py). Both are journaled, so
`ServingState.rebuild` replays them. A replay never makes them and uses EngineState.

The rules live in their own modules, which take the state as an argument; this subclass is what
joins them to it, so that state.py does not import them (and they import state.py only for its
type)."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import Node
from .events import Event
from .nodes import NodeChange, set_nodes
from .reconfigure import Reconfigured, reconfigure
from .setup import EngineSetup
from .state import EngineState


class ServingState(EngineState):
    """EngineState with `reconfigure` and `set_nodes` (a live driver's engine)."""

    def reconfigure(self, setup: EngineSetup) -> Reconfigured:
        """A new policy (tree, knobs, GPU rates, window, exceptions; the same nodes: set_nodes) applies from
        now: usage carries over by tree path, pending jobs whose leaf or class is gone are
        cancelled, running ones never preempted by it (the rules: fairshare.engine.reconfigure).
        Returns the jobs it cancelled and the runs whose leaf is gone, for the driver to audit."""
        if self.journal is not None:
            self.journal.append(Event("reconfigure", (setup,)))
        return self._reconfigure(setup)

    def _reconfigure(self, setup: EngineSetup) -> Reconfigured:
        return reconfigure(self, setup)

    def set_nodes(self, nodes: Sequence[Node]) -> NodeChange:
        """The cluster's nodes from now, all of them (indices stay; new ones appended, missing ones
        out of service for good: the rules, fairshare.engine.nodes). Journaled when it changes
        anything; raises ValueError (nothing changed) when a new node cannot be taken."""
        return set_nodes(self, nodes)
