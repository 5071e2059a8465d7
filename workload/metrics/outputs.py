"""Write results as ``metrics.jsonl``, VirtualClient-compatible ``metrics.csv`` and ``summary.json``.

Several hosts can write into one run folder (the fleet merges per-host results): a write replaces
the records of the hosts it carries and keeps everyone else's, under an exclusive lock, so
re-collecting a host never duplicates it. ``metrics.csv`` has VC's exact columns and quoting (every
field double-quoted, ``"`` doubled, ``Metadata`` as ``key=value;key=value``); unlike VC the MLPerf
scenario survives, in ``Metadata``.

Why one module of ~520 lines: writing the three files is one transaction under one lock (merge the
hosts' earlier records, stream the new ones, replace all three), and the merge reads back exactly the
formats the writers produce; split apart, each half would have to know the other's file formats.
The record formats themselves live in :mod:`.records`.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import os
import platform
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from workload import __version__
from workload.errors import ResultsError
from workload.metrics.collection import Collection, collect, collect_many, gc_paused
from workload.metrics.model import BenchmarkResult, Metric, ParseIssue
from workload.metrics.records import RecordRenderer, format_value, quote, vc_timestamp
from workload.metrics.verdict import Verdict
from workload.safefile import atomic_write_text, current_umask, locked_folder, new_temporary, read_regular

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


def _replace(path: Path, text: str) -> None:
    # surrogates (undecodable bytes in a metadata string) must not abort the write of 100,000 records;
    # a temporary made with O_EXCL and renamed: a link planted in the folder is replaced, not followed
    atomic_write_text(path, text)


#: metrics rendered per batch when streaming a file (a few MB of text at a time)
_BATCH_METRICS = 4096


def _rendered(head: str, render: Callable[[list[Metric]], str], results: Sequence[BenchmarkResult]) -> Iterator[str]:
    """``head``, then ``render`` of the metrics of ``results`` a batch at a time (in order)."""
    yield head
    batch: list[Metric] = []
    for result in results:
        batch.extend(result.metrics)
        if len(batch) >= _BATCH_METRICS:
            yield render(batch)
            batch = []
    if batch:
        yield render(batch)


def _write_chunks(handle: BinaryIO, chunks: Iterable[str]) -> None:
    for chunk in chunks:
        # surrogates (undecodable bytes in a metadata string) must not abort the write of 100,000 records
        handle.write(chunk.encode("utf-8", errors="replace"))


def _replace_chunks(path: Path, chunks: Iterable[str]) -> None:
    """:func:`_replace` of the text ``chunks`` make, written as they come (never all in memory).

    The temporary is made with ``O_EXCL`` under an unpredictable name (:func:`new_temporary`) and
    renamed over ``path``: a link planted in the folder is replaced, never followed.
    """
    fd, tmp = new_temporary(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            _write_chunks(handle, chunks)
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp made it 0600
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
        jsonl_lines = read_regular(jsonl_path).decode("utf-8", errors="replace").splitlines()
        line_hosts = [_host_of_line(line) for line in jsonl_lines]
    kept_jsonl = "".join(line + "\n" for line, host in zip(jsonl_lines, line_hosts, strict=True)
                         if host is not False and host not in hosts)  # fmt: skip
    if not csv_path.exists():
        return kept_jsonl, ""
    text = read_regular(csv_path).decode("utf-8", errors="replace")
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


def _earlier_summary(path: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The ``results`` and ``issues`` entries of the summary.json a write merges into (none: empty).

    Raises :class:`ResultsError` naming the file when it is not a summary this module wrote: merging
    into it would throw its content away without a word.
    """
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read the earlier summary: {exc.strerror or exc}") from None
    hint = "move it away or write to another folder; merging into it would lose what it holds"
    try:
        old = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ResultsError(f"{path}: not a summary.json this tool wrote (not JSON: {exc})", hint=hint) from None
    if not isinstance(old, dict):
        raise ResultsError(f"{path}: not a summary.json this tool wrote (not a JSON object)", hint=hint)
    lists: list[list[dict[str, object]]] = []
    for key in ("results", "issues"):
        value = old.get(key, [])
        if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
            raise ResultsError(f"{path}: {key}: not a list of objects; not a summary.json this tool wrote", hint=hint)
        lists.append(value)
    return lists[0], lists[1]


def _earlier_result(path: Path, entry: dict[str, object]) -> BenchmarkResult:
    try:
        return BenchmarkResult.model_validate(entry)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise ResultsError(
            f"{path}: a result entry is malformed ({first}); not a summary.json this tool wrote",
            hint="move it away or write to another folder; merging into it would lose what it holds",
        ) from None


def _metric_count(entry: Mapping[str, object]) -> int:
    count = entry.get("metric_count", 0)
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 0


def replaced_results(out_dir: Path, hosts: Iterable[str | None]) -> int:
    """How many results of ``hosts`` ``out_dir``'s summary.json holds now: what a write of them replaces.

    Raises :class:`ResultsError` when that summary.json is malformed (as :func:`write_outputs` would).
    """
    wanted = set(hosts)
    results, _ = _earlier_summary(Path(out_dir) / SUMMARY_NAME)
    return sum(1 for e in results if e.get("host") in wanted)


def write_outputs(
    out_dir: Path,
    results: Sequence[BenchmarkResult],
    context: OutputContext,
    issues: Sequence[ParseIssue] = (),
) -> list[Path]:
    """Write (or merge into) ``out_dir``'s metrics.jsonl, metrics.csv and summary.json; return their paths.

    Records of the hosts present in ``results`` are replaced; other hosts' records are kept.
    Raises :class:`ResultsError` (nothing written) when ``out_dir`` holds a summary.json this module
    did not write (see :func:`replaced_results`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    hosts: set[str | None] = {r.host for r in results}
    timestamp = vc_timestamp(datetime.now(UTC))
    parent_id = str(uuid.uuid4())
    jsonl_path, csv_path, summary_path = out_dir / JSONL_NAME, out_dir / CSV_NAME, out_dir / SUMMARY_NAME
    # no cyclic GC while ~1M short-lived pieces are made: each collection would rescan every result
    with locked_folder(out_dir), gc_paused():
        old_results, old_issues = _earlier_summary(summary_path)  # first: a malformed one stops the write here
        entries = [e for e in old_results if e.get("host") not in hosts]
        old_issues = [i for i in old_issues if i.get("host") not in hosts]
        # only other hosts' entries are re-validated; this write's results are already models
        all_results = [_earlier_result(summary_path, e) for e in _strip(entries)] + list(results)
        kept_jsonl, kept_csv = _kept(jsonl_path, csv_path, hosts)
        renderer = RecordRenderer(context, timestamp, parent_id)
        csv_head = ",".join(quote(c) for c in CSV_COLUMNS) + "\n" + kept_csv
        # the CSV is rendered in a forked child while this process does the JSONL and the summary; both
        # stream (a batch of metrics at a time): 400,000 Metric objects or their text at once are GBs
        csv_writer = _ForkedCsv.start(csv_path, csv_head, renderer, results)
        _replace_chunks(jsonl_path, _rendered(kept_jsonl, renderer.jsonl_text, results))

        metric_count = sum(_metric_count(e) for e in entries)
        entry_hosts = {e.get("host") for e in entries} | hosts
        # this write's entries as their JSON text at once: ~1.5 kB of text each instead of a ~5 kB dict
        entry_lines = _Dumped(json.dumps(e) for e in entries)
        for result in results:
            entry_lines.append(json.dumps(result_summary(result)))
            metric_count += len(result.metrics)
        host = next(iter(hosts)) if len(hosts) == 1 else None
        issue_entries = old_issues + [{"path": i.path, "problem": i.problem, "host": host} for i in issues]
        summary = {
            "experiment_id": context.experiment_id,
            "profile_name": context.profile_name,
            "app_version": context.app_version,
            "verdict": Verdict.from_results(all_results, _issues_of(issue_entries)).as_dict(),
            "counts": {
                "results": len(entry_lines),
                "metrics": metric_count,
                "issues": len(issue_entries),
                "hosts": len(entry_hosts) if entry_lines else 0,
            },
            "results": entry_lines,
            "issues": issue_entries,
        }
        if csv_writer is None or not csv_writer.finish():
            _replace_chunks(csv_path, _rendered(csv_head, renderer.csv_text, results))
        _replace_chunks(summary_path, _summary_chunks(summary))
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
    def start(
        cls, path: Path, head: str, renderer: RecordRenderer, results: Sequence[BenchmarkResult]
    ) -> _ForkedCsv | None:
        """The running child, or None where forking is not worth it or not safe (then render here)."""
        # forking a threaded process can deadlock the child on a lock another thread held
        if not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        if sum(len(r.metrics) for r in results) < FORK_MIN_METRICS:
            return None
        fd, tmp = new_temporary(path.parent, path.name)  # made here (O_EXCL), filled by the child
        try:
            pid = os.fork()
        except OSError:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            return None
        if pid == 0:  # pragma: no cover - the child; coverage cannot see it
            code = 1
            try:
                gc.disable()  # a collection would touch (and so copy) every page of the parent's heap
                with os.fdopen(fd, "wb") as handle:
                    _write_chunks(handle, _rendered(head, renderer.csv_text, results))
                code = 0
            finally:
                os._exit(code)  # no atexit handlers, no flushing of the parent's buffers
        os.close(fd)
        return cls(pid, tmp, path)

    def finish(self) -> bool:
        """Wait for the child; move its file into place. False if it failed (the caller renders the CSV)."""
        _, status = os.waitpid(self.pid, 0)
        if os.waitstatus_to_exitcode(status) == 0 and self.tmp.is_file():
            os.chmod(self.tmp, 0o666 & ~current_umask())  # mkstemp made it 0600
            os.replace(self.tmp, self.path)
            return True
        self.tmp.unlink(missing_ok=True)
        return False


class _Dumped(list[str]):
    """A summary.json list whose items are already JSON text."""


def _summary_chunks(summary: Mapping[str, object]) -> Iterator[str]:
    """summary.json with one result / issue per line: readable, and written by json's C encoder (a line at a time)."""
    yield "{\n"
    items = list(summary.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list):
            if not value:
                yield f"  {json.dumps(key)}: []{comma}\n"
                continue
            yield f"  {json.dumps(key)}: [\n"
            dumped = isinstance(value, _Dumped)
            for j, item in enumerate(value):
                yield "    " + (item if dumped else json.dumps(item)) + (",\n" if j < len(value) - 1 else "\n")
            yield f"  ]{comma}\n"
        else:
            yield f"  {json.dumps(key)}: {json.dumps(value)}{comma}\n"
    yield "}\n"


def _summary_text(summary: Mapping[str, object]) -> str:
    """summary.json's text (see :func:`_summary_chunks`)."""
    return "".join(_summary_chunks(summary))


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
        run = json.loads(read_regular(path / "run.json"))
        names = [h["name"] for h in run["hosts"] if isinstance(h.get("name"), str)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    from workload.rundir import host_folder_name, safe_name

    targets = []
    for name in names:
        # run folders made before host folder names were one-to-one used safe_name
        folder = next((path / f for f in (host_folder_name(name), safe_name(name)) if (path / f).is_dir()), None)
        if folder is not None:
            targets.append((folder, name))
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
        data = read_regular(jsonl_path)
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
            summary = json.loads(read_regular(summary_path))
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
