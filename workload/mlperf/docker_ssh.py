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

The client serves the container's lifecycle only (inspect, create, start, remove, build): commands
inside the container are ``docker exec`` run by the host's own transport
(:class:`~workload.hosts.container.ContainerHost`), which also ends them when the connection drops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import paramiko
from docker.transport.basehttpadapter import BaseHTTPAdapter
from docker.transport.sshconn import SSHConnection, SSHConnectionPool

from workload.commands import cmd
from workload.errors import ConnectError
from workload.hosts.base import Host
from workload.hosts.container import docker_needs_sudo

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
        self.sudo = docker_needs_sudo(host, f"unix://{socket_path}" if socket_path else None)
        argv = ["docker"]
        if socket_path is not None:
            argv += ["-H", f"unix://{socket_path}"]
        argv += ["system", "dial-stdio"]
        # The same sudo wrapping as every other command (sudo -n, or -S with the password first on stdin).
        self.line, stdin = host.wrap(cmd(*argv, sudo=self.sudo))
        self._prefix = stdin or b""
        self._last: paramiko.Channel | None = None

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
    return client
