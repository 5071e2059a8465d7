"""The live progress line of a running activity (workload.cli.progress) and its wiring in the reporter."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from workload.actions.loadgen_executor import expected_marker, expected_seconds
from workload.cli.console import ConsoleReporter
from workload.cli.progress import ActivityTicker, clock, split_expected
from workload.loadgen.settings import RunSettings


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_expected_marker_round_trips() -> None:
    assert split_expected(f"LoadGen Server PerformanceOnly {expected_marker(12.4)}") == (
        "LoadGen Server PerformanceOnly",
        12.0,
    )
    assert split_expected("Actions[0] LoadGenExecutor") == ("Actions[0] LoadGenExecutor", None)
    assert clock(67) == "1:07" and clock(-3) == "0:00"


def test_expected_time_follows_loadgen_rules() -> None:
    settings = RunSettings(min_duration_ms=5000, find_peak_performance=True, sample_count=512)
    offline = expected_seconds("Offline", "PerformanceOnly", settings, {})
    assert offline >= 5.0 + 3.0  # min_duration, start-up and find-performance
    # Server: 500 queries at 0.4 x the Offline rate take longer than min_duration on a slow machine
    server = expected_seconds("Server", "PerformanceOnly", settings, {"Offline": 25.0})
    assert server >= 500 / 10.0
    # Accuracy: every sample twice at the measured Offline rate
    accuracy = expected_seconds("Offline", "AccuracyOnly", settings, {"Offline": 100.0})
    assert accuracy >= 2 * 512 / 100.0


def test_plain_lines_come_every_heartbeat_with_elapsed_and_expected() -> None:
    now = FakeClock()
    ticker = ActivityTicker(Console(file=io.StringIO()), live=False, heartbeat_s=15, now=now)
    ticker._ensure_thread = lambda: None  # type: ignore[method-assign]  # drive beats() by hand
    ticker.start("local", "LoadGen Server PerformanceOnly (expected ~40s)")
    now.t += 10
    assert ticker.beats() == []
    now.t += 6
    assert ticker.beats() == ["[local] ... LoadGen Server PerformanceOnly: 16s elapsed, expected ~40s"]
    assert ticker.beats() == []  # one per heartbeat
    now.t += 100
    shown = ticker.describe(ticker._current["local"])
    assert shown.startswith("[local] LoadGen Server PerformanceOnly  1:56 of ~0:40") and "longer than expected" in shown
    ticker.stop("local")
    now.t += 30
    assert ticker.beats() == []


def test_a_terminal_gets_a_live_line_and_markup_is_shown_literally() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    with ActivityTicker(console, live=True) as ticker:
        ticker.start("local", "[red]LoadGen[/red] Offline (expected ~5s)")
        time.sleep(0.6)
        # the elapsed time is whatever this machine took; the markup must come through as text
        assert re.search(r"\[red\]LoadGen\[/red\] Offline  0:\d\d of ~0:05", ticker.render().plain)
    assert "[red]LoadGen[/red] Offline" in out.getvalue()


def test_the_reporter_starts_an_activity_per_announced_part_and_stops_it_with_the_step() -> None:
    console = Console(file=io.StringIO(), width=120)
    reporter = ConsoleReporter(console, hosts=["local"])
    assert reporter.ticker is not None and not reporter.ticker.live_mode
    with reporter:
        reporter.line("local", "-> LoadGen Offline PerformanceOnly -> results/x (expected ~9s)")
        activity = reporter.ticker._current["local"]
        assert activity.label == "LoadGen Offline PerformanceOnly -> results/x" and activity.expected_s == 9.0
    assert ConsoleReporter(console, hosts=["local"], planning=True).ticker is None


def test_the_plain_line_thread_prints_while_an_activity_runs() -> None:
    out = io.StringIO()
    with ActivityTicker(Console(file=out, width=200), live=False, heartbeat_s=0.2) as ticker:
        ticker.start("vm-1", "[bold]LoadGen[/] Offline PerformanceOnly (expected ~9s)")
        deadline = time.monotonic() + 30
        while out.getvalue().count("\n") < 2:  # two heartbeats, however late a loaded machine runs the thread
            assert time.monotonic() < deadline, f"no heartbeat line while the activity ran: {out.getvalue()!r}"
            time.sleep(0.05)
        ticker.stop("vm-1")
        printed = out.getvalue()
        time.sleep(0.5)
    lines = printed.splitlines()
    assert lines and all(line.startswith("[vm-1] ... [bold]LoadGen[/] Offline PerformanceOnly: ") for line in lines)
    assert lines[0].endswith("s elapsed, expected ~9s")
    assert out.getvalue() == printed  # nothing after the activity stopped
