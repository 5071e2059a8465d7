"""The remote process of one SSH command: the wrapper line with its watchdog, and its process group.

Moved out of :mod:`workload.hosts.ssh` (the connection and the ``Host`` primitives stay there; its
module docstring explains the wrapper): :func:`_remote_line` builds the remote shell line,
:class:`_StderrHead` takes the process group id off stderr, :class:`_Counter` counts the commands
whose group id has not arrived yet, :func:`_buffered` says whether a channel holds unread output.
"""

from __future__ import annotations

import shlex
import threading

import paramiko

from workload.hosts.base import OutputCollector

_PGID_MARK = b"workload-pgid:"


#: The wrapper's watchdog (see the module docstring): while sshd's session process (the wrapper's
#: parent) lives, sleep; once it is gone (the connection dropped, or this client died), TERM then
#: KILL the command's process group. It ignores TERM itself, so interrupt()'s group TERM leaves it
#: to finish the job; the wrapper KILLs it when the command ends. Without /proc it does not run.
_WATCHDOG = (
    'p=$PPID; w=; if [ -d "/proc/$p" ]; then '
    "( trap '' TERM; while [ -d \"/proc/$p\" ]; do sleep 1; done; "
    "kill -TERM -$$ 2>/dev/null; sleep 5; kill -KILL -$$ 2>/dev/null ) </dev/null >/dev/null 2>&1 & w=$!; fi; "
)


def _remote_line(shell_line: str, *, stdin: bool) -> str:
    """The wrapper line around ``shell_line``; without ``stdin`` the command reads /dev/null.

    A command given no input gets its end of input on the host, not as a channel EOF from here:
    sshd ends the connection when an EOF arrives for a channel it has already closed and freed
    ("packet referred to nonexistent channel"), and paramiko sends ``shutdown_write``'s EOF outside
    the channel's lock, so the close its own thread sends for a command that finished at once can
    overtake it (seen beside a busy core: every command on that connection was lost).
    """
    inner = (
        "printf 'workload-pgid:%s\\n' \"$$\" >&2; "
        + _WATCHDOG
        + "/bin/sh -c "
        + shlex.quote(shell_line)
        + '; s=$?; [ -n "$w" ] && kill -KILL "$w" 2>/dev/null; exit $s'
    )
    return "exec /bin/sh -c " + shlex.quote(inner) + ("" if stdin else " </dev/null")


def _buffered(chan: paramiko.Channel) -> bool:
    return bool(chan.recv_ready() or chan.recv_stderr_ready())


class _Counter:
    """A thread-safe count that can be waited on until it is zero."""

    def __init__(self) -> None:
        self._value = 0
        self._zero = threading.Condition()

    def add(self, delta: int) -> None:
        with self._zero:
            self._value += delta
            if self._value == 0:
                self._zero.notify_all()

    def wait_zero(self, *, timeout_s: float) -> bool:
        with self._zero:
            return self._zero.wait_for(lambda: self._value == 0, timeout=timeout_s)


class _StderrHead:
    """Takes the ``workload-pgid:N`` line off the start of stderr; passes the rest through.

    Counts itself in ``unannounced`` from creation until the group id arrives or it is forgotten.
    """

    def __init__(self, collector: OutputCollector, running: set[int], unannounced: _Counter) -> None:
        self.collector = collector
        self.pgid: int | None = None
        self._running = running
        self._head: bytes | None = b""
        self._unannounced: _Counter | None = unannounced
        unannounced.add(1)

    def _announced(self) -> None:
        if self._unannounced is not None:
            self._unannounced.add(-1)
            self._unannounced = None

    def forget(self) -> None:
        self._announced()
        if self.pgid is not None:
            self._running.discard(self.pgid)

    def feed(self, chunk: bytes) -> None:
        if self._head is None:
            self.collector.feed(chunk)
            return
        self._head += chunk
        if b"\n" not in self._head and len(self._head) < 64:
            return
        first, sep, rest = self._head.partition(b"\n")
        self._head = None
        if first.startswith(_PGID_MARK) and first[len(_PGID_MARK) :].isdigit():
            self.pgid = int(first[len(_PGID_MARK) :])
            self._running.add(self.pgid)
            self._announced()
            if rest:
                self.collector.feed(rest)
        else:
            self.collector.feed(first + sep + rest)

    def close(self) -> None:
        if self._head:
            self.collector.feed(self._head)
        self._head = None
