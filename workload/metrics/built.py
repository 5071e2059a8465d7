"""A result as plain data (:class:`Built`) and the one way its model is made (:func:`result_of`).

:func:`workload.metrics.build.build_data` makes the plain data of one directory; the serial path
makes the :class:`BenchmarkResult` of it here, and the process pool of :mod:`.collection` sends the
same plain data on in :mod:`.wire` form without making model objects (bench/README.md says why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from workload.metrics.model import BenchmarkResult, Categorization, Metric, Relativity

#: the fields a result's metrics share (see :func:`metrics_of`)
CONTEXT_FIELDS = ("tool_name", "tool_version", "scenario_name", "start_time", "end_time", "host", "metadata")
#: a metric's own fields: (name, value, unit, relativity, categorization, description, verbosity)
Row = tuple[str, float, str, Relativity, Categorization, str, int]


def metrics_of(rows: Iterable[Row], context: Mapping[str, Any]) -> list[Metric]:
    """The metrics of ``rows``, each with the fields of ``context`` (tool_name, tool_version, scenario_name,
    start_time, end_time, host, metadata); the metrics of one result share its one metadata dict."""
    return Metric.trusted_all(
        [
            {
                "name": n,
                "value": v,
                "unit": u,
                "relativity": r,
                "categorization": c,
                "description": d,
                "verbosity": verbosity,
                **context,
            }
            for n, v, u, r, c, d, verbosity in rows
        ]
    )


class Built(NamedTuple):
    """A result as plain data, before any model object is made: :func:`build_data` makes it, :func:`result_of`
    makes the :class:`BenchmarkResult` of it, and the process pool of :mod:`.collection` sends it on in
    :mod:`.wire` form without making the model at all (a Metric object costs more to make and to flatten
    again than its row: ``bench/README.md``). One definition of a result, whichever path it takes."""

    #: every :class:`BenchmarkResult` field but ``metrics`` and ``headline``
    fields: dict[str, Any]
    #: the fields every metric of the result shares (:data:`CONTEXT_FIELDS`; one metadata dict)
    context: dict[str, Any]
    #: each metric's own fields, in order
    rows: list[Row]
    #: ``rows[0]`` is the headline
    has_headline: bool


def result_of(built: Built) -> BenchmarkResult:
    """The model of ``built`` (its metrics share its one metadata dict; the headline is the first of them)."""
    metrics = metrics_of(built.rows, built.context)
    return BenchmarkResult.trusted(
        {**built.fields, "headline": metrics[0] if built.has_headline else None, "metrics": metrics}
    )
