"""The main thread acts on a signal another thread took while it waits for the hosts.

The kernel may hand ``kill``'s SIGTERM (or a terminal's SIGINT) to any thread of the process; CPython
then runs the Python handler in the main thread only when that thread next runs. Here the signal is
sent to a helper thread on purpose (``pthread_kill``), with the CLI's own SIGTERM handler installed.
"""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import Future

import pytest

from workload.cli import _sigterm_as_interrupt
from workload.interrupts import WAKE_S, SignalInterrupt, wait_all

#: When the helper finishes the work if nothing stopped the wait first (far beyond WAKE_S).
WORK_S = 10.0


def test_sigterm_taken_by_another_thread_stops_the_wait_while_the_work_still_runs() -> None:
    """An unbounded wait slept through the signal until the work ended (a 60 s LoadGen test ran on)."""
    # only the main thread can install the handler; without it SIGTERM would end the test process
    assert threading.current_thread() is threading.main_thread()
    restore = _sigterm_as_interrupt()
    work: Future[None] = Future()
    signalled = threading.Event()

    def helper() -> None:
        time.sleep(0.2)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # this thread takes it, not the main one
        signalled.set()
        time.sleep(WORK_S)
        work.set_result(None)

    threading.Thread(target=helper, daemon=True).start()
    try:
        with pytest.raises(SignalInterrupt) as caught:
            wait_all([work])
    finally:
        restore()
    assert signalled.is_set() and not work.done()  # stopped by the signal, not by the end of the work
    assert caught.value.signal_name == "SIGTERM"


def test_the_wait_returns_when_every_future_is_done() -> None:
    futures: list[Future[int]] = [Future() for _ in range(3)]
    for i, future in enumerate(futures):
        threading.Timer(WAKE_S * (i + 1) / 2, future.set_result, args=(i,)).start()
    wait_all(futures)
    assert [f.result() for f in futures] == [0, 1, 2]
    wait_all([])
