"""Ctrl-C and SIGTERM stop a whole run, with real processes.

``workload run --profile PERF-CPU-MLPERF`` runs as its own process; once its first LoadGen run is
going, the test sends SIGINT or SIGTERM to it (as a terminal or ``timeout``/``docker stop`` would)
and checks: exit 130 within 10 s, no benchmark process left, no later scenario started, run.json
and summary.json say interrupted (summary never "ok").
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import workload

ROOT = Path(workload.__file__).resolve().parent.parent


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (this test's own process excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_the_cpu_profile_stops_the_whole_run(tmp_path: Path, signum: int) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKLOAD_STATE_PATH": str(tmp_path / "state.json")}
    argv = [
        sys.executable,
        "-m",
        "workload",
        "run",
        "--profile",
        "PERF-CPU-MLPERF",
        "--parameters",
        "Scenarios=Offline,Server,SingleStream,,,TestModes=PerformanceOnly,,,MinDurationMs=60000,,,"
        "FindPeakPerformance=false,,,OfflineTargetQps=50,,,ServerTargetQps=20,,,SampleCount=64",
        "--output-dir",
        str(runs),
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The first LoadGen run is going once its runner process exists.
        wait_for(lambda: bool(processes_mentioning(f"{runs}/") and list(runs.glob("*/local/*.log"))), 60, "a runner")
        wait_for(lambda: bool(processes_mentioning("workload.loadgen.runner")), 60, "the LoadGen runner")
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert took < 10
    (folder,) = runs.iterdir()
    assert not processes_mentioning(str(folder)), "a benchmark process outlived the run"
    # Nothing after the interrupted scenario started.
    started = sorted(p.name for p in (folder / "local" / "results" / "loadgen").glob("*/*"))
    assert started == ["Offline"], started
    log = next((folder / "local").glob("*LoadGenExecutor*.log")).read_text()
    assert "LoadGen Server" not in log and "LoadGen SingleStream" not in log
    run = json.loads((folder / "run.json").read_text())
    assert run["outcomes"][0]["status"] == "interrupted"
    assert run["outcomes"][0]["steps"][-1]["status"] == "interrupted"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["verdict"]["ok"] is False
    assert "run again to resume" not in out  # a re-run starts the LoadGen scenarios over
    assert "interrupted" in out
