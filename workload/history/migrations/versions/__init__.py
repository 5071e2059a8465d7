"""Alembic revision files (one module per revision, applied in ``down_revision`` order)."""
