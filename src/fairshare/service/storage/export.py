"""`audit export`: the audit records as the replay's decisions.jsonl (so `fairshare explain` reads
live and replayed decisions alike), the journal as events.jsonl, and the current policy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...replay.outputs import EXPORT_KIND, write_files
from ..timefmt import iso
from . import audit, journal, portfolio
from .audit import StoredRecord, Verdict
from .db import Tx
from .export_events import replay_events


@dataclass(frozen=True)
class Exported:
    decisions: int
    events: int
    verdict: Verdict | None


def _line(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _records(tx: Tx) -> list[StoredRecord]:
    out: list[StoredRecord] = []
    after = 0
    while True:
        page = audit.query(tx, after_seq=after, limit=audit.PAGE)
        out.extend(page)
        if len(page) < audit.PAGE:
            return out
        after = page[-1].seq


def export(tx: Tx, out: Path, verdict: Verdict | None) -> Exported:
    """Write OUT/{decisions.jsonl, events.jsonl, policy.yaml, audit.json} from one snapshot `tx`,
    then the completion marker (replay.outputs), so `explain` reads it as a complete folder."""
    out.mkdir(parents=True, exist_ok=True)
    utf8 = "utf-8"
    decisions = [_line(rec.as_decision()) + "\n" for rec in _records(tx)]
    events = [_line(ev) + "\n" for ev in replay_events((e.t, e.payload) for e in journal.events(tx))]
    files = {
        "decisions.jsonl": "".join(decisions).encode(utf8),
        "events.jsonl": "".join(events).encode(utf8),
    }
    cur = portfolio.current_policy(tx)
    if cur is not None:
        files["policy.yaml"] = cur.text.encode(utf8)
    seq, head = audit.head(tx)
    summary = {
        "exported_at": iso(tx.now),
        "records": len(decisions),
        "events": len(events),
        "head_seq": seq,
        "head_hash": head,
        "verified": None if verdict is None else verdict.ok,
        "policy_version": None if cur is None else cur.version,
        "policy_sha256": None if cur is None else cur.sha256,
    }
    files["audit.json"] = (json.dumps(summary, indent=2) + "\n").encode(utf8)
    write_files(out, files, {"fairshare_output": EXPORT_KIND, "exported_at": summary["exported_at"]})
    return Exported(len(decisions), len(events), verdict)
