"""Interrupt plumbing of ``Host.interrupt``: stop hooks run quietly, waited for with a bound.

Moved out of :mod:`workload.hosts.base` (which re-exports :data:`STOP_HOOK_SLACK_S`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

#: How long :meth:`Host.interrupt` waits for stop hooks beyond their grace period.
STOP_HOOK_SLACK_S = 15.0


def _call_quietly(hook: Callable[[float], None], grace_s: float) -> None:
    with contextlib.suppress(Exception):
        hook(grace_s)


def _finish_stop_hooks(threads: list[threading.Thread], grace_s: float) -> None:
    end = time.monotonic() + grace_s + STOP_HOOK_SLACK_S
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
