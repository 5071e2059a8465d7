"""SshHost connecting: host keys, authentication, retries, lost connections; against a real sshd.

paramiko is mocked only for failures a real server cannot produce on demand here (name resolution,
a reset during the handshake, a socket timeout); everything else meets a real OpenSSH server.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest

from tests.test_mlperf_exec_guard import wait_for
from tests.testbed.sshd import (  # noqa: F401  (fixtures)
    SshServer,
    free_port,
    fresh_sshd,
    local_user,
    ssh_agent,
    ssh_host,
    ssh_options,
    sshd,
)
from workload.commands import Secret, cmd
from workload.errors import ConnectError, UsageError
from workload.hosts import ConnectionLost, ConnectOptions, LocalHost, SshHost, open_host, parse_host_spec
from workload.hosts.base import CommandResult
from workload.hosts.options import secret_from_env
from workload.hosts.ssh_connect import TransientConnectError
from workload.hosts.stophooks import interrupt_exempt

# -- host keys -----------------------------------------------------------------------------------


def test_unknown_host_key_is_refused_with_a_hint(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = ssh_host(sshd, known_hosts=str(empty))
    with pytest.raises(ConnectError) as info:
        host.run(cmd("true"))
    text = str(info.value)
    assert "not known" in text and sshd.host_key_fingerprint() in text
    assert "--accept-new-host-key" in text and str(empty) in text
    assert host.connect_attempts == 1
    assert empty.read_text() == ""


def test_new_host_key_is_accepted_and_recorded_when_asked(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    known = tmp_path / "sub" / "known_hosts"  # the folder does not exist yet either
    with ssh_host(sshd, known_hosts=str(known), accept_new_host_keys=True) as host:
        assert host.check(cmd("echo", "hi")).stdout == "hi\n"
    recorded = known.read_text()
    assert recorded.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 ")
    assert (known.stat().st_mode & 0o777) == 0o600
    # Recorded means verified next time, without the option.
    with ssh_host(sshd, known_hosts=str(known)) as host:
        assert host.check(cmd("echo", "again")).stdout == "again\n"
    assert known.read_text() == recorded


def test_changed_host_key_is_refused_even_with_accept_new(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    other = paramiko.Ed25519Key.from_private_key_file(str(sshd.user_key))  # any other ed25519 key
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 {other.get_base64()}\n")
    host = ssh_host(sshd, known_hosts=str(known), accept_new_host_keys=True)
    with pytest.raises(ConnectError) as info:
        host.connect()
    text = str(info.value)
    assert "CHANGED" in text and "ssh-keygen -R" in text and sshd.host_key_fingerprint() in text
    assert host.connect_attempts == 1


def test_broken_known_hosts_file_names_the_file(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 AAAA-not-base64!!\n")
    with pytest.raises(ConnectError) as info:
        ssh_host(sshd, known_hosts=str(known)).connect()
    assert f"cannot read the known_hosts file {known}" in str(info.value) and "base64" in str(info.value)


# -- authentication ------------------------------------------------------------------------------


def test_wrong_key_fails_once_without_retry(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    host = ssh_host(sshd, key_filename=str(stranger), connect_attempts=5)
    with pytest.raises(ConnectError) as info:
        host.run(cmd("true"))
    assert not isinstance(info.value, TransientConnectError)
    assert "authentication failed for root@127.0.0.1" in str(info.value) and str(stranger) in str(info.value)
    assert host.connect_attempts == 1  # no retry: a wrong key stays wrong


def test_encrypted_key_without_passphrase_says_so(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    locked = tmp_path / "locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "passphrase", "-f", str(locked)], check=True)
    host = ssh_host(sshd, key_filename=str(locked))
    with pytest.raises(ConnectError) as info:
        host.connect()
    assert "passphrase" in str(info.value) and "ssh-add" in str(info.value)
    assert host.connect_attempts == 1


def test_password_authentication(sshd: SshServer) -> None:  # noqa: F811
    with local_user() as user:
        with ssh_host(sshd, user=user.name, key_filename=None, password=Secret(user.password)) as host:
            assert host.check(cmd("id", "-un")).stdout == f"{user.name}\n"
            assert not host.is_root and host.identity.home == user.home
        bad = ssh_host(sshd, user=user.name, key_filename=None, password=Secret("wrong"))
        with pytest.raises(ConnectError) as info:
            bad.connect()
        assert "authentication failed" in str(info.value) and "wrong" not in str(info.value)
        assert bad.connect_attempts == 1


def test_server_refusing_the_method_lists_what_it_allows(tmp_path: Path) -> None:
    server = SshServer(tmp_path / "nopw", password_auth=False).start()
    try:
        host = ssh_host(server, key_filename=None, password=Secret("whatever"))
        with pytest.raises(ConnectError) as info:
            host.connect()
        assert "publickey" in str(info.value) and host.connect_attempts == 1
        # The hint names the real options (-i/--identity; there is no --key).
        assert "-i/--identity" in str(info.value) and "--key" not in str(info.value)
    finally:
        server.stop()


def _plan_argv(sshd: SshServer, tmp_path: Path, *more: str) -> list[str]:  # noqa: F811
    profile = tmp_path / "p.json"
    profile.write_text('{"Description": "x", "Actions": [{"Type": "EchoStep"}]}')
    return ["plan", "--profile", str(profile), "--known-hosts", str(sshd.known_hosts), *more]


def test_ssh_password_from_an_environment_variable_through_the_cli(
    sshd: SshServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.steptypes import TEST_TYPES
    from workload import registry
    from workload.cli import invoke

    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh keys or known_hosts of the machine
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with local_user() as user:
        monkeypatch.setenv("WL_TEST_SSH_PASSWORD", user.password)
        target = f"ssh://{user.name}@127.0.0.1:{sshd.port}"
        code = invoke(_plan_argv(sshd, tmp_path, "--host", target, "--ssh-password-env", "WL_TEST_SSH_PASSWORD"))
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        assert "Actions[0] EchoStep" in out.out and user.password not in out.out + out.err
        # The same from an inventory line.
        inventory = tmp_path / "fleet.txt"
        inventory.write_text(f"{target} password_env=WL_TEST_SSH_PASSWORD name=vm-pw\n")
        assert invoke(_plan_argv(sshd, tmp_path, "--inventory", str(inventory))) == 0, capsys.readouterr()
        assert "== host vm-pw ==" in capsys.readouterr().out
        # A wrong password: one authentication error (exit 3) that names the variable, not the value.
        monkeypatch.setenv("WL_TEST_SSH_PASSWORD", "not-the-password")
        code = invoke(_plan_argv(sshd, tmp_path, "--host", target, "--ssh-password-env", "WL_TEST_SSH_PASSWORD"))
        out = capsys.readouterr()
        assert code == 3, out.out + out.err
        assert "authentication failed" in out.out and "--ssh-password-env" in out.out
        assert "not-the-password" not in out.out + out.err


def test_agent_authentication(sshd: SshServer, ssh_agent: str) -> None:  # noqa: F811
    with ssh_host(sshd, key_filename=None, use_agent=True) as host:
        assert host.check(cmd("echo", "via agent")).stdout == "via agent\n"


# -- transient errors and retries ----------------------------------------------------------------


def test_refused_connection_is_retried_then_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # nothing listens there
    known = tmp_path / "known_hosts"
    known.write_text("")
    options = ConnectOptions(
        known_hosts=str(known),
        use_system_known_hosts=False,
        use_agent=False,
        look_for_keys=False,
        connect_attempts=3,
        connect_budget_s=20,
    )
    host = SshHost("127.0.0.1", port=port, user="root", options=options)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="workload.hosts.ssh"), pytest.raises(ConnectError) as info:
        host.connect()
    assert "connection refused" in str(info.value) and "gave up after 3 attempts" in str(info.value)
    assert host.connect_attempts == 3 and time.monotonic() - started < 20  # within its connect_budget_s
    # One clean line per retry: the host once, the problem, the delay; the hint only in the final error.
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 2, retries
    for number, line in enumerate(retries, start=2):
        assert line.startswith(f"[127.0.0.1:{port}] connection refused by 127.0.0.1:{port}; retrying in ")
        assert line.count(f"127.0.0.1:{port}]") == 1 and "hint" not in line and "\n" not in line
        assert line.endswith(f"(attempt {number} of 3)")
    assert "hint: check the host name and port" in str(info.value)


def test_connect_waits_for_sshd_that_comes_up_late(fresh_sshd: SshServer) -> None:  # noqa: F811
    fresh_sshd.stop()
    timer = threading.Timer(2.0, fresh_sshd.start)
    timer.start()
    try:
        host = ssh_host(fresh_sshd, connect_attempts=10, connect_budget_s=30)
        started = time.monotonic()
        assert host.check(cmd("echo", "up")).stdout == "up\n"
        assert host.connect_attempts >= 2 and time.monotonic() - started >= 1.5
        host.close()
    finally:
        timer.join()


@pytest.fixture
def slammer() -> Iterator[int]:
    """A port that accepts TCP connections and closes them at once (EOF before the SSH banner)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    listener.close()


def test_eof_before_the_banner_is_transient(slammer: int, tmp_path: Path) -> None:
    options = ConnectOptions(
        use_system_known_hosts=False,
        use_agent=False,
        look_for_keys=False,
        connect_attempts=2,
        connect_budget_s=20,
        connect_timeout_s=2,
    )
    host = SshHost("127.0.0.1", port=slammer, user="root", options=options)
    with pytest.raises(ConnectError) as info:
        host.connect()
    assert "before the SSH handshake" in str(info.value) and host.connect_attempts == 2


class _Failing(paramiko.SSHClient):
    """An SSHClient whose connect fails with a given exception (failures sshd cannot make on demand)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    def connect(self, *args: object, **kwargs: object) -> None:
        raise self.error


@pytest.mark.parametrize(
    ("error", "transient", "words"),
    [
        (socket.gaierror(-2, "Name or service not known"), False, "cannot resolve the host name"),
        (ConnectionResetError(104, "Connection reset by peer"), True, "was reset"),
        (TimeoutError("timed out"), True, "timed out connecting"),
        (OSError(113, "No route to host"), True, "unreachable"),
        (paramiko.SSHException("Incompatible ssh peer (no acceptable kex algorithm)"), False, "no acceptable kex"),
        (EOFError(), True, "before the SSH handshake"),
        (ValueError("odd"), False, "unexpected error connecting"),
    ],
)
def test_exception_mapping(error: BaseException, transient: bool, words: str) -> None:
    options = ConnectOptions(use_system_known_hosts=False, connect_attempts=2, connect_budget_s=10)
    host = SshHost("vm.example", user="ubuntu", options=options, client_factory=lambda: _Failing(error))
    with pytest.raises(ConnectError) as info:
        host.connect()
    assert words in str(info.value) and info.value.host == "vm.example"
    assert host.connect_attempts == (2 if transient else 1)
    assert "Traceback" not in str(info.value)


def test_sshd_dropping_at_max_startups_is_retried_as_transient() -> None:
    """sshd past its MaxStartups limit writes "Exceeded MaxStartups" instead of its banner and closes
    (OpenSSH sshd.c, drop_connection); a login node hit by one connection per Slurm node at once
    does this. It is sshd, busy: retried like a refused connection, never "does not speak SSH"."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[int] = []

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            with conn:
                conn.sendall(b"Exceeded MaxStartups\r\n")

    threading.Thread(target=answer, daemon=True).start()
    try:
        options = ConnectOptions(use_system_known_hosts=False, connect_attempts=2, connect_budget_s=20)
        host = SshHost("127.0.0.1", port=port, user="root", options=options, name="login1")
        with pytest.raises(ConnectError) as info:
            host.connect()
    finally:
        server.close()
    assert host.connect_attempts == 2 and len(accepted) >= 2, (host.connect_attempts, accepted)
    assert "does not speak SSH" not in str(info.value), str(info.value)
    assert "MaxStartups" in str(info.value), str(info.value)


# -- losing the connection -----------------------------------------------------------------------


def test_sshd_killed_mid_command_then_next_command_reconnects(
    fresh_sshd: SshServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    host = ssh_host(fresh_sshd, connect_attempts=10, connect_budget_s=30)
    assert host.check(cmd("true")).ok
    generation = host.connection_generation
    running = tmp_path / "running"

    def kill_once_running() -> None:  # mid-command however late a loaded machine starts it
        wait_for(running.exists, 30)
        fresh_sshd.kill()

    killer = threading.Thread(target=kill_once_running)
    killer.start()
    started = time.monotonic()
    with pytest.raises(ConnectError) as info:
        host.run(cmd("sh", "-c", 'touch "$1" && exec sleep 44', "mid-command", str(running)))
    killer.join()
    assert isinstance(info.value, ConnectionLost)
    assert "connection was lost while running: sh -c" in str(info.value)
    assert time.monotonic() - started < 44  # noticed at the loss, not when the command would have ended
    # sshd comes back a little later: the next command reconnects (with retries) and works.
    restarter = threading.Timer(1.5, fresh_sshd.start)
    restarter.start()
    try:
        assert host.check(cmd("echo", "back")).stdout == "back\n"
    finally:
        restarter.join()
    assert host.connection_generation == generation + 1
    host.close()


def test_file_transfer_after_a_lost_connection_reconnects(fresh_sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    host = ssh_host(fresh_sshd)
    host.write_text(str(tmp_path / "a"), "one")
    fresh_sshd.kill()
    fresh_sshd.start()
    host.write_text(str(tmp_path / "a"), "two")  # the dead SFTP session is replaced
    assert (tmp_path / "a").read_text() == "two"
    host.close()


def test_a_command_that_ends_at_once_leaves_the_connection_up_when_our_eof_is_late(
    fresh_sshd: SshServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # paramiko builds shutdown_write's channel EOF under the channel's lock and sends it after releasing it; for a
    # command that ended at once, the close its transport thread sends can go first, and sshd then ends the whole
    # connection ("packet referred to nonexistent channel"), with every command on it (seen beside a busy core, as
    # "the connection was lost (Channel closed.)"). Here an EOF from a command's thread is held back for a second,
    # as a thread the scheduler left waiting is: a command without input must not send one.
    original = paramiko.Transport._send_user_message

    def late_eof(transport: paramiko.Transport, data: Any) -> None:
        if threading.current_thread() is not transport and data.asbytes()[:1] == paramiko.common.cMSG_CHANNEL_EOF:
            time.sleep(1.0)
        original(transport, data)

    monkeypatch.setattr(paramiko.Transport, "_send_user_message", late_eof)
    host = ssh_host(fresh_sshd)
    try:
        host.connect()
        generation = host.connection_generation
        for _ in range(3):
            assert host.run(cmd("true")).ok
        assert host.run(cmd("cat", input="in\n")).stdout == "in\n"  # with input, the EOF still ends it
        time.sleep(1.5)  # a late EOF has arrived by now
        assert host.is_connected and host.run(cmd("echo", "same connection")).ok
        assert host.connection_generation == generation
        assert "nonexistent channel" not in fresh_sshd.log_text()
    finally:
        host.close()


def test_a_channel_whose_close_fails_on_a_dead_socket_still_gives_the_commands_result(
    sshd: SshServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seen beside a busy core while a VM rebooted: the socket died under a reboot probe that had finished, paramiko's
    # close() raised EOFError (its transport thread had not noticed yet), and the step ended as "internal error:
    # EOFError". A real server cannot time that on demand, so close() fails here as it did then.
    host = ssh_host(sshd)
    try:
        host.connect()

        def close_on_a_dead_socket(channel: paramiko.Channel) -> None:
            raise EOFError()

        monkeypatch.setattr(paramiko.Channel, "close", close_on_a_dead_socket)
        assert host.run(cmd("echo", "done")).stdout == "done\n"
    finally:
        monkeypatch.undo()
        host.close()


def test_interrupt_stops_running_commands(sshd: SshServer) -> None:  # noqa: F811
    host = ssh_host(sshd)
    results: list[int] = []

    def run() -> None:
        results.append(host.run(cmd("sh", "-c", "trap '' TERM; sleep 30")).returncode)

    worker = threading.Thread(target=run)
    started = time.monotonic()
    worker.start()
    time.sleep(1.0)
    host.interrupt(grace_s=0.5)  # TERM is ignored by the command: the KILL after the grace ends it
    worker.join(30)
    assert results and results[0] != 0 and time.monotonic() - started < 30  # killed, not waited for
    host.close()


def test_interrupt_just_after_a_command_starts_still_stops_it(sshd: SshServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Interrupting before the command's process group id has come back still reaches it."""
    host = ssh_host(sshd)
    opened = threading.Event()
    real_open = SshHost._open_command

    def open_and_tell(self: SshHost, *args: Any, **kwargs: Any) -> Any:
        chan = real_open(self, *args, **kwargs)
        opened.set()  # the command is on its way; its group id is not back yet
        return chan

    monkeypatch.setattr(SshHost, "_open_command", open_and_tell)
    results: list[CommandResult] = []
    worker = threading.Thread(target=lambda: results.append(host.run(cmd("sleep", "30", timeout=10))))
    worker.start()
    assert opened.wait(10)
    started = time.monotonic()
    host.interrupt(grace_s=0.5)
    worker.join(15)
    assert results and not results[0].timed_out and results[0].returncode != 0
    assert time.monotonic() - started < 10  # stopped by the interrupt, before its own 10 s timeout
    host.close()


def test_interrupt_waits_for_a_command_slow_to_announce_its_group(
    sshd: SshServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Beside a busy core the remote shell took longer than the stop's 0.5 s grace to start and announce its process
    group; the interrupt then signalled nothing and the command ran to its timeout. Here it starts 1.5 s late."""
    import workload.hosts.ssh as ssh_module

    real_line = ssh_module._remote_line
    monkeypatch.setattr(ssh_module, "_remote_line", lambda line, **kw: "sleep 1.5; " + real_line(line, **kw))
    host = ssh_host(sshd)
    try:
        host.connect()
        results: list[CommandResult] = []
        worker = threading.Thread(target=lambda: results.append(host.run(cmd("sleep", "30", timeout=15))))
        worker.start()
        time.sleep(0.3)  # the channel is open; the group id is 1.2 s away
        started = time.monotonic()
        host.interrupt(grace_s=0.5)
        worker.join(20)
        assert results and not results[0].timed_out and results[0].returncode != 0
        assert time.monotonic() - started < 15  # stopped by the interrupt, not its own timeout
    finally:
        host.close()


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_a_command_a_stop_runs_is_left_alone_by_the_interrupt(sshd: SshServer, transport: str) -> None:  # noqa: F811
    """``interrupt_exempt``: a command started in the block (a stop hook's own ``docker exec``) is not
    among those the interrupt stops; one started beside it, outside the block, is."""
    host: LocalHost | SshHost = LocalHost("ctl") if transport == "local" else ssh_host(sshd)
    results: dict[str, CommandResult] = {}
    up = {name: threading.Event() for name in ("stop", "other")}

    def run(name: str) -> None:
        def seen(_stream: str, line: str) -> None:
            if line.startswith("up"):
                up[name].set()

        with interrupt_exempt() if name == "stop" else contextlib.nullcontext():
            results[name] = host.run(cmd("sh", "-c", "echo up; sleep 4; echo done", timeout=60), on_line=seen)

    workers = [threading.Thread(target=run, args=(name,)) for name in up]
    for worker in workers:
        worker.start()
    try:
        assert all(event.wait(30) for event in up.values())  # both run (over SSH: their group announced)
        host.interrupt(grace_s=0.5)
        for worker in workers:
            worker.join(30)
    finally:
        host.close()
    assert results["other"].returncode != 0 and "done" not in results["other"].stdout  # stopped
    assert results["stop"].returncode == 0 and results["stop"].stdout == "up\ndone\n"  # left to finish


# -- open_host and options -----------------------------------------------------------------------


def test_open_host_builds_the_right_transport(sshd: SshServer) -> None:  # noqa: F811
    local = open_host(parse_host_spec("local://"))
    assert isinstance(local, LocalHost) and local.name == "local"
    spec = parse_host_spec(f"ssh://root@127.0.0.1:{sshd.port}")
    with open_host(spec, ssh_options(sshd)) as remote:
        assert isinstance(remote, SshHost) and remote.name == f"127.0.0.1:{sshd.port}"
        assert remote.check(cmd("id", "-u")).stdout == "0\n"


def test_open_host_with_a_missing_key_file_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        open_host(parse_host_spec("ssh://root@10.0.0.1"), ConnectOptions(key_filename="/nonexistent/key"))
    assert "/nonexistent/key" in str(info.value)


def test_sudo_password_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WL_TEST_SUDO_PW", "hunter2")
    secret = secret_from_env("WL_TEST_SUDO_PW")
    assert secret.value == "hunter2" and str(secret) == "***"
    monkeypatch.delenv("WL_TEST_SUDO_PW")
    with pytest.raises(UsageError) as info:
        secret_from_env("WL_TEST_SUDO_PW")
    assert "WL_TEST_SUDO_PW" in str(info.value) and "--sudo-password-env" in str(info.value)


def test_bad_options_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        ConnectOptions(connect_attempts=0)
