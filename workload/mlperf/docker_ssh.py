"""A docker SDK client that reaches an SSH host's daemon over that host's own, verified SSH connection.

docker-py's ``ssh://`` transport opens a second SSH connection of its own: paramiko with
``~/.ssh/config`` and the system known_hosts only, so it ignores ``-i``, ``--known-hosts``, an
inventory's ``key=``, the sudo password, and needs the SSH user in the ``docker`` group. Its
paramiko mode does no more than open a session channel running ``docker system dial-stdio`` and
speak HTTP over it (``docker.transport.sshconn``).

This module does the same on the channel of the :class:`~workload.hosts.ssh.SshHost` every other
command uses (same keys, same host-key verification, no second login), and runs the dial through
``sudo`` (with the host's password rule) when the SSH user cannot open the daemon's socket. Each
HTTP connection of the client is one ``dial-stdio`` channel.
"""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import paramiko
from docker.transport.basehttpadapter import BaseHTTPAdapter
from docker.transport.sshconn import SSHConnection, SSHConnectionPool

from workload.commands import cmd
from workload.errors import ConnectError
from workload.hosts.base import Host

#: The daemon socket ``docker`` uses when DOCKER_HOST is not set.
DEFAULT_SOCKET = "/var/run/docker.sock"
#: The pseudo base URL docker-py uses for channel transports (its ``_get_raw_response_socket``
#: then takes the paramiko channel under a response for attach/exec streams).
BASE_URL = "http+docker://ssh"

Dial = Callable[[float | None], paramiko.Channel]


class _ChannelFile:
    """http.client's response file on a channel, reading no byte beyond what it is asked for.

    docker-py reads attach/exec streams from the raw channel under a response (``fp.channel``)
    once the headers are parsed. A buffered file (paramiko's ``makefile``) reads ahead while
    parsing the headers, and the first bytes of the stream would be lost in its buffer; so lines
    are read byte by byte, and ``read(n)`` / ``readinto`` wait for exactly n bytes (or the end).
    """

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel
        self.closed = False

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.channel.fileno()

    def readline(self, limit: int = -1) -> bytes:
        line = bytearray()
        while limit < 0 or len(line) < limit:
            byte = self.channel.recv(1)
            if not byte:
                break
            line += byte
            if byte == b"\n":
                break
        return bytes(line)

    def read(self, size: int | None = -1) -> bytes:
        data = bytearray()
        while size is None or size < 0 or len(data) < size:
            chunk = self.channel.recv(65536 if size is None or size < 0 else min(65536, size - len(data)))
            if not chunk:
                break
            data += chunk
        return bytes(data)

    def read1(self, size: int = -1) -> bytes:
        return self.channel.recv(size if size > 0 else 65536)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True  # the channel belongs to the connection, which closes it


class _ChannelSocket:
    """A dial-stdio channel as the HTTP connection's socket (everything but ``makefile`` is the channel's)."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel

    def makefile(self, *args: Any, **kwargs: Any) -> _ChannelFile:
        return _ChannelFile(self.channel)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.channel, name)


class _DialConnection(SSHConnection):  # type: ignore[misc]  # docker-py is untyped
    """One HTTP connection = one ``docker system dial-stdio`` channel."""

    def __init__(self, dial: Dial, timeout: float | None) -> None:
        super().__init__(ssh_transport=None, timeout=timeout, host=None)
        self._dial = dial

    def connect(self) -> None:
        self.sock = _ChannelSocket(self._dial(self.timeout))


class _DialPool(SSHConnectionPool):  # type: ignore[misc]  # docker-py is untyped
    """docker-py's channel pool (it avoids urllib3's fileno()-based liveness check on channels)."""

    def __init__(self, dial: Dial, timeout: float | None, maxsize: int) -> None:
        super().__init__(ssh_client=None, timeout=timeout, maxsize=maxsize, host=None)
        self._dial = dial

    def _new_conn(self) -> _DialConnection:
        return _DialConnection(self._dial, self.timeout)


class _DialAdapter(BaseHTTPAdapter):  # type: ignore[misc]  # docker-py is untyped
    """A requests adapter whose connections are dial-stdio channels."""

    def __init__(self, dial: Dial, timeout: float | None, max_pool_size: int = 10) -> None:
        self._dial = dial
        self.timeout = timeout
        self.max_pool_size = max_pool_size
        self._pool: _DialPool | None = None
        self._pool_lock = threading.Lock()
        super().__init__()

    def get_connection(self, url: str, proxies: Any = None) -> _DialPool:
        with self._pool_lock:
            if self._pool is None:
                self._pool = _DialPool(self._dial, self.timeout, self.max_pool_size)
            return self._pool

    def close(self) -> None:
        super().close()
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None


class HostDialer:
    """Opens ``docker [-H unix://SOCKET] system dial-stdio`` channels on an SSH host's connection."""

    def __init__(self, host: Host, socket_path: str | None) -> None:
        self.host = host
        self.socket_path = socket_path
        self.sudo = self._needs_sudo()
        argv = ["docker"]
        if socket_path is not None:
            argv += ["-H", f"unix://{socket_path}"]
        argv += ["system", "dial-stdio"]
        # The same sudo wrapping as every other command (sudo -n, or -S with the password first on stdin).
        self.line, stdin = host.wrap(cmd(*argv, sudo=self.sudo))
        self._prefix = stdin or b""
        self._last: paramiko.Channel | None = None

    def _needs_sudo(self) -> bool:
        """Root, or a user who may open the socket (``docker`` group), dials directly; anyone else through sudo."""
        if self.host.is_root:
            return False
        path = self.socket_path or DEFAULT_SOCKET
        return not self.host.run(cmd("test", "-w", path, timeout=60)).ok

    def __call__(self, timeout: float | None) -> paramiko.Channel:
        channel: paramiko.Channel = self.host.exec_channel(self.line, timeout=timeout)
        if self._prefix:
            channel.sendall(self._prefix)
        self._last = channel
        return channel

    def last_error(self) -> str:
        """What the last dial printed on stderr (why the daemon could not be reached), if anything."""
        channel = self._last
        if channel is None:
            return ""
        data = b""
        while channel.recv_stderr_ready():
            data += channel.recv_stderr(65536)
        return data.decode("utf-8", "replace").strip()


def connect_over_host(
    host: Host, socket_url: str | None, *, timeout: int = 600, log: Callable[[str], None] | None = None
) -> Any:
    """A ``docker.DockerClient`` for the daemon on ``host``, over the host's SSH connection.

    ``socket_url``: ``unix:///path`` (that socket on the host) or None (the host's default).
    ``log`` gets one line saying how the daemon is reached. Raises
    :class:`~workload.errors.ConnectError` naming the host when the daemon cannot be reached.
    """
    import docker
    import requests

    socket_path = None
    if socket_url:
        if not socket_url.startswith("unix://"):
            raise ValueError(f"not a unix socket URL: {socket_url}")
        socket_path = "/" + socket_url.removeprefix("unix://").lstrip("/")
    dialer = HostDialer(host, socket_path)
    adapter = _DialAdapter(dialer, timeout)
    try:
        # The API version first (what version="auto" does), so the client is built with it.
        with requests.Session() as session:
            session.mount(BASE_URL, adapter)
            response = session.get(f"{BASE_URL}/version", timeout=timeout)
            response.raise_for_status()
            api_version = str(response.json()["ApiVersion"])
        client = docker.DockerClient(base_url="tcp://127.0.0.1:2375", version=api_version, timeout=timeout)
        client.api.close()  # its plain-HTTP adapters are never used
        client.api.mount(BASE_URL, adapter)
        client.api.base_url = BASE_URL
        client.ping()
    except (requests.RequestException, docker.errors.DockerException, KeyError, ValueError, OSError) as exc:
        why = dialer.last_error() or str(exc)
        hint = "check that dockerd runs there and DockerBaseUrl names its socket (unix:///var/run/docker.sock)"
        if dialer.sudo:
            hint = (
                f"{host.identity.user} may not open the Docker socket, so the dial runs through sudo: allow sudo "
                "(--sudo-password-env when it asks for a password) or add the user to the docker group; " + hint
            )
        raise ConnectError(
            host.name, f"cannot reach the Docker daemon on the host with `{dialer.line}`: {why}", hint=hint
        ) from None
    if log is not None:
        log(f"Docker daemon on {host.name}: over its SSH connection (`{dialer.line}` per request)")
    # HarnessContainer.exec runs every exec under this guard (see ExecGuard).
    client.workload_exec_guard = ExecGuard(host, dialer)
    return client


#: The guard's script: wait for the done file; on SIGTERM (the SSH wrapper's watchdog when the
#: connection is lost, or Ctrl-C's interrupt) run the kill command given as arguments first.
#: Once "guard-ready" is out, its output goes to /dev/null: the watchdog TERMs the whole group, so
#: the ``sleep`` dies too and dash reports "Terminated" on stderr, the dead channel's pipe; that
#: write raised SIGPIPE and killed the shell before its TERM trap ran the kill (about 1 run in 3).
_GUARD_SCRIPT = (
    "d=$1; shift; trap '\"$@\" >/dev/null 2>&1; exit 0' TERM; echo guard-ready; exec >/dev/null 2>&1; "
    'while [ ! -e "$d" ]; do sleep 1 & wait $!; done; rm -f "$d"'
)
#: The guard of a scheduler's node: its kill is an srun job step, slow to start on a busy cluster, so
#: it runs in a session of its own (setsid, util-linux, where the login host has it): the watchdog
#: KILLs the guard's process group 5 s after its TERM, and the kill must not die with the group
#: before it has ended the exec'd processes (it did, in tests/test_slurm_mlperf.py).
_DETACHED_GUARD_SCRIPT = (
    'd=$1; shift; trap \'if command -v setsid >/dev/null; then setsid -w "$@"; else "$@"; fi >/dev/null 2>&1; '
    "exit 0' TERM; echo guard-ready; exec >/dev/null 2>&1; "
    'while [ ! -e "$d" ]; do sleep 1 & wait $!; done; rm -f "$d"'
)
#: After an exec failed: how long to wait for the connection to show it is gone before the guard is
#: called off (paramiko notices a dead socket on its next read).
GUARD_SETTLE_S = 3.0
#: How long an exec waits for its guard to be up before it starts anyway.
GUARD_READY_S = 15.0
#: How long a guard may live: the longest exec it watches (a harness stage of many hours), bounded.
GUARD_TIMEOUT_S = 48 * 3600.0


class ExecGuard:
    """Ties a ``docker exec`` on the dial-stdio channel to the SSH connection, as the watchdog does for commands.

    dockerd keeps an exec'd process running when the client's connection goes away (no TTY, no
    signal is sent), and sshd only closes ``dial-stdio``'s pipes. So while an exec runs, a guard
    command runs on the host through the normal command path (:meth:`SshHost.run`), whose
    wrapper's watchdog TERMs it when the connection drops; its trap then runs ``docker exec -u 0
    NAME kill -TERM -1`` on the host, which ends every exec'd process in the container (as
    :meth:`HarnessContainer.stop` does; PID 1 is spared, the next run reuses the container). When
    the exec ends normally the guard is told through a done file and exits without killing.
    """

    def __init__(self, host: Host, dialer: HostDialer) -> None:
        #: Where the guard runs: the host itself, or a scheduler node's login host (see :meth:`_guard`).
        self.host = host.scheduler_login or host
        self.node = host
        self.dialer = dialer

    def _guard(self, done: str, kill: list[str]) -> Any:
        """The guard command, run on :attr:`host`.

        On a scheduler's node (Slurm) the guard runs on the login host, beside the srun of the
        dial, and its kill is a job step of its own on the node: srun answers the watchdog's
        SIGTERM by SIGKILLing its step's tasks (``forcing job termination``), so a trap inside a
        step never runs.
        """
        if self.host is self.node:
            return cmd(
                "sh", "-c", _GUARD_SCRIPT, "exec-guard", done, *kill, sudo=self.dialer.sudo, timeout=GUARD_TIMEOUT_S
            )
        line = shlex.join((["sudo", "-n", "--"] if self.dialer.sudo else []) + kill)
        return cmd(
            "sh",
            "-c",
            _DETACHED_GUARD_SCRIPT,
            "exec-guard",
            done,
            *self.node.launch_argv(line),
            timeout=GUARD_TIMEOUT_S,
        )

    @contextlib.contextmanager
    def __call__(self, container: str) -> Iterator[None]:
        done = posixpath.join("/tmp", f"workload-exec-guard-{uuid.uuid4().hex}")
        docker = ["docker"] + (["-H", f"unix://{self.dialer.socket_path}"] if self.dialer.socket_path else [])
        kill = [*docker, "exec", "-u", "0:0", container, "sh", "-c", "kill -TERM -1"]
        guard = self._guard(done, kill)
        ready = threading.Event()
        thread = threading.Thread(
            target=self._run_quietly, args=(guard, ready), name=f"exec-guard-{container}", daemon=True
        )
        thread.start()
        # The exec starts once the guard runs (its trap set), so no window is left unguarded.
        ready.wait(GUARD_READY_S)
        connection = self.host.connection_generation
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            # The guard is told to go, on the connection it runs on. After that connection was lost its
            # watchdog acts; a touch would reconnect and could call the guard off before it fired. An
            # exec that failed may have failed because the connection is going: give the transport a
            # moment to notice a dead socket before asking whether it is still connected.
            if failed:
                deadline = time.monotonic() + GUARD_SETTLE_S
                while self.host.is_connected and time.monotonic() < deadline:
                    time.sleep(0.1)
            if self.host.is_connected and self.host.connection_generation == connection:
                with contextlib.suppress(Exception):
                    self.host.run(cmd("touch", done, timeout=60))
            thread.join(5.0)

    def _run_quietly(self, guard: Any, ready: threading.Event) -> None:
        def sink(stream: str, line: str) -> None:
            if line.strip() == "guard-ready":
                ready.set()

        # Its result is of no interest: it exits 0 when told, and a lost connection is the exec's to report.
        try:
            with contextlib.suppress(Exception):
                self.host.run(guard, on_line=sink)
        finally:
            ready.set()  # a guard that could not start must not hold the exec up
