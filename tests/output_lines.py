"""A child process's output read line by line as it comes, for tests that act on what it has printed so far."""

from __future__ import annotations

import threading
import time
from typing import IO


class TimedLines:
    """The lines of ``stream`` (a child's stdout or stderr pipe), each with the wall-clock time it arrived.

    A thread of its own reads the pipe, so the child never blocks on a full pipe and a test can wait for a
    line without reading the stream itself.
    """

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None, "the child's output must be a pipe"
        self._stream = stream
        self._lock = threading.Lock()
        self._lines: list[tuple[float, str]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._stream:
            with self._lock:
                self._lines.append((time.time(), line))

    def first_time(self, fragment: str) -> float | None:
        """When the first line holding ``fragment`` arrived; None: none has (yet)."""
        with self._lock:
            return next((at for at, line in self._lines if fragment in line), None)

    def wait_for(self, fragment: str, timeout_s: float) -> bool:
        """Block until a line holding ``fragment`` has arrived (True), or until ``timeout_s`` passed or the
        output ended without one (False)."""
        deadline = time.monotonic() + timeout_s
        while self.first_time(fragment) is None:
            if time.monotonic() >= deadline or not self._reader.is_alive():
                return self.first_time(fragment) is not None
            time.sleep(0.1)
        return True

    def text(self, timeout_s: float = 20.0) -> str:
        """Everything printed, once the output has ended (waiting at most ``timeout_s`` for its end)."""
        self._reader.join(timeout_s)
        with self._lock:
            return "".join(line for _, line in self._lines)
