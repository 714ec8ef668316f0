"""The engine's event journal (append-only) and the usage ledger as intervals.

Journal: the engine's recorded events in order, each stored as (seq, t, kind, payload JSON text);
`EngineState.rebuild` will read them back. An event observed from the cluster may carry a key (e.g.
`finish:<job>:<run start>`): the same key again is not journaled twice.

Usage: one interval per charged run, (job, leaf, charge rate, from, to); `to` is None while the run
is still charged. Recording is idempotent: observing the same run again changes nothing, a longer
observation extends it, a conflicting one is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import and_, or_, select

from ...errors import InputError
from ..service_errors import Conflict
from . import schema
from .db import Tx, new_id

PAGE = 2000


@dataclass(frozen=True)
class JournalEvent:
    """An event to journal: `payload` is the engine event's `as_json()` (key order kept); `key`
    identifies an observation, so that observing it again journals nothing."""

    t: float
    kind: str
    payload: Mapping[str, Any]
    key: str | None = None


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    t: float
    kind: str
    payload: dict[str, Any]
    text: str  # the payload exactly as stored


def append_events(tx: Tx, events: Iterable[JournalEvent]) -> list[int | None]:
    """Append events in order; returns their seqs, None for an event whose key is journaled already
    (the caller must not apply it again)."""
    seqs: list[int | None] = []
    j = schema.journal.c
    for i, ev in enumerate(events):
        where = f"journal event [{i}]"
        if not (isinstance(ev.t, int | float) and math.isfinite(ev.t)):
            raise InputError(where, "t", f"expected a finite number of seconds, got {ev.t!r}")
        if not ev.kind or not isinstance(ev.kind, str):
            raise InputError(where, "kind", f"expected a non-empty text, got {ev.kind!r}")
        if ev.key is not None and (not isinstance(ev.key, str) or not ev.key):
            raise InputError(where, "key", f"expected a non-empty text or none, got {ev.key!r}")
        try:
            text = json.dumps(ev.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputError(where, "payload", f"not storable as JSON: {exc}") from None
        if ev.key is not None and tx.conn.execute(select(j.seq).where(j.key == ev.key)).first() is not None:
            seqs.append(None)
            continue
        res = tx.conn.execute(
            schema.journal.insert().values(t=float(ev.t), kind=ev.kind, payload=text, key=ev.key)
        )
        seqs.append(new_id(res))
    return seqs


def events(tx: Tx, after: int = 0, kind: str | None = None) -> Iterator[StoredEvent]:
    """Journal events with seq > after, in order, a page at a time."""
    j = schema.journal.c
    last = after
    while True:
        q = select(schema.journal).where(j.seq > last).order_by(j.seq).limit(PAGE)
        if kind is not None:
            q = q.where(j.kind == kind)
        page = tx.conn.execute(q).all()
        for r in page:
            yield StoredEvent(
                int(r.seq), float(r._mapping["t"]), str(r.kind), json.loads(r.payload), str(r.payload)
            )
        if len(page) < PAGE:
            return
        last = int(page[-1].seq)


@dataclass(frozen=True)
class Interval:
    """Charged usage of one run: `charge_rate` GPU-equivalents per second from `t_from` to `t_to`."""

    job: str
    leaf: str
    charge_rate: float
    t_from: float
    t_to: float | None = None  # None: still charged

    def charged(self, lo: float, hi: float) -> float:
        """GPU-equivalent seconds charged within [lo, hi) (an open interval counts up to hi)."""
        end = hi if self.t_to is None else min(self.t_to, hi)
        return max(0.0, end - max(self.t_from, lo)) * self.charge_rate


UsageOutcome = Literal["added", "extended", "closed", "unchanged", "stale"]


def _check(iv: Interval) -> None:
    where = "usage"
    for name in ("job", "leaf"):
        value = getattr(iv, name)
        if not isinstance(value, str) or not value:
            raise InputError(where, name, f"expected a non-empty text, got {value!r}")
    for name in ("charge_rate", "t_from", "t_to"):
        value = getattr(iv, name)
        if value is None and name == "t_to":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InputError(where, name, f"expected a finite number, got {value!r}")
    if iv.charge_rate < 0:
        raise InputError(where, "charge_rate", f"must be >= 0, got {iv.charge_rate!r}")
    if iv.t_to is not None and iv.t_to < iv.t_from:
        raise InputError(where, "t_to", f"ends ({iv.t_to!r}) before it starts ({iv.t_from!r})")


def record_usage(tx: Tx, iv: Interval) -> UsageOutcome:
    """Record an observation of a run's charged interval; the same observation twice changes nothing.

    A run is identified by (job, t_from). Observing it again with a later end extends it, with an
    end where it was open closes it; an earlier end than stored is stale and ignored (stored usage is
    never shortened). A different leaf or rate for the same run, or a run overlapping another run of
    the same job, is refused (Conflict) and nothing is written.
    """
    _check(iv)
    u = schema.usage.c
    row = tx.conn.execute(
        select(schema.usage).where(u.job == iv.job, u.t_from == float(iv.t_from))
    ).one_or_none()
    if row is not None:
        if row.leaf != iv.leaf or row.charge_rate != float(iv.charge_rate):
            raise Conflict(
                f"usage of job {iv.job!r} from t={iv.t_from!r} is stored with leaf {row.leaf!r} and "
                f"rate {row.charge_rate!r}; the observation says leaf {iv.leaf!r}, rate "
                f"{iv.charge_rate!r}",
                field="usage",
            )
        if iv.t_to == row.t_to:
            return "unchanged"
        if iv.t_to is None or (row.t_to is not None and iv.t_to < row.t_to):
            return "stale"  # an older observation of a run already seen longer or closed
        _no_overlap(tx, iv, exclude=int(row.id))
        tx.conn.execute(schema.usage.update().where(u.id == row.id).values(t_to=float(iv.t_to)))
        return "closed" if row.t_to is None else "extended"
    _no_overlap(tx, iv, exclude=None)
    tx.conn.execute(
        schema.usage.insert().values(
            job=iv.job,
            leaf=iv.leaf,
            charge_rate=float(iv.charge_rate),
            t_from=float(iv.t_from),
            t_to=None if iv.t_to is None else float(iv.t_to),
        )
    )
    return "added"


def _no_overlap(tx: Tx, iv: Interval, exclude: int | None) -> None:
    u = schema.usage.c
    conds = [u.job == iv.job, or_(u.t_to.is_(None), u.t_to > float(iv.t_from))]
    if iv.t_to is not None:
        conds.append(u.t_from < float(iv.t_to))
    if exclude is not None:
        conds.append(u.id != exclude)
    other = tx.conn.execute(select(schema.usage).where(and_(*conds)).limit(1)).one_or_none()
    if other is not None:
        raise Conflict(
            f"usage of job {iv.job!r} from t={iv.t_from!r} overlaps its run from t={other.t_from!r} "
            f"to {'now' if other.t_to is None else repr(other.t_to)}: a job holds one run at a time",
            field="usage",
        )


def usage_between(tx: Tx, lo: float, hi: float, leaf: str | None = None) -> list[Interval]:
    """Intervals that overlap [lo, hi), by start then job (open ones included)."""
    u = schema.usage.c
    q = select(schema.usage).where(u.t_from < hi, or_(u.t_to.is_(None), u.t_to > lo))
    if leaf is not None:
        q = q.where(u.leaf == leaf)
    q = q.order_by(u.t_from, u.job)
    return [Interval(r.job, r.leaf, r.charge_rate, r.t_from, r.t_to) for r in tx.conn.execute(q)]


def open_usage(tx: Tx) -> list[Interval]:
    """Runs still charged (no end yet), by start then job."""
    u = schema.usage.c
    q = select(schema.usage).where(u.t_to.is_(None)).order_by(u.t_from, u.job)
    return [Interval(r.job, r.leaf, r.charge_rate, r.t_from, r.t_to) for r in tx.conn.execute(q)]


def keys_since(tx: Tx, t: float) -> dict[str, float]:
    """Observation keys journaled at or after instant t (the loop's dedupe set after a restart)."""
    j = schema.journal.c
    rows = tx.conn.execute(select(j.key, j.t).where(j.key.is_not(None), j.t >= t)).all()
    return {str(k): float(v) for k, v in rows}


def usage_of(tx: Tx, job: str) -> list[Interval]:
    """A job's charged runs, by start."""
    u = schema.usage.c
    q = select(schema.usage).where(u.job == job).order_by(u.t_from)
    return [Interval(r.job, r.leaf, r.charge_rate, r.t_from, r.t_to) for r in tx.conn.execute(q)]


def keys_present(tx: Tx, keys: Iterable[str]) -> set[str]:
    """Which of these observation keys are journaled."""
    j = schema.journal.c
    wanted = list(dict.fromkeys(keys))
    found: set[str] = set()
    for i in range(0, len(wanted), 500):
        part = wanted[i : i + 500]
        found.update(str(k) for (k,) in tx.conn.execute(select(j.key).where(j.key.in_(part))))
    return found
