"""SSH problems end in one clear message: ports that are not SSH, known_hosts markers, non-key files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testbed.sshd import SshServer, fresh_sshd, ssh_host, ssh_options, sshd  # noqa: F401  (fixture)
from workload.cli import invoke
from workload.commands import cmd
from workload.errors import ConnectError
from workload.hosts import SshHost
from workload.hosts.base import ConnectionLost


def serve(reply: bytes | None) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers every connection with ``reply`` (None: says nothing)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def loop() -> None:
        listener.settimeout(0.2)
        held = []
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            if reply is not None:
                conn.sendall(reply)
                conn.close()
            else:
                held.append(conn)
        for conn in held:
            conn.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.fixture
def http_port() -> Iterator[int]:
    yield from serve(b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<html>no</html>\r\n")


@pytest.fixture
def silent_port() -> Iterator[int]:
    yield from serve(None)


@pytest.mark.parametrize(("port_fixture", "said"), [("http_port", "HTTP/1.0 400"), ("silent_port", "no SSH banner")])
def test_a_port_that_does_not_speak_ssh_is_named_once_without_tracebacks(
    port_fixture: str, said: str, tmp_path: Path, request: pytest.FixtureRequest, capfd: pytest.CaptureFixture[str]
) -> None:
    port: int = request.getfixturevalue(port_fixture)
    from workload.hosts import ConnectOptions

    options = ConnectOptions(
        known_hosts=str(tmp_path / "kh"),
        use_system_known_hosts=False,
        use_agent=False,
        look_for_keys=False,
        connect_timeout_s=2.0,
        connect_attempts=4,
    )
    host = SshHost("127.0.0.1", port=port, user="root", options=options)
    with pytest.raises(ConnectError) as info:
        host.connect()
    assert "does not speak SSH" in str(info.value) and said in str(info.value)
    assert host.connect_attempts == 1  # not retried: it will not start speaking SSH
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out


def test_known_hosts_markers_are_read_as_openssh_does(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    entry = sshd.known_hosts.read_text().strip()
    _names, keytype, key = entry.split()
    ca = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "ca")], check=True)
    assert ca.returncode == 0
    ca_pub = (tmp_path / "ca.pub").read_text().split()
    known = tmp_path / "known_hosts"
    # A @cert-authority line (paramiko cannot check host certificates: skipped) beside the plain entry.
    known.write_text(f"@cert-authority *.example.com {ca_pub[0]} {ca_pub[1]}\n{entry}\n")
    host = ssh_host(sshd, known_hosts=str(known))
    assert host.run(cmd("true")).ok
    host.close()
    # The server's key @revoked: refused, even with --accept-new-host-key.
    known.write_text(f"@revoked * {keytype} {key}\n")
    host = ssh_host(sshd, known_hosts=str(known), accept_new_host_keys=True)
    with pytest.raises(ConnectError, match=r"is marked @revoked in .*known_hosts:1"):
        host.connect()
    # A broken line is named by file and line.
    known.write_text(f"{entry}\nhost ssh-ed25519 AAAA-not-base64\n")
    with pytest.raises(ConnectError, match=r"known_hosts:2: not a known_hosts entry"):
        ssh_host(sshd, known_hosts=str(known)).connect()


def test_identity_that_is_not_a_private_key_is_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notkey = tmp_path / "notes.txt"
    notkey.write_text("just some text\n")
    pub = tmp_path / "id.pub"
    pub.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE9p user@h\n")
    for path, problem in ((notkey, "is not an SSH private key"), (pub, "is a public key")):
        code = invoke(["plan", "--profile", "PERF-CPU-MLPERF", "--host", "ssh://u@10.255.255.1", "-i", str(path)])
        err = capsys.readouterr().err
        assert code == 2 and f"-i/--identity {path}: {problem}" in err


#: Prints the pid of the nearest sshd ancestor: the process of the connection the command came through.
NEAREST_SSHD = """import os
pid = os.getpid()
while pid > 1:
    if open(f"/proc/{pid}/comm").read().startswith("sshd"):
        print(pid)
        break
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
"""


def _connection_process(host: SshHost) -> int:
    """The pid of the sshd process that serves this host's connection (the test's sshd runs on this machine)."""
    return int(host.run(cmd("python3", "-c", NEAREST_SSHD)).stdout)


@contextlib.contextmanager
def _cut_while_opening(net: int) -> Iterator[None]:
    """Stop the connection's sshd process (a channel opened now waits for its answer), kill it half a second later."""
    os.kill(net, signal.SIGSTOP)
    killer = threading.Timer(0.5, os.kill, (net, signal.SIGKILL))
    killer.start()
    try:
        yield
    finally:
        killer.join()


def test_a_connection_that_dies_while_a_command_opens_its_channel_runs_it_on_a_new_one(
    fresh_sshd: SshServer,  # noqa: F811
) -> None:
    # The sshd process of the connection is stopped, so the next channel open waits for an answer, then killed:
    # the connection ends while the channel is being opened (seen under load as "the connection was lost (Unable
    # to open channel.)"). Nothing ran on the host, so the command runs on a new connection.
    host = ssh_host(fresh_sshd)
    try:
        net = _connection_process(host)
        generation = host.connection_generation
        with _cut_while_opening(net):
            assert host.run(cmd("echo", "ran")).stdout == "ran\n"
        assert host.connection_generation == generation + 1
    finally:
        host.close()


def test_a_host_gone_while_a_command_opens_its_channel_is_reported_lost_at_once(
    fresh_sshd: SshServer,  # noqa: F811
) -> None:
    # The same with sshd's listener gone: one connect attempt (refused), then the loss is reported as before.
    host = ssh_host(fresh_sshd, connect_attempts=8)
    try:
        net = _connection_process(host)
        assert fresh_sshd.proc is not None
        fresh_sshd.proc.kill()  # the listener only: the connection's own process lives on, stopped below
        fresh_sshd.proc.wait(10)
        attempts = host.connect_attempts
        with _cut_while_opening(net), pytest.raises(ConnectionLost, match="the connection was lost"):
            host.run(cmd("echo", "ran"))
        assert host.connect_attempts == attempts + 1
    finally:
        host.close()


def test_an_eof_while_opening_a_channel_is_a_loss_even_before_the_transport_notices(
    sshd: SshServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seen beside a busy core: the socket ended while a channel was being opened, and the transport's thread had
    # not yet marked it inactive, so the loss was reported as "the server refused to start a command: " (an EOF
    # has no text). Only this connection's open fails (a failure a real sshd gives only by chance); the command
    # runs on a new connection.
    host = ssh_host(sshd)
    try:
        host.run(cmd("true"))
        generation = host.connection_generation

        def eof(*_args: object, **_kwargs: object) -> None:
            raise EOFError

        monkeypatch.setattr(host._transport(), "open_session", eof)
        assert host.run(cmd("echo", "ran")).stdout == "ran\n"
        assert host.connection_generation == generation + 1
    finally:
        host.close()
