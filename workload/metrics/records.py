"""Render metrics as ``metrics.csv`` rows (VirtualClient's columns) and ``metrics.jsonl`` lines, fast.

A fleet folder yields ~100,000 metrics, so the text is assembled from pieces rendered once: the run's
fields once per write, a result's fields (host, times, metadata) once per result, a metric kind's
fields (name, unit, relativity, description ...) once per kind; per metric only the value and the
OperationId are formatted. The output is the same as rendering every field of every metric.

CSV contract: every field double-quoted, ``"`` doubled, a cell that a spreadsheet would run as a formula
prefixed with ``'`` (:func:`spreadsheet_safe`), ``Metadata`` as ``key=value;...`` (None values
left out, like VC's IConvertible filter). JSONL contract: each line is one self-contained JSON object
that ``Metric.model_validate_json`` turns back into an equal Metric; null and empty-string fields are
left out (they are the model's defaults), ``host`` is always present and first (merges read it cheaply).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from workload.metrics.model import BenchmarkResult, Metric

SEVERITY_INFORMATION = "2"
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class RunContext(Protocol):
    """The run-level fields of every record (``outputs.OutputContext``)."""

    @property
    def experiment_id(self) -> str: ...
    @property
    def profile_name(self) -> str: ...
    @property
    def execution_system(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def app_host(self) -> str: ...
    @property
    def app_name(self) -> str: ...
    @property
    def app_version(self) -> str: ...
    @property
    def operating_system_platform(self) -> str: ...
    @property
    def platform_architecture(self) -> str: ...
    @property
    def tags(self) -> tuple[str, ...]: ...


def vc_timestamp(moment: datetime | None) -> str:
    """.NET round-trip ("o") format, 7 fractional digits, UTC: ``2024-07-24T15:03:20.1234560Z``."""
    if moment is None:
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


def format_value(value: float) -> str:
    """Shortest exact text of a metric value (``73309.5``, ``1924537``)."""
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)


#: first characters that make a spreadsheet (Excel, LibreOffice, Google Sheets) take a cell for a formula
_FORMULA_START = frozenset("=+-@\t\r")
#: ... unless the cell is a plain number (``-3``, ``+1.5e3``), which no spreadsheet runs
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(text: str) -> str:
    """``text`` as a cell no spreadsheet runs as a formula: one that starts like a formula gets a ``'`` before it.

    A host named ``=cmd|' /C calc'!A0`` or a benchmark named ``=HYPERLINK(...)`` lands in
    ``metrics.csv``, which people open in spreadsheets; the apostrophe is the text marker spreadsheets
    honour (OWASP, "CSV Injection"). How VirtualClient's own tooling reads such a cell: VC's
    ``MetricsCsvFileLogger`` (VirtualClient.Contracts/Logging/MetricsCsvFileLogger.cs, ``CreateMessage``)
    writes every field between double quotes and escapes nothing, and a CSV reader (VC's or pandas)
    reads this cell back with its leading apostrophe: only cells that begin with ``= + - @``, a tab
    or a carriage return and are not plain numbers change; ``metrics.jsonl`` keeps every value as is.
    Applying it again changes nothing (the cell then starts with ``'``).
    """
    if text and text[0] in _FORMULA_START and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def quote(text: str) -> str:
    """One CSV field, VC style: always quoted, ``"`` doubled; spreadsheet-safe (:func:`spreadsheet_safe`)."""
    return '"' + spreadsheet_safe(text).replace('"', '""') + '"'


def pairs(items: dict[str, str | int | float | bool | None]) -> str:
    """VC's ``Metadata`` column text: ``key=value;key=value`` without the None values."""
    return ";".join(f"{k}={v}" for k, v in items.items() if v is not None)


@dataclass
class Rendered:
    """Text rendered by :meth:`RecordRenderer.render`: lines, each ending in a newline."""

    csv: str
    jsonl: str


class RecordRenderer:
    """Renders metrics of one write (one timestamp, one OperationParentId) as CSV rows and JSONL lines."""

    def __init__(self, context: RunContext, timestamp: str, parent_id: str) -> None:
        self.context = context
        run = (timestamp, context.experiment_id, context.execution_system, context.profile_name)
        self._run = ",".join(quote(f) for f in run)
        app = (context.app_host, context.app_name, context.app_version, context.operating_system_platform,
               context.platform_architecture, SEVERITY_INFORMATION)  # fmt: skip
        # OperationId: one random GUID prefix per write plus a counter (unique, and ~10x cheaper than uuid4)
        p = uuid.uuid4().hex[:20]
        self._mid = "," + ",".join(quote(f) for f in app) + f',"{p[:8]}-{p[8:12]}-{p[12:16]}-{p[16:20]}-'
        self._parent = '",' + quote(parent_id) + ","
        self._tags = quote(",".join(context.tags))
        self.count = 0
        self._kinds: dict[tuple[Any, ...], tuple[str, str, str, str]] = {}

    def _kind(self, d: dict[str, Any]) -> tuple[str, str, str, str]:
        """(CSV name field, CSV unit..verbosity fields, JSON name + members) of a metric kind, rendered once."""
        key = (d["name"], d["unit"], d["relativity"], d["categorization"], d["description"], d["verbosity"])
        kind = self._kinds.get(key)
        if kind is None:
            rel, cat = str(d["relativity"]), str(d["categorization"])
            after = (d["unit"], cat, d["description"], rel, str(d["verbosity"]))
            members = {"unit": d["unit"], "relativity": rel, "categorization": cat,
                       "description": d["description"], "verbosity": d["verbosity"]}  # fmt: skip
            text = _dumps({k: v for k, v in members.items() if v != ""})[1:-1]
            kind = (quote(d["name"]), ",".join(quote(f) for f in after), _dumps(d["name"]) + ',"value":', "," + text)
            self._kinds[key] = kind
        return kind

    def _csv_context(self, d: dict[str, Any]) -> tuple[str, str]:
        """(CSV text before the metric name, CSV text after the OperationId counter) of a result's context."""
        host = d["host"]
        head = (host or self.context.client_id, d["tool_name"], d["tool_version"] or "", d["scenario_name"],
                vc_timestamp(d["start_time"]), vc_timestamp(d["end_time"]))  # fmt: skip
        before = self._run + "," + ",".join(quote(f) for f in head) + ","
        after = (self._parent + quote(pairs(d["metadata"])) + "," + quote(pairs({"host": host})) + ',"",'
                 + self._tags + "\n")  # fmt: skip
        return before, after

    @staticmethod
    def _json_context(d: dict[str, Any]) -> tuple[str, str]:
        """(JSON text before the metric name, JSON text after the metric's kind) of a result's context."""
        start, end = d["start_time"], d["end_time"]
        members = {
            "tool_name": d["tool_name"], "tool_version": d["tool_version"], "scenario_name": d["scenario_name"],
            "start_time": start.isoformat() if start is not None else None,
            "end_time": end.isoformat() if end is not None else None,
        }  # fmt: skip
        text = _dumps({k: v for k, v in members.items() if v is not None and v != ""})[1:-1]
        text = "," + (text + "," if text else "") + '"metadata":' + _dumps(d["metadata"]) + "}\n"
        return '{"host":' + _dumps(d["host"]) + ',"name":', text

    def render(self, results: Iterable[BenchmarkResult]) -> Rendered:
        """Every metric of ``results``, in order, as CSV rows and JSONL lines."""
        metrics = [m for r in results for m in r.metrics]
        return Rendered(self.csv_text(metrics), self.jsonl_text(metrics))

    # Both loops below re-render a result's context only when a metric's differs from the previous
    # one's: the metrics of one result share one context and one metadata dict (see build.py). The
    # comparison and the kind lookup are written out in the loops: as calls they were a fifth of the loop.

    def csv_text(self, metrics: Iterable[Metric]) -> str:
        """metrics.csv rows of ``metrics`` (each ending in a newline); OperationIds continue ``self.count``."""
        # pieces joined once: building each ~700-character row first would copy every byte twice
        parts: list[str] = []
        add, mid, kinds, kind_of, count = parts.extend, self._mid, self._kinds, self._kind, self.count
        before = after = ""
        last: dict[str, Any] = _NO_METRIC
        for metric in metrics:
            d = metric.__dict__
            if _new_context(d, last):
                before, after = self._csv_context(d)
                last = d
            kind = kinds.get((d["name"], d["unit"], d["relativity"], d["categorization"], d["description"],
                              d["verbosity"])) or kind_of(d)  # fmt: skip
            count += 1
            add((before, kind[0], ',"', format_value(d["value"]), '",', kind[1], mid, f"{count:012x}", after))
        self.count = count
        return "".join(parts)

    def jsonl_text(self, metrics: Iterable[Metric]) -> str:
        """metrics.jsonl lines of ``metrics`` (each ending in a newline)."""
        parts: list[str] = []
        add, kinds, kind_of, isfinite = parts.extend, self._kinds, self._kind, math.isfinite
        head = tail = ""
        last: dict[str, Any] = _NO_METRIC
        for metric in metrics:
            d = metric.__dict__
            if _new_context(d, last):
                head, tail = self._json_context(d)
                last = d
            kind = kinds.get((d["name"], d["unit"], d["relativity"], d["categorization"], d["description"],
                              d["verbosity"])) or kind_of(d)  # fmt: skip
            value = d["value"]
            add((head, kind[2], repr(value) if isfinite(value) else "null", kind[3], tail))
        return "".join(parts)

    def csv_row(self, metric: Metric) -> str:
        """One metrics.csv row (with newline) for ``metric``."""
        return self.csv_text([metric])


#: the "previous metric" before the first one: its metadata is no metric's (the first one renders its context)
_NO_METRIC: dict[str, Any] = {"metadata": object()}


def _new_context(d: dict[str, Any], last: dict[str, Any]) -> bool:
    """Whether metric fields ``d`` need other record context than the previous metric's ``last``.

    Metrics of one result share their metadata object, so a run of them renders its context once.
    """
    return (
        d["metadata"] is not last["metadata"]
        or d["host"] != last["host"]
        or d["scenario_name"] != last["scenario_name"]
        or d["start_time"] != last["start_time"]
        or d["end_time"] != last["end_time"]
        or d["tool_version"] != last["tool_version"]
        or d["tool_name"] != last["tool_name"]
    )
