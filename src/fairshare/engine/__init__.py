"""Engine state: the execution plane's bookkeeping every driver shares (DESIGN.md §4)."""

from .actions import Actions
from .changes import NodeChange, Reconfigured
from .events import Event
from .serving import ServingState
from .setup import EngineSetup
from .state import EngineState, RatesListener

__all__ = [
    "Actions",
    "EngineSetup",
    "EngineState",
    "Event",
    "NodeChange",
    "RatesListener",
    "Reconfigured",
    "ServingState",
]
