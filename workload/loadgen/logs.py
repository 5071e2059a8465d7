"""Readers for LoadGen's logs: the ``:::MLLOG {json}`` detail log and the text summary.

Each detail-log line is ``:::MLLOG `` followed by a JSON object with ``key`` and ``value``
(plus ``metadata``). Keys may repeat (``error_invalid_config`` for example); :func:`detail_values`
keeps the last value of each key, :func:`detail_entries` keeps them all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workload.errors import ResultsError

DETAIL_LOG = "mlperf_log_detail.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
_PREFIX = ":::MLLOG "


def detail_entries(path: Path) -> list[dict[str, Any]]:
    """Every ``:::MLLOG`` record of a detail log, in order; other lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ResultsError(f"{path}: LoadGen detail log not found") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(_PREFIX):
            continue
        try:
            record = json.loads(line[len(_PREFIX) :])
        except ValueError as exc:
            raise ResultsError(f"{path}:{number}: bad :::MLLOG record ({exc})") from None
        if isinstance(record, dict) and "key" in record:
            entries.append(record)
    return entries


def detail_values(path: Path) -> dict[str, Any]:
    """``key -> value`` of a detail log (the last value when a key repeats)."""
    return {str(e["key"]): e.get("value") for e in detail_entries(path)}


def detail_errors(path: Path) -> list[dict[str, Any]]:
    """Records flagged ``metadata.is_error`` (e.g. ``error_invalid_config``)."""
    return [e for e in detail_entries(path) if isinstance(e.get("metadata"), dict) and e["metadata"].get("is_error")]


def loadgen_settings(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``requested_*`` and ``effective_*`` settings LoadGen logged, with the prefixes removed."""
    out: dict[str, dict[str, Any]] = {"requested": {}, "effective": {}}
    for key, value in values.items():
        for group in ("requested", "effective"):
            if key.startswith(group + "_"):
                out[group][key[len(group) + 1 :]] = value
    return out


def summary_field(path: Path, name: str) -> str | None:
    """The value of a ``Name : value`` line of the summary (``Result is``, ``Min duration satisfied``)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        raise ResultsError(f"{path}: LoadGen summary not found") from None
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value.strip()
    return None
