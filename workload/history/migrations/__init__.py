"""Alembic migrations of the run-history schema, shipped inside the package and run on open.

``HEAD`` is the newest revision: :func:`workload.history.db.open_engine` skips Alembic (and its
import) when the database's ``alembic_version`` already says ``HEAD``. A new migration adds a
file under ``versions/`` and moves ``HEAD`` (a test checks that the two agree).
"""

HEAD = "0002"
