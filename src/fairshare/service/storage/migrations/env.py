"""Alembic environment: runs on the connection `db.migrate` passes in (never from alembic.ini)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
