"""What a run folder holds, read for the report.

Reads ``summary.json`` (verdict and per-result headline, reasons, fixes), ``metrics.jsonl``
(latency percentiles), ``run.json`` (metadata, exit code), each retried result's
``attempts.json``, and ``telemetry/`` (samples and summary). Only ``summary.json`` or ``run.json``
is required; whatever else is missing is left out of the report.

A run folder is input like any other: every file is read with :func:`~workload.safefile.read_regular`
(a FIFO or device under one of these names is refused, never blocks), its numbers through
:func:`~workload.numbers.load_json` (no 5,000-digit integer, ``Infinity`` or ``1e999`` gets as
far as a chart's axis) and its structure checked against the shape the report walks
(:mod:`workload.jsonshape`, the ``*_SHAPE`` values below). A file that is not what it should be is
a :class:`~workload.errors.UsageError` (exit 2) naming the file, the line and the JSON path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.errors import UsageError
from workload.jsonloc import format_loc
from workload.jsonshape import (
    ANY,
    NUMBER,
    SCALAR,
    SCALAR_OR_NULL,
    TEXT,
    Shape,
    array,
    mapping,
    needs,
    obj,
    shape_problem,
)
from workload.numbers import load_json, unbounded_numbers
from workload.safefile import read_regular

#: metrics.jsonl percentile names -> label, in order.
PERCENTILES: tuple[tuple[str, str], ...] = (
    ("latency_p50_ns", "p50"),
    ("latency_p90_ns", "p90"),
    ("latency_p95_ns", "p95"),
    ("latency_p97_ns", "p97"),
    ("latency_p99_ns", "p99"),
    ("latency_p99_9_ns", "p99.9"),
)


#: the largest file of a run folder the report reads (telemetry samples of a long fleet run included)
MAX_FILE_BYTES = 256 * 1024 * 1024
_TEXTS = array(SCALAR)
SUMMARY_SHAPE = obj(
    experiment_id=SCALAR,
    profile_name=SCALAR,
    verdict=mapping(ANY),
    issues=array(obj(path=SCALAR, problem=SCALAR)),
    results=array(
        obj(
            source=SCALAR,
            host=SCALAR,
            benchmark_full=SCALAR,
            model=SCALAR,
            scenario=SCALAR,
            test_mode=SCALAR,
            validity=SCALAR,
            accuracy_pass=SCALAR,
            headline=obj(name=SCALAR, value=NUMBER, unit=SCALAR, relativity=SCALAR),
            invalid_reasons=_TEXTS,
            fixes=_TEXTS,
            notes=_TEXTS,
        )
    ),
)
RUN_SHAPE = obj(
    run_id=SCALAR,
    profile=SCALAR,
    started_at=SCALAR,
    ended_at=SCALAR,
    exit_code=NUMBER,
    tool=obj(name=SCALAR, version=SCALAR),
    controller=obj(cpu_model=SCALAR, cpu_count=SCALAR, load_average=_TEXTS, packages=mapping(SCALAR_OR_NULL)),
    command_line=_TEXTS,
)
ATTEMPTS_SHAPE = obj(attempts=array(obj(attempt=SCALAR, validity=SCALAR, retried_because=SCALAR, changed=mapping(ANY))))
_STAT = needs(obj(min=NUMBER, avg=NUMBER, max=NUMBER, unit=SCALAR), "min", "avg", "max")
_HOST_TELEMETRY = {
    "throttling": obj(devices=mapping(_TEXTS)),
    "devices": mapping(obj(name=SCALAR, metrics=mapping(_STAT))),
    "notes": _TEXTS,
    "errors": _TEXTS,
    "failed_samples": SCALAR,
}
TELEMETRY_SHAPE = obj(hosts=mapping(obj(**_HOST_TELEMETRY)), **_HOST_TELEMETRY)
SAMPLE_SHAPE = obj(time=TEXT, host=SCALAR, device=SCALAR, values=mapping(ANY))
METRIC_LINE_SHAPE = obj(name=SCALAR, host=SCALAR, metadata=obj(host=SCALAR, source=SCALAR))


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


def _read(path: Path) -> bytes | None:
    """The bytes of ``path``; None when it does not exist; UsageError when it cannot be read."""
    try:
        return read_regular(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}", hint=_DAMAGED) from None


_DAMAGED = "the run folder is damaged or not one `workload` wrote: repair or remove the file named"


def _checked(value: Any, shape: Shape, where: str) -> Any:
    """``value`` when its numbers are bounded and it has ``shape``; else UsageError naming ``where`` and the place."""
    for loc, why in unbounded_numbers(value):
        raise UsageError(f"{where}: {format_loc(loc) or '(top level)'}: {why}", hint=_DAMAGED)
    problem = shape_problem(value, shape)
    if problem is not None:
        raise UsageError(f"{where}: {problem}", hint=_DAMAGED)
    return value


def _object(path: Path, shape: Shape) -> dict[str, Any] | None:
    """The JSON object in ``path`` checked against ``shape``; None when there is no such file."""
    data = _read(path)
    if data is None:
        return None
    try:
        value = load_json(data.decode("utf-8", errors="strict"))
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not a readable JSON file ({exc})", hint=_DAMAGED) from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: expected a JSON object", hint=_DAMAGED)
    result: dict[str, Any] = _checked(value, shape, str(path))
    return result


def _json_lines(path: Path, shape: Shape, *, skip_cut: bool) -> list[dict[str, Any]]:
    """The JSON objects of the lines of ``path`` (checked against ``shape``); [] without the file.

    ``skip_cut``: a line that is not JSON is one an interrupted writer cut (telemetry samples), skipped.
    """
    data = _read(path)
    records: list[dict[str, Any]] = []
    for number, line in enumerate((data or b"").decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = load_json(line)
        except (ValueError, RecursionError):
            if skip_cut:
                continue
            raise UsageError(f"{path}:{number}: not a JSON line", hint=_DAMAGED) from None
        if not isinstance(record, dict):
            raise UsageError(f"{path}:{number}: expected a JSON object", hint=_DAMAGED)
        records.append(_checked(record, shape, f"{path}:{number}"))
    return records


def _relative_source(source: str, run_id: str) -> str | None:
    """The part of a result's recorded (absolute) path inside its run folder, so a moved folder still works."""
    marker = f"/{run_id}/"
    return source.split(marker, 1)[1] if marker in source else None


def _percentiles(root: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(host, source) -> percentile label -> ms, from metrics.jsonl."""
    wanted = dict(PERCENTILES)
    out: dict[tuple[str, str], dict[str, float]] = {}
    for record in _json_lines(root / "metrics.jsonl", METRIC_LINE_SHAPE, skip_cut=False):
        label = wanted.get(str(record.get("name")))
        value = record.get("value")
        if label is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        metadata = record.get("metadata") or {}
        key = (str(record.get("host") or metadata.get("host") or ""), str(metadata.get("source") or ""))
        out.setdefault(key, {})[label] = float(value) / 1e6
    return out


def load_run(root: Path) -> RunData:
    """Read one run folder (see the module docstring)."""
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder", hint="give a run folder (workload-runs/<time>-<profile>)")
    summary = _object(root / "summary.json", SUMMARY_SHAPE)
    meta = _object(root / "run.json", RUN_SHAPE)
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
                record = _object(folder / "attempts.json", ATTEMPTS_SHAPE) or {}
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
    samples = _json_lines(root / "telemetry" / "samples.jsonl", SAMPLE_SHAPE, skip_cut=True)
    verdict = summary.get("verdict") if isinstance(summary.get("verdict"), dict) else {}
    return RunData(
        root=root,
        run_id=run_id,
        profile=str(summary.get("profile_name") or meta.get("profile") or "?"),
        verdict=verdict or {},
        meta=meta,
        results=rows,
        issues=[i for i in summary.get("issues", []) or [] if isinstance(i, dict)],
        telemetry=_object(root / "telemetry" / "summary.json", TELEMETRY_SHAPE),
        samples=samples,
    )
