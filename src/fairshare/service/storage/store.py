"""`Store`: the service's storage behind one interface, SQLite or PostgreSQL.

Open with `Store.open(url, clock)` (runs the migrations). Every write is one transaction: use
`with store.write() as tx:` and the module functions (`audit.append`, `journal.append_events`,
`journal.record_usage`, `portfolio.put_policy`, `tokens.create_token`, ...), or `commit()`, the
scheduler loop's write-ahead step: its journal events, audit records and usage observations in one
transaction, committed before the loop acts on them. Nothing is ever half-written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import URL

from ...errors import InputError
from ..timefmt import Clock
from . import audit, journal
from .audit import AuditRecord, StoredRecord
from .db import Tx, make_engine, migrate, parse_url, transaction
from .journal import Interval, JournalEvent, UsageOutcome
from .lock import WriterLock


@dataclass(frozen=True)
class Committed:
    """What one `commit` stored: the journal seqs (None: a keyed event journaled before), the audit
    records, each usage outcome."""

    events: list[int | None]
    audit: list[StoredRecord]
    usage: list[UsageOutcome]


class Store:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine = engine
        self.clock = clock
        self.revision = ""

    @classmethod
    def open(
        cls, url: str | URL, clock: Clock, *, run_migrations: bool = True, must_exist: bool = False
    ) -> Store:
        """Connect and bring the schema up to date (a database newer than this code is refused).

        `must_exist`: refuse an SQLite file that does not exist yet instead of creating it (for
        commands that only read: a mistyped path should not verify as an empty database).
        """
        parsed = parse_url(url) if isinstance(url, str) else url
        if must_exist and parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").exists():
            raise InputError(
                "--db",
                str(parsed.database),
                "no such database file (it is created by a command that writes, e.g. fairshare "
                "policy push or fairshare token create)",
            )
        store = cls(make_engine(parsed), clock)
        if run_migrations:
            try:
                store.revision = migrate(store.engine)
            except BaseException:
                store.close()
                raise
        return store

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    @property
    def url(self) -> str:
        """The database URL with its password masked."""
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction: committed at the end of the block, rolled back on an error."""
        with transaction(self.engine, self.clock, write=True) as tx:
            yield tx

    @contextmanager
    def read(self, snapshot: bool = False) -> Iterator[Tx]:
        """A read transaction; `snapshot`: all its reads see one state (for verification, exports)."""
        with transaction(self.engine, self.clock, write=False, snapshot=snapshot) as tx:
            yield tx

    def writer_lock(self) -> WriterLock:
        return WriterLock(self.engine, self.clock)

    def commit(
        self,
        *,
        events: Iterable[JournalEvent] = (),
        audit_records: Iterable[AuditRecord] = (),
        usage: Iterable[Interval] = (),
    ) -> Committed:
        """The loop's write-ahead step: everything given, in one transaction, or nothing."""
        with self.write() as tx:
            seqs = journal.append_events(tx, events)
            stored = audit.append(tx, audit_records)
            outcomes = [journal.record_usage(tx, iv) for iv in usage]
        return Committed(seqs, stored, outcomes)
