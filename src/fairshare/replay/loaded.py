"""What a replay is run on (`Inputs`): the policy, the cluster and the jobs, loaded from files, a
built-in scenario or a trace (fairshare.replay.runner loads them; the as-run replay reads them too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.tree import TreeIndex
from ..inputs.cluster import Cluster
from ..inputs.policy import Policy
from ..inputs.workload import Job

if TYPE_CHECKING:
    from .history import History


@dataclass(frozen=True)
class Inputs:
    name: str
    description: str
    policy: Policy
    policy_text: str
    policy_where: str
    tree: TreeIndex
    cluster: Cluster
    jobs: list[Job]
    notes: tuple[str, ...] = ()  # what a trace loader read, skipped or changed
    history: History | None = None  # the recorded runs of a site folder (as-run; replay/site.py)
    not_modelled: tuple[dict[str, str], ...] = ()  # incumbent settings the model does not implement
