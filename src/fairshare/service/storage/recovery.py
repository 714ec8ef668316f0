"""Each class's recovery, read back from the audit (docs/progress.md): for `fairshare review`.

The live engine keeps the same figures in memory (engine/progress.py); the review reads them from
the stored records so it needs no loop: per job in audit order, a run that reported (`progress` or
`checkpoint`) and was then preempted is a requeued run when the job starts again, and it resumed
when that run reports `resumed`. A job's class and declared `resumable` come from its reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from ...engine.progress import not_borne_out
from . import schema
from .audit import _stored
from .db import Tx

_KINDS = ("start", "preempt", "progress", "checkpoint", "resumed")


@dataclass
class ClassRecovery:
    cls: str
    declared_resumable: bool = False
    restarts: int = 0
    resumed: int = 0

    @property
    def not_borne_out(self) -> bool:
        return not_borne_out(self.declared_resumable, self.restarts, self.resumed)

    def as_json(self) -> dict[str, Any]:
        return {
            "class": self.cls,
            "declared_resumable": self.declared_resumable,
            "restarts": self.restarts,
            "resumed": self.resumed,
            "resumed_share": self.resumed / self.restarts if self.restarts else None,
        }


@dataclass
class _Job:
    cls: str | None = None
    reported: bool = False  # the current run reported
    requeued: bool = False  # its reporting run was preempted: the next start is a restart
    awaiting: bool = False  # restarted: a `resumed` report counts


def recovery_from_audit(tx: Tx) -> list[ClassRecovery]:
    """Per class with requeued reporting runs, by class name."""
    a = schema.audit.c
    q = select(schema.audit).where(a.decision.in_(_KINDS)).order_by(a.seq)
    jobs: dict[str, _Job] = {}
    out: dict[str, ClassRecovery] = {}
    for row in tx.conn.execute(q):
        rec = _stored(row)
        if rec.job is None:
            continue
        j = jobs.setdefault(rec.job, _Job())
        if rec.decision in ("progress", "checkpoint", "resumed"):
            cls = str(rec.evidence.get("class", j.cls or ""))
            j.cls = cls
            c = out.setdefault(cls, ClassRecovery(cls))
            c.declared_resumable = bool(rec.evidence.get("resumable", c.declared_resumable))
            if rec.decision == "resumed" and j.awaiting:
                c.resumed += 1
                j.awaiting = False
            j.reported = True
        elif rec.decision == "preempt":
            j.requeued, j.reported, j.awaiting = j.reported, False, False
        elif rec.decision == "start":
            if j.requeued and j.cls is not None:
                out.setdefault(j.cls, ClassRecovery(j.cls)).restarts += 1
                j.awaiting = True
            j.requeued, j.reported = False, False
    return [out[c] for c in sorted(out) if out[c].restarts]
