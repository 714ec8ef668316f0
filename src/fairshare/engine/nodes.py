"""The cluster's nodes changed while an engine serves (`ServingState.set_nodes`).

A live cluster gains and loses nodes; the replay's never does. A driver gives the engine the
cluster's nodes as they are now (every node that exists, schedulable or not: a node that is merely
down or drained stays, and the driver reports its drain as before); the engine compares them with
its own by name. A separate call rather than `reconfigure` with other nodes: a policy change
re-applies the policy's carry-over rules (tree remap, window, decay grid, exception timers), while
a node change touches capacity and placement only, and comes from the cluster (the observations),
not from the operator. The rules, the edge cases with each:

Index. A node keeps its index for the engine's life: the journal, the runs' allocations, the
  reservations and the audit refer to nodes by index. Nodes are never renumbered or dropped from
  the index; `EngineState.nodes` only grows.
New node (a name the engine does not have): appended with the next index, in the order the driver
  lists the new ones, and in service from now (free, not drained). Its GPU type must have a rate in
  the policy's gpu_rates unless the engine has nodes of that type already (as the replay refuses a
  cluster whose GPU type has no rate; the engine's own nodes were rated 1.0 when no rate was given):
  otherwise the whole change is refused (ValueError naming the node and its type) and nothing
  changes. A node with no GPUs, or a name listed twice, is refused the same way.
Removed node (a name the engine has in service and the cluster no longer lists): out of service
  from now, for good: a drain that never ends. It takes no new start, its idle GPUs leave C(t) (its
  allocated ones count until their runs end, as for a drain), a drain it was under is dropped with
  its deadline, and later drains or undrains of it change nothing. Its running jobs are never
  preempted by the engine because of the removal: the cluster reports what happened to them
  (finished, preempted, cancelled) as for any run.
Returning node (a removed node's name, listed again with the same hardware: GPUs, GPU type, CPUs,
  memory, block, pool): back in service at its old index, not drained (the driver reports a drain
  as for any node).
Changed node (a name the engine has, listed with other hardware): the old index is removed (the
  rule above: its runs keep running there) and the node is new under the same name at the next
  index. `EngineState.nodes` may then hold a name twice; the highest index is the cluster's node.
Derived state. Everything the node set feeds is rebuilt from the engine's own records: the free
  GPU index (types, buckets, blocks, availability: drains and removals), C(t) and its per-type
  parts, the pending queues (their shapes name GPU type ids, which a new type may renumber) and
  demand. A pending job's charge (its cheapest over the GPU types it may use) is computed again
  when the set of GPU types changes. The ledger, the tree, timers, holds and reservations do not
  depend on the nodes and are kept. Usage is integrated up to now first, at the old capacity.
No change (the same nodes, the same service states): nothing happens and nothing is journaled.

How: `plan_nodes` says what changes, `nodes_state` computes the new state from the state's public
reads (a typed `NodesState`, fairshare.engine.changes) and `EngineState.adopt_nodes` takes it in.

Deterministic: the result depends on the state and the nodes given only, so a journal with the
`set_nodes` record rebuilds the same state (EngineState.rebuild).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from ..core.model import Node
from ..core.placement import FreeIndex
from ..core.snapshot import PendingQueues, leaf_sort_key
from .changes import NodeChange, NodesState
from .demand import Demand
from .fleet import Fleet
from .state import EngineState

__all__ = ["NodeChange", "nodes_state", "plan_nodes"]


def plan_nodes(
    known: Sequence[Node], out: AbstractSet[int], cluster: Sequence[Node], rates: Mapping[str, float]
) -> NodeChange:
    """The change that takes an engine with nodes `known` (indices in `out` removed) to the
    cluster's `cluster` (the module's rules). Raises ValueError when it must be refused."""
    latest = {n.name: i for i, n in enumerate(known)}  # a name's highest index: the cluster's node
    typed = {n.gpu_type for n in known}
    nodes = list(known)
    added: list[int] = []
    removed: list[int] = []
    returned: list[int] = []
    seen: set[str] = set()
    for n in cluster:
        if n.name in seen:
            raise ValueError(f"node {n.name!r} is listed twice")
        seen.add(n.name)
        i = latest.get(n.name)
        if i is not None and known[i] == n:
            if i in out:
                returned.append(i)
            continue
        if n.gpus <= 0:
            raise ValueError(f"node {n.name!r} has no GPUs")
        if n.gpu_type not in rates and n.gpu_type not in typed:
            have = ", ".join(sorted(rates)) or "none"
            raise ValueError(
                f"node {n.name!r}: GPU type {n.gpu_type!r} has no rate in the policy's gpu_rates "
                f"(rated: {have}); add a rate for it to the policy first"
            )
        if i is not None and i not in out:
            removed.append(i)  # other hardware under the same name: the old index leaves service
        nodes.append(n)
        added.append(len(nodes) - 1)
    removed += [i for name, i in latest.items() if name not in seen and i not in out]
    return NodeChange(tuple(nodes), tuple(added), tuple(sorted(removed)), tuple(sorted(returned)))


def nodes_state(e: EngineState, change: NodeChange) -> NodesState:
    """The state `change` (plan_nodes) gives `e` from its instant (the module's rules), from the
    state's public reads; `e` is not changed (EngineState.adopt_nodes takes the result in)."""
    old, nodes = e.fleet, change.nodes
    index = FreeIndex(nodes)
    fleet = Fleet(index, [e.rates.get(n.gpu_type, 1.0) for n in nodes])
    for i, n in enumerate(old.index.nodes):
        used = n.gpus - old.index.free[i]
        if used:
            fleet.change_free(i, -used)
    out = (old.retired | set(change.removed)) - set(change.returned)
    for i, deadline in old.draining.items():
        if i not in out:
            fleet.drain(i, deadline)
    for i in sorted(out):
        fleet.retire(i)
    new_types = index.types != old.index.types
    demand = Demand(e.tree, index, nodes, e.rates)
    pending = PendingQueues()
    for was in e.pending.jobs.values():
        job = was
        if new_types:
            job = dataclasses.replace(was, charge=min(c for _, c in demand.type_charges(was)))
        st = e.states[job.id]
        pending.add(
            job,
            index,
            leaf_sort_key(job, st, e.knobs.leaf_order) if e.keyed else None,
            never_started=st.starts == 0,
        )
        demand.add_pending(job)
    for job_id, view in e.running.items():
        if job_id in e.detached:
            demand.add_direct(e.detached[job_id], view.charge)
        else:
            demand.add_run(view.job.leaf, index.node_type[view.alloc[0][0]], view.charge)
    return NodesState(change, fleet, demand, pending)
