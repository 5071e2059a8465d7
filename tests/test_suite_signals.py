"""The suite's own set-up: what the processes the tests start inherit from it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path


def _ignored_signals(pid: int) -> int:
    """The ``SigIgn`` mask of a process (bit ``n - 1`` set: signal ``n`` ignored), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"/proc/{pid}/status has no SigIgn line")


def test_children_of_the_suite_do_not_ignore_sigint() -> None:
    # The interrupt tests send SIGINT to the `workload` they start: a suite launched as a background
    # job (SIGINT ignored, which exec keeps) must not hand that on (conftest.pytest_configure).
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert not _ignored_signals(child.pid) & (1 << (signal.SIGINT - 1))
    finally:
        child.kill()
        child.wait(10)
