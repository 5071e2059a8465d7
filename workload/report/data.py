"""What a run folder holds, read for the report.

Reads ``summary.json`` (verdict and per-result headline, reasons, fixes), ``metrics.jsonl``
(latency percentiles), ``run.json`` (metadata, exit code), each retried result's
``attempts.json``, and ``telemetry/`` (samples and summary). Only ``summary.json`` or ``run.json``
is required; whatever else is missing is left out of the report. A file that is not what it
should be is a :class:`~workload.errors.UsageError` naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.errors import UsageError

#: metrics.jsonl percentile names -> label, in order.
PERCENTILES: tuple[tuple[str, str], ...] = (
    ("latency_p50_ns", "p50"),
    ("latency_p90_ns", "p90"),
    ("latency_p95_ns", "p95"),
    ("latency_p97_ns", "p97"),
    ("latency_p99_ns", "p99"),
    ("latency_p99_9_ns", "p99.9"),
)


@dataclass
class ResultRow:
    run_id: str
    host: str
    benchmark: str
    scenario: str
    mode: str
    validity: str | None
    accuracy_pass: bool | None
    headline: dict[str, Any] | None
    reasons: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: label -> latency in ms (performance results with LoadGen percentiles)
    percentiles: dict[str, float] = field(default_factory=dict)
    #: attempts.json's attempts when the test was retried
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_performance(self) -> bool:
        return self.mode.lower().startswith("performance")

    @property
    def failed(self) -> bool:
        if self.is_performance:
            return self.validity != "VALID"
        return self.accuracy_pass is not True


@dataclass
class RunData:
    root: Path
    run_id: str
    profile: str
    verdict: dict[str, Any]
    meta: dict[str, Any]
    results: list[ResultRow]
    issues: list[dict[str, Any]] = field(default_factory=list)
    telemetry: dict[str, Any] | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable JSON file ({exc})") from None


def _object(path: Path) -> dict[str, Any] | None:
    data = _json(path)
    if data is not None and not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return data


def _relative_source(source: str, run_id: str) -> str | None:
    """The part of a result's recorded (absolute) path inside its run folder, so a moved folder still works."""
    marker = f"/{run_id}/"
    return source.split(marker, 1)[1] if marker in source else None


def _percentiles(root: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(host, source) -> percentile label -> ms, from metrics.jsonl."""
    wanted = dict(PERCENTILES)
    out: dict[tuple[str, str], dict[str, float]] = {}
    path = root / "metrics.jsonl"
    if not path.is_file():
        return out
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise UsageError(f"{path}:{number}: not a JSON line") from None
            label = wanted.get(record.get("name"))
            value = record.get("value")
            if label is None or not isinstance(value, int | float):
                continue
            metadata = record.get("metadata") or {}
            key = (str(record.get("host") or metadata.get("host") or ""), str(metadata.get("source") or ""))
            out.setdefault(key, {})[label] = float(value) / 1e6
    return out


def load_run(root: Path) -> RunData:
    """Read one run folder (see the module docstring)."""
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder", hint="give a run folder (workload-runs/<time>-<profile>)")
    summary = _object(root / "summary.json")
    meta = _object(root / "run.json")
    if summary is None and meta is None:
        raise UsageError(
            f"{root}: not a run folder (no summary.json or run.json)",
            hint="give a folder that `workload run` created, or run `workload results PATH --output DIR` first",
        )
    summary = summary or {}
    meta = meta or {}
    # run.json's id is the folder's name; summary.json's experiment id is a UUID when `workload results` wrote it
    run_id = str(meta.get("run_id") or summary.get("experiment_id") or root.name)
    percentiles = _percentiles(root)
    rows: list[ResultRow] = []
    for entry in summary.get("results", []) or []:
        if not isinstance(entry, dict):
            continue
        source = str(entry.get("source") or "")
        host = str(entry.get("host") or "")
        rel = _relative_source(source, root.name)
        attempts: list[dict[str, Any]] = []
        for folder in (root / rel if rel else None, Path(source) if source else None):
            if folder is not None and (folder / "attempts.json").is_file():
                record = _object(folder / "attempts.json") or {}
                attempts = [a for a in record.get("attempts", []) if isinstance(a, dict)]
                break
        rows.append(
            ResultRow(
                run_id=run_id,
                host=host,
                benchmark=str(entry.get("benchmark_full") or entry.get("model") or "?"),
                scenario=str(entry.get("scenario") or "?"),
                mode=str(entry.get("test_mode") or "?"),
                validity=entry.get("validity"),
                accuracy_pass=entry.get("accuracy_pass"),
                headline=entry.get("headline") if isinstance(entry.get("headline"), dict) else None,
                reasons=[str(r) for r in entry.get("invalid_reasons") or []],
                fixes=[str(f) for f in entry.get("fixes") or []],
                notes=[str(n) for n in entry.get("notes") or []],
                percentiles=percentiles.get((host, source), {}),
                attempts=attempts,
            )
        )
    samples: list[dict[str, Any]] = []
    samples_path = root / "telemetry" / "samples.jsonl"
    if samples_path.is_file():
        for line in samples_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by an interrupted run
            if isinstance(record, dict):
                samples.append(record)
    verdict = summary.get("verdict") if isinstance(summary.get("verdict"), dict) else {}
    return RunData(
        root=root,
        run_id=run_id,
        profile=str(summary.get("profile_name") or meta.get("profile") or "?"),
        verdict=verdict or {},
        meta=meta,
        results=rows,
        issues=[i for i in summary.get("issues", []) or [] if isinstance(i, dict)],
        telemetry=_object(root / "telemetry" / "summary.json"),
        samples=samples,
    )
