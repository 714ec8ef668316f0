"""The scheduling core: `decide(snapshot, strategy) -> Decisions`, a pure function.

Standard library only (a test checks it): a driver, a test or a notebook can import it alone.
"""

from .model import JobRequest, Knobs, Node, ResolvedException
from .scheduler import decide
from .snapshot import Decisions, Hold, HoldReason, JobState, Preempt, PreemptReason, RunView, Snapshot, Start
from .strategies import STRATEGIES, Strategy, get_strategy
from .tree import TreeIndex

__all__ = [
    "STRATEGIES",
    "Decisions",
    "Hold",
    "HoldReason",
    "JobRequest",
    "JobState",
    "Knobs",
    "Node",
    "Preempt",
    "PreemptReason",
    "ResolvedException",
    "RunView",
    "Snapshot",
    "Start",
    "Strategy",
    "TreeIndex",
    "decide",
    "get_strategy",
]
