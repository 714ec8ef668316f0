"""Engine state: the execution plane's bookkeeping every driver shares (DESIGN.md §4)."""

from .events import Event
from .nodes import NodeChange
from .reconfigure import Reconfigured
from .serving import ServingState
from .setup import EngineSetup
from .state import Actions, EngineState, RatesListener

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
