"""Engine state: the execution plane's bookkeeping every driver shares (DESIGN.md §4)."""

from .events import Event
from .state import Actions, EngineSetup, EngineState, RatesListener

__all__ = ["Actions", "EngineSetup", "EngineState", "Event", "RatesListener"]
