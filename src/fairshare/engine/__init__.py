"""Engine state: the execution plane's bookkeeping every driver shares (DESIGN.md §4)."""

from .actions import Actions, RatesListener
from .events import Event
from .nodes import NodeChange
from .reconfigure import Reconfigured
from .serving import ServingState
from .setup import EngineSetup
from .state import EngineState

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
