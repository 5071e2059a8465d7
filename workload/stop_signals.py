"""The signals that stop a ``workload`` command (SIGINT, SIGTERM): the CLI's handler and what it remembers.

The CLI installs :func:`on_signal` for SIGINT and SIGTERM while a command runs. Each signal stops the main
thread the way Ctrl-C does (a KeyboardInterrupt), and is remembered, so that a wait can stop again when
CPython lost the first raise (:func:`raise_if_signalled_since`). No dependencies beyond the standard
library: the history, the engine and the transports all wait.
"""

from __future__ import annotations

import signal


class SignalInterrupt(KeyboardInterrupt):
    """A stop asked by a signal other than Ctrl-C's SIGINT (SIGTERM from CI, ``timeout``, ``docker stop``).

    Raised in the main thread by the CLI's handler, so it takes Ctrl-C's path (a KeyboardInterrupt)
    while the run can still say which signal stopped it.
    """

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


#: The names of the signals :func:`on_signal` took in this process, oldest first.
_RECEIVED: list[str] = []


def on_signal(signum: int, _frame: object) -> None:
    """The CLI's handler of SIGINT and SIGTERM: note the signal, then stop the main thread the way Ctrl-C
    does (KeyboardInterrupt for SIGINT; :class:`SignalInterrupt` naming any other signal)."""
    name = signal.Signals(signum).name
    _RECEIVED.append(name)
    _raise_for(name)


def signal_count() -> int:
    """How many signals :func:`on_signal` has taken so far (for :func:`raise_if_signalled_since`)."""
    return len(_RECEIVED)


def raise_if_signalled_since(count: int) -> None:
    """Stop again if a signal arrived after :func:`signal_count` returned ``count``.

    CPython raises a signal handler's exception in whatever Python code the main thread runs next.
    When that is a finalizer (a ``__del__``, a weakref callback: SQLAlchemy hands pooled connections
    back that way) the exception is printed as "Exception ignored" and lost, and a wait that goes on
    by itself (SQLite's busy retry, up to 60 s) ignored the Ctrl-C. Waits call this between steps,
    so a signal ends them even when its first raise was lost.
    """
    if len(_RECEIVED) > count:
        _raise_for(_RECEIVED[-1])


def _raise_for(name: str) -> None:
    if name == "SIGINT":
        raise KeyboardInterrupt
    raise SignalInterrupt(name)
