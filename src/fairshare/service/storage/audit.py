"""The audit chain: append-only decision records with evidence, hash-chained (DESIGN §5).

A record is `{"seq", "t", "decision", "job", "policy_version", "evidence"}`;
`hash = sha256(prev_hash + canonical JSON of the record)` (keys sorted, no spaces, UTF-8, no NaN),
the first record's prev_hash 64 zeros. The stored text keeps the evidence's own key order (so an
export reads like the replay's decisions.jsonl); verification parses it and hashes its canonical
form. `verify` recomputes the chain and names the first record that does not match; `audit_head`
holds the last seq and hash, so records removed from the end show too.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, func, select, update

from ...errors import InputError
from . import schema
from .db import Tx
from .schema import GENESIS

RESERVED = ("seq", "t", "decision", "job", "policy_version", "evidence")
PAGE = 2000  # rows read per query when walking the chain


def canonical(obj: Any) -> str:
    """Canonical JSON: sorted keys, compact, UTF-8 text; NaN and infinities refused."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def chain_hash(prev_hash: str, record: str) -> str:
    return hashlib.sha256((prev_hash + record).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AuditRecord:
    """A decision to record. `policy_version` None: the policy version stored when it is appended."""

    t: float
    decision: str
    job: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    policy_version: str | None = None

    @staticmethod
    def from_decision(d: Mapping[str, Any], policy_version: str | None = None) -> AuditRecord:
        """From a line of the replay's decisions.jsonl (`{"t", "decision", "job", ...evidence}`)."""
        evidence = {k: v for k, v in d.items() if k not in ("t", "decision", "job")}
        return AuditRecord(float(d["t"]), str(d["decision"]), d.get("job"), evidence, policy_version)


@dataclass(frozen=True)
class StoredRecord:
    seq: int
    t: float
    decision: str
    job: str | None
    policy_version: str | None
    evidence: dict[str, Any]
    prev_hash: str
    hash: str

    def as_decision(self) -> dict[str, Any]:
        """The replay's decisions.jsonl form, plus the record's seq and policy version."""
        return {
            "t": self.t,
            "decision": self.decision,
            "job": self.job,
            **self.evidence,
            "seq": self.seq,
            "policy_version": self.policy_version,
        }


def _check(rec: AuditRecord, i: int) -> None:
    where = f"audit record [{i}]"
    if not (isinstance(rec.t, int | float) and math.isfinite(rec.t)):
        raise InputError(where, "t", f"expected a finite number of seconds, got {rec.t!r}")
    if not rec.decision or not isinstance(rec.decision, str):
        raise InputError(where, "decision", f"expected a non-empty text, got {rec.decision!r}")
    if rec.job is not None and not isinstance(rec.job, str):
        raise InputError(where, "job", f"expected text or null, got {rec.job!r}")
    for key in rec.evidence:
        if not isinstance(key, str):
            raise InputError(where, "evidence", f"keys must be text, got {key!r}")
        if key in RESERVED:
            raise InputError(where, f"evidence.{key}", f"{key!r} is a field of the record itself")


def current_sha(tx: Tx) -> str | None:
    """The sha256 of the stored policy's newest version (None before the first)."""
    p = schema.policy_versions.c
    return tx.conn.execute(select(p.sha256).order_by(p.version.desc()).limit(1)).scalar_one_or_none()


def head(tx: Tx, lock: bool = False) -> tuple[int, str]:
    """The last (seq, hash); `lock` holds the head row until the transaction ends (serializes appends)."""
    q = select(schema.audit_head.c.seq, schema.audit_head.c.hash).where(schema.audit_head.c.id == 1)
    if lock:
        q = q.with_for_update()
    row = tx.conn.execute(q).one()
    return int(row.seq), str(row.hash)


def append(tx: Tx, records: Iterable[AuditRecord]) -> list[StoredRecord]:
    """Append records in order; the caller's transaction makes them all-or-nothing."""
    pending = list(records)
    if not pending:
        return []
    for i, rec in enumerate(pending):
        _check(rec, i)
    seq, prev = head(tx, lock=True)
    current: str | None = None
    if any(r.policy_version is None for r in pending):
        current = current_sha(tx)
    out = []
    for i, rec in enumerate(pending):
        seq += 1
        version = rec.policy_version if rec.policy_version is not None else current
        t = float(rec.t)
        evidence = dict(rec.evidence)
        body = {
            "seq": seq,
            "t": t,
            "decision": rec.decision,
            "job": rec.job,
            "policy_version": version,
            "evidence": evidence,
        }
        try:
            text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            digest = chain_hash(prev, canonical(body))
        except (TypeError, ValueError) as exc:
            raise InputError(f"audit record [{i}]", "evidence", f"not storable as JSON: {exc}") from None
        tx.conn.execute(
            schema.audit.insert().values(
                seq=seq,
                t=t,
                decision=rec.decision,
                job=rec.job,
                policy_version=version,
                record=text,
                prev_hash=prev,
                hash=digest,
            )
        )
        out.append(StoredRecord(seq, t, rec.decision, rec.job, version, evidence, prev, digest))
        prev = digest
    tx.conn.execute(update(schema.audit_head).where(schema.audit_head.c.id == 1).values(seq=seq, hash=prev))
    return out


def _stored(row: Any) -> StoredRecord:
    body = json.loads(row.record)
    return StoredRecord(
        int(row.seq),
        float(row._mapping["t"]),  # Row.t is the row as a tuple
        str(row.decision),
        row.job,
        row.policy_version,
        body.get("evidence", {}),
        str(row.prev_hash),
        str(row.hash),
    )


def query(
    tx: Tx,
    *,
    job: str | None = None,
    decision: str | None = None,
    since: float | None = None,
    until: float | None = None,
    after_seq: int = 0,
    limit: int | None = 100,
    newest_first: bool = False,
) -> list[StoredRecord]:
    """Records matching every given filter, by seq (since <= t < until)."""
    a = schema.audit.c
    q = select(schema.audit)
    if job is not None:
        q = q.where(a.job == job)
    if decision is not None:
        q = q.where(a.decision == decision)
    if since is not None:
        q = q.where(a.t >= since)
    if until is not None:
        q = q.where(a.t < until)
    if after_seq:
        q = q.where(a.seq < after_seq) if newest_first else q.where(a.seq > after_seq)
    q = q.order_by(a.seq.desc() if newest_first else a.seq)
    if limit is not None:
        q = q.limit(limit)
    return [_stored(r) for r in tx.conn.execute(q)]


def count(tx: Tx) -> int:
    return int(tx.conn.execute(select(func.count()).select_from(schema.audit)).scalar_one())


def rows(tx: Tx) -> Iterator[Row[Any]]:
    """Every stored row in seq order, a page at a time."""
    last: int | None = None
    while True:
        q = select(schema.audit).order_by(schema.audit.c.seq).limit(PAGE)
        if last is not None:
            q = q.where(schema.audit.c.seq > last)
        page = tx.conn.execute(q).all()
        yield from page
        if len(page) < PAGE:
            return
        last = int(page[-1].seq)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    records: int  # records checked before the first bad one (all of them when ok)
    head_seq: int
    head_hash: str
    bad_seq: int | None = None
    reason: str | None = None
    bad_record: str | None = None  # the stored row of the first bad record, as JSON text


def verify(tx: Tx) -> Verdict:
    """Recompute the chain (run it in a snapshot transaction); the first record that does not match."""
    head_seq, head_hash = head(tx)
    prev, expected, checked = GENESIS, 1, 0

    def bad(row: Any, reason: str) -> Verdict:
        shown = {k: row._mapping[k] for k in ("seq", "t", "decision", "job", "policy_version")}
        shown |= {"record": row.record, "prev_hash": row.prev_hash, "hash": row.hash}
        return Verdict(False, checked, head_seq, head_hash, int(row.seq), reason, canonical(shown))

    for row in rows(tx):
        seq = int(row.seq)
        if seq != expected:
            return bad(
                row,
                f"record {expected} is missing: record {expected - 1} is followed by record {seq}"
                if seq > expected
                else f"record {seq} is out of order (expected {expected})",
            )
        try:
            body = json.loads(row.record)
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            return bad(row, f"its record is not valid JSON ({exc}): it was edited")
        if body.get("seq") != seq:
            return bad(
                row,
                f"it is stored as record {seq} but was written as record {body.get('seq')}: "
                "records were moved or reordered",
            )
        if row.prev_hash != prev:
            return bad(
                row,
                "its prev_hash is not the hash of the record before it: that record was changed "
                "(and its hash recomputed), or a record was removed or inserted before it",
            )
        if chain_hash(prev, canonical(body)) != row.hash:
            return bad(row, "its hash does not match its content: the record was edited")
        for col in ("t", "decision", "job", "policy_version"):
            stored = row._mapping[col]
            if stored != body.get(col):
                return bad(
                    row,
                    f"its {col} column says {stored!r} but the hashed record says "
                    f"{body.get(col)!r}: the row was edited",
                )
        prev, expected, checked = row.hash, expected + 1, checked + 1
    if head_seq != checked or head_hash != prev:
        end = (
            f"the chain ends at record {checked} but its head says record {head_seq}: records at the "
            "end were removed"
            if head_seq > checked
            else f"the head (record {head_seq}, {head_hash[:12]}) does not match the chain's end "
            f"(record {checked}, {prev[:12]}): the head was edited"
        )
        return Verdict(
            False, checked, head_seq, head_hash, checked + 1 if head_seq > checked else head_seq, end, None
        )
    return Verdict(True, checked, head_seq, head_hash)
