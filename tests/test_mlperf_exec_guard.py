"""A harness ``docker exec`` run by an SSH host's transport dies with the SSH connection.

Real parts: OpenSSH's sshd on 127.0.0.1 (its session ends when the client's socket goes), the
test bed's private dockerd (its lifecycle reached over that connection with ``docker system
dial-stdio``; the commands run as ``docker exec`` by the real ``docker`` CLI on the SSH host), a
real container and exec. The connection is cut the way a crash or a network cut does it (the
client's socket closed under paramiko). dockerd keeps an exec'd process running when its client
dies (nothing signals it); the container host's guard on the SSH host, TERMed by the SSH
wrapper's watchdog, ends it within seconds.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.test_mlperf_docker_errors import sleeper, spec  # noqa: F401  (sleeper is a fixture)
from tests.testbed.sshd import SshServer, fresh_sshd, ssh_host  # noqa: F401  (fixture)
from workload.hosts.guard import DETACHED, guarded_argv
from workload.mlperf.container import HarnessContainer
from workload.mlperf.docker_ssh import connect_over_host

pytestmark = pytest.mark.slow


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def test_a_lost_connection_ends_the_exec_in_the_container(
    fresh_sshd: SshServer,  # noqa: F811
    docker_engine: Any,
    sleeper: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    if shutil.which("docker") is None:
        pytest.skip("needs the docker CLI (docker system dial-stdio) on this machine")
    direct = docker_engine.client  # the test's own view of the daemon, not over SSH
    name = f"workload-test-guard-{uuid.uuid4().hex[:10]}"
    host = ssh_host(fresh_sshd)
    client = connect_over_host(host, docker_engine.base_url)
    box = HarnessContainer(
        client, spec(name, sleeper, tmp_path), lambda line: None, outer=host, docker_url=docker_engine.base_url
    )
    box.ensure_running()
    marker = f"sleep 4{uuid.uuid4().int % 1000}.5"

    def in_container() -> bool:
        return marker in str(direct.containers.get(name).top(ps_args="-eo pid,args")["Processes"])

    def harness() -> None:
        with contextlib.suppress(Exception):  # the connection goes: the exec fails, the test checks the container
            box.exec(["sh", "-c", f"echo started; {marker}"], on_line=None)

    runner = threading.Thread(target=harness, daemon=True)
    try:
        runner.start()
        assert wait_for(in_container, 30), "the exec did not start"
        transport = host._client.get_transport() if host._client else None
        assert transport is not None
        transport.sock.close()  # the client vanishes: crash, kill -9, network cut
        assert wait_for(lambda: not in_container(), 15), "the exec'd process still runs in the container"
        assert direct.containers.get(name).status == "running"  # only the exec'd processes were ended
    finally:
        with contextlib.suppress(Exception):
            direct.containers.get(name).remove(force=True)
        host.close()
        runner.join(10)


@pytest.mark.parametrize("detached", [False, True], ids=["guard", "detached-stop"])
def test_the_guard_runs_its_stop_when_its_output_pipe_is_gone(detached: bool, tmp_path: Path) -> None:
    """The watchdog TERMs the guard's whole group after the channel died: its stdout/stderr pipe
    has no reader then. The guard must still run its stop line (a shell that writes to the dead
    pipe first, e.g. dash's "Terminated" report, dies of SIGPIPE before its trap). The detached stop (a
    Slurm node's, run in a session of its own) too. Real sh, real signals."""
    stopped = tmp_path / "stopped"
    stop = f"touch {stopped}"
    if detached:
        stop = shlex.join(["sh", "-c", DETACHED, "stop", stop])
    guard = subprocess.Popen(
        guarded_argv(stop, ["sh", "-c", "echo ready; exec sleep 30"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert guard.stdout is not None
        assert guard.stdout.readline().strip() == b"ready"
        guard.stdout.close()  # the channel is gone: nobody reads the pipe any more
        os.killpg(guard.pid, signal.SIGTERM)  # the watchdog's TERM to the group
        guard.wait(10)
        assert wait_for(stopped.exists, 10), f"the stop never ran (guard exit status {guard.returncode})"
        assert guard.returncode == 143
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(guard.pid, signal.SIGKILL)


def test_the_guard_passes_stdin_and_the_exit_code_on(tmp_path: Path) -> None:
    """Without a signal the guard is transparent: the command reads the guard's stdin, its exit code is the guard's."""
    stopped = tmp_path / "stopped"
    done = subprocess.run(
        guarded_argv(f"touch {stopped}", ["sh", "-c", "cat; exit 5"]),
        input=b"through\n",
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (5, b"through\n")
    assert not stopped.exists()
