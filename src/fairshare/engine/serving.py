"""The engine state a live driver uses: EngineState plus the two changes only a live cluster makes
while it is served, a new policy version (`reconfigure`; the rules: engine/reconfigure.py) and a
new set of nodes (`set_nodes`; the rules: engine/nodes.py). Both are journaled, so
`ServingState.rebuild` replays them. A replay never makes them and uses EngineState.

The rules live in their own modules, which read the state and compute the new one as a typed value
(fairshare.engine.changes); EngineState adopts it (`adopt_policy`, `adopt_nodes`). This subclass
joins the rules to the state, so that state.py does not import them."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import Node
from .changes import NodeChange, Reconfigured
from .events import Event
from .nodes import nodes_state, plan_nodes
from .reconfigure import plan_policy
from .setup import EngineSetup
from .state import EngineState


class ServingState(EngineState):
    """EngineState with `reconfigure` and `set_nodes` (a live driver's engine)."""

    def reconfigure(self, setup: EngineSetup, *, journaled: bool = True) -> Reconfigured:
        """A new policy (tree, knobs, GPU rates, window, exceptions; the same nodes: set_nodes) applies from
        now: usage carries over by tree path, pending jobs whose leaf or class is gone are
        cancelled, running ones never preempted by it (the rules: fairshare.engine.reconfigure).
        Returns the jobs it cancelled and the runs whose leaf is gone, for the driver to audit.
        `journaled=False`: the driver journals the call it made instead (a policy version)."""
        if journaled and self.journal is not None:
            self.journal.append(Event("reconfigure", (setup,)))
        self.integrate()  # the old rates integrated up to now, into the old tree's ledger
        new = plan_policy(self, setup)
        self.adopt_policy(new)
        return new.outcome

    def set_nodes(self, nodes: Sequence[Node]) -> NodeChange:
        """The cluster's nodes from now, all of them (indices stay; new ones appended, missing ones
        out of service for good: the rules, fairshare.engine.nodes). Journaled when it changes
        anything; raises ValueError (nothing changed) when a new node cannot be taken."""
        cluster = tuple(nodes)
        change = plan_nodes(self.nodes, self.fleet.retired, cluster, self.rates)
        if not change:
            return change
        if self.journal is not None:
            self.journal.append(Event("set_nodes", (cluster,)))
        self.integrate()  # usage up to now at the old capacity
        self.adopt_nodes(nodes_state(self, change))
        return change
