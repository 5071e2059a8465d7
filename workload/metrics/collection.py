"""Find result files under a folder, parse them, and return a :class:`Collection`.

Standard names are found at any depth (``metadata.json``, ``mlperf_log_detail.txt``,
``mlperf_log_summary.txt``, ``accuracy.txt``, ``accuracy.json``, and our LoadGen runner's
``effective_settings.json``); the files of one directory form one result. Published submission trees
are understood too (see :func:`find_result_dirs`): compliance ``TEST0x`` folders give their verdict, v6.1
endpoints scenario folders their computed result, and ``systems/<system>.json`` goes into each result's
metadata (:mod:`.submission`). ``collect()`` never raises
for what it finds: unreadable, corrupt or unknown files become :class:`ParseIssue` entries (which
fail the :class:`~workload.metrics.verdict.Verdict`) and every other result is still returned.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from workload.metrics import config_source, submission
from workload.metrics.build import Built, build_data, result_of
from workload.metrics.model import BenchmarkResult, MetadataValue, Metric, ParseIssue
from workload.metrics.parsers import PARSERS, compliance, endpoints
from workload.metrics.raw import RawResult
from workload.metrics.wire import Encoded, decode, encode, encode_built
from workload.safefile import TooLarge, read_regular

#: the largest file read; result files are kB, a 64 MiB "metadata.json" is not one
MAX_FILE_BYTES = 64 * 1024 * 1024
#: below this many result directories a process pool costs more than it saves (~30 ms to start)
PARALLEL_MIN_DIRS = 200
#: "superseded": first attempts that a LoadGenExecutor retry replaced (kept for the record, not results)
_SKIP_DIR_NAMES = frozenset({".git", "__pycache__", ".venv", "node_modules", "superseded"})


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


_ORDER = {name: i for i, name in enumerate(PARSERS)}
#: endpoints files (v6.1): the file name -> the folder it sits in, below the scenario folder (a job of its own)
_ENDPOINT_FILES = {"result_summary.json": "performance", "accuracy_results.json": "accuracy"}
#: ``performance/ranging``: a power submission's ranging run (the power checker's; read when it is all there is)
_RANGING = "ranging"


def find_result_dirs(root: Path, issues: list[ParseIssue] | None = None) -> dict[str, list[str]]:
    """Map each directory under ``root`` (itself included) that holds result files to their names.

    A submission tree is understood as the MLPerf submission checker lays it out: a ``TEST0x`` compliance
    folder is one job of its verify files (its LoadGen logs and hash-only accuracy.txt are what those were
    computed from); the endpoints files of a v6.1 scenario folder (``performance/result_summary.json``,
    ``accuracy/accuracy_results.json``) are one job of that folder, named relative to it, and its
    ``audit/audit_<test>.json`` files one job of their folder; ``performance/ranging`` (a power
    submission's ranging run) is skipped while anything else is found, and read when it is all there is.

    ``root`` may itself be a ``TEST0x`` folder: then it is read as what it is, the verdict of its verify
    files (where it has them) and the compliance run's own LoadGen result below ``performance/`` (the
    v5.1+ layout keeps the verify files elsewhere, ``compliance/TEST0x`` or none). A folder that cannot be
    listed is an issue in ``issues``.
    """
    found: dict[str, list[str]] = {}
    if compliance.TEST_DIR.match(root.name) and root.is_dir():
        _compliance_dir(str(root), found, issues)
        run = root / "performance"
        if run.is_dir():
            _walk(str(run), found, issues, [])
        if not found:  # neither verify files nor a run: whatever is there, so that it is named
            _walk(str(root), found, issues, [])
            if issues is not None:
                listed = ", ".join(compliance.VERIFY_FILES)
                problem = f"a compliance folder without a verify file ({listed}) or a performance run: no verdict"
                issues.append(ParseIssue(path=str(root), problem=problem))
        return dict(sorted(found.items()))
    ranging: list[str] = []
    _walk(str(root), found, issues, ranging)
    if not found:
        for path in ranging:  # only ranging runs: they are the results there are
            _walk(path, found, issues, [])
    return dict(sorted(found.items()))


def _walk(top: str, found: dict[str, list[str]], issues: list[ParseIssue] | None, ranging: list[str]) -> None:
    """Add the result directories under ``top`` to ``found`` (see :func:`find_result_dirs`); the
    ``performance/ranging`` folders passed over are appended to ``ranging``."""
    stack = [top]
    while stack:
        current = stack.pop()
        base = os.path.basename(current)
        try:
            with os.scandir(current) as entries:
                names: list[str] = []
                for entry in entries:
                    name = entry.name
                    if name in PARSERS and not entry.is_dir():
                        if entry.is_file():
                            names.append(name)
                        elif issues is not None:  # a broken link, a FIFO (reading it would block) ...
                            issues.append(ParseIssue(path=entry.path, problem="not a readable regular file"))
                    elif name in _ENDPOINT_FILES and base == _ENDPOINT_FILES[name] and entry.is_file():
                        found.setdefault(os.path.dirname(current), []).append(f"{base}/{name}")
                    elif entry.is_dir(follow_symlinks=False) and name not in _SKIP_DIR_NAMES:
                        if compliance.TEST_DIR.match(name):
                            _compliance_dir(entry.path, found, issues)
                        elif name == compliance.AUDIT_DIR:
                            _audit_dir(entry.path, found, issues)
                            stack.append(entry.path)  # a harness's own audit/compliance/TEST0x may be below
                        elif name == _RANGING and base == "performance":
                            ranging.append(entry.path)
                        else:
                            stack.append(entry.path)
        except OSError as exc:
            if issues is not None:
                issues.append(ParseIssue(path=current, problem=f"folder cannot be listed: {exc.strerror or exc}"))
            continue
        if names:
            found.setdefault(current, []).extend(sorted(names, key=_ORDER.__getitem__))


def _compliance_dir(path: str, found: dict[str, list[str]], issues: list[ParseIssue] | None) -> None:
    """Record the verify files of the compliance folder ``path`` (nothing below it is a result)."""
    try:
        with os.scandir(path) as entries:
            names = [e.name for e in entries if e.name in compliance.VERIFY_FILES and e.is_file()]
    except OSError as exc:
        if issues is not None:
            issues.append(ParseIssue(path=path, problem=f"folder cannot be listed: {exc.strerror or exc}"))
        return
    if names:
        found[path] = sorted(names, key=compliance.VERIFY_FILES.index)


def _audit_dir(path: str, found: dict[str, list[str]], issues: list[ParseIssue] | None) -> None:
    """Record the ``audit_<test>.json`` files of an endpoints result's ``audit`` folder."""
    try:
        with os.scandir(path) as entries:
            names = [e.name for e in entries if compliance.AUDIT_FILE.match(e.name) and e.is_file()]
    except OSError as exc:
        if issues is not None:
            issues.append(ParseIssue(path=path, problem=f"folder cannot be listed: {exc.strerror or exc}"))
        return
    if names:
        found[path] = sorted(names)


def parse_dir(directory: str, file_names: list[str]) -> RawResult:
    """Parse the named result files of one directory into a RawResult (issues recorded, never raised)."""
    raw = RawResult(directory=directory)
    for name in file_names:
        path = os.path.join(directory, name)
        try:
            data = read_regular(path, MAX_FILE_BYTES)
        except TooLarge:
            raw.issue(path, f"file is larger than any result file ({MAX_FILE_BYTES} bytes), skipped")
            continue
        except OSError as exc:
            raw.issue(path, f"cannot read: {exc.strerror or exc}")
            continue
        if not data.strip():
            raw.issue(path, "file is empty")
            continue
        try:
            PARSERS[name](path, data, raw)
        except Exception as exc:  # a parser bug must not hide the other results
            raw.issue(path, f"could not be parsed ({type(exc).__name__}: {exc})")
    return raw


Job = tuple[str, list[str], str | None]
#: a worker's answer for one job: its issues as (path, problem) pairs, its result in :mod:`.wire` form
_Done = tuple[list[tuple[str, str]], Encoded | None]


def _result_of(
    directory: str, file_names: list[str], host: str | None, labels: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], BenchmarkResult | None]:
    """Parse and build one directory: (its issues, its result or None). Never raises (see :func:`_found`)."""
    issues, found = _found(directory, file_names, host, labels)
    return issues, (result_of(found) if isinstance(found, Built) else found)


def _encoded_of(
    directory: str, file_names: list[str], host: str | None, labels: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], Encoded | None]:
    """:func:`_result_of` in :mod:`.wire` form: a LoadGen result goes from its plain data to the wire form
    without a model object made and flattened again in between (the pool's path; ``bench/README.md``)."""
    issues, found = _found(directory, file_names, host, labels)
    if found is None:
        return issues, None
    return issues, (encode_built(found) if isinstance(found, Built) else encode(found))


def _found(
    directory: str, file_names: list[str], host: str | None, labels: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], Built | BenchmarkResult | None]:
    """Parse and build one directory: (its issues, its result or None). Never raises.

    A LoadGen result comes as its plain data (:class:`~workload.metrics.build.Built`, one step before the
    model); compliance and endpoints results, a few per submission, as the model.

    The result's metadata gets the submission's system description (``systems/<system>.json``) and
    measurement description (``measurements.json``) when the directory is part of a submission tree,
    then where the harness's config values came from (:mod:`.config_source`: the MLPerf action's sidecar),
    then ``labels`` (e.g. inventory labels), each under the keys not set yet: parsed values win.
    A directory whose result files gave neither a result nor an issue is itself an issue: a folder of
    result files is never skipped in silence.
    """
    try:
        extra: dict[str, MetadataValue] = {}
        problems: list[ParseIssue] = []
        for describe in (submission.system_description, submission.measurement_description):
            described, problem = describe(directory)
            for key, value in (described or {}).items():
                extra.setdefault(key, value)
            if problem is not None:
                problems.append(problem)
        # where the harness's config values came from (the MLPerf action's sidecar; none in published results)
        sourced, problem = config_source.read(directory)
        for key, value in (sourced or {}).items():
            extra.setdefault(key, value)
        if problem is not None:
            problems.append(problem)
        for key, value in (labels or {}).items():
            extra.setdefault(key, value)
        result: Built | BenchmarkResult | None
        if file_names and file_names[0] in compliance.VERIFY_FILES:
            issues, result = compliance.build(directory, file_names, host, extra)
        elif file_names and compliance.AUDIT_FILE.match(file_names[0]):
            issues, result = compliance.build_audit(directory, file_names, host, extra)
        elif any(endpoints.is_endpoints_name(name) for name in file_names):
            issues, result = endpoints.build(directory, file_names, host, extra)
        else:
            raw = parse_dir(directory, file_names)
            issues, result = raw.issues, build_data(raw, host=host, extra_metadata=extra)
    except Exception as exc:  # same contract as parse_dir: report, keep going
        return [ParseIssue(path=directory, problem=f"could not build a result ({exc!r})")], None
    if result is None:
        if not issues:
            listed = ", ".join(file_names)
            issues = [ParseIssue(path=directory, problem=f"holds result files ({listed}) but none gave a result")]
        return issues, None
    return [*issues, *problems], result


def _parse_chunk(jobs: list[Job], labels: Mapping[str, MetadataValue] | None = None) -> list[_Done]:
    """Worker side: parse a chunk of directories; results in :mod:`.wire` form (see there why)."""
    with gc_paused():
        out: list[_Done] = []
        for directory, file_names, host in jobs:
            issues, encoded = _encoded_of(directory, file_names, host, labels)
            out.append(([(i.path, i.problem) for i in issues], encoded))
        return out


def _workers_for(n_dirs: int, workers: int | None) -> int:
    """How many worker processes to use: 1 (serial) unless there is enough work and it is safe to fork."""
    if workers is None:
        if n_dirs < PARALLEL_MIN_DIRS:
            return 1
        workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    # fork is the only cheap start (spawn re-imports everything, ~0.5 s); forking a threaded process can
    # deadlock the child on a lock another thread held, so threaded callers (the fleet) parse serially
    if workers < 2 or n_dirs < 2 or "fork" not in mp.get_all_start_methods() or threading.active_count() > 1:
        return 1
    return min(workers, n_dirs)


def _parse_all(
    jobs: list[Job],
    workers: int,
    while_parsing: Callable[[], object] | None = None,
    labels: Mapping[str, MetadataValue] | None = None,
) -> Iterator[tuple[list[ParseIssue], BenchmarkResult | None]]:
    """Every job's (issues, result), in job order; in ``workers`` forked processes when > 1.

    ``while_parsing`` is called once: after the workers have their jobs (so it runs while they parse),
    or before a serial parse.

    If the pool cannot start or breaks (a worker killed: out of memory), the jobs not yet returned
    are parsed here: the results are the same, only slower.
    """
    done = 0
    if workers > 1:
        # small chunks keep both workers busy to the end; each chunk is one pickle round trip
        size = max(8, min(256, len(jobs) // (workers * 8) or 1))
        chunks = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        try:
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
                # map() submits every chunk (and forks the workers) before it returns
                parsed = pool.map(functools.partial(_parse_chunk, labels=labels), chunks)
                hook, while_parsing = while_parsing, None  # called once, even if the pool breaks below
                if hook is not None:
                    hook()
                for chunk in parsed:
                    for pairs, parts in chunk:
                        yield (
                            [ParseIssue(path=p, problem=q) for p, q in pairs],
                            (decode(parts, lazy=True) if parts is not None else None),
                        )
                    done += size
        except (OSError, BrokenProcessPool):
            pass
    if while_parsing is not None:
        while_parsing()
    for directory, file_names, host in jobs[done:]:
        yield _result_of(directory, file_names, host, labels)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: parsing makes ~30 acyclic objects per metric, and every
    few hundred allocations gen-0 collections (and, as the heap grows, full ones) rescan them all."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def find_jobs(targets: Sequence[tuple[Path, str | None]]) -> tuple[list[Job], list[ParseIssue]]:
    """The result directories under each (path, host) target as parse jobs, plus issues for bad targets."""
    jobs: list[Job] = []
    issues: list[ParseIssue] = []
    for path, host in targets:
        path = Path(path)
        if path.is_file():
            name = path.name
            if name in PARSERS or name in compliance.VERIFY_FILES:
                jobs.append((str(path.parent), [name], host))
            elif name in _ENDPOINT_FILES and path.parent.name == _ENDPOINT_FILES[name]:
                jobs.append((str(path.parent.parent), [f"{path.parent.name}/{name}"], host))
            else:
                known = ", ".join([*PARSERS, *compliance.VERIFY_FILES, *_ENDPOINT_FILES])
                issues.append(ParseIssue(path=str(path), problem=f"not a known result file ({known})"))
        elif path.is_dir():
            jobs.extend((directory, names, host) for directory, names in find_result_dirs(path, issues).items())
        else:
            issues.append(ParseIssue(path=str(path), problem="no such file or directory"))
    return jobs, issues


def parse_jobs(
    jobs: list[Job],
    *,
    workers: int | None = None,
    while_parsing: Callable[[], object] | None = None,
    labels: Mapping[str, MetadataValue] | None = None,
) -> Collection:
    """Parse and build every job (see :func:`collect_many` for the keywords); never raises."""
    collection = Collection()
    with gc_paused():
        for issues, result in _parse_all(jobs, _workers_for(len(jobs), workers), while_parsing, labels):
            collection.issues.extend(issues)
            if result is not None:
                collection.results.append(result)
    return collection


def collect_many(
    targets: Sequence[tuple[Path, str | None]],
    *,
    workers: int | None = None,
    while_parsing: Callable[[], object] | None = None,
    labels: Mapping[str, MetadataValue] | None = None,
) -> Collection:
    """:func:`collect` for several (path, host) pairs at once, sharing one process pool.

    ``workers``: processes to parse in; None picks the CPU count when there are at least
    ``PARALLEL_MIN_DIRS`` result directories (and the caller has no other threads), else parses here.
    Results come in target order, then directory order, as if each target were collected in turn.
    ``while_parsing`` (the caller's own start-up work, e.g. imports) is called exactly once, while the
    worker processes parse (or before a serial parse), so that it costs no wall time of its own.
    ``labels`` (e.g. a host's inventory labels, ``rack=r12``) go into every metric's metadata under the
    keys the result does not set itself.
    """
    jobs, issues = find_jobs(targets)
    collection = parse_jobs(jobs, workers=workers, while_parsing=while_parsing, labels=labels)
    collection.issues[:0] = issues
    return collection


def collect(
    path: Path,
    *,
    host: str | None = None,
    workers: int | None = None,
    while_parsing: Callable[[], object] | None = None,
    labels: Mapping[str, MetadataValue] | None = None,
) -> Collection:
    """Parse every result under ``path`` (a folder, or one result file) for ``host`` (``labels``: see
    :func:`collect_many`).

    Never raises: a missing path or unparseable files are reported in ``Collection.issues``.
    Large folders are parsed in a process per CPU (see :func:`collect_many`, also for ``while_parsing``).
    """
    return collect_many([(path, host)], workers=workers, while_parsing=while_parsing, labels=labels)
