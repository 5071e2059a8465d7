"""Plain-tuple form of a :class:`BenchmarkResult`, for handing results between processes cheaply.

Pickling pydantic models goes through ``__getstate__``/``__setstate__`` per object (tens of
microseconds each, and enums are re-validated on load); a result of ~30 metrics becomes a few
tuples of strings and floats here instead. Contract: ``decode(encode(r)) == r`` for every result
``build()`` makes, and the metrics of one result that shared one ``metadata`` dict before
``encode`` share one dict after ``decode`` (callers update it in place, see ``run_cmd``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from workload.metrics.model import AccuracyCheck, BenchmarkResult, Categorization, Metric, Relativity

_REL = {r.value: r for r in Relativity}
# the four slots Metric.trusted sets (see model._trusted), as descriptor setters: no attribute lookup per call
_new = object.__new__
_SET_DICT = BaseModel.__dict__["__dict__"].__set__
_SET_FIELDS = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__
_METRIC_FIELDS = set(Metric.model_fields)
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
    index: dict[int, int] = {}
    rows: list[MetricRow] = []
    headline = -1
    for i, m in enumerate(result.metrics):
        d = m.__dict__
        meta = d["metadata"]
        ctx = (d["tool_name"], d["tool_version"], d["scenario_name"], d["start_time"], d["end_time"], d["host"], meta)
        at = index.get(id(meta))
        if at is None or contexts[at][:6] != ctx[:6]:
            at = len(contexts)
            contexts.append(ctx)
            index[id(meta)] = at
        rows.append((d["name"], d["value"], d["unit"], d["relativity"].value, d["categorization"].value,
                     d["description"], d["verbosity"], at))  # fmt: skip
        if m is result.headline:
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


def check_rows(checks: list[AccuracyCheck]) -> list[tuple[Any, ...]]:
    """Accuracy checks as tuples of their fields."""
    return [tuple(c.__dict__[f] for f in _CHECK_FIELDS) for c in checks]


def decode(encoded: Encoded) -> BenchmarkResult:
    """The :class:`BenchmarkResult` that ``encode`` was given (equal, not identical)."""
    fields, contexts, rows, headline_at, checks = encoded
    # Metric.trusted inlined (a third of the decode time was its two calls per metric)
    new, cls, set_dict, set_fields, set_extra, set_private = (
        _new,
        Metric,
        _SET_DICT,
        _SET_FIELDS,
        _SET_EXTRA,
        _SET_PRIVATE,
    )
    fields_set, rel, cat = _METRIC_FIELDS, _REL, _CAT
    metrics: list[Metric] = []
    add = metrics.append
    for name, value, unit, r, c, desc, verbosity, at in rows:
        ctx = contexts[at]
        metric = new(cls)
        set_dict(metric, {
            "name": name, "value": value, "unit": unit, "relativity": rel[r], "categorization": cat[c],
            "description": desc, "verbosity": verbosity, "tool_name": ctx[0], "tool_version": ctx[1],
            "scenario_name": ctx[2], "start_time": ctx[3], "end_time": ctx[4], "host": ctx[5], "metadata": ctx[6],
        })  # fmt: skip
        set_fields(metric, fields_set)
        set_extra(metric, None)
        set_private(metric, None)
        add(metric)
    headline: Metric | None = None
    if headline_at >= 0:
        headline = metrics[headline_at]
    elif headline_at <= -2:
        headline = metrics.pop(-2 - headline_at)
    values: dict[str, Any] = dict(zip(_FIELDS, fields, strict=True))
    values["accuracy_checks"] = [AccuracyCheck.trusted(dict(zip(_CHECK_FIELDS, c, strict=True))) for c in checks]
    values["headline"] = headline
    values["metrics"] = metrics
    return BenchmarkResult.trusted(values)
