"""Shared test configuration: markers, parallel-run groups, and the real test-bed fixtures (tests/testbed/)."""

from __future__ import annotations

import shutil
import signal

import pytest

from tests.testbed.parallel import group_by_shared_fixtures, slow_first


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job (`.ci/run &`, `nohup ... &`) with SIGINT ignored, and an ignored
    # signal stays ignored across exec: every `workload` the tests start would then shrug off the
    # Ctrl-C the interrupt tests send, and each such test would wait out its timeout. A handler (not
    # SIG_IGN) is reset to the default on exec, so the children get a SIGINT they can act on.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # pytest-xdist (.ci/run: -n 2 --dist loadgroup): tests sharing a module/class fixture stay on one
    # worker (tests/testbed/parallel.py says why); everything else spreads. tryfirst: xdist's worker reads
    # the xdist_group markers in its own pytest_collection_modifyitems (xdist/remote.py), so ours must
    # run before it, whatever order the plugins were registered in (tests/test_parallel_groups.py).
    group_by_shared_fixtures(items)
    slow_first(items)
    # GPU tests need a real NVIDIA GPU; everywhere else they are reported as skipped, never passed.
    if shutil.which("nvidia-smi") is None:
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi not found)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


# The fresh-VM test bed (private Docker Engine, Debian VMs with sshd, stand-in apt repository,
# CUDA run-file server): fixtures docker_engine, fresh_vm, fresh_vms, standin_repo, ...
# The run-history backends: a SQLite file and a PostgreSQL server the tests start (history_url).
from tests.history_db import history_url, postgres_server  # noqa: E402, F401
from tests.testbed.fixtures import *  # noqa: E402, F403


@pytest.fixture(autouse=True, scope="session")
def _private_history(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Every `workload run` records into the run history; tests must not write into the user's
    # data directory (~/.local/share/workload): their default history lives in a session folder.
    import os

    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    os.environ.pop("WORKLOAD_HISTORY", None)
