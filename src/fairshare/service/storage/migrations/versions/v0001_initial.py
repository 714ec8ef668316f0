"""Initial schema: policy versions, tokens, share exceptions, audit chain, journal, usage intervals.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

GENESIS = "0" * 64
APPEND_ONLY = ("audit", "journal")


def _id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "policy_versions",
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("author", sa.Text, nullable=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("note", sa.Text, nullable=True),
    )
    op.create_table(
        "tokens",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("node", sa.Text, nullable=True),
        sa.Column("secret_sha256", sa.Text, nullable=False),
        sa.Column("created_t", sa.Float, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("expires_t", sa.Float, nullable=True),
        sa.Column("revoked_t", sa.Float, nullable=True),
        sa.Column("revoked_by", sa.Text, nullable=True),
        sa.UniqueConstraint("secret_sha256", name="uq_tokens_secret_sha256"),
    )
    op.create_table(
        "share_exceptions",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("group_path", sa.Text, nullable=False),
        sa.Column("extra_share", sa.Float, nullable=False),
        sa.Column("expires_t", sa.Float, nullable=False),
        sa.Column("approver", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_t", sa.Float, nullable=False),
        sa.Column("created_by", sa.Text, nullable=False),
        sa.Column("expired_t", sa.Float, nullable=True),
        sa.Column("expired_by", sa.Text, nullable=True),
    )
    op.create_index("ix_share_exceptions_expires_t", "share_exceptions", ["expires_t"])
    op.create_table(
        "audit",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("job", sa.Text, nullable=True),
        sa.Column("policy_version", sa.Text, nullable=True),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.Text, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
    )
    op.create_index("ix_audit_job", "audit", ["job"])
    op.create_index("ix_audit_decision_t", "audit", ["decision", "t"])
    op.create_index("ix_audit_t", "audit", ["t"])
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS}])
    op.create_table(
        "journal",
        sa.Column("seq", _id(), primary_key=True, autoincrement=True),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=True),
        sa.UniqueConstraint("key", name="uq_journal_key"),
    )
    op.create_table(
        "usage",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("job", sa.Text, nullable=False),
        sa.Column("leaf", sa.Text, nullable=False),
        sa.Column("charge_rate", sa.Float, nullable=False),
        sa.Column("t_from", sa.Float, nullable=False),
        sa.Column("t_to", sa.Float, nullable=True),
        sa.UniqueConstraint("job", "t_from", name="uq_usage_job_t_from"),
    )
    op.create_index("ix_usage_t_to", "usage", ["t_to"])
    op.create_index("ix_usage_leaf", "usage", ["leaf"])
    _append_only_triggers()


def _append_only_triggers() -> None:
    """Refuse UPDATE and DELETE (and TRUNCATE) on the audit chain and the journal.

    Not a security boundary (the owner of the database can drop a trigger; the hash chain shows what
    was changed then): a guard against a mistaken statement or a bug.
    """
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION fairshare_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'fairshare: % is append-only (% refused)', TG_TABLE_NAME, TG_OP; "
            "END $$"
        )
        for table in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION fairshare_append_only()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION fairshare_append_only()"
            )
    else:
        for table in APPEND_ONLY:
            for what in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{what.lower()} BEFORE {what} ON {table} BEGIN "
                    f"SELECT RAISE(ABORT, 'fairshare: {table} is append-only ({what} refused)'); END"
                )


def downgrade() -> None:
    for table in ("usage", "journal", "audit_head", "audit", "share_exceptions", "tokens", "policy_versions"):
        op.drop_table(table)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION fairshare_append_only()")
