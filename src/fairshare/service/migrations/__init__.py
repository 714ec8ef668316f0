"""Alembic migrations, shipped in the package and run by `fairshare.service.db.migrate` on open."""
