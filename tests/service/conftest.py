"""Service fixtures: a settable clock, a policy, and a store on each backend.

`store` runs a test on SQLite (a temp file) and on PostgreSQL: a throwaway server this session
starts (DESIGN: TESTING-SERVICES.md) with a fresh database per test. Without PostgreSQL binaries
it installs postgresql-15 with apt-get (as root); if the server still cannot start, the PostgreSQL
tests fail with the reason, never skip. FAIRSHARE_TEST_POSTGRES=postgresql+psycopg://USER@HOST:PORT
uses an existing server instead (a database is created in it per test, so USER needs CREATEDB).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import apt_install
from fairshare.core.model import Node
from fairshare.service.clusters.fake import FakeCluster
from fairshare.service.loop.cycle import SchedulerLoop
from fairshare.service.loop.options import LoopOptions
from fairshare.service.storage import portfolio
from fairshare.service.storage.store import Store

T0 = 1796083200.0  # 2026-12-01T00:00:00Z
PG_MAJOR = "15"

POLICY = """\
window: 7d
gpu_rates: {H100: 1.0}
tree:
  - name: ml
    share: 60
    owner: ml-lead@example.org
    review: 2026-11-30
    hypothesis: the new model ships
    children:
      - {name: vision, share: 50, owner: vis@example.org, review: 2027-03-01}
      - {name: nlp, share: 50, owner: nlp@example.org, review: 2026-12-01}
  - {name: ops, share: 40, owner: ops@example.org, review: 2027-06-30}
classes:
  train: {protected: 1h, max_protected: 2h, resumable: true, checkpoint: 30m}
exceptions:
  - {group: ml/nlp, extra_share: 10, expires: 2026-12-05, approver: cto@example.org, reason: launch}
gates:
  exception_max_days: 14
"""


class Clock:
    """A clock the test sets: `clock()` is the current instant; `advance(seconds)` moves it."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@dataclass
class PgServer:
    base: str  # postgresql+psycopg://USER@HOST:PORT
    stop_dir: Path | None = None  # set when this session started the server
    pg_bin: Path | None = None
    template: str | None = None  # a migrated database that new ones copy (faster than migrating each)

    def admin_url(self) -> str:
        return self.base.replace("postgresql+psycopg", "postgresql", 1) + "/postgres"

    def create_database(self, migrated: bool = True) -> str:
        """A new database: a copy of the migrated template, or (migrated=False) an empty one."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        like = f" TEMPLATE {self.template}" if self.template and migrated else ""
        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}{like}")
        return name

    def make_template(self) -> None:
        """A migrated database to copy: each test's database starts at the current schema."""
        name = self.create_database()
        Store.open(self.url(name), lambda: 0.0).close()
        self.template = name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"


def _pg_bin() -> Path | None:
    root = Path("/usr/lib/postgresql")
    found = [p / "bin" for p in sorted(root.glob("*"), reverse=True) if (p / "bin" / "initdb").exists()]
    preferred = [b for b in found if b.parent.name == PG_MAJOR]
    if preferred or found:
        return (preferred or found)[0]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _install() -> str | None:
    """Install PostgreSQL with apt-get; the reason it could not, or None."""
    return apt_install([f"postgresql-{PG_MAJOR}", f"postgresql-client-{PG_MAJOR}"], "PostgreSQL binaries")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(pg_bin: Path) -> PgServer:
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    # as root the server runs as postgres, which must reach the folder: /tmp, whatever TMPDIR says
    tmp = Path(tempfile.mkdtemp(prefix="fairshare-pg-", dir="/tmp" if as_pg else None))
    if as_pg:
        shutil.chown(tmp, "postgres", "postgres")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*as_pg, *args], capture_output=True, text=True, timeout=120, check=False)

    init = run(
        str(pg_bin / "initdb"), "-D", str(tmp / "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8",
        "--no-locale", "--no-sync",
    )  # fmt: skip
    if init.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"PostgreSQL initdb failed: {init.stderr.strip()[-800:]}", pytrace=False)
    last = ""
    for _ in range(3):  # another process may take the free port between probe and start
        port = _free_port()
        opts = (
            f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        started = run(str(pg_bin / "pg_ctl"), "-D", str(tmp / "data"), "-l", str(tmp / "log"), "-w",
                      "-o", opts, "start")  # fmt: skip
        if started.returncode == 0:
            return PgServer(f"postgresql+psycopg://postgres@127.0.0.1:{port}", tmp, pg_bin)
        log = (tmp / "log").read_text(errors="replace") if (tmp / "log").exists() else ""
        last = f"{started.stderr.strip()} {log[-800:]}"
    shutil.rmtree(tmp, ignore_errors=True)
    pytest.fail(f"PostgreSQL did not start: {last}", pytrace=False)


def _stop(server: PgServer) -> None:
    assert server.stop_dir is not None and server.pg_bin is not None
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*as_pg, str(server.pg_bin / "pg_ctl"), "-D", str(server.stop_dir / "data"), "-m", "fast", "-w",
         "stop"],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    shutil.rmtree(server.stop_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    external = os.environ.get("FAIRSHARE_TEST_POSTGRES")
    if external:
        server = PgServer(external.rstrip("/"))
        server.make_template()
        try:
            yield server
        finally:
            assert server.template is not None
            server.drop_database(server.template)
        return
    pg_bin = _pg_bin()
    if pg_bin is None:
        reason = _install()
        pg_bin = _pg_bin()
        if pg_bin is None:
            pytest.fail(
                f"cannot run the PostgreSQL tests: {reason or 'no initdb after installing'}", pytrace=False
            )
    server = _start(pg_bin)
    try:
        server.make_template()
        yield server
    finally:
        _stop(server)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database on the session's PostgreSQL server (dropped after the test)."""
    name = pg_server.create_database()
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL on each backend: an SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fairshare.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def store(db_url: str, clock: Clock) -> Iterator[Store]:
    with Store.open(db_url, clock) as s:
        yield s


@pytest.fixture
def policy_store(store: Store) -> Store:
    """A store holding POLICY as version 1."""
    from fairshare.service.storage import portfolio

    with store.write() as tx:
        portfolio.put_policy(tx, POLICY, "setup")
    return store


@pytest.fixture
def live(db_url: str) -> Iterator[Any]:
    """A running loop (demo cluster, manual clock) behind the API, after a busy stretch (live_helpers)."""
    from .live_helpers import live_service

    yield from live_service(db_url)


# the loop on the scripted fake cluster (test_fake_cluster.py, test_retention.py)
FAKE_NODES = [Node(f"n{i}", "p", 8, "H100", 64.0, 512.0, "b0") for i in range(2)]


@pytest.fixture
def fake_loop(db_url: str, clock: Clock) -> Iterator[tuple[SchedulerLoop, FakeCluster, Store]]:
    fake = FakeCluster(FAKE_NODES)
    with Store.open(db_url, clock) as store:
        with store.write() as tx:
            portfolio.put_policy(tx, POLICY, "test")
        loop = SchedulerLoop(store, lambda: fake, clock, LoopOptions(speed=0, forecast_s=0.0, publish_s=0.0))
        assert loop.take_lock()
        loop.become_writer()
        yield loop, fake, store
        loop._reset()


def tick(loop: SchedulerLoop, clock: Clock, seconds: float) -> None:
    clock.advance(seconds)
    loop.cycle()
