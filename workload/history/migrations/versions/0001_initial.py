"""The first history schema: runs, hosts (with facts), results and metrics.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(255), nullable=False, unique=True),
        sa.Column("profile", sa.String(255)),
        sa.Column("tag", sa.String(255)),
        sa.Column("command", sa.String(32), nullable=False),
        sa.Column("source", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("ok", sa.Boolean),
        sa.Column("parameters", sa.JSON),
        sa.Column("tool_version", sa.String(64)),
    )
    op.create_index("ix_runs_started_at", "runs", ["started_at"])
    op.create_index("ix_runs_profile", "runs", ["profile"])
    op.create_index("ix_runs_tag", "runs", ["tag"])
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("sku", sa.String(255)),
        sa.Column("gpu_model", sa.String(255)),
        sa.Column("gpu_count", sa.Integer),
        sa.Column("driver", sa.String(64)),
        sa.Column("cuda", sa.String(64)),
        sa.Column("harness_round", sa.String(32)),
        sa.Column("cpu", sa.String(255)),
        sa.Column("facts", sa.JSON),
    )
    op.create_index("ix_hosts_run_pk", "hosts", ["run_pk"])
    op.create_index("ix_hosts_sku", "hosts", ["sku"])
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("host", sa.String(255)),
        sa.Column("benchmark", sa.String(255)),
        sa.Column("model", sa.String(255)),
        sa.Column("scenario", sa.String(64)),
        sa.Column("mode", sa.String(64)),
        sa.Column("system", sa.String(255)),
        sa.Column("validity", sa.String(16)),
        sa.Column("accuracy_pass", sa.Boolean),
        sa.Column("headline", sa.String(255)),
        sa.Column("invalid_reasons", sa.JSON),
        sa.Column("fixes", sa.JSON),
        sa.Column("source", sa.Text),
    )
    op.create_index("ix_results_run_pk", "results", ["run_pk"])
    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("result_pk", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("value", sa.Double, nullable=False),
        sa.Column("unit", sa.String(64)),
        sa.Column("relativity", sa.String(32)),
        sa.Column("categorization", sa.String(32)),
        sa.Column("verbosity", sa.Integer),
        sa.Column("meta", sa.JSON),
    )
    op.create_index("ix_metrics_run_pk", "metrics", ["run_pk"])
    op.create_index("ix_metrics_result_pk", "metrics", ["result_pk"])
    op.create_index("ix_metrics_name", "metrics", ["name"])


def downgrade() -> None:
    for table in ("metrics", "results", "hosts", "runs"):
        op.drop_table(table)
