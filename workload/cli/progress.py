"""A live line for what one host is doing now: label, elapsed time, expected time.

A single-host run used to print "-> LoadGen Server PerformanceOnly" and then nothing for the
length of the test. :class:`ActivityTicker` shows the running activity (a step, or a part of it
that announced itself with a ``-> ...`` line) with its elapsed time and, when the line ends with
``(expected ~12s)`` (:func:`workload.actions.loadgen_executor.expected_marker`), the expected time:

* on a terminal, one transient live line redrawn twice a second
  (``⠹ [local] LoadGen Server PerformanceOnly  0:07 of ~0:12``);
* elsewhere (CI logs, pipes), a plain line every :data:`HEARTBEAT_S` seconds while it runs
  (``[local] ... LoadGen Server PerformanceOnly: 30s elapsed, expected ~12s``), never a redraw.

Thread-safe; the text shown is printed literally (no rich markup).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

#: Seconds between the plain progress lines when the console is not a terminal.
HEARTBEAT_S = 15.0
_EXPECTED = re.compile(r"\s*\(expected ~(\d+(?:\.\d+)?)s\)\s*$")


def split_expected(text: str) -> tuple[str, float | None]:
    """``"LoadGen Offline (expected ~12s)"`` -> ``("LoadGen Offline", 12.0)``; no marker: ``(text, None)``."""
    match = _EXPECTED.search(text)
    if match is None:
        return text, None
    return text[: match.start()], float(match.group(1))


def clock(seconds: float) -> str:
    """``67`` -> ``1:07``."""
    whole = max(int(seconds), 0)
    return f"{whole // 60}:{whole % 60:02d}"


@dataclass
class Activity:
    host: str
    label: str
    expected_s: float | None
    started: float
    last_beat: float


class ActivityTicker:
    """Shows the current activity of each host (see the module docstring)."""

    def __init__(
        self,
        console: Console,
        *,
        live: bool | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.live_mode = console.is_terminal if live is None else live
        self.heartbeat_s = heartbeat_s
        self.now = now
        self._lock = threading.Lock()
        self._current: dict[str, Activity] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._spinner = Spinner("dots")

    def start(self, host: str, text: str) -> None:
        """``host`` now does ``text`` (which may end with an ``(expected ~Ns)`` marker)."""
        label, expected = split_expected(text)
        with self._lock:
            at = self.now()
            self._current[host] = Activity(host, label.strip(), expected, at, at)
        self._ensure_thread()

    def stop(self, host: str) -> None:
        with self._lock:
            self._current.pop(host, None)
        if self._live is not None:
            self._live.update(self.render(), refresh=True)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> ActivityTicker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- rendering ---------------------------------------------------------------------------------
    def describe(self, activity: Activity, *, at: float | None = None) -> str:
        """``[local] LoadGen Server PerformanceOnly  0:07 of ~0:12`` (plain text)."""
        elapsed = (self.now() if at is None else at) - activity.started
        text = f"[{activity.host}] {activity.label}  {clock(elapsed)}"
        if activity.expected_s is not None:
            text += f" of ~{clock(activity.expected_s)}"
            if elapsed > activity.expected_s * 1.5 + 10:
                text += " (taking longer than expected: a busy machine?)"
        return text

    def render(self) -> Text:
        with self._lock:
            lines = [self.describe(a) for a in self._current.values()]
        return Text("\n".join(lines)) if lines else Text("")

    def beats(self) -> list[str]:
        """The plain lines due now (non-terminal mode): one per activity every ``heartbeat_s``."""
        out: list[str] = []
        with self._lock:
            at = self.now()
            for activity in self._current.values():
                if at - activity.last_beat >= self.heartbeat_s:
                    activity.last_beat = at
                    elapsed = at - activity.started
                    line = f"[{activity.host}] ... {activity.label}: {elapsed:.0f}s elapsed"
                    if activity.expected_s is not None:
                        line += f", expected ~{activity.expected_s:.0f}s"
                    out.append(line)
        return out

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        if self.live_mode:
            self._live = Live(
                _LiveView(self), console=self.console, transient=True, refresh_per_second=4, auto_refresh=True
            )
            self._live.start()
            self._thread = threading.Thread(target=self._stop.wait, daemon=True)  # the Live refreshes itself
        else:
            self._thread = threading.Thread(target=self._beat_loop, name="workload-progress", daemon=True)
        self._thread.start()

    def _beat_loop(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s)):
            for line in self.beats():
                self.console.print(line, markup=False, highlight=False)


class _LiveView:
    """What the Live display draws on each refresh: a spinner and the activities."""

    def __init__(self, ticker: ActivityTicker) -> None:
        self.ticker = ticker

    def __rich__(self) -> Text:
        body = self.ticker.render()
        if not body.plain:
            return body
        frame = self.ticker._spinner.render(time.monotonic())
        head = frame if isinstance(frame, Text) else Text(str(frame))
        return Text.assemble(head, " ", body)
