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


#: Login-shell output held back while the announce line is awaited (see :class:`_StderrHead`); past
#: this much, the stream is taken as the command's own, as when the announce never comes.
_PREAMBLE_LIMIT = 64 * 1024
#: How the login shell's own lines are labelled where they are shown.
LOGIN_SHELL_LABEL = "(login shell)"


class _StderrHead:
    """Takes the ``workload-pgid:N`` line off stderr; passes the command's stderr through.

    The wrapper prints that line before it starts the command, so any stderr line ahead of it comes
    from the user's login shell starting up: sshd runs ``bash -c`` and bash reads ``~/.bashrc`` for
    it, where pyenv's rehash warnings, conda or ``mesg`` print. Those lines are shown to the live sink
    (labelled :data:`LOGIN_SHELL_LABEL`) but are not the command's stderr. They no longer hide the
    announce either: once a login shell's warning came first, the group id was lost, and a timeout or
    an interrupt could not stop the command. Without an announce (a login shell that failed before
    the wrapper ran) or past :data:`_PREAMBLE_LIMIT`, everything held is the command's stderr.

    Counts itself in ``unannounced`` from creation until the group id arrives or it is forgotten.
    """

    def __init__(self, collector: OutputCollector, running: set[int], unannounced: _Counter) -> None:
        self.collector = collector
        self.pgid: int | None = None
        self._running = running
        self._head: bytes | None = b""
        self._preamble: list[bytes] = []
        self._preamble_bytes = 0
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
        head = self._head + chunk
        while True:
            line, sep, rest = head.partition(b"\n")
            if not sep:
                self._head = head
                if self._preamble_bytes + len(head) > _PREAMBLE_LIMIT:
                    self._give_up()
                return
            if line.startswith(_PGID_MARK) and line[len(_PGID_MARK) :].isdigit():
                self.pgid = int(line[len(_PGID_MARK) :])
                self._running.add(self.pgid)
                self._announced()
                self._head = None
                for before in self._preamble:
                    self.collector.aside(before, LOGIN_SHELL_LABEL)
                self._preamble, self._preamble_bytes = [], 0
                if rest:
                    self.collector.feed(rest)
                return
            self._preamble.append(line)
            self._preamble_bytes += len(line) + 1
            head = rest
            if self._preamble_bytes > _PREAMBLE_LIMIT:
                self._head = head
                self._give_up()
                return

    def _give_up(self) -> None:
        """No announce to be found: everything held back is the command's stderr, in order."""
        held = b"".join(line + b"\n" for line in self._preamble) + (self._head or b"")
        self._preamble, self._preamble_bytes, self._head = [], 0, None
        if held:
            self.collector.feed(held)

    def close(self) -> None:
        if self._head is not None:
            self._give_up()
