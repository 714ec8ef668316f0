"""Storage on both backends: migrations, URLs, the journal, usage intervals, atomic commits."""

from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from fairshare.errors import InputError
from fairshare.service.service_errors import Conflict, SchemaTooNew
from fairshare.service.storage import audit, journal, schema
from fairshare.service.storage.audit import AuditRecord
from fairshare.service.storage.db import parse_url
from fairshare.service.storage.journal import Interval, JournalEvent
from fairshare.service.storage.store import Store

from .conftest import Clock, PgServer


def test_migrated_schema_matches_the_tables(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with store.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), schema.metadata)
    assert diffs == []
    assert store.revision == "0003"


def test_reopening_keeps_the_data_and_the_revision(db_url: str, clock: Clock) -> None:
    with Store.open(db_url, clock) as s, s.write() as tx:
        journal.append_events(tx, [JournalEvent(1.0, "submit", {"job": "a"})])
    with Store.open(db_url, clock) as s, s.read() as tx:
        assert [e.payload for e in journal.events(tx)] == [{"job": "a"}]
        assert s.revision == "0003"


def test_a_newer_schema_is_refused(db_url: str, clock: Clock) -> None:
    with Store.open(db_url, clock) as s, s.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaTooNew, match=r"revision 9999.*newer fairshare"):
        Store.open(db_url, clock)


@pytest.mark.parametrize(
    ("raw", "expect"),
    [
        ("fairshare.db", "sqlite"),
        ("sqlite:///x.db", "sqlite"),
        ("postgresql://u:secret@h/db", "postgresql+psycopg"),
        ("postgres://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h:5433/db", "postgresql+psycopg"),
    ],
)
def test_database_urls(raw: str, expect: str) -> None:
    assert parse_url(raw).drivername == expect


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("sqlite://", "needs a file"),
        ("sqlite:///:memory:", "needs a file"),
        ("mysql://u:secret@h/db", "unsupported database 'mysql'"),
        ("postgresql+asyncpg://u:secret@h/db", "psycopg 3"),
        ("  ", "give a database"),
    ],
)
def test_bad_database_urls_name_the_problem_and_hide_passwords(raw: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        parse_url(raw)
    assert "secret" not in str(err.value)


def test_sqlite_runs_in_wal_mode(tmp_path: Path, clock: Clock) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'x.db'}", clock) as s, s.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_journal_keeps_order_and_payload_bytes(store: Store) -> None:
    payload = {"t": 5.0, "type": "submit", "job": "j-ü", "gpus": 8, "alloc": None}
    committed = store.commit(
        events=[JournalEvent(5.0, "submit", payload), JournalEvent(6.5, "start", {"z": 1, "a": 2})]
    )
    with store.read() as tx:
        got = list(journal.events(tx))
        assert [e.seq for e in got] == committed.events
        assert [e.kind for e in got] == ["submit", "start"]
        assert got[0].payload == payload
        assert got[1].text == '{"z":1,"a":2}'  # key order as the engine wrote it
        assert [e.seq for e in journal.events(tx, after=got[0].seq)] == [got[1].seq]
        assert [e.kind for e in journal.events(tx, kind="start")] == ["start"]


def test_a_keyed_observation_is_journaled_once(store: Store) -> None:
    seen = JournalEvent(9.0, "finish", {"job": "a"}, key="finish:a:0")
    first = store.commit(events=[JournalEvent(1.0, "submit", {"job": "a"}), seen])
    again = store.commit(events=[seen, JournalEvent(9.0, "finish", {"job": "b"}, key="finish:b:0"), seen])
    assert first.events[1] is not None and again.events[0] is None and again.events[2] is None
    with store.read() as tx:
        assert [e.payload["job"] for e in journal.events(tx, kind="finish")] == ["a", "b"]


def test_journal_pages_through_many_events(store: Store) -> None:
    n = journal.PAGE + 5
    store.commit(events=[JournalEvent(float(i), "tick", {"i": i}) for i in range(n)])
    with store.read() as tx:
        assert [e.payload["i"] for e in journal.events(tx)] == list(range(n))


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (JournalEvent(math.nan, "x", {}), "t"),
        (JournalEvent(1.0, "", {}), "kind"),
        (JournalEvent(1.0, "x", {"bad": math.inf}), "payload"),
        (JournalEvent(1.0, "x", {"bad": {1, 2}}), "payload"),
        (JournalEvent(1.0, "x", {}, key=""), "key"),
    ],
)
def test_bad_journal_events_are_refused_by_field(store: Store, event: JournalEvent, field: str) -> None:
    with pytest.raises(InputError) as err:
        store.commit(events=[event])
    assert err.value.at == field


def test_a_commit_is_all_or_nothing(store: Store) -> None:
    with pytest.raises(InputError):
        store.commit(
            events=[JournalEvent(1.0, "submit", {"job": "a"})],
            usage=[Interval("a", "ml/nlp", 1.0, 1.0, None)],
            audit_records=[AuditRecord(1.0, "start", "a", {"bad": math.nan})],
        )
    with store.read() as tx:
        assert list(journal.events(tx)) == []
        assert journal.open_usage(tx) == []
        assert audit.count(tx) == 0
        assert audit.head(tx) == (0, schema.GENESIS)


def test_usage_ingestion_is_idempotent(store: Store) -> None:
    run = Interval("j1", "ml/nlp", 2.0, 100.0, None)
    assert store.commit(usage=[run]).usage == ["added"]
    assert store.commit(usage=[run]).usage == ["unchanged"]
    ended = Interval("j1", "ml/nlp", 2.0, 100.0, 160.0)
    assert store.commit(usage=[ended, ended, run]).usage == ["closed", "unchanged", "stale"]
    later = Interval("j1", "ml/nlp", 2.0, 100.0, 200.0)
    assert store.commit(usage=[later, ended]).usage == ["extended", "stale"]
    with store.read() as tx:
        assert journal.usage_between(tx, 0, 1e9) == [later]
        assert journal.open_usage(tx) == []


def test_usage_conflicts_are_refused_and_change_nothing(store: Store) -> None:
    store.commit(usage=[Interval("j1", "ml/nlp", 2.0, 100.0, 200.0)])
    with pytest.raises(Conflict, match="stored with leaf 'ml/nlp'"):
        store.commit(usage=[Interval("j1", "ops", 2.0, 100.0, 200.0)])
    with pytest.raises(Conflict, match=r"rate 2\.0"):
        store.commit(usage=[Interval("j1", "ml/nlp", 3.0, 100.0, 200.0)])
    with pytest.raises(Conflict, match=r"overlaps its run from t=100\.0"):
        store.commit(usage=[Interval("j1", "ml/nlp", 2.0, 150.0, None)])
    store.commit(usage=[Interval("j1", "ml/nlp", 2.0, 300.0, None)])  # a later run of the same job
    with pytest.raises(Conflict, match=r"overlaps its run from t=300\.0 to now"):
        store.commit(usage=[Interval("j1", "ml/nlp", 2.0, 100.0, 400.0)])  # extending into it
    with store.read() as tx:
        assert journal.usage_between(tx, 0, 1e9) == [
            Interval("j1", "ml/nlp", 2.0, 100.0, 200.0),
            Interval("j1", "ml/nlp", 2.0, 300.0, None),
        ]


@pytest.mark.parametrize(
    ("iv", "field"),
    [
        (Interval("", "a", 1.0, 0.0), "job"),
        (Interval("j", "", 1.0, 0.0), "leaf"),
        (Interval("j", "a", -1.0, 0.0), "charge_rate"),
        (Interval("j", "a", 1.0, math.inf), "t_from"),
        (Interval("j", "a", 1.0, 5.0, 4.0), "t_to"),
    ],
)
def test_bad_usage_names_the_field(store: Store, iv: Interval, field: str) -> None:
    with pytest.raises(InputError) as err:
        store.commit(usage=[iv])
    assert err.value.at == field


def test_usage_window_query_and_charge(store: Store) -> None:
    runs = [
        Interval("a", "ml/nlp", 1.0, 0.0, 50.0),
        Interval("b", "ops", 2.0, 40.0, 120.0),
        Interval("c", "ml/nlp", 0.5, 110.0, None),
        Interval("d", "ops", 1.0, 200.0, 210.0),
    ]
    store.commit(usage=runs)
    with store.read() as tx:
        window = journal.usage_between(tx, 45.0, 150.0)
        assert [iv.job for iv in window] == ["a", "b", "c"]
        assert [iv.job for iv in journal.usage_between(tx, 45.0, 150.0, leaf="ops")] == ["b"]
    assert sum(iv.charged(45.0, 150.0) for iv in window) == 5.0 + 2.0 * 75.0 + 0.5 * 40.0


_jobs = itertools.count()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_repeated_observations_in_any_order_store_each_run_once(store: Store, data: st.DataObject) -> None:
    """Each run is polled while open, part-way and at its end, in any order and with repeats (also
    late repeats of earlier runs); a run is seen closed before the job's next run starts. The stored
    intervals are exactly the runs."""
    job = f"job-{next(_jobs)}"  # the store outlives the examples: a new job each
    starts = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True))
    runs = [Interval(job, "ops", 1.5, float(s * 10), float(s * 10 + 5)) for s in sorted(starts)]
    seen: list[Interval] = []
    sequence: list[Interval] = []
    for r in runs:
        polls = [Interval(r.job, r.leaf, r.charge_rate, r.t_from, end) for end in (None, r.t_from + 2.0)]
        repeats = data.draw(st.lists(st.sampled_from(seen), max_size=3)) if seen else []
        block = data.draw(st.permutations([*polls, r, *polls, *repeats]))
        sequence += [*block, r]
        seen += [*polls, r]
    sequence += data.draw(st.permutations(seen))
    for obs in sequence:
        store.commit(usage=[obs])
    with store.read() as tx:
        stored = [iv for iv in journal.usage_between(tx, -1.0, 1e9) if iv.job == job]
    assert stored == runs


def test_audit_and_journal_are_append_only(store: Store) -> None:
    store.commit(events=[JournalEvent(1.0, "submit", {})], audit_records=[AuditRecord(1.0, "start", "a", {})])
    for statement in (
        "UPDATE audit SET job = 'b'",
        "DELETE FROM audit",
        "UPDATE journal SET kind = 'x'",
        "DELETE FROM journal",
    ):
        with pytest.raises(Exception, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))
    with store.read() as tx:
        assert audit.verify(tx).ok


def test_concurrent_appends_keep_one_chain(store: Store) -> None:
    """Writers in several threads (as API workers and the loop would be) never fork the chain."""
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(15):
                store.commit(audit_records=[AuditRecord(float(i), "hold", f"w{k}-{i}", {"reason": "x"})])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    with store.read(snapshot=True) as tx:
        v = audit.verify(tx)
    assert v.ok and v.records == 45


WRITER = """
import sys, time
from fairshare.service.storage.audit import AuditRecord
from fairshare.service.storage.journal import Interval, JournalEvent
from fairshare.service.storage.store import Store
store = Store.open(sys.argv[1], time.time)
for k in range(1000):
    store.commit(
        events=[JournalEvent(float(k), "tick", {"k": k, "i": i}) for i in range(100)],
        audit_records=[AuditRecord(float(k), "hold", f"job-{k}-{i}", {"reason": "x"}) for i in range(100)],
        usage=[Interval(f"job-{k}", "ops", 1.0, float(k), float(k) + 0.5)],
    )
    print(k, flush=True)
"""


def test_a_killed_writer_leaves_whole_transactions_only(db_url: str, store: Store) -> None:
    """kill -9 in the middle of a stream of large commits: every commit is there whole or not at all,
    and the audit chain verifies."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, db_url], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for _ in range(3):
        assert proc.stdout.readline(), "the writer died before committing"
    time.sleep(0.05)  # land somewhere inside a later transaction
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with store.read(snapshot=True) as tx:
        events = list(journal.events(tx))
        runs = journal.usage_between(tx, -1.0, 1e9)
        records = audit.count(tx)
        verdict = audit.verify(tx)
    commits = len(runs)
    assert commits >= 3
    assert len(events) == records == 100 * commits
    assert [e.payload["k"] for e in events] == [k for k in range(commits) for _ in range(100)]
    assert verdict.ok and verdict.records == records


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def test_processes_opening_a_new_database_together_migrate_it_once(
    backend: str, clock: Clock, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'new.db'}"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        name = server.create_database(migrated=False)
        request.addfinalizer(lambda: server.drop_database(name))
        url = server.url(name)
    revisions: list[str] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            with Store.open(url, clock) as s:
                revisions.append(s.revision)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and revisions == ["0003"] * 4
