"""Processes on this machine, for tests that check that a stop left nothing running."""

from __future__ import annotations

import os
from pathlib import Path


def processes(pattern: str) -> list[int]:
    """Pids whose command line contains ``pattern`` (containers' processes included: they share this
    kernel), leaving out this test process and any pytest."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if pattern in argv and "pytest" not in argv:
                found.append(int(entry))
    return found
