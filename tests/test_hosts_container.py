"""The container host: commands in a running container through the outer host's own transport.

Real parts: the test bed's private dockerd, the real ``docker`` CLI run by a real
:class:`~workload.hosts.local.LocalHost` (or by an SSH login of a real local user on OpenSSH's
sshd), a real container of the fresh-VM image (Debian: sh, procps). Whether the in-container
process is gone is read from the daemon (``docker top``), not from what the host reports.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.test_mlperf_docker_errors import sleeper  # noqa: F401  (a fixture)
from tests.test_mlperf_exec_guard import wait_for
from tests.testbed.sshd import SshServer, local_user, ssh_host, sshd  # noqa: F401  (sshd is a fixture)
from workload.commands import Secret, cmd
from workload.errors import CommandFailed, CommandTimeout
from workload.hosts.container import ContainerHost, docker_needs_sudo
from workload.hosts.local import LocalHost

pytestmark = pytest.mark.slow


@pytest.fixture
def box(docker_engine: Any, sleeper: str) -> Iterator[tuple[ContainerHost, Any]]:  # noqa: F811
    """A running container and its host (as root; the image has no other user)."""
    name = f"workload-test-chost-{uuid.uuid4().hex[:10]}"
    container = docker_engine.client.containers.run(sleeper, name=name, detach=True)
    try:
        yield (
            ContainerHost(LocalHost("ctl"), name, user="0:0", workdir="/tmp", docker_url=docker_engine.base_url),
            container,
        )
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)


def processes(container: Any) -> str:
    return str(container.top(ps_args="-eo pid,stat,args")["Processes"])


def running(container: Any, marker: str) -> bool:
    """Whether a live (not zombie) process of the container has ``marker`` in its arguments."""
    for _pid, stat, args in container.top(ps_args="-eo pid,stat,args")["Processes"]:
        if marker in args and not stat.startswith("Z"):
            return True
    return False


def test_a_command_in_the_container_gives_a_result(box: tuple[ContainerHost, Any]) -> None:
    host, _container = box
    result = host.run(cmd("sh", "-c", "pwd; id -u; echo err >&2; exit 3", timeout=60))
    assert result.host == f"ctl/{host.container}"
    assert result.returncode == 3
    assert result.stdout == "/tmp\n0\n"  # the working directory and user given to docker exec
    assert result.stderr == "err\n"
    assert result.argv == ("sh", "-c", "pwd; id -u; echo err >&2; exit 3")


def test_stdin_env_and_cwd_reach_the_command(box: tuple[ContainerHost, Any]) -> None:
    host, _container = box
    result = host.check(
        cmd(
            "sh",
            "-c",
            'cat; echo "$GREETING"; pwd',
            input="from stdin\n",
            env={"GREETING": "hi there"},
            cwd="/etc",
            timeout=60,
        )
    )
    assert result.stdout == "from stdin\nhi there\n/etc\n"


def test_files_move_through_commands(box: tuple[ContainerHost, Any]) -> None:
    host, _container = box
    data = bytes(range(256)) * 10
    host.write_bytes("/tmp/some file", data, mode=0o600)
    assert host.read_bytes("/tmp/some file") == data
    assert host.exists("/tmp/some file") and not host.exists("/tmp/nothing here")
    assert host.check(cmd("stat", "-c", "%a", "/tmp/some file", timeout=60)).stdout == "600\n"
    with pytest.raises(FileNotFoundError):
        host.read_bytes("/tmp/nothing here")


def test_a_failing_command_raises_command_failed_with_its_fields(box: tuple[ContainerHost, Any]) -> None:
    host, _container = box
    token = Secret("hunter2-token")
    with pytest.raises(CommandFailed) as info:
        host.check(cmd("sh", "-c", 'echo "using $1"; echo line-2; exit 7', "x", token, timeout=60))
    failed = info.value
    assert failed.returncode == 7
    assert failed.argv == ("sh", "-c", 'echo "using $1"; echo line-2; exit 7', "x", "***")
    assert "hunter2" not in failed.stdout and "using ***" in failed.stdout  # masked as it streamed
    assert "line-2" in failed.tail and "hunter2" not in str(failed)
    assert failed.host == host.name


def test_output_streams_line_by_line_as_it_comes(box: tuple[ContainerHost, Any]) -> None:
    host, container = box
    seen: list[tuple[float, str]] = []
    marker = f"sleep 3{uuid.uuid4().int % 1000}.5"
    started = time.monotonic()

    def sink(stream: str, line: str) -> None:
        seen.append((time.monotonic() - started, line))

    runner = threading.Thread(
        target=host.run,
        args=(cmd("sh", "-c", f"echo first; {marker}; echo second", timeout=120),),
        kwargs={"on_line": sink},
    )
    runner.start()
    try:
        assert wait_for(lambda: running(container, marker), 30)
        # The command is still sleeping and its first line is already here.
        assert [line for _t, line in seen] == ["first"]
    finally:
        host.interrupt(grace_s=2)
        runner.join(30)


def test_a_timeout_stops_the_process_in_the_container(box: tuple[ContainerHost, Any]) -> None:
    host, container = box
    marker = f"sleep 6{uuid.uuid4().int % 1000}.5"
    with pytest.raises(CommandTimeout) as info:
        host.check(cmd("sh", "-c", f"echo started; {marker}; echo never", timeout=3))
    assert info.value.returncode is None  # killed at its timeout, no exit code of its own
    assert "started" in info.value.stdout and "never" not in info.value.stdout
    # The outer transport killed the docker client; the container host ended the process itself.
    assert wait_for(lambda: not running(container, marker), 10), processes(container)
    assert container.reload() is None and container.status == "running"  # only the command was ended


def test_an_interrupt_stops_the_process_in_the_container_within_its_grace(box: tuple[ContainerHost, Any]) -> None:
    host, container = box
    marker = f"sleep 6{uuid.uuid4().int % 1000}.5"
    # The command ignores SIGTERM, so only the SIGKILL after the grace period ends it.
    script = f"trap '' TERM; echo started; {marker}"
    results: list[Any] = []
    runner = threading.Thread(target=lambda: results.append(host.run(cmd("sh", "-c", script, timeout=300))))
    runner.start()
    try:
        assert wait_for(lambda: running(container, marker), 30)
        began = time.monotonic()
        host.interrupt(grace_s=2)
        runner.join(10)
        took = time.monotonic() - began
    finally:
        host.interrupt(grace_s=0)
        runner.join(10)
    assert not runner.is_alive()
    assert not running(container, marker), processes(container)
    # The exec'd shell dies of the SIGTERM (128+15); the sleep that ignores it only of the SIGKILL.
    assert results and results[0].returncode == 143
    assert took < 10.0  # the project's bound on stopping


def test_a_term_to_the_client_on_the_outer_host_stops_the_process(box: tuple[ContainerHost, Any]) -> None:
    """What an SSH host's watchdog does when the connection drops: TERM the command's group there."""
    host, container = box
    outer = host.outer
    assert isinstance(outer, LocalHost)
    marker = f"sleep 6{uuid.uuid4().int % 1000}.5"
    runner = threading.Thread(target=host.run, args=(cmd("sh", "-c", f"{marker}", timeout=300),))
    runner.start()
    try:
        assert wait_for(lambda: running(container, marker), 30)
        outer.interrupt(grace_s=8)  # SIGTERM to the group of `docker exec` on the outer host, nothing else
        assert wait_for(lambda: not running(container, marker), 10), processes(container)
    finally:
        host.interrupt(grace_s=0)
        runner.join(10)


def test_a_ctrl_c_stops_a_command_once_though_it_reaches_it_twice(box: tuple[ContainerHost, Any]) -> None:
    """Ctrl-C reaches a container command through its container host (a stop hook of the outer host,
    as the MLPerf interpreter registers it) and through its guard (the outer host TERMs it): the
    command is stopped, no stop is left running in the container, and a stop that comes after the
    first has ended does nothing (it does not wait for, or signal,
    a process whose group id the pid file holds afterwards)."""
    host, container = box
    outer = host.outer
    marker = f"sleep 6{uuid.uuid4().int % 1000}.5"
    runner = threading.Thread(target=host.run, args=(cmd("sh", "-c", marker, timeout=300),))
    runner.start()
    try:
        assert wait_for(lambda: running(container, marker), 30)
        (pidfile,) = host._running.values()
        with outer.on_interrupt(host.interrupt):
            outer.interrupt(grace_s=2)
        runner.join(10)
        assert not runner.is_alive()
        # Bounded waits, not "at once": on a loaded machine a docker exec can take longer to start than the
        # interrupt waits for its stop hooks; what is judged is that everything ends and nothing is stopped twice.
        assert wait_for(lambda: not running(container, marker), 30), processes(container)
        assert wait_for(lambda: not running(container, "workload-stop"), 30), processes(container)
    finally:
        host.interrupt(grace_s=0)
        runner.join(10)
    # A late stop of the same command (a guard TERMed after the command ended): the pid file now
    # names another group, which must be left alone, and the file with it.
    other = f"sleep 7{uuid.uuid4().int % 1000}.5"
    container.exec_run(["sh", "-c", f"echo $$ > {pidfile}.new; exec {other}"], detach=True)
    assert wait_for(lambda: running(container, other), 30)
    assert container.exec_run(["mv", f"{pidfile}.new", pidfile]).exit_code == 0
    outer.run(cmd(*host.stop_argv(pidfile, 0.5), timeout=60))
    assert running(container, other), processes(container)
    assert container.exec_run(["test", "-s", pidfile]).exit_code == 0


def test_the_stop_a_ctrl_c_runs_is_not_itself_stopped_by_the_ctrl_c(
    box: tuple[ContainerHost, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container host's stop runs as a stop hook of the outer host, beside the outer host's own
    stopping of every command it runs: that must not kill the stop's ``docker exec`` before it has
    reached the container (seen beside a busy core, where a ``docker exec`` took seconds to start:
    the harness ran on after the run had exited). Here the ``docker`` CLI on PATH is slow to start
    a stop, and the outer host's interrupt comes while the stop is starting."""
    host, container = box
    outer = host.outer
    real = shutil.which("docker")
    assert real is not None
    starting = tmp_path / "stop-starting"
    wrapper = tmp_path / "bin" / "docker"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *workload-stop*) : > {starting}; sleep 3;; esac\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    marker = f"sleep 6{uuid.uuid4().int % 1000}.5"
    runner = threading.Thread(target=host.run, args=(cmd("sh", "-c", marker, timeout=300),))
    runner.start()
    try:
        assert wait_for(lambda: running(container, marker), 30)
        stopper = threading.Thread(target=host.interrupt, kwargs={"grace_s": 2})
        stopper.start()
        assert wait_for(starting.exists, 30)
        outer.interrupt(grace_s=0.5)  # what a Ctrl-C does to the outer host's own commands meanwhile
        stopper.join(30)
        runner.join(30)
        assert wait_for(lambda: not running(container, marker), 30), processes(container)
    finally:
        monkeypatch.undo()
        host.interrupt(grace_s=0)
        runner.join(10)


def test_root_commands_go_through_as_root(docker_engine: Any, box: tuple[ContainerHost, Any]) -> None:
    host, _container = box
    nobody = ContainerHost(host.outer, host.container, user="65534:65534", docker_url=docker_engine.base_url)
    assert nobody.check(cmd("id", "-u", timeout=60)).stdout == "65534\n"
    with pytest.raises(ValueError, match="as_root"):
        nobody.run(cmd("id", "-u", sudo=True, timeout=60))
    assert nobody.as_root().check(cmd("id", "-u", sudo=True, timeout=60)).stdout == "0\n"


def test_root_reaches_the_socket_without_sudo(docker_engine: Any) -> None:
    outer = LocalHost("ctl")
    assert outer.is_root  # the test bed runs as root (its docker_engine fixture needs it)
    assert docker_needs_sudo(outer, docker_engine.base_url) is False
    assert docker_needs_sudo(outer, "tcp://127.0.0.1:2375") is False


def test_over_ssh_as_a_user_who_needs_sudo_with_a_password(
    sshd: SshServer,  # noqa: F811
    docker_engine: Any,
    box: tuple[ContainerHost, Any],
) -> None:
    """The outer host is an SSH login of a user who may not open the Docker socket and whose sudo asks
    for a password: the ``docker`` CLI runs through ``sudo -S`` there, the password first on stdin, the
    command's own stdin after it; a timeout still ends the process in the container."""
    _local, container = box
    with local_user(sudo="password") as user:
        outer = ssh_host(sshd, user=user.name, sudo_password=Secret(user.password))
        try:
            host = ContainerHost(outer, container.name, user="0:0", docker_url=docker_engine.base_url)
            assert host.docker_sudo() is True  # decided on the SSH host: the socket is root's
            result = host.check(cmd("sh", "-c", "cat; echo pw=$1", "x", input="own stdin\n", timeout=60))
            assert result.stdout == "own stdin\npw=\n"  # sudo took its line; the command got the rest
            assert user.password not in result.stdout + result.stderr
            marker = f"sleep 6{uuid.uuid4().int % 1000}.5"
            with pytest.raises(CommandTimeout):
                host.check(cmd("sh", "-c", marker, timeout=3))
            assert wait_for(lambda: not running(container, marker), 10), processes(container)
        finally:
            outer.close()
