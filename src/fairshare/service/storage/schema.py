"""The tables (SQLAlchemy Core). The migrations in `migrations/versions` create exactly these; a test
compares the migrated database with this metadata on both backends.

Times are seconds since 1970 (double precision). JSON is stored as text, byte for byte as written:
the audit chain hashes that text, and journal payloads keep the engine's key order.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

# an integer that autoincrements on both backends (SQLite only does so for INTEGER PRIMARY KEY)
Id = BigInteger().with_variant(Integer(), "sqlite")

GENESIS = "0" * 64  # prev_hash of the first audit record

policy_versions = Table(
    "policy_versions",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("sha256", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("author", Text, nullable=False),
    Column("t", Float, nullable=False),
    Column("note", Text, nullable=True),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("node", Text, nullable=True),
    Column("secret_sha256", Text, nullable=False),
    Column("created_t", Float, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("expires_t", Float, nullable=True),
    Column("revoked_t", Float, nullable=True),
    Column("revoked_by", Text, nullable=True),
    UniqueConstraint("secret_sha256", name="uq_tokens_secret_sha256"),
)

share_exceptions = Table(
    "share_exceptions",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("group_path", Text, nullable=False),
    Column("extra_share", Float, nullable=False),
    Column("expires_t", Float, nullable=False),
    Column("approver", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_t", Float, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("expired_t", Float, nullable=True),
    Column("expired_by", Text, nullable=True),
    Index("ix_share_exceptions_expires_t", "expires_t"),
)

# The audit chain: `record` is the canonical JSON that is hashed; t/decision/job/policy_version are
# copies for queries (verification checks that they agree with `record`). Append-only (triggers).
audit = Table(
    "audit",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("t", Float, nullable=False),
    Column("decision", Text, nullable=False),
    Column("job", Text, nullable=True),
    Column("policy_version", Text, nullable=True),
    Column("record", Text, nullable=False),
    Column("prev_hash", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Index("ix_audit_job", "job"),
    Index("ix_audit_decision_t", "decision", "t"),
    Index("ix_audit_t", "t"),
)

# One row (id 1): the last record's seq and hash, updated in the same transaction as each append.
# Appends lock it first, which serializes them; it also shows records removed from the end.
audit_head = Table(
    "audit_head",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("hash", Text, nullable=False),
)

# The engine's event journal (append-only): kind is the event type, payload its `as_json()` text;
# `key` (optional) names an observation so that the same observation is journaled once.
journal = Table(
    "journal",
    metadata,
    Column("seq", Id, primary_key=True, autoincrement=True),
    Column("t", Float, nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", Text, nullable=False),
    Column("key", Text, nullable=True),
    UniqueConstraint("key", name="uq_journal_key"),
)

# Charged usage as intervals; t_to is NULL while the run is still charged. One row per run
# (job, t_from); re-observing a run extends or closes it, never adds to it.
usage = Table(
    "usage",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("job", Text, nullable=False),
    Column("leaf", Text, nullable=False),
    Column("charge_rate", Float, nullable=False),
    Column("t_from", Float, nullable=False),
    Column("t_to", Float, nullable=True),
    UniqueConstraint("job", "t_from", name="uq_usage_job_t_from"),
    Index("ix_usage_t_to", "t_to"),
    Index("ix_usage_leaf", "leaf"),
)

# Settings of the live service (the demo cluster's scenario, the accelerated clock's base), JSON text.
service_state = Table(
    "service_state",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)

# The demo cluster's own memory (a real cluster keeps its own): jobs submitted through the API, runs
# it started (ended by a preemption or a cancellation; a finish is its truth's), pending jobs
# cancelled. Written by the demo backend in transactions of its own, never the loop's.
demo_jobs = Table(
    "demo_jobs",
    metadata,
    Column("job", Text, primary_key=True),
    Column("t", Float, nullable=False),
    Column("spec", Text, nullable=False),
    Column("by", Text, nullable=False),
)

demo_runs = Table(
    "demo_runs",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("job", Text, nullable=False),
    Column("t0", Float, nullable=False),
    Column("alloc", Text, nullable=False),
    Column("charge", Float, nullable=False),
    Column("t_end", Float, nullable=True),
    Column("end_kind", Text, nullable=True),
    Column("reason", Text, nullable=True),
    Column("by", Text, nullable=True),
    Column("lost_gpu_s", Float, nullable=True),
    Column("kept", Float, nullable=True),
    Column("stall_done", Integer, nullable=False, server_default="0"),
    UniqueConstraint("job", "t0", name="uq_demo_runs_job_t0"),
)

demo_cancels = Table(
    "demo_cancels",
    metadata,
    Column("job", Text, primary_key=True),
    Column("t", Float, nullable=False),
    Column("by", Text, nullable=False),
)

# Checkpoints of the live engine (not append-only: pruned to the newest few). `state` is the engine
# pickled and zlib-compressed, `sha256` its digest, `seq` the last journal event it covers, `t` the
# engine's instant, `version` the code that wrote it (a checkpoint is used only by the same version).
checkpoint = Table(
    "checkpoint",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("seq", BigInteger, nullable=False),
    Column("t", Float, nullable=False),
    Column("version", Text, nullable=False),
    Column("sha256", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("state", LargeBinary, nullable=False),
    Column("created_t", Float, nullable=False),
    Index("ix_checkpoint_seq", "seq"),
)
