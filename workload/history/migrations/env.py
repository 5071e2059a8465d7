"""Alembic's environment: migrate on the connection :func:`workload.history.db.migrate` hands over.

Run only programmatically (``config.attributes["connection"]``): the caller holds the migration
lock inside that connection's transaction, so the whole upgrade is one transaction on both SQLite
and PostgreSQL (both have transactional DDL).
"""

from __future__ import annotations

from alembic import context

from workload.history.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reached from the alembic command line
    raise RuntimeError("workload's history migrations run from workload.history.db.migrate, not the alembic CLI")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
