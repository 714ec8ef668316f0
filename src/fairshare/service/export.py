"""`audit export`: the audit records as the replay's decisions.jsonl (so `fairshare explain` reads
live and replayed decisions alike), the journal as events.jsonl, and the current policy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import audit, journal, portfolio
from .audit import StoredRecord, Verdict
from .db import Tx
from .timefmt import iso


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
    """Write OUT/{decisions.jsonl, events.jsonl, policy.yaml, audit.json} from one snapshot `tx`."""
    out.mkdir(parents=True, exist_ok=True)
    utf8 = "utf-8"
    n = 0
    with (out / "decisions.jsonl").open("w", encoding=utf8) as f:
        for rec in _records(tx):
            f.write(_line(rec.as_decision()) + "\n")
            n += 1
    m = 0
    with (out / "events.jsonl").open("w", encoding=utf8) as f:
        for ev in journal.events(tx):
            f.write(ev.text + "\n")
            m += 1
    cur = portfolio.current_policy(tx)
    if cur is not None:
        (out / "policy.yaml").write_text(cur.text, encoding=utf8)
    seq, head = audit.head(tx)
    summary = {
        "exported_at": iso(tx.now),
        "records": n,
        "events": m,
        "head_seq": seq,
        "head_hash": head,
        "verified": None if verdict is None else verdict.ok,
        "policy_version": None if cur is None else cur.version,
        "policy_sha256": None if cur is None else cur.sha256,
    }
    (out / "audit.json").write_text(json.dumps(summary, indent=2) + "\n", encoding=utf8)
    return Exported(n, m, verdict)
