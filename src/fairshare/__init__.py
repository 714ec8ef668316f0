"""fairshare: budget-based fair-share scheduling for GPU clusters.

Public API: load inputs, run one strategy or a comparison, the engine state every driver shares,
and the pure scheduling core. Names are imported on first use, so `import fairshare.core` loads
the core alone (standard library only) and `fairshare check` does not pay for the simulator.

    fairshare.core     decide(snapshot, strategy) -> Decisions; the strategies; JobRequest, Node
    fairshare.engine   EngineState: events in, snapshots out, decisions applied
    fairshare.replay   the simulator (a driver of the engine), comparisons, metrics, outputs
    fairshare.inputs   policy, cluster and workload files, trace formats, built-in scenarios
    fairshare.report   the HTML report, the terminal table, `explain`
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # the interpreter's own (already loaded): `signal` would import enum first
import sys as _sys

if _sys.argv[:1] and _sys.argv[0].rsplit("/", 1)[-1] == "fairshare":
    # the `fairshare` command: a Ctrl-C or SIGTERM from the first instant is remembered instead of
    # ending the process with a traceback from the imports below; fairshare.__main__, imported
    # next, takes over (interrupts.install) and acts on it
    _early: list[int] = []
    for _s in (_signal.SIGINT, _signal.SIGTERM):
        _signal.signal(_s, lambda signum, frame: _early.append(signum))
    if hasattr(_signal, "pthread_sigmask"):  # a parent that started us with them blocked (a
        # thread inside a signal-deferring block): held forever, the command would never see one
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (_signal.SIGINT, _signal.SIGTERM))

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "decide": "core.scheduler",
    "Decisions": "core.snapshot",
    "Hold": "core.snapshot",
    "Preempt": "core.snapshot",
    "Snapshot": "core.snapshot",
    "Start": "core.snapshot",
    "STRATEGIES": "core.strategies",
    "Strategy": "core.strategies",
    "get_strategy": "core.strategies",
    "JobRequest": "core.model",
    "Knobs": "core.model",
    "Node": "core.model",
    "TreeIndex": "core.tree",
    "EngineSetup": "engine.setup",
    "EngineState": "engine.state",
    "InputError": "errors",
    "Cluster": "inputs.cluster",
    "load_cluster": "inputs.cluster",
    "Policy": "inputs.policy",
    "load_policy": "inputs.policy",
    "Job": "inputs.workload",
    "load_workload": "inputs.workload",
    "Comparison": "replay.results",
    "ReplayResult": "replay.results",
    "Series": "replay.results",
    "Inputs": "replay.loaded",
    "compare": "replay.runner",
    "inputs_from_files": "replay.runner",
    "inputs_from_scenario": "replay.runner",
    "run_strategy": "replay.runner",
    "Simulator": "replay.sim",
}

__all__ = [
    "STRATEGIES",
    "Cluster",
    "Comparison",
    "Decisions",
    "EngineSetup",
    "EngineState",
    "Hold",
    "InputError",
    "Inputs",
    "Job",
    "JobRequest",
    "Knobs",
    "Node",
    "Policy",
    "Preempt",
    "ReplayResult",
    "Series",
    "Simulator",
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
    "run_strategy",
]

if TYPE_CHECKING:
    from .core.model import JobRequest, Knobs, Node
    from .core.scheduler import decide
    from .core.snapshot import Decisions, Hold, Preempt, Snapshot, Start
    from .core.strategies import STRATEGIES, Strategy, get_strategy
    from .core.tree import TreeIndex
    from .engine.setup import EngineSetup
    from .engine.state import EngineState
    from .errors import InputError
    from .inputs.cluster import Cluster, load_cluster
    from .inputs.policy import Policy, load_policy
    from .inputs.workload import Job, load_workload
    from .replay.loaded import Inputs
    from .replay.results import Comparison, ReplayResult, Series
    from .replay.runner import compare, inputs_from_files, inputs_from_scenario, run_strategy
    from .replay.sim import Simulator


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fairshare' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
