"""fairshare: budget-based fair-share scheduling for GPU clusters.

Public API: load inputs, run one policy or a comparison, and the pure scheduling core.
"""

from .core.scheduler import decide
from .core.snapshot import Decisions, Hold, Preempt, Snapshot, Start
from .core.strategies import STRATEGIES, Strategy, get_strategy
from .core.tree import TreeIndex
from .errors import InputError
from .inputs.cluster import Cluster, load_cluster
from .inputs.policy import Policy, load_policy
from .inputs.workload import Job, load_workload
from .replay.results import Comparison, ReplayResult, Series
from .replay.runner import Inputs, compare, inputs_from_files, inputs_from_scenario, run_policy

__version__ = "0.1.0"

__all__ = [
    "STRATEGIES",
    "Cluster",
    "Comparison",
    "Decisions",
    "Hold",
    "InputError",
    "Inputs",
    "Job",
    "Policy",
    "Preempt",
    "ReplayResult",
    "Series",
    "Snapshot",
    "Start",
    "Strategy",
    "TreeIndex",
    "__version__",
    "compare",
    "decide",
    "get_strategy",
    "inputs_from_files",
    "inputs_from_scenario",
    "load_cluster",
    "load_policy",
    "load_workload",
    "run_policy",
]
