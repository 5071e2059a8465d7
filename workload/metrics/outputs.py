"""Write results as ``metrics.jsonl``, VirtualClient-compatible ``metrics.csv`` and ``summary.json``.

Several hosts can write into one run folder (the fleet merges per-host results): a write replaces
the records of the hosts it carries and keeps everyone else's, under an exclusive lock, so
re-collecting a host never duplicates it. ``metrics.csv`` has VC's exact columns and quoting (every
field double-quoted, ``"`` doubled, ``Metadata`` as ``key=value;key=value``); unlike VC the MLPerf
scenario survives, in ``Metadata``.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import math
import os
import platform
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from workload import __version__
from workload.metrics.collection import Collection, collect
from workload.metrics.model import BenchmarkResult, Metric, ParseIssue
from workload.metrics.verdict import Verdict

CSV_COLUMNS = (
    "Timestamp", "ExperimentId", "ExecutionSystem", "ProfileName", "ClientId", "ToolName", "ToolVersion",
    "ScenarioName", "ScenarioStartTime", "ScenarioEndTime", "MetricName", "MetricValue", "MetricUnit",
    "MetricCategorization", "MetricDescription", "MetricRelativity", "MetricVerbosity", "AppHost", "AppName",
    "AppVersion", "OperatingSystemPlatform", "PlatformArchitecture", "SeverityLevel", "OperationId",
    "OperationParentId", "Metadata", "Metadata_Host", "ToolResults", "Tags",
)  # fmt: skip
JSONL_NAME = "metrics.jsonl"
CSV_NAME = "metrics.csv"
SUMMARY_NAME = "summary.json"
_SEVERITY_INFORMATION = "2"


def _platform() -> str:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine().lower(), "")
    return f"{platform.system().lower()}-{arch}" if arch else platform.system().lower()


@dataclass(frozen=True)
class OutputContext:
    """Run-level fields of every record (VC's persistent context)."""

    experiment_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    profile_name: str = ""
    execution_system: str = "workload"
    client_id: str = field(default_factory=socket.gethostname)
    app_host: str = field(default_factory=socket.gethostname)
    app_name: str = "workload"
    app_version: str = __version__
    operating_system_platform: str = field(default_factory=_platform)
    platform_architecture: str = field(default_factory=lambda: _platform().rsplit("-", 1)[-1])
    tags: tuple[str, ...] = ()


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


def _pairs(items: dict[str, str | int | float | bool | None]) -> str:
    return ";".join(f"{k}={v}" for k, v in items.items() if v is not None)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def csv_row(metric: Metric, context: OutputContext, timestamp: str, parent_id: str) -> str:
    """One metrics.csv line (with newline) for ``metric``."""
    return _CsvWriter(context, timestamp, parent_id).row(metric)


class _CsvWriter:
    """metrics.csv rows; the fields shared by a run and by a result are quoted once, not per metric."""

    def __init__(self, context: OutputContext, timestamp: str, parent_id: str) -> None:
        self.context = context
        self.timestamp = _quote(timestamp)
        self.run_fields = ",".join(_quote(f) for f in (context.experiment_id, context.execution_system,
                                                       context.profile_name))  # fmt: skip
        self.app_fields = ",".join(
            _quote(f)
            for f in (context.app_host, context.app_name, context.app_version, context.operating_system_platform,
                      context.platform_architecture, _SEVERITY_INFORMATION)
        )  # fmt: skip
        self.parent = _quote(parent_id)
        self.tags = _quote(",".join(context.tags))
        # OperationId: one random GUID prefix per write plus a counter (unique, and ~10x cheaper than uuid4)
        self.id_prefix = uuid.uuid4().hex[:20]
        self.count = 0
        self._cache: dict[int, tuple[str, str]] = {}
        self._specs: dict[tuple[object, ...], tuple[str, str]] = {}

    def _shared(self, metric: Metric) -> tuple[str, str]:
        key = id(metric.metadata)  # metrics of one result share one metadata dict (see build.py)
        cached = self._cache.get(key)
        if cached is None or cached[0] != metric.scenario_name + "\0" + (metric.host or ""):
            head = ",".join(
                _quote(f)
                for f in (metric.host or self.context.client_id, metric.tool_name, metric.tool_version or "",
                          metric.scenario_name, vc_timestamp(metric.start_time), vc_timestamp(metric.end_time))
            )  # fmt: skip
            tail = _quote(_pairs(metric.metadata)) + "," + _quote(_pairs({"host": metric.host})) + ',"",' + self.tags
            cached = (metric.scenario_name + "\0" + (metric.host or ""), head + "\x00" + tail)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = cached
        head, _, tail = cached[1].partition("\x00")
        return head, tail

    def row(self, metric: Metric) -> str:
        head, tail = self._shared(metric)
        self.count += 1
        p = self.id_prefix
        op_id = f"{p[:8]}-{p[8:12]}-{p[12:16]}-{p[16:20]}-{self.count:012x}"
        spec_key = (metric.name, metric.unit, metric.categorization, metric.description, metric.relativity,
                    metric.verbosity)  # fmt: skip
        spec = self._specs.get(spec_key)
        if spec is None:
            after = (metric.unit, str(metric.categorization), metric.description, str(metric.relativity),
                     str(metric.verbosity))  # fmt: skip
            spec = (_quote(metric.name), ",".join(_quote(f) for f in after))
            self._specs[spec_key] = spec
        value = format_value(metric.value)
        return (
            f'{self.timestamp},{self.run_fields},{head},{spec[0]},"{value}",{spec[1]},{self.app_fields},'
            f'"{op_id}",{self.parent},{tail}\n'
        )


class _JsonWriter:
    """metrics.jsonl lines equal to ``Metric.model_dump_json()`` in content, built from cached pieces."""

    def __init__(self) -> None:
        self._specs: dict[tuple[str, str, str, str, str, int], str] = {}
        self._shared: dict[int, tuple[Metric, str]] = {}

    def line(self, metric: Metric) -> str:
        spec_key = (metric.name, metric.unit, str(metric.relativity), str(metric.categorization),
                    metric.description, metric.verbosity)  # fmt: skip
        spec = self._specs.get(spec_key)
        if spec is None:
            spec = json.dumps(
                {"name": metric.name, "unit": metric.unit, "relativity": str(metric.relativity),
                 "categorization": str(metric.categorization), "description": metric.description,
                 "verbosity": metric.verbosity}
            )[1:-1]  # fmt: skip
            self._specs[spec_key] = spec
        cached = self._shared.get(id(metric.metadata))
        if cached is None or not _same_context(cached[0], metric):
            shared = json.dumps(
                {"tool_name": metric.tool_name, "tool_version": metric.tool_version,
                 "scenario_name": metric.scenario_name,
                 "start_time": metric.start_time.isoformat() if metric.start_time else None,
                 "end_time": metric.end_time.isoformat() if metric.end_time else None,
                 "host": metric.host, "metadata": metric.metadata}
            )[1:-1]  # fmt: skip
            cached = (metric, shared)
            if len(self._shared) > 4096:
                self._shared.clear()
            self._shared[id(metric.metadata)] = cached
        return f'{{{spec}, "value": {_json_number(metric.value)}, {cached[1]}}}\n'


def _same_context(a: Metric, b: Metric) -> bool:
    return (a.metadata is b.metadata and a.host == b.host and a.scenario_name == b.scenario_name
            and a.start_time == b.start_time and a.tool_version == b.tool_version)  # fmt: skip


def _json_number(value: float) -> str:
    return repr(value) if math.isfinite(value) else "null"


def result_summary(result: BenchmarkResult) -> dict[str, object]:
    """The per-result entry of summary.json (everything but the metric list)."""
    data = result.model_dump(mode="json", exclude={"metrics"})
    data["metric_count"] = len(result.metrics)
    return data


@contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    with open(out_dir / ".metrics.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _kept_jsonl(path: Path, hosts: set[str | None]) -> str:
    if not path.exists():
        return ""
    kept: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            host = json.loads(line).get("host")
        except (ValueError, AttributeError):
            continue  # a torn line from an interrupted writer is dropped, not propagated
        if host not in hosts:
            kept.append(line + "\n")
    return "".join(kept)


def _kept_csv(path: Path, hosts: set[str | None]) -> str:
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8")
    kept: list[str] = []
    host_col = CSV_COLUMNS.index("Metadata_Host")
    for row in csv.reader(io.StringIO(text)):
        if not row or row[0] == "Timestamp" or len(row) != len(CSV_COLUMNS):
            continue
        host = row[host_col].partition("host=")[2] or None
        if host not in hosts:
            kept.append(",".join(_quote(f) for f in row) + "\n")
    return "".join(kept)


def write_outputs(
    out_dir: Path,
    results: Sequence[BenchmarkResult],
    context: OutputContext,
    issues: Sequence[ParseIssue] = (),
) -> list[Path]:
    """Write (or merge into) ``out_dir``'s metrics.jsonl, metrics.csv and summary.json; return their paths.

    Records of the hosts present in ``results`` are replaced; other hosts' records are kept.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    hosts: set[str | None] = {r.host for r in results}
    timestamp = vc_timestamp(datetime.now(UTC))
    parent_id = str(uuid.uuid4())
    jsonl_path, csv_path, summary_path = out_dir / JSONL_NAME, out_dir / CSV_NAME, out_dir / SUMMARY_NAME
    with _locked(out_dir):
        jsonl_parts = [_kept_jsonl(jsonl_path, hosts)]
        csv_parts = [",".join(_quote(c) for c in CSV_COLUMNS) + "\n", _kept_csv(csv_path, hosts)]
        csv_writer, json_writer = _CsvWriter(context, timestamp, parent_id), _JsonWriter()
        for result in results:
            for metric in result.metrics:
                jsonl_parts.append(json_writer.line(metric))
                csv_parts.append(csv_writer.row(metric))
        _replace(jsonl_path, "".join(jsonl_parts))
        _replace(csv_path, "".join(csv_parts))

        entries: list[dict[str, object]] = []
        old_issues: list[dict[str, object]] = []
        if summary_path.exists():
            try:
                old = json.loads(summary_path.read_text(encoding="utf-8"))
                entries = [e for e in old.get("results", []) if isinstance(e, dict) and e.get("host") not in hosts]
                old_issues = [i for i in old.get("issues", []) if isinstance(i, dict) and i.get("host") not in hosts]
            except (ValueError, AttributeError):
                entries, old_issues = [], []
        # only other hosts' entries are re-validated; this write's results are already models
        all_results = [BenchmarkResult.model_validate(e) for e in _strip(entries)] + list(results)
        entries += [result_summary(r) for r in results]
        host = next(iter(hosts)) if len(hosts) == 1 else None
        issue_entries = old_issues + [{"path": i.path, "problem": i.problem, "host": host} for i in issues]
        summary = {
            "experiment_id": context.experiment_id,
            "profile_name": context.profile_name,
            "app_version": context.app_version,
            "verdict": Verdict.from_results(all_results).as_dict(),
            "counts": {
                "results": len(entries),
                "metrics": sum(int(str(e.get("metric_count", 0))) for e in entries),
                "issues": len(issue_entries),
                "hosts": len({e.get("host") for e in entries}),
            },
            "results": entries,
            "issues": issue_entries,
        }
        _replace(summary_path, _summary_text(summary))
    return [jsonl_path, csv_path, summary_path]


def _summary_text(summary: Mapping[str, object]) -> str:
    """summary.json with one result / issue per line: readable, and written by json's C encoder."""
    parts = ["{"]
    items = list(summary.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list):
            inner = ",\n".join("    " + json.dumps(v) for v in value)
            parts.append(f"  {json.dumps(key)}: [\n{inner}\n  ]{comma}" if value else f"  {json.dumps(key)}: []{comma}")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value)}{comma}")
    parts.append("}")
    return "\n".join(parts) + "\n"


def _strip(entries: list[dict[str, object]]) -> Iterator[dict[str, object]]:
    for entry in entries:
        yield {k: v for k, v in entry.items() if k in BenchmarkResult.model_fields}


def _collect_run_hosts(path: Path) -> Collection | None:
    """A run folder without metrics files: parse each host's folder (named in run.json) for that host."""
    try:
        run = json.loads((path / "run.json").read_text(encoding="utf-8"))
        names = [h["name"] for h in run["hosts"] if isinstance(h.get("name"), str)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    from workload.rundir import safe_name

    collection = Collection()
    for name in names:
        if (path / safe_name(name)).is_dir():
            collection.extend(collect(path / safe_name(name), host=name))
    return collection if collection.results or collection.issues else None


def load_run(path: Path) -> Collection:
    """A previous run folder (``metrics.jsonl`` + ``summary.json``) as a Collection; raw files otherwise.

    Never raises; problems are issues of the returned Collection.
    """
    path = Path(path)
    jsonl_path = path / JSONL_NAME if path.is_dir() else path
    if jsonl_path.name != JSONL_NAME or not jsonl_path.is_file():
        return _collect_run_hosts(path) or collect(path)
    collection = Collection()
    by_key: dict[tuple[str | None, str], list[Metric]] = {}
    try:
        lines = jsonl_path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        collection.issues.append(ParseIssue(path=str(jsonl_path), problem=f"cannot read: {exc}"))
        return collection
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            metric = Metric.model_validate_json(line)
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            collection.issues.append(
                ParseIssue(path=f"{jsonl_path}:{lineno}", problem=f"not a metric record ({first})")
            )
            continue
        source = str(metric.metadata.get("source") or "")
        by_key.setdefault((metric.host, source), []).append(metric)
    summaries: dict[tuple[str | None, str], dict[str, object]] = {}
    summary_path = jsonl_path.with_name(SUMMARY_NAME)
    if summary_path.is_file():
        try:
            for entry in json.loads(summary_path.read_text(encoding="utf-8")).get("results", []):
                if isinstance(entry, dict):
                    host = entry.get("host")
                    summaries[(host if isinstance(host, str) else None, str(entry.get("source", "")))] = entry
        except (ValueError, OSError, AttributeError) as exc:
            collection.issues.append(ParseIssue(path=str(summary_path), problem=f"unreadable summary ({exc})"))
    for key, metrics in by_key.items():
        entry = summaries.get(key)
        meta = metrics[0].metadata
        base: dict[str, object] = dict(next(_strip([entry]))) if entry else {
            "model": meta.get("model"), "benchmark_full": meta.get("benchmark_full"), "scenario": meta.get("scenario"),
            "test_mode": meta.get("test_mode"), "system": meta.get("system"), "config_name": meta.get("config_name"),
            "validity": meta.get("validity"), "source": key[1], "host": key[0],
        }  # fmt: skip
        try:
            result = BenchmarkResult.model_validate({**base, "metrics": metrics})
        except ValueError as exc:
            collection.issues.append(ParseIssue(path=str(jsonl_path), problem=f"inconsistent records ({exc})"))
            continue
        collection.results.append(result)
    for key, entry in summaries.items():
        if key not in by_key:  # results without metrics (an AccuracyOnly run with no scored figure)
            try:
                collection.results.append(BenchmarkResult.model_validate(next(_strip([entry]))))
            except ValueError as exc:
                collection.issues.append(ParseIssue(path=str(summary_path), problem=f"bad result entry ({exc})"))
    return collection
