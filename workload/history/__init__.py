"""Run history in a database: every run and every ``results --record``, with hosts, facts and metrics.

The read API the rest of the project (the HTML report, scripts) uses::

    from workload.history import open_history

    with open_history(url) as history:          # url: None = the default (see default_url)
        history.runs(profile="PERF-CPU-MLPERF", sku="ND96isr_H100_v5", since=..., limit=20)
        history.trend("samples_per_second", sku=None)   # -> list[TrendPoint], oldest first
        history.baseline("last-good")                   # or a run id or a tag -> RunRow
        history.baseline("last-good", candidate=record) # of the record's kind, never the record itself
        history.baselines("last-good", candidate=record, count=3)   # the 3 newest that qualify
        history.collection(run_id)                      # -> metrics Collection of a recorded run

Every run row has an ``identity`` (what was measured, see :mod:`workload.history.identity`), a
``kind`` (profile, result-changing parameters, SKUs, host count) and ``interrupted`` (the stop's
reason, or None); a record made from :func:`workload.history.record.build_record` computes them.

``TrendPoint`` carries sku, host, benchmark, scenario, mode, run_id, tag, started_at, value and unit;
group the points by (sku, benchmark, scenario, mode) to draw one line each.

Backends: SQLite (the default file ``$XDG_DATA_HOME/workload/history.sqlite``, or
``$WORKLOAD_HISTORY``) and PostgreSQL (``postgresql://user@host/db``), one schema, migrated by the
Alembic revisions shipped in :mod:`workload.history.migrations` when the history is opened.
"""

from __future__ import annotations

from workload.history.db import ENV_VAR, default_url
from workload.history.store import History, HostFacts, RunRecord, RunRow, TrendPoint, parse_since

__all__ = [
    "ENV_VAR",
    "History",
    "HostFacts",
    "RunRecord",
    "RunRow",
    "TrendPoint",
    "default_url",
    "open_history",
    "parse_since",
]


def open_history(url: str | None = None, *, read_only: bool = False) -> History:
    """Open (creating and migrating as needed) the history at ``url``, or the default one.

    ``read_only`` (commands that only read): a history that does not exist is a HistoryError, and
    nothing is created. Raises UsageError for a URL that is not SQLite or PostgreSQL, HistoryError
    when the database cannot be reached or migrated (both name the URL with its password masked).
    """
    return History(url or default_url(), read_only=read_only)
