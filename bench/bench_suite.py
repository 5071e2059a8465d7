"""The test suite's own figures: wall and CPU time per test file, the slowest tests, collection time.

Runs pytest once (the whole suite, or the paths given) the way ``.ci/run`` does (``--workers 5``:
pytest-xdist, ``--dist loadgroup --no-loadscope-reorder``; ``--workers 0``: one process), with pytest's JUnit XML report
(the wall time of each test: setup + call + teardown) and the ``_suite_cpu.py`` plugin (CPU of each
test: the pytest process and the children it reaped; collection wall and CPU). Prints, sorted by
wall time: each file's tests, wall seconds, CPU seconds and share of the suite's wall; the
``--top`` slowest tests; and the totals: tests by outcome, the run's elapsed wall time and CPU
time (all processes it waited for), peak RSS of the pytest process (not its workers), load average at start and end.
With several workers the per-file wall times add up to more than the elapsed time (they overlap).

``--junit FILE`` reads a JUnit XML report made elsewhere (CI's) instead of running: wall figures only.

    .venv/bin/python bench/bench_suite.py [PATH ...] [--workers 6] [--dist loadgroup] [--top 25] [--keep DIR] [--json]
    .venv/bin/python bench/bench_suite.py --junit report.xml

A single run, not interleaved rounds: it is a profile of where the suite's time goes, to see the
next slowdown, not a comparison (for that, run it on both commits at similar load and compare the
per-file CPU seconds, which the neighbours' load barely moves).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from _measure import machine, run_process

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent


@dataclass
class TestTime:
    #: JUnit's identity of the test: (classname, name), as pytest's junitxml writes them
    key: tuple[str, str]
    file: str
    wall: float
    outcome: str
    cpu: float | None = None
    #: first line of the failure / error / skip message
    message: str = ""

    @property
    def nodeid(self) -> str:
        module = self.file.removesuffix(".py").replace("/", ".")
        classname, name = self.key
        inner = classname[len(module) + 1 :].replace(".", "::") if classname.startswith(module + ".") else ""
        return "::".join(part for part in (self.file, inner, name) if part)


@dataclass
class FileTime:
    file: str
    tests: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def junit_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) of a node id, the way pytest's junitxml names a test case (``mangle_test_address``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".").removesuffix(".py")
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def _file_of(classname: str) -> str:
    """``tests.test_x.TestY`` -> ``tests/test_x.py`` (the longest prefix that is a file of the checkout)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if (ROOT / candidate).is_file():
            return candidate
    return classname


def read_junit(path: Path) -> list[TestTime]:
    """Every test case of a pytest JUnit XML report: its identity, file, wall seconds and outcome."""
    tests = []
    for case in ET.parse(path).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = (child.get("message") or "").strip().split("\n", 1)[0][:300]
        try:
            wall = float(case.get("time", "0"))
        except ValueError:
            wall = 0.0
        tests.append(TestTime(key, case.get("file") or _file_of(key[0]), wall, outcome, message=message))
    return tests


@dataclass
class CpuRecord:
    file: str
    cpu: float


def read_cpu(folder: Path) -> tuple[dict[tuple[str, str], CpuRecord], list[dict[str, float]]]:
    """The plugin's records: file and CPU seconds (self + children) per JUnit key, and the collections."""
    per_test: dict[tuple[str, str], CpuRecord] = {}
    collections: list[dict[str, float]] = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("collection"):
                collections.append({"wall": float(record["wall"]), "cpu": float(record["cpu"])})
            else:
                cpu = float(record["cpu_self"]) + float(record["cpu_children"])
                per_test[junit_key(str(record["nodeid"]))] = CpuRecord(str(record["file"]), cpu)
    return per_test, collections


def by_file(tests: list[TestTime]) -> list[FileTime]:
    files: dict[str, FileTime] = {}
    for test in tests:
        entry = files.setdefault(test.file, FileTime(test.file))
        entry.tests += 1
        entry.wall += test.wall
        entry.cpu += test.cpu or 0.0
        entry.outcomes[test.outcome] += 1
    return sorted(files.values(), key=lambda f: f.wall, reverse=True)


def _match_cpu(tests: list[TestTime], cpu: dict[tuple[str, str], CpuRecord]) -> None:
    """Attach each test's CPU seconds and its file (the plugin knows the file; JUnit only a dotted name)."""
    for test in tests:
        record = cpu.get(test.key)
        if record is not None:
            test.cpu, test.file = record.cpu, record.file


def run_suite(args: argparse.Namespace, work: Path) -> tuple[Path, dict[str, float | int]]:
    """Run pytest with the JUnit report and the CPU plugin; return the report and the run's totals."""
    junit = work / "junit.xml"
    cpu_dir = work / "cpu"
    cpu_dir.mkdir()
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_suite_cpu", f"--junitxml={junit}"]
    if args.workers > 0:
        argv += ["-n", str(args.workers), "--dist", args.dist]
        if args.dist in ("loadscope", "loadfile", "loadgroup"):
            argv.append("--no-loadscope-reorder")  # the suite's own order, as .ci/run (tests/testbed/parallel.py)
    argv += args.paths or ["tests"]
    # Not an xdist worker's variables, when this runs inside a test of a parallel run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as .ci/run has it
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), env.get("PYTHONPATH", "")) if p)
    env["WORKLOAD_SUITE_CPU_DIR"] = str(cpu_dir)
    log = work / "pytest.log"
    with open(log, "w", encoding="utf-8") as out:
        run = run_process(argv, check=False, cwd=ROOT, env=env, stdout=out, poll_s=0.5)
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    print(f"pytest: {lines[-1] if lines else '(no output)'}")
    if not junit.is_file():
        raise SystemExit(f"bench_suite: pytest exited {run.returncode} without a JUnit report ({' '.join(argv)})")
    totals: dict[str, float | int] = {"elapsed_s": run.wall_s, "cpu_s": run.cpu_s}
    return junit, totals | {"peak_rss_mib": run.peak_rss_mib, "exit": run.returncode}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="*", help="test files or folders (default: tests)")
    parser.add_argument(
        "--workers", type=int, default=6, help="pytest-xdist workers, 0 = one process (default 6, as .ci/run)"
    )
    parser.add_argument("--dist", default="loadgroup", help="pytest-xdist distribution (default loadgroup)")
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list (default 25)")
    parser.add_argument("--junit", type=Path, help="read this JUnit XML report instead of running pytest")
    parser.add_argument("--keep", type=Path, help="keep pytest's output and JUnit report in this folder")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every figure")
    args = parser.parse_args()

    start = machine()
    print(f"bench_suite: machine at start: load average {start['loadavg']}; {start['cores']} cores", flush=True)
    totals: dict[str, float | int] = {}
    collections: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        if args.junit:
            tests = read_junit(args.junit)
        else:
            junit, totals = run_suite(args, Path(tmp))
            tests = read_junit(junit)
            cpu, collections = read_cpu(Path(tmp) / "cpu")
            _match_cpu(tests, cpu)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for name in ("junit.xml", "pytest.log"):
                    shutil.copy(Path(tmp) / name, args.keep / name)
    end = machine()
    files = by_file(tests)
    wall_sum = sum(f.wall for f in files) or 1.0
    have_cpu = any(t.cpu is not None for t in tests)

    print(f"\n{'file':<48} {'tests':>6} {'wall s':>9} {'CPU s':>9} {'share':>6}")
    for f in files:
        cpu_text = f"{f.cpu:9.1f}" if have_cpu else f"{'-':>9}"
        print(f"{f.file:<48} {f.tests:>6} {f.wall:9.1f} {cpu_text} {100 * f.wall / wall_sum:5.1f}%")
    slowest = sorted(tests, key=lambda t: t.wall, reverse=True)[: args.top]
    print(f"\nslowest {len(slowest)} tests (wall s, CPU s):")
    for t in slowest:
        cpu_text = f"{t.cpu:7.1f}" if t.cpu is not None else f"{'-':>7}"
        print(f"{t.wall:8.1f} {cpu_text}  {t.nodeid}")
    outcomes: dict[str, int] = defaultdict(int)
    for t in tests:
        outcomes[t.outcome] += 1
    print(f"\ntests: {len(tests)} ({', '.join(f'{n} {k}' for k, n in sorted(outcomes.items()))})")
    for t in tests:
        if t.outcome in ("failed", "error"):
            print(f"  {t.outcome.upper()} {t.nodeid}: {t.message}")
    print(f"sum of the tests' wall times: {wall_sum:.1f} s; of their CPU: {sum(f.cpu for f in files):.1f} s")
    if collections:
        worst = max(collections, key=lambda c: c["wall"])
        print(f"collection: {worst['wall']:.1f} s wall, {worst['cpu']:.1f} s CPU (slowest of {len(collections)})")
    if totals:
        print(
            f"run: {totals['elapsed_s']:.1f} s elapsed, {totals['cpu_s']:.1f} CPU-s, "
            f"peak RSS (pytest process) {totals['peak_rss_mib']:.0f} MiB, pytest exit {totals['exit']}"
        )
    print(f"machine at end: load average {end['loadavg']}; {end['cores']} cores")
    if args.json:
        record = {
            "bench": "bench_suite",
            "settings": {"workers": args.workers, "dist": args.dist, "paths": args.paths, "junit": str(args.junit)},
            "totals": totals,
            "outcomes": dict(outcomes),
            "collection": collections,
            "files": [{"file": f.file, "tests": f.tests, "wall_s": f.wall, "cpu_s": f.cpu} for f in files],
            "slowest": [{"nodeid": t.nodeid, "wall_s": t.wall, "cpu_s": t.cpu} for t in slowest],
            "failed": [t.nodeid for t in tests if t.outcome in ("failed", "error")],
            "machine_start": start,
            "machine_end": end,
        }
        print(json.dumps(record, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
