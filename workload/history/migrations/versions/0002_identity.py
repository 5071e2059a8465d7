"""Result-set identity, run kind and interruption on ``runs`` (additive: nullable columns, indexes).

``identity`` and ``kind`` are SHA-256 hex digests (:mod:`workload.history.identity`); ``interrupted``
is the reason a run was stopped (``SIGINT``, ``SIGTERM``, a timeout), None when it was not. Runs
recorded before this revision have None in all three: they are never a ``last-good`` baseline
(their kind is unknown) until recorded again.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("identity", sa.String(64)))
        batch.add_column(sa.Column("kind", sa.String(64)))
        batch.add_column(sa.Column("interrupted", sa.String(255)))
        batch.create_index("ix_runs_identity", ["identity"])
        batch.create_index("ix_runs_kind", ["kind"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_kind")
        batch.drop_index("ix_runs_identity")
        batch.drop_column("interrupted")
        batch.drop_column("kind")
        batch.drop_column("identity")
