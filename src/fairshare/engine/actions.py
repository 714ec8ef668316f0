"""What a pass asks a driver to do (`Actions`), and who hears of the engine's rates (`RatesListener`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..core.snapshot import Preempt, Start

if TYPE_CHECKING:
    from .state import EngineState


class RatesListener(Protocol):
    """Told when the engine's rates change and when it integrates them (the replay's metrics)."""

    def rates_changed(self, engine: EngineState) -> None: ...
    def interval(self, t0: float, t1: float) -> None: ...


@dataclass(frozen=True)
class Actions:
    """What a pass asks the driver to do, in this order, and the audit records of the pass
    (`{"t", "decision", "job", ...evidence}`, the lines of decisions.jsonl)."""

    preempts: tuple[Preempt, ...]
    starts: tuple[Start, ...]
    audit: tuple[dict[str, Any], ...]
