"""Find result files under a folder, parse them, and return a :class:`Collection`.

Standard names are found at any depth (``metadata.json``, ``mlperf_log_detail.txt``,
``mlperf_log_summary.txt``, ``accuracy.txt``, ``accuracy.json``); the files of one directory form one
result. ``collect()`` never raises for what it finds: unreadable, corrupt or unknown files become
:class:`ParseIssue` entries and every other result is still returned.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from workload.metrics.build import build
from workload.metrics.model import BenchmarkResult, Metric, ParseIssue
from workload.metrics.parsers import PARSERS
from workload.metrics.raw import RawResult

#: the largest file read; result files are kB, a 64 MiB "metadata.json" is not one
MAX_FILE_BYTES = 64 * 1024 * 1024
_SKIP_DIR_NAMES = frozenset({".git", "__pycache__", ".venv", "node_modules"})


@dataclass
class Collection:
    """Parsed results plus the issues met on the way (a file each)."""

    results: list[BenchmarkResult] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)

    @property
    def metrics(self) -> list[Metric]:
        """Every metric of every result, in result order."""
        return [m for r in self.results for m in r.metrics]

    @property
    def hosts(self) -> list[str]:
        """Distinct hosts, in first-seen order (results without a host are skipped)."""
        seen: dict[str, None] = {}
        for r in self.results:
            if r.host:
                seen.setdefault(r.host)
        return list(seen)

    def headline_for_host(self, host: str) -> str | None:
        """The host's main metric as text (``bert-99 Server samples_per_second 57609.27 samples/s``).

        With several performance results on the host, the first one is shown.
        """
        for result in self.results:
            if result.host == host and result.headline is not None:
                metric = result.headline
                what = " ".join(x for x in (result.benchmark_full or result.model, result.scenario) if x)
                return f"{what} {metric.name} {metric.value:.6g} {metric.unit}".strip()
        return None

    def extend(self, other: Collection) -> None:
        """Add another collection's results and issues (e.g. one per fleet host)."""
        self.results.extend(other.results)
        self.issues.extend(other.issues)


def find_result_dirs(root: Path) -> dict[str, list[str]]:
    """Map each directory under ``root`` (itself included) that holds result files to their names."""
    found: dict[str, list[str]] = {}
    stack = [str(root)]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                names: list[str] = []
                for entry in entries:
                    if entry.name in PARSERS:
                        if entry.is_file():
                            names.append(entry.name)
                    elif entry.is_dir(follow_symlinks=False) and entry.name not in _SKIP_DIR_NAMES:
                        stack.append(entry.path)
        except OSError:
            continue
        if names:
            found[current] = sorted(names, key=list(PARSERS).index)
    return dict(sorted(found.items()))


def parse_dir(directory: str, file_names: list[str]) -> RawResult:
    """Parse the named result files of one directory into a RawResult (issues recorded, never raised)."""
    raw = RawResult(directory=directory)
    for name in file_names:
        path = os.path.join(directory, name)
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raw.issue(path, f"file is {size} bytes; larger than any result file ({MAX_FILE_BYTES}), skipped")
                continue
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as exc:
            raw.issue(path, f"cannot read: {exc.strerror or exc}")
            continue
        if not text.strip():
            raw.issue(path, "file is empty")
            continue
        try:
            PARSERS[name](path, text, raw)
        except Exception as exc:  # a parser bug must not hide the other results
            raw.issue(path, f"could not be parsed ({type(exc).__name__}: {exc})")
    return raw


def collect(path: Path, *, host: str | None = None) -> Collection:
    """Parse every result under ``path`` (a folder, or one result file) for ``host``.

    Never raises: a missing path or unparseable files are reported in ``Collection.issues``.
    """
    collection = Collection()
    path = Path(path)
    if path.is_file():
        if path.name not in PARSERS:
            known = ", ".join(PARSERS)
            collection.issues.append(ParseIssue(path=str(path), problem=f"not a known result file ({known})"))
            return collection
        dirs = {str(path.parent): [path.name]}
    elif path.is_dir():
        dirs = find_result_dirs(path)
    else:
        collection.issues.append(ParseIssue(path=str(path), problem="no such file or directory"))
        return collection
    for directory, file_names in dirs.items():
        raw = parse_dir(directory, file_names)
        collection.issues.extend(raw.issues)
        try:
            result = build(raw, host=host)
        except Exception as exc:  # same contract as parse_dir: report, keep going
            collection.issues.append(ParseIssue(path=directory, problem=f"could not build a result ({exc!r})"))
            continue
        if result is not None:
            collection.results.append(result)
    return collection
