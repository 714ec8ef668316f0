"""Checkpoints of the live engine: recovery loads the newest valid one and replays the journal after it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # not append-only (unlike the journal and the audit): old checkpoints are pruned
    op.create_table(
        "checkpoint",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("sha256", sa.Text, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("state", sa.LargeBinary, nullable=False),
        sa.Column("created_t", sa.Float, nullable=False),
    )
    op.create_index("ix_checkpoint_seq", "checkpoint", ["seq"])


def downgrade() -> None:
    op.drop_table("checkpoint")
