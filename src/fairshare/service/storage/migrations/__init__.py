"""Alembic migrations, shipped in the package and run by `fairshare.service.storage.db.migrate` on open."""
