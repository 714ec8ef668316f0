"""The audit chain on both backends: hashing, verification after tampering, export for `explain`."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from conftest import job, make_inputs, tiny_cluster, tiny_policy
from fairshare.cli import main
from fairshare.errors import InputError
from fairshare.replay.outputs import write_replay
from fairshare.replay.runner import run_strategy
from fairshare.report.explain import explain
from fairshare.service.storage import audit
from fairshare.service.storage.audit import AuditRecord, canonical
from fairshare.service.storage.journal import JournalEvent
from fairshare.service.storage.schema import GENESIS
from fairshare.service.storage.store import Store

from .conftest import Clock


def _fill(store: Store, n: int = 6) -> None:
    store.commit(
        audit_records=[
            AuditRecord(100.0 + i, "start", f"job-{i}", {"nodes": [f"n-{i}"], "waited_s": float(i)})
            for i in range(n)
        ]
    )


def _unguard(store: Store) -> None:
    """Drop the append-only guard, as someone editing the database by hand could."""
    with store.engine.begin() as conn:
        if store.backend == "postgresql":
            conn.execute(text("ALTER TABLE audit DISABLE TRIGGER USER"))
        else:
            conn.execute(text("DROP TRIGGER audit_no_update"))
            conn.execute(text("DROP TRIGGER audit_no_delete"))


def _tamper(store: Store, *statements: str) -> None:
    _unguard(store)
    with store.engine.begin() as conn:
        for s in statements:
            conn.exec_driver_sql(s)


def _verify(store: Store) -> audit.Verdict:
    with store.read(snapshot=True) as tx:
        return audit.verify(tx)


def test_hash_is_sha256_of_prev_hash_and_canonical_record(store: Store) -> None:
    stored = store.commit(
        audit_records=[
            AuditRecord(5.0, "start", "j1", {"z": 1, "a": "ü"}, policy_version="p" * 64),
            AuditRecord(6.0, "hold", "j2", {"reason": "no_capacity"}, policy_version="p" * 64),
        ]
    ).audit
    first = canonical(
        {
            "seq": 1,
            "t": 5.0,
            "decision": "start",
            "job": "j1",
            "policy_version": "p" * 64,
            "evidence": {"z": 1, "a": "ü"},
        }
    )
    assert first == (
        '{"decision":"start","evidence":{"a":"ü","z":1},"job":"j1","policy_version":"'
        + "p" * 64
        + '","seq":1,"t":5.0}'
    )
    assert stored[0].prev_hash == GENESIS
    assert stored[0].hash == hashlib.sha256((GENESIS + first).encode()).hexdigest()
    assert stored[1].prev_hash == stored[0].hash
    with (
        store.read() as tx
    ):  # the stored text keeps the evidence's key order; the hash is of the canonical form
        kept = tx.conn.execute(text("SELECT record FROM audit WHERE seq = 1")).scalar_one()
    assert '"evidence":{"z":1,"a":"ü"}' in kept
    v = _verify(store)
    assert v.ok and v.records == 2 and v.head_seq == 2 and v.head_hash == stored[1].hash


def test_records_take_the_stored_policy_version(policy_store: Store) -> None:
    with policy_store.read() as tx:
        sha = audit.current_sha(tx)
    rec = policy_store.commit(audit_records=[AuditRecord(1.0, "start", "j", {})]).audit[0]
    assert sha is not None and rec.policy_version == sha


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (AuditRecord(math.nan, "start"), "t"),
        (AuditRecord(1.0, ""), "decision"),
        (AuditRecord(1.0, "start", "j", {"seq": 3}), "evidence.seq"),
        (AuditRecord(1.0, "start", "j", {"x": math.inf}), "evidence"),
    ],
)
def test_bad_records_are_refused(store: Store, record: AuditRecord, field: str) -> None:
    with pytest.raises(InputError) as err:
        store.commit(audit_records=[record])
    assert err.value.at == field


def test_an_edited_record_is_named(store: Store) -> None:
    _fill(store)
    _tamper(
        store,
        "UPDATE audit SET record = replace(record, '\"waited_s\":3.0', '\"waited_s\":0.0') WHERE seq = 4",
    )
    v = _verify(store)
    assert not v.ok and v.bad_seq == 4 and "hash does not match its content" in (v.reason or "")
    assert v.records == 3
    assert v.bad_record is not None and '"seq":4' in v.bad_record


def test_an_edited_column_is_named(store: Store) -> None:
    _fill(store)
    _tamper(store, "UPDATE audit SET job = 'someone-else' WHERE seq = 2")
    v = _verify(store)
    assert not v.ok and v.bad_seq == 2 and "job column says 'someone-else'" in (v.reason or "")


def test_an_edited_and_rehashed_record_shows_at_the_next(store: Store) -> None:
    _fill(store)
    with store.read() as tx:
        row = tx.conn.execute(text("SELECT record, prev_hash FROM audit WHERE seq = 3")).one()
    forged = row.record.replace('"job-2"', '"job-x"')
    digest = hashlib.sha256((row.prev_hash + canonical(json.loads(forged))).encode()).hexdigest()
    _tamper(
        store,
        f"UPDATE audit SET record = '{forged}', job = 'job-x', hash = '{digest}' WHERE seq = 3",
    )
    v = _verify(store)
    assert (
        not v.ok
        and v.bad_seq == 4
        and "prev_hash is not the hash of the record before it" in (v.reason or "")
    )


def test_a_deleted_record_is_named(store: Store) -> None:
    _fill(store)
    _tamper(store, "DELETE FROM audit WHERE seq = 3")
    v = _verify(store)
    assert not v.ok and v.bad_seq == 4 and "record 3 is missing" in (v.reason or "")


def test_a_deleted_last_record_is_found_through_the_head(store: Store) -> None:
    _fill(store)
    _tamper(store, "DELETE FROM audit WHERE seq = 6")
    v = _verify(store)
    assert not v.ok and v.bad_seq == 6 and "records at the end were removed" in (v.reason or "")


def test_reordered_records_are_named(store: Store) -> None:
    _fill(store)
    _tamper(
        store,
        "UPDATE audit SET seq = -1 WHERE seq = 2",
        "UPDATE audit SET seq = 2 WHERE seq = 5",
        "UPDATE audit SET seq = 5 WHERE seq = -1",
    )
    v = _verify(store)
    assert not v.ok and v.bad_seq == 2 and "moved or reordered" in (v.reason or "")


def test_an_empty_chain_verifies(store: Store) -> None:
    v = _verify(store)
    assert v.ok and v.records == 0 and v.head_hash == GENESIS


def test_cli_verify_exits_1_and_prints_the_first_bad_record(store: Store, db_url: str) -> None:
    _fill(store)
    ok = CliRunner().invoke(main, obj={"clock": Clock()}, args=["audit", "verify", "--db", db_url])
    assert ok.exit_code == 0, ok.output
    assert ok.output.startswith("audit chain ok: 6 records, head 6 ")
    _tamper(store, "UPDATE audit SET t = 0 WHERE seq = 5")
    bad = CliRunner().invoke(main, obj={"clock": Clock()}, args=["audit", "verify", "--db", db_url])
    assert bad.exit_code == 1
    assert (
        "audit chain broken at record 5: its t column says 0.0 but the hashed record says 104.0" in bad.output
    )
    assert "record 5 as stored: {" in bad.output


def _replayed(tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    policy, cluster = tiny_policy(), tiny_cluster(nodes=1, gpus=4)
    jobs = [
        job("a-1", 0, "a", "train", 4, 7200),
        job("b-1", 60, "b", "train", 2, 3600),
        job("b-2", 120, "b", "debug", 2, 600),
        job("a-2", 4000, "a", "debug", 1, 300),
    ]
    inputs = make_inputs(policy, cluster, jobs)
    out = run_strategy(inputs, "fairshare")
    folder = tmp_path / "replay"
    write_replay(folder, inputs.cluster, inputs.policy_text, out)
    return folder, out.events, out.decisions


def test_export_is_the_replays_decisions_and_explain_reads_it(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """Engine events and decisions stored as the live loop will store them, exported, then read by
    `fairshare explain` exactly as the replay's own output folder."""
    folder, events, decisions = _replayed(tmp_path)
    assert any(json.loads(d)["decision"] == "hold" for d in decisions)
    parsed = [json.loads(e) for e in events]
    store.commit(
        events=[JournalEvent(e["t"], e["type"], e) for e in parsed],
        audit_records=[AuditRecord.from_decision(json.loads(d)) for d in decisions],
    )
    out = tmp_path / "export"
    res = CliRunner().invoke(
        main, obj={"clock": Clock()}, args=["audit", "export", "--db", db_url, "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert f"{len(decisions)} decisions (verified), {len(events)} events" in res.output
    exported = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    for i, (mine, theirs) in enumerate(zip(exported, decisions, strict=True)):
        assert mine == {**json.loads(theirs), "seq": i + 1, "policy_version": None}
    assert (out / "events.jsonl").read_text().splitlines() == [
        json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in parsed
    ]
    summary = json.loads((out / "audit.json").read_text())
    assert summary["records"] == len(decisions) and summary["verified"] is True
    for jid in ("a-1", "b-1", "b-2"):
        assert explain(out, jid).replace(str(out), "X") == explain(folder, jid).replace(str(folder), "X")
    shown = CliRunner().invoke(
        main, obj={"clock": Clock()}, args=["explain", "--out", str(out), "--job", "b-2"]
    )
    assert shown.exit_code == 0 and "why it waited:" in shown.output


def test_export_to_an_unwritable_place_exits_2(store: Store, db_url: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    res = CliRunner().invoke(
        main,
        obj={"clock": Clock()},
        args=["audit", "export", "--db", db_url, "--out", str(tmp_path / "file")],
    )
    assert res.exit_code == 2 and f"error: --out: {tmp_path / 'file'}: is a file" in res.stderr


def test_export_never_replaces_a_folder_holding_other_files(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """Issue 19: OUT is replaced whole, so it must be new, empty or an earlier export."""
    _fill(store)
    out = tmp_path / "x"
    args = ["audit", "export", "--db", db_url, "--out", str(out)]
    assert CliRunner().invoke(main, obj={"clock": Clock()}, args=args).exit_code == 0
    assert CliRunner().invoke(main, obj={"clock": Clock()}, args=args).exit_code == 0  # an earlier export
    (out / "notes.txt").write_text("mine")
    res = CliRunner().invoke(main, obj={"clock": Clock()}, args=args)
    assert res.exit_code == 2 and "notes.txt: no run wrote it" in res.stderr
    assert (out / "notes.txt").read_text() == "mine"


def test_export_refuses_a_broken_chain_unless_told(store: Store, db_url: str, tmp_path: Path) -> None:
    _fill(store)
    _tamper(store, "DELETE FROM audit WHERE seq = 2")
    res = CliRunner().invoke(
        main, obj={"clock": Clock()}, args=["audit", "export", "--db", db_url, "--out", str(tmp_path / "x")]
    )
    assert res.exit_code == 1 and "broken at record 3" in res.output
    assert not (tmp_path / "x").exists()
    res = CliRunner().invoke(
        main, ["audit", "export", "--db", db_url, "--out", str(tmp_path / "x"), "--no-verify"]
    )
    assert res.exit_code == 0 and "5 decisions (not verified)" in res.output
