"""A real OpenSSH server on 127.0.0.1 for the host tests, plus throwaway local users.

:class:`SshServer` runs Debian's ``/usr/sbin/sshd`` in the foreground (``-D``) at a free port with
its own generated host key, an authorised user key, ``StrictModes no`` and ``UsePAM no``. sshd
re-executes itself per connection, so every path in its config is absolute. ``stop()`` ends it
cleanly, ``kill()`` SIGKILLs the listener *and* its per-connection children (a crash: clients see
their connections drop), ``restart()`` starts it again on the same port with the same keys.

:func:`local_user` creates a real user with a password (``useradd`` + ``chpasswd``), optionally a
``/etc/sudoers.d`` entry, and removes both afterwards. Needs root, like the rest of the test bed.

Fixtures: ``sshd`` (one server for the module), ``fresh_sshd`` (one per test, for tests that kill
or restart it), ``ssh_agent`` (a real ssh-agent holding the user key).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.testbed.ports import free_port
from workload.hosts import ConnectOptions, SshHost

SSHD = "/usr/sbin/sshd"


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (read from /proc before anything is killed and re-parented)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


class SshServer:
    """One sshd on 127.0.0.1:``port``; files live in ``root`` (world-readable, for other users)."""

    def __init__(self, root: Path, *, port: int | None = None, password_auth: bool = True) -> None:
        self.root = root.resolve()
        self.port = port or free_port()
        self.password_auth = password_auth
        self.host_key = self.root / "ssh_host_ed25519_key"
        self.user_key = self.root / "id_ed25519"
        self.authorized_keys = self.root / "authorized_keys"
        self.known_hosts = self.root / "known_hosts"
        self.config = self.root / "sshd_config"
        self.log = self.root / "sshd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._prepare()

    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)  # test users read authorized_keys as themselves
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        if not self.host_key.exists():
            _keygen(self.host_key, "workload-test-host")
            _keygen(self.user_key, "workload-test-user")
            shutil.copyfile(self.user_key.with_suffix(".pub"), self.authorized_keys)
            os.chmod(self.authorized_keys, 0o644)
        host_pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.authorized_keys}",
                    f"PidFile {self.root / 'sshd.pid'}",
                    "StrictModes no",
                    "UsePAM no",
                    "PermitRootLogin yes",
                    f"PasswordAuthentication {'yes' if self.password_auth else 'no'}",
                    "KbdInteractiveAuthentication no",
                    "Subsystem sftp internal-sftp",
                    "MaxStartups 100",
                    "LogLevel VERBOSE",
                    # This machine's root is the test bed's root, but root's ~/.bashrc is the machine's own
                    # (here pyenv's init), not part of the test bed: bash reads it for every command sshd
                    # starts (bash's run_startup_files: ~/.bashrc when run by sshd and SHLVL is unset),
                    # 139 execs and about 90 ms CPU each, and under load pyenv's rehash lock printed
                    # "cannot rehash" lines into a CI run's output. SHLVL=1 makes bash a nested shell,
                    # which does not read it. Other users (tests/test_ssh_login_shell.py's, whose
                    # ~/.bashrc prints on purpose) get the login shell every VM has.
                    "Match User root",
                    "    SetEnv SHLVL=1",
                    "",
                ]
            )
        )

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, *, wait: bool = True) -> SshServer:
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("sshd is already running")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-f", str(self.config), "-E", str(self.log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the port answers with an SSH banner."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"sshd exited with {self.proc.returncode}: {err}\n{self.log_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not answer on port {self.port} within {timeout}s\n{self.log_text()}")

    def stop(self) -> None:
        """End sshd cleanly (SIGTERM to the listener; established sessions are ended too)."""
        if self.proc is None:
            return
        children = [p for p in _children(self.proc.pid) if _comm(p) == "sshd"]
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        self._close_pipes()

    def kill(self) -> None:
        """Simulate a crash: SIGKILL the listener and every per-connection sshd process."""
        if self.proc is None:
            return
        victims = [self.proc.pid] + [p for p in _children(self.proc.pid) if _comm(p) == "sshd"]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()
        self._close_pipes()

    def restart(self, *, wait: bool = True) -> SshServer:
        self.stop()
        return self.start(wait=wait)

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    # -- client-side helpers ---------------------------------------------------------------------
    def host_key_fingerprint(self) -> str:
        out = subprocess.run(
            ["ssh-keygen", "-l", "-f", str(self.host_key.with_suffix(".pub"))],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.split()[1]


@dataclass(frozen=True)
class LocalUser:
    name: str
    password: str
    home: str


@contextlib.contextmanager
def local_user(*, sudo: str | None = None) -> Iterator[LocalUser]:
    """A throwaway local user with a random password.

    ``sudo``: None (not in sudoers), ``"nopasswd"`` (passwordless sudo) or ``"password"`` (sudo asks
    for the user's password). Everything is removed afterwards, also when the test fails.
    """
    _needs_root()
    name = f"wlt{secrets.token_hex(3)}"
    password = f"pw-{secrets.token_urlsafe(12)}"
    sudoers = Path(f"/etc/sudoers.d/workload-test-{name}")
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
    try:
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n".encode(), check=True)
        if sudo is not None:
            rule = "NOPASSWD: ALL" if sudo == "nopasswd" else "ALL"
            sudoers.write_text(f"{name} ALL=(ALL:ALL) {rule}\n")
            os.chmod(sudoers, 0o440)
        yield LocalUser(name=name, password=password, home=f"/home/{name}")
    finally:
        sudoers.unlink(missing_ok=True)
        # Processes left by a killed test would make userdel refuse; they belong to this new user only.
        for pid in _pids_of_user(name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        subprocess.run(["userdel", "-r", "-f", name], check=False, capture_output=True)


def _pids_of_user(name: str) -> list[int]:
    import pwd

    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    pids.append(int(entry))
    return pids


def ssh_options(server: SshServer, **changes: Any) -> ConnectOptions:
    """ConnectOptions for ``server`` that use only the test bed's files (no ~/.ssh, no agent)."""
    base: dict[str, Any] = {
        "key_filename": str(server.user_key),
        "known_hosts": str(server.known_hosts),
        "use_system_known_hosts": False,
        "use_agent": False,
        "look_for_keys": False,
        "connect_timeout_s": 5.0,
        "connect_attempts": 3,
        "connect_budget_s": 15.0,
    }
    base.update(changes)
    return ConnectOptions(**base)


def ssh_host(server: SshServer, *, user: str = "root", **changes: Any) -> SshHost:
    """An SshHost for ``server`` (root with the test key unless told otherwise)."""
    return SshHost("127.0.0.1", port=server.port, user=user, options=ssh_options(server, **changes))


def _new_root(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def _needs_root() -> None:
    if os.geteuid() != 0 or not os.path.exists(SSHD):
        pytest.skip("needs root and /usr/sbin/sshd (apt-get install openssh-server)")


@pytest.fixture(scope="module")
def sshd() -> Iterator[SshServer]:
    """One sshd shared by a module's tests (do not stop or kill it: use ``fresh_sshd``)."""
    _needs_root()
    root = _new_root("workload-sshd-")
    server = SshServer(root).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fresh_sshd() -> Iterator[SshServer]:
    """A private sshd for one test, free to be stopped, killed and restarted."""
    _needs_root()
    root = _new_root("workload-sshd-")
    server = SshServer(root).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ssh_agent(sshd: SshServer) -> Iterator[str]:
    """A real ssh-agent holding the test user key; yields its socket path (also set as SSH_AUTH_SOCK)."""
    if shutil.which("ssh-agent") is None:
        pytest.skip("ssh-agent not installed")
    sock = str(_new_root("workload-agent-") / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 5
        while not os.path.exists(sock) and time.monotonic() < end:
            time.sleep(0.02)
        env = {**os.environ, "SSH_AUTH_SOCK": sock}
        subprocess.run(["ssh-add", "-q", str(sshd.user_key)], env=env, check=True, capture_output=True)
        old = os.environ.get("SSH_AUTH_SOCK")
        os.environ["SSH_AUTH_SOCK"] = sock
        try:
            yield sock
        finally:
            if old is None:
                os.environ.pop("SSH_AUTH_SOCK", None)
            else:
                os.environ["SSH_AUTH_SOCK"] = old
    finally:
        agent.terminate()
        agent.wait()
        shutil.rmtree(os.path.dirname(sock), ignore_errors=True)
