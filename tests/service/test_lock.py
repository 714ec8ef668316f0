"""The one-writer lock on both backends: a second holder is refused; a dead holder's lock is freed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairshare.service.service_errors import WriterLockHeld
from fairshare.service.storage.store import Store

from .conftest import PgServer

HOLDER = """
import sys, time
from fairshare.service.storage.store import Store
store = Store.open(sys.argv[1], time.time)
lock = store.writer_lock()
lock.acquire()
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_holder_is_refused_until_release(store: Store) -> None:
    first, second = store.writer_lock(), store.writer_lock()
    first.acquire()
    assert first.held()
    with pytest.raises(WriterLockHeld, match=f"pid {os.getpid()}|fairshare-writer pid={os.getpid()}"):
        second.acquire()
    assert not second.held()
    first.release()
    assert not first.held()
    with second:
        assert second.held()
        with pytest.raises(WriterLockHeld, match="may serve reads only"):
            first.acquire()
    first.acquire()
    first.release()


def test_the_lock_is_per_database(store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Holding one database's writer lock does not block another database's."""
    if store.backend == "sqlite":
        other_url = f"sqlite:///{tmp_path / 'other.db'}"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        name = server.create_database()
        request.addfinalizer(lambda: server.drop_database(name))
        other_url = server.url(name)
    with store.writer_lock(), Store.open(other_url, store.clock) as other, other.writer_lock() as lock:
        assert lock.held()


def test_a_dead_holders_lock_is_released(db_url: str, store: Store) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "locked", proc.stderr.read() if proc.stderr else ""
        lock = store.writer_lock()
        with pytest.raises(WriterLockHeld, match=f"pid {proc.pid}|pid={proc.pid}"):
            lock.acquire()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = (
            time.monotonic() + 20
        )  # PostgreSQL ends the dead client's session when it sees the socket close
        while True:
            try:
                lock.acquire()
                break
            except WriterLockHeld:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert lock.held()
        lock.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.postgresql
def test_losing_the_postgresql_session_shows_in_held(pg_url: str) -> None:
    with Store.open(pg_url, time.time) as store:
        lock = store.writer_lock()
        lock.acquire()
        with store.engine.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name LIKE 'fairshare-writer%%' AND datname = current_database()"
            )
        assert not lock.held()
        lock.release()  # does not raise on a lost session
        lock.acquire()
        assert lock.held()
        lock.release()
