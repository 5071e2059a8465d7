"""pytest plugin for ``bench_suite.py``: CPU seconds and wall time of each test, and of collection.

Loaded with ``-p _suite_cpu`` (``bench/`` on ``PYTHONPATH``); it writes one JSON line per test to
``$WORKLOAD_SUITE_CPU_DIR/<worker>-<pid>.jsonl`` (``<worker>`` is the pytest-xdist worker id, ``main``
without xdist), so parallel workers never write the same file. A test's figures cover its setup,
call and teardown (so a session fixture's cost lands on the first test that asked for it):

* ``cpu_self``: user + system CPU of the pytest process (all its threads);
* ``cpu_children``: user + system CPU of the child processes it reaped meanwhile (subprocesses the
  test ran and waited for: LoadGen runners, ``workload`` CLIs, ssh). What runs under the test bed's
  dockerd (the VMs' sshd, apt, dpkg) is the daemon's, not ours, and is not counted;
* ``wall``: seconds from the start of setup to the end of teardown.

Without ``$WORKLOAD_SUITE_CPU_DIR`` the plugin does nothing.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_started: dict[str, float] = {}


def _out() -> Path | None:
    folder = os.environ.get("WORKLOAD_SUITE_CPU_DIR")
    return Path(folder) if folder else None


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _write(record: dict[str, Any]) -> None:
    folder = _out()
    if folder is None:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / f"{worker}-{os.getpid()}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def pytest_sessionstart(session: pytest.Session) -> None:
    _started["collect"] = time.perf_counter()
    _started["collect_cpu"] = sum(_cpu())


def pytest_collection_finish(session: pytest.Session) -> None:
    if "collect" in _started:
        wall = time.perf_counter() - _started["collect"]
        _write({"collection": True, "wall": wall, "cpu": sum(_cpu()) - _started["collect_cpu"]})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    own, children = _cpu()
    started = time.perf_counter()
    yield
    wall = time.perf_counter() - started
    own_after, children_after = _cpu()
    _write(
        {
            "nodeid": item.nodeid,
            "file": item.location[0],
            "wall": wall,
            "cpu_self": own_after - own,
            "cpu_children": children_after - children,
        }
    )
