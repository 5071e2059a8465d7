"""How the CLI's process acts on a signal, where CPython's own handling gets in the way.

* The main thread acts on a signal another thread took while it waits for the hosts. The kernel may
  hand ``kill``'s SIGTERM (or a terminal's SIGINT) to any thread of the process; CPython then runs the
  Python handler in the main thread only when that thread next runs. Here the signal is sent to a
  helper thread on purpose (``pthread_kill``), with the CLI's own SIGTERM handler installed.
* A Ctrl-C the CLI handled keeps its exit code 130 under ``python -m workload`` even when it ended an
  ``eval`` of a string (CPython marks it unhandled: ``workload.cli._forget_handled_interrupt``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from workload.cli import _sigterm_as_interrupt
from workload.interrupts import WAKE_S, SignalInterrupt, wait_all

ROOT = Path(__file__).resolve().parent.parent
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


_INTERRUPTED_IN_AN_EVAL = """
import workload.cli as cli


def interrupted_while_a_class_is_built(*args, **kwargs):
    # namedtuple and dataclasses build classes with eval/exec of a string: a Ctrl-C landing there
    eval("(_ for _ in ()).throw(KeyboardInterrupt())")


cli.cli.main = interrupted_while_a_class_is_built
cli.main(["version"])
"""


def test_a_ctrl_c_handled_after_it_ended_a_string_eval_still_exits_130_under_python_m(tmp_path: Path) -> None:
    (tmp_path / "interrupted_in_an_eval.py").write_text(_INTERRUPTED_IN_AN_EVAL, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "interrupted_in_an_eval"], env=env, capture_output=True, text=True, timeout=60
    )
    # CPython's mark would make the interpreter kill itself with SIGINT at exit (returncode -2)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert "interrupted" in done.stderr and "what finished so far is kept" in done.stderr, done.stderr
