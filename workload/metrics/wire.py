"""Compact form of a :class:`BenchmarkResult`, for the large-archive path only: the process pool of
:mod:`.collection` (``PARALLEL_MIN_DIRS`` result directories or more). ``build()`` returns the model.

Why it is kept, measured (``bench/bench_results.py --large --no-library --compare-root``, 50,008 result
files, 3 interleaved rounds, one run, 2-core machine at load 25-39): with the pool sending pickled
models and the parent holding every Metric object, ``workload results`` peaks at 383 MiB (table) and
407 MiB (``--output``), over the 300 MB goal; with this form, 190 MiB and 215 MiB (paired ratio 0.50
and 0.53). A Metric object costs ~1 kB, its row here ~150 bytes: :class:`LazyMetrics` keeps a result's
metrics as rows in the parent and makes the objects when they are read (the JSONL, the CSV, ``--json``).
Rows also pickle as plain tuples between processes (pydantic pickles per object). The workers encode
``build.build_data``'s plain data (:func:`encode_built`) and make no model objects: making every Metric
and flattening it again cost ~25 % more CPU than the base commit (10,010 and 50,008 files, ratios 1.26
and 1.27 table, 1.17 and 1.24 ``--output``); from the plain data, 1.01-1.11 and 1.01-1.17 in four
runs at load 2-38 (10,010 files; ``bench/README.md``). Both paths make a result by the one definition in ``build``.

Contract: ``decode(encode(r)) == r`` for every result, and the metrics of one result that shared one
``metadata`` dict before ``encode`` share one dict after ``decode``. Objects are made with the model's
own :meth:`Metric.trusted` (no other pydantic internals here).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, SupportsIndex

from workload.metrics.build import CONTEXT_FIELDS, Built
from workload.metrics.model import AccuracyCheck, BenchmarkResult, Categorization, Metric, Relativity

_REL = {r.value: r for r in Relativity}
_CAT = {c.value: c for c in Categorization}

# (tool_name, tool_version, scenario_name, start_time, end_time, host, metadata)
Context = tuple[Any, ...]
# (name, value, unit, relativity, categorization, description, verbosity, context index); relativity and
# categorization as their values or the enum members (StrEnum members hash and compare as their values)
MetricRow = tuple[str, float, str, str, str, str, int, int]
Encoded = tuple[tuple[Any, ...], list[Context], list[MetricRow], int, list[tuple[Any, ...]]]

_FIELDS = (
    "model", "benchmark_full", "scenario", "test_mode", "system", "config_name", "validity", "accuracy_pass",
    "invalid_reasons", "fixes", "notes", "source", "files", "host", "loadgen_version",
)  # fmt: skip
_CHECK_FIELDS = ("name", "value", "threshold", "upper_limit", "passed")


def encode(result: BenchmarkResult) -> Encoded:
    """``result`` as tuples of plain values (see the module contract)."""
    contexts: list[Context] = []
    rows: list[MetricRow] = []
    headline = -1
    # a LazyMetrics list makes new objects on each read: its headline is found by value
    lazy = isinstance(result.metrics, LazyMetrics) and result.headline is not None
    for i, m in enumerate(result.metrics):
        d = m.__dict__
        meta = d["metadata"]
        ctx = (d["tool_name"], d["tool_version"], d["scenario_name"], d["start_time"], d["end_time"], d["host"], meta)
        # one context per distinct (fields, metadata dict): a result's metrics usually share one, the last
        at = len(contexts) - 1
        if at < 0 or contexts[at][6] is not meta or contexts[at][:6] != ctx[:6]:
            found = next((j for j, c in enumerate(contexts) if c[6] is meta and c[:6] == ctx[:6]), None)
            if found is None:
                found = len(contexts)
                contexts.append(ctx)
            at = found
        rows.append((d["name"], d["value"], d["unit"], d["relativity"].value, d["categorization"].value,
                     d["description"], d["verbosity"], at))  # fmt: skip
        if m is result.headline or (lazy and headline < 0 and m == result.headline):
            headline = i
    data = result.__dict__
    fields = tuple(data[f] for f in _FIELDS)
    if headline < 0 and result.headline is not None:  # a headline outside the metric list: carried as a row
        h = result.headline.__dict__
        contexts.append((h["tool_name"], h["tool_version"], h["scenario_name"], h["start_time"], h["end_time"],
                         h["host"], h["metadata"]))  # fmt: skip
        rows.append((h["name"], h["value"], h["unit"], h["relativity"].value, h["categorization"].value,
                     h["description"], h["verbosity"], len(contexts) - 1))  # fmt: skip
        headline = -2 - (len(rows) - 1)
    return fields, contexts, rows, headline, check_rows(result.accuracy_checks)


def encode_built(built: Built) -> Encoded:
    """``encode(build.result_of(built))``, made from the plain data without making the model (the pool's path).

    Rows keep their enum members: a StrEnum member hashes and compares as its value, and pickle sends
    each member once per message (memoised).
    """
    fields = built.fields
    context = built.context
    return (
        tuple(fields[f] for f in _FIELDS),
        [tuple(context[f] for f in CONTEXT_FIELDS)],
        [(*row, 0) for row in built.rows],
        0 if built.has_headline else -1,
        check_rows(fields["accuracy_checks"]),
    )


def check_rows(checks: list[AccuracyCheck]) -> list[tuple[Any, ...]]:
    """Accuracy checks as tuples of their fields."""
    return [tuple(c.__dict__[f] for f in _CHECK_FIELDS) for c in checks]


def _metrics_of(rows: list[MetricRow], contexts: list[Context]) -> list[Metric]:
    """The Metric objects of ``rows`` (each row's context from ``contexts``)."""
    rel, cat = _REL, _CAT
    return Metric.trusted_all([
        {
            "name": name, "value": value, "unit": unit, "relativity": rel[r], "categorization": cat[c],
            "description": desc, "verbosity": verbosity, "tool_name": ctx[0], "tool_version": ctx[1],
            "scenario_name": ctx[2], "start_time": ctx[3], "end_time": ctx[4], "host": ctx[5], "metadata": ctx[6],
        }
        for name, value, unit, r, c, desc, verbosity, at in rows
        for ctx in (contexts[at],)
    ])  # fmt: skip


class LazyMetrics(list[Metric]):
    """A result's metric list kept as wire rows: Metric objects are made when it is read, and not kept.

    A Metric object costs ~1 kB; its row ~150 bytes. With 50,000 result files (~400,000 metrics) held
    as rows, ``workload results`` stays within its memory budget; each pass over a result's metrics
    (the JSONL, the CSV, ``--json``) makes and drops them. The metadata dicts are the rows' contexts'
    own, so updating a metric's metadata in place (``run_cmd``) updates every later read. Any change to
    the list (append, sort ...) first makes it an ordinary list of the objects.
    """

    __slots__ = ("_contexts", "_rows")

    def __init__(self, rows: list[MetricRow], contexts: list[Context]) -> None:
        super().__init__()
        self._rows: list[MetricRow] | None = rows
        self._contexts = contexts

    def _real(self) -> list[Metric]:
        """Turn into an ordinary list (for changes); returns ``self``."""
        if self._rows is not None:
            rows, self._rows = self._rows, None
            super().extend(_metrics_of(rows, self._contexts))
        return self

    def __iter__(self) -> Iterator[Metric]:
        if self._rows is None:
            return super().__iter__()
        return iter(_metrics_of(self._rows, self._contexts))

    def __reversed__(self) -> Iterator[Metric]:
        return reversed(list(self.__iter__()))

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else super().__len__()

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, index: Any) -> Any:
        if self._rows is None:
            return super().__getitem__(index)
        if isinstance(index, slice):
            return _metrics_of(self._rows[index], self._contexts)
        return _metrics_of([self._rows[index]], self._contexts)[0]

    def __contains__(self, item: object) -> bool:
        return any(m == item for m in self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self.__iter__()) == list(other.__iter__() if isinstance(other, LazyMetrics) else other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None

    def __repr__(self) -> str:
        return repr(list(self.__iter__()))

    def copy(self) -> list[Metric]:
        return list(self.__iter__())

    def index(self, value: Metric, start: SupportsIndex = 0, stop: SupportsIndex = sys.maxsize) -> int:
        return list(self.__iter__()).index(value, start, stop)

    def count(self, value: Metric) -> int:
        return list(self.__iter__()).count(value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self.__iter__()),))


def _changing(name: str) -> Any:
    method = getattr(list, name)

    def change(self: LazyMetrics, *args: Any, **kwargs: Any) -> Any:
        return method(self._real(), *args, **kwargs)

    change.__name__ = name
    return change


for _name in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
              "__delitem__", "__iadd__", "__imul__", "__add__", "__mul__", "__rmul__"):  # fmt: skip
    setattr(LazyMetrics, _name, _changing(_name))


def decode(encoded: Encoded, *, lazy: bool = False) -> BenchmarkResult:
    """The :class:`BenchmarkResult` that ``encode`` was given (equal, not identical).

    ``lazy``: the metric list is a :class:`LazyMetrics` (rows, made into Metric objects when read); the
    headline is made at once.
    """
    fields, contexts, rows, headline_at, checks = encoded
    metrics: list[Metric]
    headline: Metric | None = None
    if lazy and headline_at > -2:
        metrics = LazyMetrics(rows, contexts)
        if headline_at >= 0:
            headline = _metrics_of([rows[headline_at]], contexts)[0]
    else:
        metrics = _metrics_of(rows, contexts)
        if headline_at >= 0:
            headline = metrics[headline_at]
        elif headline_at <= -2:
            headline = metrics.pop(-2 - headline_at)
    values: dict[str, Any] = dict(zip(_FIELDS, fields, strict=True))
    values["accuracy_checks"] = [AccuracyCheck.trusted(dict(zip(_CHECK_FIELDS, c, strict=True))) for c in checks]
    values["headline"] = headline
    values["metrics"] = metrics
    return BenchmarkResult.trusted(values)
