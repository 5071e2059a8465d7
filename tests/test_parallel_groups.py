"""The parallel-run groups reach pytest-xdist's scheduler: tests sharing a module fixture run on one worker.

A real ``pytest -n 2 --dist loadgroup`` run (the way .ci/run runs the suite) of a small test module whose tests
build on one module-scoped fixture, with this suite's own collection hook (``tests/conftest.py``). Each test
records the worker that ran it and the fixture instance it got; the run must use one worker and one instance for
them, while tests without a shared fixture may go anywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODULE = """
import json, os, uuid
import pytest

OUT = os.environ["GROUP_TEST_OUT"]


@pytest.fixture(scope="module")
def shared():
    return uuid.uuid4().hex


def _record(name, instance):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump({"worker": os.environ.get("PYTEST_XDIST_WORKER"), "instance": instance}, f)


@pytest.mark.parametrize("n", range(6))
def test_builds_on_the_shared_fixture(shared, n):
    _record(f"shared-{n}", shared)


@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    _record(f"alone-{n}", None)
"""

CONFTEST = """
from tests.conftest import pytest_collection_modifyitems  # noqa: F401  (the suite's own hook, as registered there)
"""


def _run_suite(tmp_path: Path, module: str, workers: int) -> Path:
    """``module`` as the only test file of a suite with this suite's collection hook, run by ``workers``
    pytest-xdist workers (``--dist loadgroup --no-loadscope-reorder``, as .ci/run); the folder its tests record into."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_generated.py").write_text(module)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "GROUP_TEST_OUT": str(out), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(workers), "--dist", "loadgroup"]
    argv.append("--no-loadscope-reorder")
    done = subprocess.run(
        [*argv, "--rootdir", str(suite), str(suite)], cwd=suite, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path: Path) -> None:
    out = _run_suite(tmp_path, MODULE, 2)
    records = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    shared = [records[f"shared-{n}"] for n in range(6)]
    assert {r["worker"] for r in shared} <= {"gw0", "gw1"} and len({r["worker"] for r in shared}) == 1, shared
    assert len({r["instance"] for r in shared}) == 1, shared  # made once: the tests built on the same one
    assert len([name for name in records if name.startswith("alone-")]) == 6


ORDERED = """
import os
import pytest

OUT = os.environ["GROUP_TEST_OUT"]


def _record(name):
    with open(os.path.join(OUT, "order"), "a") as f:
        f.write(name + "\\n")


@pytest.fixture(scope="module")
def shared():
    return 1


def test_quick_first_in_the_file():
    _record("quick-1")


def test_grouped_quick_one(shared):
    _record("group-1")


@pytest.mark.slow
def test_slow_in_the_middle():
    _record("slow")


def test_quick_after_it():
    _record("quick-2")


def test_grouped_quick_two(shared):
    _record("group-2")


@pytest.mark.heavy(seconds=20)
@pytest.mark.slow
def test_heavy_last_in_the_file():
    _record("heavy")
"""


def test_heavy_then_slow_tests_are_handed_out_before_the_quick_ones(tmp_path: Path) -> None:
    # One worker runs the tests in the order the scheduler hands them out (tests/testbed/parallel.slow_first,
    # through the suite's own hook, with xdist's reordering off as .ci/run runs it): the heavy one, the slow one,
    # the group of quick tests sharing a fixture (together, as xdist would put them before single tests), then the
    # quick ones in their file order. With xdist's reordering on, the group would come first of all.
    out = _run_suite(tmp_path, ORDERED, 1)
    assert (out / "order").read_text().split() == ["heavy", "slow", "group-1", "group-2", "quick-1", "quick-2"]
