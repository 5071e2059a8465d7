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
import gc
import io
import json
import os
import platform
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from workload import __version__
from workload.metrics.collection import Collection, collect, collect_many, gc_paused
from workload.metrics.model import BenchmarkResult, Metric, ParseIssue
from workload.metrics.records import RecordRenderer, format_value, quote, vc_timestamp
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
__all__ = ["CSV_COLUMNS", "OutputContext", "csv_row", "format_value", "load_run", "vc_timestamp", "write_outputs"]


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


def csv_row(metric: Metric, context: OutputContext, timestamp: str, parent_id: str) -> str:
    """One metrics.csv line (with newline) for ``metric``."""
    return RecordRenderer(context, timestamp, parent_id).csv_row(metric)


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
    # surrogates (undecodable bytes in a metadata string) must not abort the write of 100,000 records
    tmp.write_bytes(text.encode("utf-8", errors="replace"))
    os.replace(tmp, path)


_raw_decode = json.JSONDecoder().raw_decode


def _is_utf8(line: str) -> bool:
    """Whether a line decoded with surrogateescape came from valid UTF-8 (no escaped byte in it)."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _host_of_line(line: str) -> str | bool | None:
    """The ``host`` of one metrics.jsonl line; False for a line that is not a JSON object (a torn write).

    Lines written by :mod:`.records` start with ``{"host":`` and only that value is decoded; others are
    parsed in full.
    """
    if line.startswith('{"host":') and line.endswith("}}"):
        try:
            host, end = _raw_decode(line, 8)
        except ValueError:
            host, end = False, 0
        if line.startswith(",", end) and (host is None or isinstance(host, str)):
            return host
    try:
        record = json.loads(line)
    except ValueError:
        return False
    if not isinstance(record, dict):
        return False
    host = record.get("host")
    return host if isinstance(host, str) else None


def _kept(jsonl_path: Path, csv_path: Path, hosts: set[str | None]) -> tuple[str, str]:
    """The records of hosts other than ``hosts`` already in the two files: (JSONL text, CSV rows text).

    A torn JSONL line (an interrupted writer) is dropped, not propagated. CSV rows are matched to the
    JSONL lines by position when the two files hold the same records in the same order (as this module
    writes them), checked by the host field of each row; otherwise each CSV row is parsed.
    """
    jsonl_lines: list[str] = []
    line_hosts: list[str | bool | None] = []
    if jsonl_path.exists():
        jsonl_lines = jsonl_path.read_text(encoding="utf-8", errors="replace").splitlines()
        line_hosts = [_host_of_line(line) for line in jsonl_lines]
    kept_jsonl = "".join(line + "\n" for line, host in zip(jsonl_lines, line_hosts, strict=True)
                         if host is not False and host not in hosts)  # fmt: skip
    if not csv_path.exists():
        return kept_jsonl, ""
    text = csv_path.read_text(encoding="utf-8", errors="replace")
    rows = text.splitlines()[1:] if text.startswith('"Timestamp",') else None
    if rows is not None and len(rows) == len(line_hosts) and False not in line_hosts:
        kept: list[str] = []
        for row, host in zip(rows, line_hosts, strict=True):
            marker = f',"host={host}",' if host is not None else None
            if (marker is not None and marker not in row) or (marker is None and ',"host=' in row):
                break  # not the same records in the same order: parse every row below
            if host not in hosts:
                kept.append(row + "\n")
        else:
            return kept_jsonl, "".join(kept)
    return kept_jsonl, _kept_csv(text, hosts)


def _kept_csv(text: str, hosts: set[str | None]) -> str:
    kept: list[str] = []
    host_col = CSV_COLUMNS.index("Metadata_Host")
    for row in csv.reader(io.StringIO(text)):
        if not row or row[0] == "Timestamp" or len(row) != len(CSV_COLUMNS):
            continue
        host = row[host_col].partition("host=")[2] or None
        if host not in hosts:
            kept.append(",".join(quote(f) for f in row) + "\n")
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
    # no cyclic GC while ~1M short-lived pieces are made: each collection would rescan every result
    with _locked(out_dir), gc_paused():
        kept_jsonl, kept_csv = _kept(jsonl_path, csv_path, hosts)
        renderer = RecordRenderer(context, timestamp, parent_id)
        metrics = [m for r in results for m in r.metrics]
        csv_head = ",".join(quote(c) for c in CSV_COLUMNS) + "\n" + kept_csv
        # the CSV is rendered in a forked child while this process does the JSONL and the summary
        csv_writer = _ForkedCsv.start(csv_path, csv_head, renderer, metrics)
        _replace(jsonl_path, kept_jsonl + renderer.jsonl_text(metrics))

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
            "verdict": Verdict.from_results(all_results, _issues_of(issue_entries)).as_dict(),
            "counts": {
                "results": len(entries),
                "metrics": sum(int(str(e.get("metric_count", 0))) for e in entries),
                "issues": len(issue_entries),
                "hosts": len({e.get("host") for e in entries}),
            },
            "results": entries,
            "issues": issue_entries,
        }
        if csv_writer is None or not csv_writer.finish():
            _replace(csv_path, csv_head + renderer.csv_text(metrics))
        _replace(summary_path, _summary_text(summary))
    return [jsonl_path, csv_path, summary_path]


#: below this many metrics a fork costs more than it saves
FORK_MIN_METRICS = 20_000


@dataclass
class _ForkedCsv:
    """metrics.csv rendered and written to a temporary file by a forked child (a second core's work)."""

    pid: int
    tmp: Path
    path: Path

    @classmethod
    def start(cls, path: Path, head: str, renderer: RecordRenderer, metrics: list[Metric]) -> _ForkedCsv | None:
        """The running child, or None where forking is not worth it or not safe (then render here)."""
        # forking a threaded process can deadlock the child on a lock another thread held
        if len(metrics) < FORK_MIN_METRICS or not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        tmp = path.with_name(f".{path.name}.{os.getpid()}.child.tmp")
        try:
            pid = os.fork()
        except OSError:
            return None
        if pid == 0:  # pragma: no cover - the child; coverage cannot see it
            code = 1
            try:
                gc.disable()  # a collection would touch (and so copy) every page of the parent's heap
                tmp.write_bytes((head + renderer.csv_text(metrics)).encode("utf-8", errors="replace"))
                code = 0
            finally:
                os._exit(code)  # no atexit handlers, no flushing of the parent's buffers
        return cls(pid, tmp, path)

    def finish(self) -> bool:
        """Wait for the child; move its file into place. False if it failed (the caller renders the CSV)."""
        _, status = os.waitpid(self.pid, 0)
        if os.waitstatus_to_exitcode(status) == 0 and self.tmp.is_file():
            os.replace(self.tmp, self.path)
            return True
        self.tmp.unlink(missing_ok=True)
        return False


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


class _Once:
    """Calls ``hook`` the first time it is called, never again (one hook for two collect attempts)."""

    def __init__(self, hook: Callable[[], object] | None) -> None:
        self._hook = hook

    def __call__(self) -> None:
        hook, self._hook = self._hook, None
        if hook is not None:
            hook()


def _issues_of(entries: Iterable[object]) -> list[ParseIssue]:
    """The summary.json ``issues`` entries as ParseIssues (malformed entries are skipped)."""
    return [
        ParseIssue(path=e["path"], problem=e["problem"])
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("problem"), str)
    ]


def _strip(entries: list[dict[str, object]]) -> Iterator[dict[str, object]]:
    for entry in entries:
        yield {k: v for k, v in entry.items() if k in BenchmarkResult.model_fields}


def _collect_run_hosts(path: Path, while_parsing: Callable[[], object] | None) -> Collection | None:
    """A run folder without metrics files: parse each host's folder (named in run.json) for that host."""
    try:
        run = json.loads((path / "run.json").read_text(encoding="utf-8"))
        names = [h["name"] for h in run["hosts"] if isinstance(h.get("name"), str)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    from workload.rundir import safe_name

    targets = [(path / safe_name(name), name) for name in names if (path / safe_name(name)).is_dir()]
    collection = collect_many(targets, while_parsing=while_parsing)  # one process pool for all hosts
    return collection if collection.results or collection.issues else None


def load_run(path: Path, *, while_parsing: Callable[[], object] | None = None) -> Collection:
    """A previous run folder (``metrics.jsonl`` + ``summary.json``) as a Collection; raw files otherwise.

    Never raises; problems are issues of the returned Collection. ``while_parsing`` is called exactly
    once, while raw files are parsed in worker processes where they are (see ``collection.collect_many``).
    """
    path = Path(path)
    jsonl_path = path / JSONL_NAME if path.is_dir() else path
    if jsonl_path.name != JSONL_NAME or not jsonl_path.is_file():
        once = _Once(while_parsing)
        return _collect_run_hosts(path, once) or collect(path, while_parsing=once)
    if while_parsing is not None:
        while_parsing()
    collection = Collection()
    by_key: dict[tuple[str | None, str], list[Metric]] = {}
    try:
        data = jsonl_path.read_bytes()
    except OSError as exc:
        collection.issues.append(ParseIssue(path=str(jsonl_path), problem=f"cannot read: {exc}"))
        return collection
    try:
        lines = data.decode("utf-8").splitlines()
        clean = True
    except UnicodeDecodeError:  # a damaged line is named below; the others are still read
        lines = data.decode("utf-8", errors="surrogateescape").splitlines()
        clean = False
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if not clean and not _is_utf8(line):
            collection.issues.append(ParseIssue(path=f"{jsonl_path}:{lineno}", problem="not UTF-8 text"))
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
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
            for entry in summary.get("results", []):
                if isinstance(entry, dict):
                    host = entry.get("host")
                    summaries[(host if isinstance(host, str) else None, str(entry.get("source", "")))] = entry
            # the files that run could not read still count against its verdict
            collection.issues.extend(_issues_of(summary.get("issues", [])))
        except (ValueError, OSError, AttributeError, TypeError) as exc:
            collection.issues.append(ParseIssue(path=str(summary_path), problem=f"unreadable summary ({exc})"))
    for key, metrics in by_key.items():
        entry = summaries.get(key)
        meta = metrics[0].metadata
        base: dict[str, object] = dict(next(_strip([entry]))) if entry else {
            "model": meta.get("model"), "benchmark_full": meta.get("benchmark_full"), "scenario": meta.get("scenario"),
            "test_mode": meta.get("test_mode"), "system": meta.get("system"), "config_name": meta.get("config_name"),
            "validity": meta.get("validity"), "source": key[1], "host": key[0],
            # without summary.json, the accuracy verdict is its metric (an AccuracyOnly run without it fails)
            "accuracy_pass": next((m.value == 1.0 for m in metrics if m.name == "accuracy_pass"), None),
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
