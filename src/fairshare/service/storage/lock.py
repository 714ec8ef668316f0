"""The one-writer lock: exactly one scheduler loop owns a database's engine state at a time.

PostgreSQL: a session advisory lock held on a connection of its own. SQLite: an exclusive flock on
`<database file>.writer-lock`. Both are released by the operating system or the server when the
holder dies (a killed process closes its socket and its files), so a crashed writer never leaves a
stale lock behind. The holder is named in the refusal (pid, host, since when).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from ..service_errors import WriterLockHeld
from ..timefmt import Clock, iso

PG_KEYS = (0x66616972, 0x77726974)  # pg_try_advisory_lock(int, int): "fair", "writ"


def _me(clock: Clock) -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": iso(clock())}


class WriterLock:
    """Take with `acquire()` (raises WriterLockHeld when another holder has it); `held()` re-checks."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._fd: int | None = None
        self._conn: Connection | None = None

    @property
    def path(self) -> Path:
        db = self._engine.url.database
        assert db is not None
        return Path(db + ".writer-lock")

    def acquire(self) -> None:
        if self._fd is not None or self._conn is not None:
            return
        if self._engine.dialect.name == "postgresql":
            self._acquire_pg()
        else:
            self._acquire_file()

    def _acquire_file(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip()
            os.close(fd)
            raise WriterLockHeld(
                f"another fairshare process holds the writer lock of this database ({self.path}): "
                f"{_holder_text(holder)}; this one may serve reads only"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_me(self._clock)).encode(), 0)
        self._fd = fd

    def _acquire_pg(self) -> None:
        conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            me = _me(self._clock)
            label = f"fairshare-writer pid={me['pid']} host={me['host']} since={me['since']}"
            conn.execute(text("SELECT set_config('application_name', :v, false)"), {"v": label[:63]})
            got = conn.execute(
                text("SELECT pg_try_advisory_lock(CAST(:a AS integer), CAST(:b AS integer))"), _keys()
            ).scalar_one()
            if not got:
                holder = conn.execute(
                    text(
                        "SELECT a.pid, a.application_name, a.client_addr, a.backend_start "
                        "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                        "WHERE l.locktype = 'advisory' AND l.classid::bigint = :a AND l.objid::bigint = :b "
                        "AND l.objsubid = 2 AND l.granted AND l.database = "
                        "(SELECT oid FROM pg_database WHERE datname = current_database())"
                    ),
                    _keys(),
                ).first()
                who = (
                    "unknown holder"
                    if holder is None
                    else f"server pid {holder.pid}, {holder.application_name or 'no name'}, from "
                    f"{holder.client_addr or 'local socket'}, connected {holder.backend_start}"
                )
                raise WriterLockHeld(
                    f"another fairshare process holds the writer lock of this database ({who}); "
                    "this one may serve reads only"
                )
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        self._conn = conn

    def held(self) -> bool:
        """Still held? (False after release, or when the lock's PostgreSQL connection was lost.)"""
        if self._fd is not None:
            return True
        if self._conn is None:
            return False
        try:
            return bool(
                self._conn.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND "
                        "locktype = 'advisory' AND classid::bigint = :a AND objid::bigint = :b "
                        "AND objsubid = 2 AND granted"
                    ),
                    _keys(),
                ).scalar_one()
            )
        except SQLAlchemyError:
            return False

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            # closing the server session releases its advisory locks, so a failed unlock (the
            # session was lost already) leaves nothing held
            try:
                conn.execute(
                    text("SELECT pg_advisory_unlock(CAST(:a AS integer), CAST(:b AS integer))"), _keys()
                )
            except SQLAlchemyError:
                pass
            finally:
                conn.invalidate()
                conn.close()

    def __enter__(self) -> WriterLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def _keys() -> dict[str, int]:
    return {"a": PG_KEYS[0], "b": PG_KEYS[1]}


def _holder_text(raw: str) -> str:
    try:
        info = json.loads(raw)
        return f"pid {info['pid']} on {info['host']}, since {info['since']}"
    except (ValueError, KeyError, TypeError):
        return "holder unknown"
