"""Ctrl-C and SIGTERM stop a whole run, with real processes.

``workload run --profile PERF-CPU-MLPERF`` runs as its own process; once its first LoadGen run is
going, the test sends SIGINT or SIGTERM to it (as a terminal or ``timeout``/``docker stop`` would)
and checks: exit 130 within 10 s, no benchmark process left, no later scenario started, run.json
and summary.json say interrupted (summary never "ok").
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import workload
from tests.processes import processes
from tests.test_mlperf_cli import bed  # noqa: F401  (fixture)
from tests.testbed.sshd import SshServer, fresh_sshd, ssh_host  # noqa: F401  (fixture)
from workload.commands import cmd
from workload.interrupts import INTERRUPT_TIMEOUT_S, KILL_GRACE_S
from workload.rundir import remote_run_name

ROOT = Path(workload.__file__).resolve().parent.parent
#: How long a stop may take by the code's own bounds: SIGTERM, the kill grace, the kill commands' timeout.
STOP_BOUND_S = KILL_GRACE_S + INTERRUPT_TIMEOUT_S


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


def running_commands() -> set[str]:
    """The command lines of every process (arguments joined by spaces)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found.add((entry / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace"))
    return found


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize(
    ("signum", "over_ssh"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["SIGINT", "SIGTERM", "SIGTERM-ssh"],
)
def test_signal_during_the_cpu_profile_stops_the_whole_run(
    tmp_path: Path, signum: int, over_ssh: bool, request: pytest.FixtureRequest
) -> None:
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKLOAD_STATE_PATH": str(tmp_path / "state.json")}
    host: list[str] = []
    profile = tmp_path / "unused"
    if over_ssh:
        server: SshServer = request.getfixturevalue("fresh_sshd")
        host = ["--host", f"ssh://root@127.0.0.1:{server.port}", "-i", str(server.user_key)]
        host += ["--known-hosts", str(server.known_hosts)]
        # The "remote" host is this machine: its runner is this interpreter (which has workload[cpu]).
        document = json.loads((ROOT / "profiles" / "PERF-CPU-MLPERF.json").read_text())
        document["Actions"][0]["Parameters"]["Python"] = sys.executable
        profile = tmp_path / "PERF-CPU-MLPERF-ssh.json"
        profile.write_text(json.dumps(document))
    argv = [
        sys.executable,
        "-m",
        "workload",
        "run",
        "--profile",
        str(profile) if over_ssh else "PERF-CPU-MLPERF",
        "--parameters",
        "Scenarios=Offline,Server,SingleStream,,,TestModes=PerformanceOnly,,,MinDurationMs=60000,,,"
        "FindPeakPerformance=false,,,OfflineTargetQps=50,,,ServerTargetQps=20,,,SampleCount=64",
        "--output-dir",
        str(runs),
        *host,
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The first LoadGen run is going once its runner process exists (over SSH: a child of sshd).
        wait_for(lambda: bool(list(runs.glob("*/*/*LoadGenExecutor*.log"))), 60, "the LoadGen step")
        (folder,) = runs.iterdir()
        wait_for(
            lambda: bool(
                processes_mentioning(
                    f"/.local/state/workload/nodes/{socket.gethostname()}/loadgen/{remote_run_name(folder)}/"
                )
                or processes_mentioning(f"--out {folder}/")
            ),
            60,
            "the LoadGen runner",
        )
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=STOP_BOUND_S)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert took < STOP_BOUND_S
    # Killed processes take a moment to be reaped (over SSH: by sshd's session after the channel closed).
    # This run's own processes only: a run id is unique per output folder, and a test running beside this one (the
    # other signal) may have started a run in the same second under the same id.
    mine = remote_run_name(folder) if over_ssh else str(folder)
    wait_for(lambda: not processes_mentioning(mine), 3, "every benchmark process to end")
    # the host's folder (telemetry/ holds what the monitor sampled meanwhile)
    (host_dir,) = [p for p in folder.iterdir() if p.is_dir() and p.name != "telemetry"]
    log = next(host_dir.glob("*LoadGenExecutor*.log")).read_text()
    # Nothing after the interrupted scenario started.
    assert "LoadGen Server" not in log and "LoadGen SingleStream" not in log
    run = json.loads((folder / "run.json").read_text())
    assert run["outcomes"][0]["status"] == "interrupted"
    assert run["outcomes"][0]["steps"][-1]["status"] == "interrupted"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["verdict"]["ok"] is False
    assert "run again to resume" not in out  # a re-run starts the LoadGen scenarios over
    assert "interrupted" in out


def test_a_lost_ssh_connection_takes_the_remote_command_with_it(request: pytest.FixtureRequest) -> None:
    """No pty means sshd sends no SIGHUP: the wrapper's watchdog must kill the command's group."""
    import threading

    server: SshServer = request.getfixturevalue("fresh_sshd")
    marker = f"{time.time_ns() % 1000}.{os.getpid() % 1000}"
    host = ssh_host(server)
    host.connect()
    done = threading.Event()

    def run_it() -> None:
        with contextlib.suppress(Exception):  # the connection is gone: the call says so; the test checks the host
            host.run(cmd("sh", "-c", f"sleep 3{marker} & wait", timeout=120))
        done.set()

    threading.Thread(target=run_it, daemon=True).start()
    sleeping = f"sleep 3{marker}"
    wait_for(lambda: sleeping in running_commands(), 20, "the remote command")
    transport = host._client.get_transport() if host._client else None
    assert transport is not None
    transport.sock.close()  # the client vanishes (crash, kill -9, network cut with an RST)
    wait_for(lambda: sleeping not in running_commands(), 10, "the remote command to die with its session")
    host.close()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_a_harness_run_in_the_container(request: pytest.FixtureRequest, signum: int) -> None:
    """The stand-in harness (test bed container) is in a long ``make run_harness``: stop everything."""
    from tests.test_mlperf_cli import PROFILE, Bed

    testbed: Bed = request.getfixturevalue("bed")
    (testbed.scratch / "standin_run_harness_sleep").write_text("393.5")
    started = testbed.scratch / "standin_run_harness_started"
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(PROFILE), "--parameters"]
    argv += [testbed.parameters + ",,,TestModes=PerformanceOnly,AccuracyOnly", "--output-dir", str(testbed.runs)]
    env = {**os.environ, "WORKLOAD_STATE_PATH": str(testbed.state), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        wait_for(lambda: started.exists() and bool(processes("sleep 393.5")), 300, "the harness run")
        sent = time.monotonic()
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=STOP_BOUND_S)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and took < STOP_BOUND_S, out
    wait_for(lambda: not processes("sleep 393.5"), 3, "the harness to end")
    (folder,) = testbed.runs.iterdir()
    (outcome,) = json.loads((folder / "run.json").read_text())["outcomes"]
    assert outcome["status"] == "interrupted" and outcome["steps"][-1]["status"] == "interrupted"
    runs = [line for line in testbed.calls() if line.startswith("run_harness ")]
    assert len(runs) == 1 and "PerformanceOnly" in runs[0]  # no AccuracyOnly run started after the stop
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["verdict"]["ok"] is False
