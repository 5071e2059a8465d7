"""How the CLI's process acts on a signal, where CPython's own handling gets in the way.

* The main thread acts on a signal another thread took while it waits for the hosts. The kernel may
  hand ``kill``'s SIGTERM (or a terminal's SIGINT) to any thread of the process; CPython then runs the
  Python handler in the main thread only when that thread next runs. Here the signal is sent to a
  helper thread on purpose (``pthread_kill``), with the CLI's own SIGTERM handler installed.
* A signal whose KeyboardInterrupt CPython lost (raised inside a finalizer, printed as "Exception
  ignored") still ends the waits: SQLite's busy retry and the wait for the hosts.
* A Ctrl-C the CLI handled keeps its exit code 130 under ``python -m workload`` even when it ended an
  ``eval`` of a string (CPython marks it unhandled: ``workload.cli._forget_handled_interrupt``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from workload.cli import _signals_as_interrupts
from workload.history.db import retry_busy
from workload.interrupts import WAKE_S, SignalInterrupt, wait_all
from workload.stop_signals import on_signal

ROOT = Path(__file__).resolve().parent.parent
#: When the helper finishes the work if nothing stopped the wait first (far beyond WAKE_S).
WORK_S = 10.0


def _wait_stopped_by(deliver: Callable[[], None]) -> tuple[SignalInterrupt, Future[None]]:
    """:func:`wait_all` on work that a helper thread ends after :data:`WORK_S`, the CLI's handlers installed;
    0.2 s in, the helper calls ``deliver``. The stop the wait raised, and the work."""
    # only the main thread can install the handlers; without them SIGTERM would end the test process
    assert threading.current_thread() is threading.main_thread()
    restore = _signals_as_interrupts()
    work: Future[None] = Future()

    def helper() -> None:
        time.sleep(0.2)
        deliver()
        time.sleep(WORK_S)
        work.set_result(None)

    threading.Thread(target=helper, daemon=True).start()
    try:
        with pytest.raises(SignalInterrupt) as caught:
            wait_all([work])
    finally:
        restore()
    return caught.value, work


def test_sigterm_taken_by_another_thread_stops_the_wait_while_the_work_still_runs() -> None:
    """An unbounded wait slept through the signal until the work ended (a 60 s LoadGen test ran on)."""
    signalled = threading.Event()

    def to_the_helper_thread() -> None:
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # this thread takes it, not the main one
        signalled.set()

    stop, work = _wait_stopped_by(to_the_helper_thread)
    assert signalled.is_set() and not work.done()  # stopped by the signal, not by the end of the work
    assert stop.signal_name == "SIGTERM"


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


class _KillsOnFinalize:
    """An object whose finalizer takes the SIGINT: CPython raises the handler's KeyboardInterrupt inside
    ``__del__``, prints "Exception ignored" and goes on (as in SQLAlchemy's pool returning a connection)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the pending handler runs on one of these bytecodes, inside __del__
            pass


def test_a_ctrl_c_lost_in_a_finalizer_still_ends_sqlites_busy_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its raise lost, the busy retry went on to its timeout (60 s in the CLI: a hung Ctrl-C in CI)."""
    assert threading.current_thread() is threading.main_thread()
    path = tmp_path / "h.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("CREATE TABLE runs (id TEXT)")
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock for the whole test
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
    tries: list[float] = []
    lost: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: lost.append(u.exc_type))

    def write() -> None:
        tries.append(time.monotonic())
        if len(tries) == 2:
            _KillsOnFinalize()  # made and dropped at once: its __del__ runs here
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO runs VALUES ('x')"))

    restore = _signals_as_interrupts()
    try:
        with pytest.raises(KeyboardInterrupt):
            retry_busy(write, timeout_s=20.0)
    finally:
        restore()
        holder.rollback()
        holder.close()
        engine.dispose()
    assert lost == [KeyboardInterrupt]  # the first raise was indeed lost ("Exception ignored")
    assert len(tries) == 2  # stopped right after the try that lost it, not at the timeout


def test_a_signal_whose_raise_was_lost_ends_the_hosts_wait() -> None:
    def lost() -> None:
        with contextlib.suppress(SignalInterrupt):
            on_signal(signal.SIGTERM, None)  # the handler ran, and its raise went nowhere

    stop, work = _wait_stopped_by(lost)
    assert not work.done() and stop.signal_name == "SIGTERM"
