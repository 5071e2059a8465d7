"""bench/bench_suite.py, the suite's own figures: run on a small generated test module, in xdist workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_suite.py"

SAMPLE = """
import time

import pytest


def test_burns_cpu():
    started = time.process_time()
    while time.process_time() - started < 0.3:
        pass


def test_fails():
    assert False


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


@pytest.mark.parametrize("path", ["a/b", "c"])
def test_param(path):
    pass


class TestGroup:
    def test_in_a_class(self):
        pass
"""


@pytest.mark.timeout(300)
def test_figures_per_file_and_per_test_from_junit_and_the_cpu_plugin(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "test_other.py").write_text("def test_quick():\n    pass\n")
    proc = subprocess.run(
        [sys.executable, str(BENCH), str(tmp_path), "--workers", "2", "--top", "3", "--json"],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["outcomes"] == {"passed": 5, "failed": 1, "skipped": 1}
    assert record["totals"]["exit"] == 1  # pytest's own status: one test failed
    files = {Path(f["file"]).name: f for f in record["files"]}
    assert set(files) == {"test_sample.py", "test_other.py"}
    assert (files["test_sample.py"]["tests"], files["test_other.py"]["tests"]) == (6, 1)
    # The busy test's 0.3 CPU-seconds are its own, whatever the machine's load; JUnit's wall covers them.
    (burner,) = [t for t in record["slowest"] if t["nodeid"].endswith("test_burns_cpu")]
    assert burner["cpu_s"] >= 0.3 and burner["wall_s"] >= 0.3
    assert record["slowest"][0]["nodeid"].endswith("test_burns_cpu")
    assert files["test_sample.py"]["cpu_s"] >= 0.3
    assert len(record["collection"]) == 2  # one collection per worker
    assert [Path(n).name for n in record["failed"]] == ["test_sample.py::test_fails"]
    assert "FAILED" in proc.stdout and "test_fails: assert False" in proc.stdout
    assert "slowest 3 tests" in proc.stdout and "test_sample.py" in proc.stdout


def test_a_junit_report_is_read_without_running(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_bench_suite" name="test_a" time="2.5"/>'
        '<testcase classname="tests.test_bench_suite" name="test_b[x/y]" time="0.5"><skipped/></testcase>'
        '<testcase classname="tests.test_bench_suite" name="test_c" time="1.0"><failure message="m"/></testcase>'
        "</testsuite></testsuites>"
    )
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--junit", str(report), "--json"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    # The dotted class name is mapped back to the file of this checkout.
    assert record["files"] == [{"cpu_s": 0.0, "file": "tests/test_bench_suite.py", "tests": 3, "wall_s": 4.0}]
    assert record["outcomes"] == {"passed": 1, "skipped": 1, "failed": 1}
    assert [t["nodeid"] for t in record["slowest"]][:1] == ["tests/test_bench_suite.py::test_a"]
