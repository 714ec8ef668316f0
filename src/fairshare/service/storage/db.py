"""Database URLs, engines and transactions for SQLite (default, WAL) and PostgreSQL (psycopg 3).

Every write is one transaction (`Tx`): SQLite takes its write lock at BEGIN (BEGIN IMMEDIATE), so a
transaction that reads and then writes never fails half-way on a busy database; PostgreSQL writes
that extend the audit chain lock its head row first. Migrations (Alembic, shipped in the package)
run on open, under a lock, so two processes opening a new database do not both create it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, CursorResult, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ...errors import InputError
from ..service_errors import SchemaTooNew
from ..timefmt import Clock

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_WRITE = "fairshare_write"
_MIGRATION_LOCK = (0x66616972, 0x6D696772)  # pg_advisory_xact_lock keys: "fair", "migr"
SQLITE_BUSY_MS = 30_000


def parse_url(text: str, where: str = "--db") -> URL:
    """`sqlite:///PATH`, a bare file path (SQLite), or `postgresql[+psycopg]://...`."""
    raw = text.strip()
    if not raw:
        raise InputError(where, "", "give a database: sqlite:///PATH or postgresql+psycopg://USER@HOST/DB")
    if "://" not in raw:
        return make_url("sqlite://").set(database=str(Path(raw).expanduser().resolve()))
    try:
        url = make_url(raw)
    except ArgumentError:
        raise InputError(where, _hide(raw), "not a database URL") from None
    backend, _, driver = url.drivername.partition("+")
    if backend == "sqlite":
        if driver not in ("pysqlite", ""):
            raise InputError(where, _hide(raw), "use sqlite:///PATH (the built-in sqlite3 driver)")
        if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
            raise InputError(
                where,
                _hide(raw),
                "SQLite needs a file (sqlite:///fairshare.db): an in-memory database would lose the "
                "ledger and cannot be shared with a second process",
            )
        return url.set(drivername="sqlite", database=str(Path(url.database).expanduser().resolve()))
    if backend in ("postgresql", "postgres"):
        if driver not in ("psycopg", "psycopg2", ""):
            raise InputError(where, _hide(raw), "use postgresql+psycopg://... (psycopg 3)")
        return url.set(drivername="postgresql+psycopg")
    raise InputError(
        where,
        _hide(raw),
        f"unsupported database {backend!r}: use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB",
    )


def _hide(raw: str) -> str:
    """The URL with its password masked, for messages."""
    try:
        return make_url(raw).render_as_string(hide_password=True)
    except ArgumentError:
        return raw.rsplit("@", maxsplit=1)[-1] if "@" in raw else raw


def make_engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_MS / 1000})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(url, pool_pre_ping=True)


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    # the driver's own transaction handling off: we say BEGIN ourselves (see _sqlite_begin)
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")  # a committed ledger change survives a power cut
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def new_id(result: CursorResult[Any]) -> int:
    """The primary key an INSERT generated."""
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


@dataclass
class Tx:
    """One open transaction: its connection, the backend's name and the instant it started."""

    conn: Connection
    backend: str  # "sqlite" or "postgresql"
    now: float


@contextmanager
def transaction(engine: Engine, clock: Clock, *, write: bool, snapshot: bool = False) -> Iterator[Tx]:
    """A transaction committed when the block ends normally and rolled back otherwise.

    `snapshot`: every statement sees the same state (PostgreSQL REPEATABLE READ; an SQLite read
    transaction in WAL mode already does).
    """
    options: dict[str, Any] = {_WRITE: write}
    if snapshot and engine.dialect.name == "postgresql":
        options["isolation_level"] = "REPEATABLE READ"
    with engine.connect().execution_options(**options) as conn, conn.begin():
        yield Tx(conn, engine.dialect.name, clock())


def migrate(engine: Engine) -> str:
    """Bring the schema to this package's head revision; returns it. Refuses a newer schema."""
    from alembic import command
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(cfg)
    head = script.get_current_head()
    assert head is not None
    known = {rev.revision for rev in script.walk_revisions()}
    with engine.connect().execution_options(**{_WRITE: True}) as conn, conn.begin():
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK[0]}, {_MIGRATION_LOCK[1]})")
        current = MigrationContext.configure(conn).get_current_revision()
        if current is not None and current not in known:
            raise SchemaTooNew(
                f"the database's schema is at revision {current}, which this fairshare does not know "
                f"(its newest is {head}): a newer fairshare migrated it; upgrade fairshare"
            )
        if current != head:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    return head
