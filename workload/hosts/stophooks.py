"""Interrupt plumbing of ``Host.interrupt``: stop hooks run quietly, waited for with a bound; the
commands a stop itself runs are left alone by the interrupt (:func:`interrupt_exempt`).

Moved out of :mod:`workload.hosts.base` (which re-exports :data:`STOP_HOOK_SLACK_S`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

#: How long :meth:`Host.interrupt` waits for stop hooks beyond their grace period.
STOP_HOOK_SLACK_S = 15.0

_exempt = threading.local()


@contextlib.contextmanager
def interrupt_exempt() -> Iterator[None]:
    """Commands this thread starts in the block are not among those :meth:`Host.interrupt` stops.

    For the commands a stop runs itself (a container host's ``docker exec`` that ends its work in
    the container): a stop hook runs beside the transport's own stopping, which signals every
    command of the host running then; a stop killed by it before it reached the container would
    leave the work running. Such commands end by their own timeout, which must be bounded.
    """
    before = getattr(_exempt, "on", False)
    _exempt.on = True
    try:
        yield
    finally:
        _exempt.on = before


def interrupt_exempt_now() -> bool:
    """Whether a command this thread starts now is left alone by interrupts (see :func:`interrupt_exempt`)."""
    return bool(getattr(_exempt, "on", False))


def _call_quietly(hook: Callable[[float], None], grace_s: float) -> None:
    with contextlib.suppress(Exception):
        hook(grace_s)


def _finish_stop_hooks(threads: list[threading.Thread], grace_s: float) -> None:
    end = time.monotonic() + grace_s + STOP_HOOK_SLACK_S
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
