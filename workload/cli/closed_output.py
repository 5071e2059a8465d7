"""A closed stdout or stderr (``workload run ... | head -1``) never costs a command its work.

Python raises ``BrokenPipeError`` on the first write after the reader of a pipe went away, and
again when it flushes the stream at exit (exit status 120). A run that printed its first line into
``head -1`` would then die in the middle of its benchmark with no run.json, no metrics and no
history record. Instead, :func:`guarded_streams` wraps ``sys.stdout`` and ``sys.stderr``: the first
write that finds the pipe closed points the stream's file descriptor at ``/dev/null`` (the way
Python's documentation recommends for SIGPIPE), and everything after it is dropped quietly. The
command runs to its end, writes its files, records its run and exits with its own exit code;
:func:`closed_note` then says on the other stream (if that one is still open) what was dropped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO


def _is_closed_pipe(exc: OSError) -> bool:
    return isinstance(exc, BrokenPipeError) or exc.errno in (errno.EPIPE, errno.ECONNRESET)


class GuardedStream:
    """A text stream whose writes survive the reader closing the pipe (see the module docstring)."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream = stream
        self.name_of_stream = name
        self.closed_by_reader = False

    def _drop(self) -> None:
        """Point the stream's descriptor at /dev/null: later writes, and the flush at exit, succeed."""
        self.closed_by_reader = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)

    def write(self, text: str) -> int:
        if self.closed_by_reader:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as exc:
            if not _is_closed_pipe(exc):
                raise
            self._drop()
            return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.closed_by_reader:
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()  # into /dev/null now: empties the buffer that held the lost text
            return
        try:
            self._stream.flush()
        except OSError as exc:
            if not _is_closed_pipe(exc):
                raise
            self._drop()
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer...: the real stream's
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_streams() -> Iterator[tuple[GuardedStream | None, GuardedStream | None]]:
    """``sys.stdout`` and ``sys.stderr`` wrapped for the block (None for a stream that is missing);
    the original streams are put back after it (tests run commands in-process)."""
    originals = (sys.stdout, sys.stderr)
    guarded: list[GuardedStream | None] = []
    for name, stream in zip(("stdout", "stderr"), originals, strict=True):
        if stream is None:
            guarded.append(None)
            continue
        wrapper = stream if isinstance(stream, GuardedStream) else GuardedStream(stream, name)
        setattr(sys, name, wrapper)
        guarded.append(wrapper)
    try:
        yield guarded[0], guarded[1]
    finally:
        sys.stdout, sys.stderr = originals


def closed_note(stdout: GuardedStream | None, stderr: GuardedStream | None, exit_code: int) -> None:
    """One line on stderr when stdout's reader left early (stderr closed too: nothing can be said)."""
    if stdout is None or not stdout.closed_by_reader or stderr is None or stderr.closed_by_reader:
        return
    stderr.write(
        "note: standard output was closed before the command finished (its reader ended); the rest of "
        f"what it printed was dropped; the command ran to its end (exit code {exit_code})\n"
    )
    stderr.flush()
