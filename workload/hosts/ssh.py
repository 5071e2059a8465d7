"""``SshHost``: run commands and move files on a remote machine over SSH (paramiko).

Connection
    Opened lazily on first use (or by :meth:`SshHost.connect`) and re-opened on the next use after
    it was lost, so a step can be re-run after a network blip or a reboot. Every paramiko/socket
    exception becomes one :class:`~workload.errors.ConnectError` with a readable message and a
    hint; transient network errors (refused, reset, timeout, EOF before the banner) are retried
    with tenacity, authentication and host-key errors never are.

Host keys
    Verified against known_hosts by default. An unknown key is refused with a message that says
    how to accept it (``--accept-new-host-key``, which records it); a changed key is always refused.

Commands
    Each command is one ``exec`` channel without a pty (so output is not mangled and stdin can carry
    a sudo password). The remote line is::

        exec /bin/sh -c 'printf "workload-pgid:%s\\n" "$$" >&2; /bin/sh -c LINE'

    OpenSSH calls ``setsid()`` for every non-pty session, so that shell is a session and process
    group leader, and ``$$`` is the process group of everything the command starts. That stderr
    line hands the id to us (it is stripped before the output reaches the collectors); lines the
    login shell printed ahead of it (a ``.bashrc``) are shown live, not kept as the command's stderr.
    At the timeout we kill the whole group with ``kill -KILL -PGID`` over a second channel:
    closing the channel alone would leave the command running, and coreutils ``timeout`` would
    tie the deadline to the remote clock and to a tool minimal images may lack.
    The wrapper does not ``exec`` the inner shell: when the command dies of a signal, the wrapper
    reports ``128+N`` as a normal exit status (paramiko ignores ``exit-signal`` messages), the same
    number :class:`~workload.hosts.local.LocalHost` reports.
    Remote work dies with its session: without a pty, sshd leaves a command running when the
    connection drops (or this process is killed), and a re-run would start a second benchmark
    beside it. So the wrapper starts a watchdog in the command's process group that kills the
    group once the wrapper's parent, sshd's session process, has exited (within about a second of
    sshd noticing the lost connection). A pty would do it through SIGHUP, but mangles output and
    merges stderr into stdout.
    The login shell must be POSIX-like (sh, bash, dash, zsh, ksh), as with Fabric.
    The wrapper line, its watchdog and the process-group bookkeeping live in
    :mod:`workload.hosts.ssh_process`.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import logging
import posixpath
import select
import shlex
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import BinaryIO

import paramiko
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

from workload.errors import ConnectError
from workload.hosts.base import ConnectionLost, FileTransferError, Host, OutputCollector
from workload.hosts.drain import DrainClock
from workload.hosts.options import ConnectOptions
from workload.hosts.ssh_connect import SshTarget, TransientConnectError, open_client

# Moved by job (issue 14): the remote process (wrapper line, watchdog, process group) lives there.
from workload.hosts.ssh_process import _buffered, _Counter, _remote_line, _StderrHead
from workload.hosts.stophooks import interrupt_exempt_now
from workload.safefile import atomic_write_bytes

log = logging.getLogger(__name__)

_CHUNK = 32 * 1024
_TICK_S = 0.2
#: How long interrupt() waits at most for commands just started to announce their process group
#: (then grace and KILL: within the 10 s a stop may take).
ANNOUNCE_WAIT_S = 5.0


class SshHost(Host):
    """A machine reached over SSH.

    ``connect_attempts`` counts every TCP/SSH connect attempt made by this object (diagnostics and
    tests: an authentication failure must show exactly one).
    """

    def __init__(
        self,
        hostname: str,
        *,
        port: int = 22,
        user: str | None = None,
        options: ConnectOptions | None = None,
        name: str | None = None,
        client_factory: Callable[[], paramiko.SSHClient] = paramiko.SSHClient,
    ) -> None:
        self.hostname = hostname
        self.port = port
        self.user = user or getpass.getuser()
        self.options = options or ConnectOptions()
        self.name = name or (hostname if port == 22 else f"{hostname}:{port}")
        self.sudo_password = self.options.sudo_password
        self.connect_attempts = 0
        self._attempts_allowed = self.options.connect_attempts
        self._client_factory = client_factory
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        # One connect at a time when threads share the host; channels themselves are thread-safe.
        self._lock = threading.RLock()
        #: Process groups of the commands running now (for interrupt()).
        self._running: set[int] = set()
        #: Commands started whose process group id has not arrived yet (interrupt() waits for them).
        self._unannounced = _Counter()

    # -- connection ------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        transport = self._client.get_transport() if self._client is not None else None
        return transport is not None and transport.is_active()

    def connect(self, *, attempts: int | None = None) -> None:
        """Connect now unless connected; ``attempts`` overrides the retry count (1: no retry)."""
        self._ensure(attempts=attempts)

    def close(self) -> None:
        if self._sftp is not None:
            with contextlib.suppress(Exception):
                self._sftp.close()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._sftp = None
        self._client = None

    def _transport(self) -> paramiko.Transport:
        transport = self._ensure().get_transport()
        assert transport is not None  # _ensure returns only connected clients
        return transport

    can_open_channels = True

    def sampling_copy(self) -> SshHost:
        """The same user, port and credentials; host keys only as already recorded (the engine's
        connection records a new one when ``--accept-new-host-key`` says so; a sampler never does),
        and one connect attempt per use, so a host that is down costs one connect timeout at most."""
        from dataclasses import replace

        options = replace(self.options, accept_new_host_keys=False, connect_attempts=1, sudo_password=None)
        return SshHost(self.hostname, port=self.port, user=self.user, options=options, name=self.name)

    def exec_channel(self, shell_line: str, *, timeout: float | None = None) -> paramiko.Channel:
        """A raw channel running ``shell_line`` on this host's (verified, reconnecting) connection.

        For byte streams that are not commands with output to collect (the docker API dialled
        through ``docker system dial-stdio``); the caller reads, writes and closes it. The line is
        used as given: build it with :meth:`wrap` so quoting and sudo are the same as for commands.
        """
        channel = self._transport().open_session(timeout=self.options.connect_timeout_s)
        channel.settimeout(timeout)
        channel.exec_command(shell_line)
        return channel

    def _ensure(self, *, attempts: int | None = None) -> paramiko.SSHClient:
        with self._lock:
            return self._ensure_locked(attempts)

    def _ensure_locked(self, attempts: int | None) -> paramiko.SSHClient:
        if self._client is not None and self.is_connected:
            return self._client
        self.close()
        self._attempts_allowed = attempts or self.options.connect_attempts
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts_allowed) | stop_after_delay(self.options.connect_budget_s),
            # Exponential backoff plus jitter, so a fleet of runners does not reconnect in lockstep.
            wait=wait_exponential(multiplier=0.5, max=8.0) + wait_random(0, 1.0),
            retry=retry_if_exception(lambda e: isinstance(e, TransientConnectError)),
            before_sleep=self._log_retry,
            reraise=True,
        )
        started = time.monotonic()
        before = self.connect_attempts
        try:
            self._client = retrying(self._connect_once)
        except TransientConnectError as e:
            tries = self.connect_attempts - before
            if tries == 1:
                raise
            raise TransientConnectError(
                self.name,
                f"{e.problem} (gave up after {tries} attempts in {time.monotonic() - started:.0f}s)",
                hint=e.hint,
            ) from e
        self.connection_generation += 1
        return self._client

    def _log_retry(self, state: RetryCallState) -> None:
        """One line per retry: ``[host] connection refused by h:22; retrying in 1.3s (attempt 3 of 8)``.

        The problem only: the host prefix is added here once, and the hint comes with the final
        error if every attempt fails.
        """
        error = state.outcome.exception() if state.outcome is not None else None
        problem = error.problem if isinstance(error, TransientConnectError) else str(error).splitlines()[0]
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        log.warning(
            "[%s] %s; retrying in %.1fs (attempt %d of %d)",
            self.name,
            problem,
            delay,
            state.attempt_number + 1,
            self._attempts_allowed,
        )

    def _connect_once(self) -> paramiko.SSHClient:
        self.connect_attempts += 1
        target = SshTarget(self.name, self.hostname, self.port, self.user)
        return open_client(target, self.options, self._client_factory)

    def _lost(self, problem: str, *, command: str | None = None) -> ConnectionLost:
        self.close()  # the next use reconnects
        return ConnectionLost(
            self.name,
            problem,
            command=command,
            hint="the host went away (reboot, crash, network); the next command reconnects, so the step can be re-run",
        )

    # -- commands --------------------------------------------------------------------------------
    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        if interrupt_exempt_now():  # announced to nobody: interrupt() neither waits for it nor signals it
            head = _StderrHead(stderr, set(), _Counter())
        else:
            head = _StderrHead(stderr, self._running, self._unannounced)
        try:
            chan, transport = self._open_command(shell_line, stdin=bool(stdin))
            try:
                return self._pump(chan, transport, stdin, timeout, stdout, head)
            finally:
                # A socket that died under the command (a reboot, say) makes paramiko's close raise until its
                # transport thread notices; what the command gave, or the loss _pump reported, is the answer.
                with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
                    chan.close()
        finally:
            head.forget()

    def _open_command(self, shell_line: str, *, stdin: bool) -> tuple[paramiko.Channel, paramiko.Transport]:
        """A session channel running ``shell_line`` in the wrapper that announces its group id, and its transport.

        When the connection turns out dead while the channel is being opened (dropped while idle, or closed
        under this command by another thread's loss), nothing has started on the host yet, so the command gets
        one new connection (a single connect attempt: a host that is gone still fails at once, as lost). Once
        the channel is open the command may be running, and a loss is never retried.
        """
        transport = self._transport()
        try:
            chan = self._open_session(transport)
        except ConnectionLost as lost:
            try:
                self._ensure(attempts=1)
            except ConnectError as e:
                raise lost from e
            transport = self._transport()
            chan = self._open_session(transport)
        try:
            chan.exec_command(_remote_line(shell_line, stdin=stdin))
        except (paramiko.SSHException, OSError, EOFError) as e:
            with contextlib.suppress(paramiko.SSHException, OSError, EOFError):
                chan.close()
            raise self._refused_or_lost(transport, e) from e
        return chan, transport

    def _open_session(self, transport: paramiko.Transport) -> paramiko.Channel:
        try:
            return transport.open_session(timeout=self.options.connect_timeout_s)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise self._refused_or_lost(transport, e) from e

    def _refused_or_lost(self, transport: paramiko.Transport, e: BaseException) -> ConnectError:
        """A refusal when the server said no to the channel (the connection lives on); a loss when the connection
        broke: the transport is down, or the socket failed or ended (EOF), which the transport's own thread may
        not have noticed yet when this runs."""
        if transport.is_active() and not isinstance(e, (OSError, EOFError)):
            return ConnectError(
                self.name,
                f"the server refused to start a command: {e or type(e).__name__}",
                hint="sshd limits concurrent commands per connection (MaxSessions, default 10)",
            )
        return self._lost(f"the connection was lost ({e or type(e).__name__})")

    def _pump(
        self,
        chan: paramiko.Channel,
        transport: paramiko.Transport,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        head: _StderrHead,
    ) -> tuple[int, bool]:
        deadline = None if timeout is None else time.monotonic() + timeout
        # Without input the command reads /dev/null (_remote_line): no EOF is sent, see there why. With input,
        # the EOF follows the last byte; the command reads to it, so it cannot have ended and closed before.
        pending = stdin or b""
        timed_out = False
        drain = DrainClock()
        while True:
            try:
                if _buffered(chan):
                    drain.output(time.monotonic())
                while chan.recv_ready():
                    stdout.feed(chan.recv(_CHUNK))
                while chan.recv_stderr_ready():
                    head.feed(chan.recv_stderr(_CHUNK))
                if pending and chan.send_ready():
                    sent = chan.send(pending[:_CHUNK])
                    pending = pending[sent:]
                    if not pending:
                        chan.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException) as e:
                # The command may still be running out there, so do not report an exit status.
                if not transport.is_active():
                    raise self._lost("the connection was lost") from e
                pending = b""  # the remote side closed stdin early; that is the command's business
            now = time.monotonic()
            got_status = chan.exit_status_ready()
            if got_status and chan.exit_status == -1 and not transport.is_active() and not timed_out:
                raise self._lost("the connection was lost")
            if got_status:
                drain.exited(now)
                # Done when all output is in, or it stopped coming (workload/hosts/drain.py).
                if (chan.eof_received and not _buffered(chan)) or drain.over(now):
                    break
            if not transport.is_active() and not timed_out:
                raise self._lost("the connection was lost")
            if deadline is not None and not timed_out and now >= deadline:
                timed_out = True
                self._signal_groups(transport, [head.pgid] if head.pgid is not None else [])
                # The killed wrapper sends no exit status; wait a little for the channel to close.
                deadline = now + 5.0
                continue
            if timed_out and deadline is not None and now >= deadline:
                break
            wait = 0.01 if pending else _TICK_S
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - now))
            if chan.eof_received and not got_status and not _buffered(chan):
                # All output is in; the exit status follows at once but does not wake select().
                chan.status_event.wait(wait)
            else:
                select.select([chan], [], [], wait)
        head.close()
        if timed_out:
            return -1, True
        return chan.exit_status, False

    def interrupt(self, *, grace_s: float = 2.0) -> None:
        """Stop every command this host object is running now: SIGTERM, then SIGKILL after ``grace_s``.

        Their ``run`` calls then return (killed by a signal). Used when the user presses Ctrl-C:
        closing a channel alone would leave its command running, since without a pty sshd sends
        no SIGHUP.
        """
        # A command just started announces its group within a round trip; one missed here would
        # run on to its end (e.g. a whole apt install) after the user asked everything to stop. The
        # wait ends as soon as every command has announced; its bound is not the grace (0.5 s in a
        # test): beside a busy core a remote shell took longer than that to start and announce.
        self._unannounced.wait_zero(timeout_s=ANNOUNCE_WAIT_S)
        groups = sorted(self._running)
        if groups and self.is_connected:
            self._signal_groups(self._transport(), groups, grace_s=grace_s)

    def _signal_groups(self, transport: paramiko.Transport, pgids: list[int], *, grace_s: float | None = None) -> None:
        """Kill process groups over a new channel: SIGKILL now, or SIGTERM and SIGKILL after ``grace_s``.

        A non-root user cannot signal the root-owned processes of a ``sudo`` command, so for
        non-root connections the kill is repeated through sudo (quietly; it fails harmlessly when
        the command did not use sudo or sudo is not allowed).
        """
        if not pgids:
            log.warning("[%s] no process group id from the command to stop; closing its channel only", self.name)
            return
        targets = " ".join(f"-{g}" for g in pgids)
        # No "--": dash's kill builtin rejects it; after a signal name a negative number is a group.
        line = f"kill -KILL {targets} 2>/dev/null"
        if grace_s is not None:
            line = f"kill -TERM {targets} 2>/dev/null; sleep {grace_s:g}; " + line
        stdin = b""
        if self._identity is not None and not self.is_root:
            # As root when sudo allows it (it reaches sudo'd commands too), else as ourselves.
            if self.sudo_password is not None:
                line = f"sudo -S -k -p '' sh -c {shlex.quote(line)} 2>/dev/null || {{ {line}; }}"
                stdin = (self.sudo_password.value + "\n").encode()
            else:
                line = f"sudo -n sh -c {shlex.quote(line)} 2>/dev/null || {{ {line}; }}"
        line += "; true"
        try:
            chan = transport.open_session(timeout=self.options.connect_timeout_s)
            try:
                # No EOF (see _remote_line): kill reads nothing, and sudo -S only its password line.
                chan.exec_command(line)
                if stdin:
                    chan.sendall(stdin)
                end = time.monotonic() + 2 * (grace_s or 0) + 10.0
                while not chan.exit_status_ready() and time.monotonic() < end:
                    select.select([chan], [], [], _TICK_S)
                    while chan.recv_ready():
                        chan.recv(_CHUNK)
            finally:
                chan.close()
        except (paramiko.SSHException, OSError, EOFError) as e:
            log.warning("[%s] could not stop process groups %s: %s", self.name, targets, e)

    # -- files -----------------------------------------------------------------------------------
    def _sftp_client(self) -> paramiko.SFTPClient:
        client = self._ensure()
        with self._lock:
            return self._sftp_locked(client)

    def _sftp_locked(self, client: paramiko.SSHClient) -> paramiko.SFTPClient:
        if self._sftp is None:
            try:
                self._sftp = client.open_sftp()
            except (paramiko.SSHException, OSError, EOFError) as e:
                if not self.is_connected:
                    raise self._lost(f"the connection was lost ({e})", command="sftp") from e
                raise ConnectError(
                    self.name,
                    f"cannot start SFTP: {e}",
                    hint="the server must enable the sftp subsystem (Subsystem sftp ... in sshd_config)",
                ) from e
        return self._sftp

    @contextlib.contextmanager
    def _file_errors(self, what: str, path: str) -> Iterator[None]:
        try:
            yield
        except OSError as e:
            if not self.is_connected:
                raise self._lost(f"the connection was lost during {what} {path}", command=f"{what} {path}") from e
            if e.errno == errno.ENOENT:
                raise FileNotFoundError(errno.ENOENT, f"[{self.name}] no such file", path) from None
            raise FileTransferError(self.name, path, f"{what} failed: {e.strerror or e}") from None
        except (paramiko.SSHException, EOFError) as e:
            if not self.is_connected:
                raise self._lost(f"the connection was lost during {what} {path}", command=f"{what} {path}") from e
            raise FileTransferError(self.name, path, f"{what} failed: {e}") from None

    def _put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        with open(local_path, "rb") as src:
            sftp = self._sftp_client()
            with self._file_errors("upload to", remote_path):
                self._atomic_write(sftp, remote_path, lambda f: _copy(src, f), mode)

    def get(self, remote_path: str, local_path: str) -> None:
        sftp = self._sftp_client()
        with self._file_errors("download of", remote_path):
            # into a temporary made with O_EXCL beside the target, then renamed: never through a link
            atomic_write_bytes(local_path, lambda f: sftp.getfo(remote_path, f))

    def read_bytes(self, path: str) -> bytes:
        sftp = self._sftp_client()
        with self._file_errors("read of", path), sftp.open(path, "rb") as f:
            f.prefetch()
            return f.read()

    def _write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        sftp = self._sftp_client()
        with self._file_errors("write of", path):
            self._atomic_write(sftp, path, lambda f: f.write(data), mode)

    def exists(self, path: str) -> bool:
        sftp = self._sftp_client()
        with self._file_errors("stat of", path):
            try:
                sftp.stat(path)
            except FileNotFoundError:
                return False
            except OSError as e:
                if e.errno == errno.ENOENT:
                    return False
                raise
            return True

    @staticmethod
    def _atomic_write(
        sftp: paramiko.SFTPClient, path: str, fill: Callable[[paramiko.SFTPFile], object], mode: int | None
    ) -> None:
        directory, base = posixpath.split(path)
        tmp = posixpath.join(directory, f".{base}.workload-{uuid.uuid4().hex[:8]}.tmp")
        try:
            with sftp.open(tmp, "wbx") as f:  # O_EXCL on the host: never a file or link someone prepared
                f.set_pipelined(True)
                fill(f)
            if mode is None:
                with contextlib.suppress(FileNotFoundError):
                    mode = stat.S_IMODE(sftp.stat(path).st_mode or 0)  # keep the mode of the file we replace
            if mode is not None:
                sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, path)
        except BaseException:
            with contextlib.suppress(Exception):
                sftp.remove(tmp)
            raise


def _copy(src: BinaryIO, dst: paramiko.SFTPFile) -> None:
    while chunk := src.read(_CHUNK):
        dst.write(chunk)
