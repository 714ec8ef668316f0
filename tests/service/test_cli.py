"""The service commands: token, policy, review (audit verify/export: test_audit.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from fairshare.cli import main
from fairshare.service.storage import tokens
from fairshare.service.storage.store import Store

from .conftest import POLICY, Clock


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args), obj={"clock": Clock()})
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(POLICY)
    return p


def test_import_of_the_cli_stays_light() -> None:
    """`fairshare check` must not pay for the service's libraries: they load when a command runs."""
    code = (
        "import sys, fairshare.cli; heavy = ('sqlalchemy', 'alembic', 'fastapi', 'starlette', 'psycopg'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


def test_token_create_prints_the_secret_once_and_stores_only_its_hash(store: Store, db_url: str) -> None:
    code, out, err = run("token", "create", "--db", db_url, "--role", "viewer", "--name", "grafana")
    assert code == 0, err
    secret = out.strip()
    assert out.count("\n") == 1 and secret.startswith("fs_") and len(secret) > 40
    assert "token 1 (grafana): viewer" in err and "shown once" in err
    with store.read() as tx:
        assert tokens.authenticate(tx, secret).name == "grafana"
        dump = " ".join(
            str(row)
            for table in ("tokens", "audit", "journal", "policy_versions")
            for row in tx.conn.execute(text(f"SELECT * FROM {table}"))
        )
    assert secret not in dump and tokens.secret_sha256(secret) in dump
    code, listed, _ = run("token", "list", "--db", db_url)
    assert code == 0 and "viewer  grafana" in listed and "[valid]" in listed and secret not in listed


def test_node_tokens_need_a_policy_and_a_node_in_it(store: Store, db_url: str, policy_file: Path) -> None:
    code, _, err = run("token", "create", "--db", db_url, "--role", "member", "--node", "ml/nlp")
    assert code == 2 and "no policy is stored yet" in err and "fairshare policy push" in err
    code, out, err = run("policy", "push", "--db", db_url, str(policy_file), "--note", "first")
    assert code == 0, err
    assert "stored as version 1 (sha256 " in out
    code, _, err = run("token", "create", "--db", db_url, "--role", "member", "--node", "ml/nope")
    assert code == 2 and "token: node: no node 'ml/nope' in the current policy's tree" in err
    code, _, err = run("token", "create", "--db", db_url, "--role", "owner")
    assert code == 2 and "needs the tree node" in err
    code, _, err = run("token", "create", "--db", db_url, "--role", "admin", "--node", "ml")
    assert code == 2 and "not tied to a node" in err
    code, out, err = run(
        "token", "create", "--db", db_url, "--role", "owner", "--node", "ml", "--expires", "30d"
    )
    assert code == 0 and "owner of ml, valid until 2026-12-31T00:00:00Z" in err
    code, _, err = run("token", "create", "--db", db_url, "--role", "viewer", "--expires", "soon")
    assert code == 2 and "--expires: expected a duration" in err


def test_token_revoke(store: Store, db_url: str) -> None:
    run("token", "create", "--db", db_url, "--role", "admin")
    assert run("token", "revoke", "--db", db_url, "1")[:2] == (0, "token 1 (admin) revoked\n")
    code, _, err = run("token", "revoke", "--db", db_url, "1")
    assert code == 2 and "already revoked" in err
    code, _, err = run("token", "revoke", "--db", db_url, "7")
    assert code == 2 and "no token 7" in err
    assert "[revoked]" in run("token", "list", "--db", db_url)[1]


def test_policy_push_show_and_history(store: Store, db_url: str, policy_file: Path, tmp_path: Path) -> None:
    assert run("policy", "show", "--db", db_url)[0] == 2
    run("policy", "push", "--db", db_url, str(policy_file))
    code, out, _ = run("policy", "push", "--db", db_url, str(policy_file))
    assert code == 0 and "unchanged: already version 1" in out
    changed = tmp_path / "p2.yaml"
    changed.write_text(POLICY.replace("share: 40", "share: 45"))
    assert "stored as version 2" in run("policy", "push", "--db", db_url, str(changed), "--note", "ops +5")[1]
    assert run("policy", "show", "--db", db_url)[1] == changed.read_text()
    assert run("policy", "show", "--db", db_url, "--version", "1")[1] == POLICY
    history = run("policy", "show", "--db", db_url, "--history")[1].splitlines()
    assert len(history) == 2 and history[1].endswith("ops +5") and "cli:" in history[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.replace("share: 40", "share: -1"))
    code, _, err = run("policy", "push", "--db", db_url, str(bad))
    assert code == 2 and "tree[1].share: share must be > 0, got -1" in err


def test_policy_push_refuses_live_rule_breaks(store: Store, db_url: str, tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(POLICY.replace("expires: 2026-12-05", "expires: 3d"))
    code, _, err = run("policy", "push", "--db", db_url, str(p))
    assert code == 2 and "exceptions[0].expires: in a live policy an exception expires at a date" in err
    p.write_text(POLICY.replace("expires: 2026-12-05", "expires: 2026-12-20"))
    code, _, err = run("policy", "push", "--db", db_url, str(p))
    assert code == 2 and "more than gates.exception_max_days (14) days after now" in err
    p.write_text(POLICY.replace("expires: 2026-12-05", "expires: 2026-11-20"))
    code, _, err = run("policy", "push", "--db", db_url, str(p))
    assert code == 0 and "warning:" in err and "expired at 2026-11-20T00:00:00Z; it does not apply" in err


def test_review_lists_nodes_past_review_and_expiring_exceptions(policy_store: Store, db_url: str) -> None:
    code, out, _ = run("review", "--db", db_url)
    assert code == 0
    assert (
        "ml: review 2026-11-30 (1 day(s) overdue), owner ml-lead@example.org, hypothesis: the new model ships"
        in out
    )
    assert "ml/nlp: review 2026-12-01 (due today)" in out
    assert "ml/vision" not in out and "ops:" not in out
    assert (
        "policy exceptions[0]: ml/nlp +10 share until 2026-12-05T00:00:00Z (in 4d), approver cto@example.org"
        in out
    )
    code, out, _ = run("review", "--db", db_url, "--days", "2", "--json")
    data = json.loads(out)
    assert [n["path"] for n in data["nodes_past_review"]] == ["ml", "ml/nlp"]
    assert data["exceptions_expiring"] == []


def test_reading_commands_do_not_create_a_missing_sqlite_file(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    for args in (["audit", "verify"], ["review"], ["token", "list"], ["policy", "show"]):
        code, _, err = run(*args, "--db", str(missing))
        assert code == 2 and "no such database file" in err, args
    assert not missing.exists()


def test_bad_database_exits_2_with_a_message() -> None:
    code, _, err = run("review", "--db", "mysql://u:pw@h/db")
    assert code == 2 and "unsupported database 'mysql'" in err and "pw" not in err
    code, _, err = run("audit", "verify", "--db", "postgresql+psycopg://u:hunter2@127.0.0.1:1/x")
    assert code == 2 and "Connection refused" in err and "hunter2" not in err
    code, _, err = run("audit", "verify")
    assert code == 2 and "--db" in err
