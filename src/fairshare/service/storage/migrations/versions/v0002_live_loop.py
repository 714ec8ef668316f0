"""The live loop's tables: service settings and the demo cluster's own state.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "service_state",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "demo_jobs",
        sa.Column("job", sa.Text, primary_key=True),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("by", sa.Text, nullable=False),
    )
    op.create_table(
        "demo_runs",
        sa.Column("id", _id(), primary_key=True, autoincrement=True),
        sa.Column("job", sa.Text, nullable=False),
        sa.Column("t0", sa.Float, nullable=False),
        sa.Column("alloc", sa.Text, nullable=False),
        sa.Column("charge", sa.Float, nullable=False),
        sa.Column("t_end", sa.Float, nullable=True),
        sa.Column("end_kind", sa.Text, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("by", sa.Text, nullable=True),
        sa.Column("lost_gpu_s", sa.Float, nullable=True),
        sa.Column("kept", sa.Float, nullable=True),
        sa.Column("stall_done", sa.Integer, nullable=False, server_default="0"),
        sa.UniqueConstraint("job", "t0", name="uq_demo_runs_job_t0"),
    )
    op.create_table(
        "demo_cancels",
        sa.Column("job", sa.Text, primary_key=True),
        sa.Column("t", sa.Float, nullable=False),
        sa.Column("by", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("demo_cancels", "demo_runs", "demo_jobs", "service_state"):
        op.drop_table(table)
