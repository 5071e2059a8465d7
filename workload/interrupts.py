"""Stopping the commands running on a fleet's hosts (the engine's ``stop``, Ctrl-C).

Moved out of :mod:`workload.engine` (which re-exports every name).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, wait
from typing import Any

from workload.hosts.base import Host
from workload.stop_signals import SignalInterrupt, raise_if_signalled_since, signal_count

__all__ = [
    "INTERRUPT_TIMEOUT_S",
    "KILL_GRACE_S",
    "WAKE_S",
    "SignalInterrupt",
    "interrupt_hosts",
    "interrupt_reason",
    "wait_all",
]

#: How long a stop waits for the hosts' kill commands (each runs over its host's own connection).
INTERRUPT_TIMEOUT_S = 20.0
#: Between SIGTERM and SIGKILL when commands are stopped: apt/dpkg and docker get a chance to exit
#: cleanly (a SIGKILLed dpkg leaves packages half-configured; the next run repairs that too).
KILL_GRACE_S = 2.0


#: The longest the main thread sleeps at a time while it waits for other threads (:func:`wait_all`).
WAKE_S = 0.25


def wait_all(futures: Sequence[Future[Any]]) -> None:
    """Return once every future is done; the main thread wakes every :data:`WAKE_S` meanwhile.

    The kernel hands a process-directed signal (SIGTERM from ``kill``, SIGINT from a terminal) to any
    thread of the process that does not block it, usually but not always the main thread. When a
    worker thread takes it, CPython only marks the signal pending: its Python handler (Ctrl-C's
    KeyboardInterrupt, the CLI's SIGTERM handler) runs in the main thread the next time that thread
    runs Python code. A main thread asleep in an unbounded wait would sleep through the signal until
    the last host finished (a 60 s LoadGen test ran on after SIGTERM). Waking in short steps bounds
    the delay; a KeyboardInterrupt raised by the handler propagates from here.
    """
    since = signal_count()
    pending = list(futures)
    while pending:
        pending = list(wait(pending, timeout=WAKE_S).not_done)
        raise_if_signalled_since(since)


def interrupt_reason(exc: KeyboardInterrupt) -> str:
    """What stopped the run, as run.json, summary.json and the console say it."""
    if isinstance(exc, SignalInterrupt):
        return f"interrupted ({exc.signal_name})"
    return "interrupted (Ctrl-C)"


# -- stopping running commands ---------------------------------------------------------------------
def interrupt_hosts(hosts: Sequence[Host], *, timeout_s: float) -> None:
    """Stop the commands running on ``hosts`` now, all hosts at once; wait at most ``timeout_s``.

    Each transport stops its own commands (:meth:`Host.interrupt`: process groups killed with
    SIGTERM, then SIGKILL after :data:`KILL_GRACE_S`). Failures are ignored: a host that cannot be
    reached has nothing we could stop, and its worker notices the stop at its next step boundary.
    """
    threads = [threading.Thread(target=_interrupt_quietly, args=(h,), daemon=True) for h in hosts]
    for thread in threads:
        thread.start()
    end = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))


def _interrupt_quietly(host: Host) -> None:
    with contextlib.suppress(Exception):
        host.interrupt(grace_s=KILL_GRACE_S)
