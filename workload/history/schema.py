"""The run-history schema (SQLAlchemy Core), the same on SQLite and PostgreSQL.

The tables are the *current* shape; the migrations in :mod:`workload.history.migrations` build it
(a test checks that they agree). One row per run in ``runs``; its hosts (with their facts), its
results (one per host, benchmark, scenario and test mode, with INVALID reasons and fixes) and every
metric hang off it and are deleted with it.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # the run folder's name (20261123-133000-PERF-CPU-MLPERF); unique within a history
    Column("run_id", String(255), nullable=False, unique=True),
    Column("profile", String(255)),
    Column("tag", String(255)),
    Column("command", String(32), nullable=False),  # "run" or "results"
    Column("source", Text),  # the run or results folder that was recorded
    Column("started_at", DateTime(timezone=True)),
    Column("ended_at", DateTime(timezone=True)),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("exit_code", Integer),
    Column("ok", Boolean),  # the verdict: every result VALID and every accuracy check passed
    Column("parameters", JSON),  # masked: secrets are *** before they reach the database
    Column("tool_version", String(64)),
    # what was measured, whichever way it was recorded: a run is never its own baseline (history/identity.py)
    Column("identity", String(64)),
    # profile, result-changing parameters, SKUs and host count: last-good picks a run of the same kind
    Column("kind", String(64)),
    Column("interrupted", String(255)),  # why the run was stopped (SIGINT, SIGTERM, ...); None if it was not
    Index("ix_runs_started_at", "started_at"),
    Index("ix_runs_profile", "profile"),
    Index("ix_runs_tag", "tag"),
    Index("ix_runs_identity", "identity"),
    Index("ix_runs_kind", "kind"),
)

hosts = Table(
    "hosts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("sku", String(255)),
    Column("gpu_model", String(255)),
    Column("gpu_count", Integer),
    Column("driver", String(64)),
    Column("cuda", String(64)),
    Column("harness_round", String(32)),
    Column("cpu", String(255)),
    Column("facts", JSON),  # every fact known about the host, the columns above included
    Index("ix_hosts_run_pk", "run_pk"),
    Index("ix_hosts_sku", "sku"),
)

results = Table(
    "results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("host", String(255)),
    Column("benchmark", String(255)),
    Column("model", String(255)),
    Column("scenario", String(64)),
    Column("mode", String(64)),
    Column("system", String(255)),
    Column("validity", String(16)),
    Column("accuracy_pass", Boolean),
    Column("headline", String(255)),  # the name of the scenario's official metric
    Column("invalid_reasons", JSON),
    Column("fixes", JSON),
    Column("source", Text),
    Index("ix_results_run_pk", "run_pk"),
)

metrics = Table(
    "metrics",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_pk", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("result_pk", Integer, ForeignKey("results.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("value", Double, nullable=False),
    Column("unit", String(64)),
    Column("relativity", String(32)),
    Column("categorization", String(32)),
    Column("verbosity", Integer),
    Column("meta", JSON),  # the metric's metadata (model, scenario, mode, validity, inventory labels)
    Index("ix_metrics_run_pk", "run_pk"),
    Index("ix_metrics_result_pk", "result_pk"),
    Index("ix_metrics_name", "name"),
)
