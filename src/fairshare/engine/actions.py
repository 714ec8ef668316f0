"""What a pass asks a driver to do (`Actions`), with the audit records of the pass (`pass_audit`).
Who hears of the engine's rates is `RatesListener` (engine/state.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.model import Node
from ..core.snapshot import Decisions, Preempt, Start


@dataclass(frozen=True)
class Actions:
    """What a pass asks the driver to do, in this order, and the audit records of the pass
    (`{"t", "decision", "job", ...evidence}`, the lines of decisions.jsonl)."""

    preempts: tuple[Preempt, ...]
    starts: tuple[Start, ...]
    audit: tuple[dict[str, Any], ...]


def pass_audit(
    t: float, names: Sequence[Node], d: Decisions, outcome: Iterable[tuple[str, str, dict[str, Any]]]
) -> Actions:
    """A pass's actions and its audit records at t: its preemptions, its starts (on the nodes
    `names`), then the state's outcome records (a reservation, holds with their evidence)."""
    audit: list[dict[str, Any]] = []
    for p in d.preempts:
        audit.append(
            {
                "t": t,
                "decision": "preempt",
                "job": p.job,
                "reason": p.reason,
                "by": p.by,
                "lost_gpu_s": p.lost_gpu_s,
                **p.evidence,
            }
        )
    for s in d.starts:
        nodes = [names[i].name for i, _ in s.alloc]
        audit.append({"t": t, "decision": "start", "job": s.job, "nodes": nodes, **s.evidence})
    evidence = {h.job: h.evidence for h in d.holds}
    for kind, job, extra in outcome:
        more = evidence[job] if kind == "hold" else {}
        audit.append({"t": t, "decision": kind, "job": job, **extra, **more})
    return Actions(d.preempts, d.starts, tuple(audit))
