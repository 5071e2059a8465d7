"""The ``Host`` interface: run commands and move files on one machine, local or remote.

Transports (:class:`~workload.hosts.local.LocalHost`, :class:`~workload.hosts.ssh.SshHost`)
implement the primitives ``_execute``, ``put``, ``get`` and friends. Everything that must behave
the same on every transport (sudo wrapping, masking of secrets, the ``run``/``check`` split,
line streaming with a ``[host]`` prefix, output limits) lives here, once.

Command results, output collection and the errors a command raises are in
:mod:`workload.hosts.result`; host URLs in :mod:`workload.hosts.spec`; the stop hooks' helpers in
:mod:`workload.hosts.stophooks` (all re-exported here).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import itertools
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from workload.commands import Command, Secret, cmd
from workload.errors import CommandFailed
from workload.hosts import batch
from workload.hosts.guard import guarded_argv

# Moved by job (issue 14); re-exported so that every name stays importable from here.
from workload.hosts.result import (
    DEFAULT_CAPTURE_LIMIT,
    MAX_LINE_BYTES,
    TIMEOUT_EXIT,
    CommandResult,
    ConnectionLost,
    FileTransferError,
    LineSink,
    OutputCollector,
    mask_secrets,
    raise_for_result,
)
from workload.hosts.spec import HostSpec, parse_host_spec
from workload.hosts.stophooks import STOP_HOOK_SLACK_S, _call_quietly, _finish_stop_hooks

__all__ = [
    "DEFAULT_CAPTURE_LIMIT",
    "MAX_LINE_BYTES",
    "STOP_HOOK_SLACK_S",
    "TIMEOUT_EXIT",
    "CommandResult",
    "ConnectionLost",
    "FileTransferError",
    "Host",
    "HostIdentity",
    "HostSpec",
    "LineSink",
    "OutputCollector",
    "mask_secrets",
    "parse_host_spec",
    "probe",
    "raise_for_result",
]


@dataclass
class HostIdentity:
    """Who we are on the host, read once per connection (cheap, and needed for sudo).

    ``node`` is the machine's own name (``uname -n``): what tells apart hosts whose ``home`` is one
    shared folder (NFS homes, an HPC cluster's ``$HOME`` on every node).
    """

    user: str
    uid: int
    home: str
    node: str = ""

    @property
    def state_root(self) -> str:
        """This machine's own folder for workload's state under the user's home.

        ``~/.local/state/workload/nodes/<node>``: nodes that share a home never share a folder (two
        nodes writing one run's results into one folder reported each other's logs). The node name
        is kept to the characters a path may hold safely.
        """
        node = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.node).strip(".") or "unnamed-node"
        return f"{self.home.rstrip('/') or ''}/.local/state/workload/nodes/{node}"


class Host(abc.ABC):
    """One target machine.

    ``run`` never raises for a non-zero exit (it raises only when the host cannot be reached:
    :class:`~workload.errors.ConnectError`); ``check`` raises :class:`CommandFailed` naming host,
    command, exit code and output tail (:class:`CommandTimeout` when the timeout killed it).

    Commands run as ``sh -c LINE`` where LINE is :meth:`Command.shell_line`, wrapped by
    :meth:`wrap` in ``sudo`` when the command asks for root (or another user) and the connecting
    user is not already that user.
    """

    #: Short name used as the ``[name]`` prefix of every log line.
    name: str
    #: Password for ``sudo -S`` when the connecting user is not root and sudo needs one.
    sudo_password: Secret | None = None
    #: Optional line sink used when a call does not give one (e.g. the console reporter).
    default_sink: LineSink | None = None
    #: Incremented by transports each time a new connection is opened. Code that must notice that
    #: a connection was replaced (``wait_for_reboot``) compares it before and after.
    connection_generation: int = 0

    # -- capabilities: what callers ask instead of checking a transport's type -----------------
    # A new transport (a Slurm node, say) sets these and every caller follows; no caller names a
    # transport class.
    #: The host is the controller itself: rebooting it would end this process, so a step's reboot
    #: stops the run with RebootRequired (resume after rebooting) instead of waiting for the host.
    is_local: ClassVar[bool] = False
    #: The host's files are the controller's files: a result folder on it is used where it is,
    #: not copied back into the run folder.
    files_are_local: ClassVar[bool] = False
    #: :meth:`exec_channel` works: a raw byte stream to a command over this host's own connection
    #: (the Docker API is dialled through it: :mod:`workload.mlperf.docker_ssh`).
    can_open_channels: ClassVar[bool] = False

    @property
    def python(self) -> str:
        """The Python interpreter workload's own helper scripts run with on this host."""
        return "python3"

    #: Whether steps may change this host (install packages). False on a scheduler's node (Slurm),
    #: which the cluster's admins provision: dependency steps then only say what is missing.
    allows_changes: bool = True

    @property
    def scheduler_login(self) -> Host | None:
        """The host where the scheduler's tools run, when this host is a scheduler's node (Slurm); else None."""
        return None

    def launch_argv(self, shell_line: str) -> list[str]:
        """The command that, run on :attr:`scheduler_login`, runs ``shell_line`` on this host (a job step).

        Only where :attr:`scheduler_login` is set."""
        raise NotImplementedError(f"{type(self).__name__} has no scheduler login")

    @property
    def is_connected(self) -> bool:
        """Whether the transport's connection is open now (a transport without one always is)."""
        return True

    @property
    def has_connected(self) -> bool:
        """Whether this object has reached the host at least once (a sampler waits for it)."""
        return self.connection_generation > 0

    def sampling_copy(self) -> Host | None:
        """A second host object for the same machine, for a sampler thread: its own connection,
        no new host keys recorded, one connect attempt per use. None: this transport has none."""
        return None

    def exec_channel(self, shell_line: str, *, timeout: float | None = None) -> Any:
        """A raw channel running ``shell_line`` on the host (only where :attr:`can_open_channels`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot open channels")

    _identity: HostIdentity | None = None
    #: Whether ``sudo -n true`` works, probed once and only when a sudo password is configured
    #: (see :meth:`wrap`).
    _sudo_passwordless: bool | None = None

    # -- primitives each transport implements ----------------------------------------------------
    @abc.abstractmethod
    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        """Run ``shell_line`` with ``sh -c``; feed output to the collectors.

        Returns ``(exit_code, timed_out)``. Kills the command (and its children) at ``timeout``.
        Raises :class:`~workload.errors.ConnectError` when the transport fails
        (:class:`ConnectionLost` when it broke while the command ran).
        """

    def _execute_guarded(
        self,
        argv: list[str],
        stop_argv: list[str],
        *,
        sudo: bool,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        """Run ``argv`` (through sudo when ``sudo``) as :meth:`_execute` does, under the guard.

        When the command is told to end on this host (SIGTERM or SIGHUP: the watchdog after a lost
        connection), ``stop_argv`` runs first, as the same user (:mod:`workload.hosts.guard`): for
        work the command started where killing it does not reach (a container's process). A
        transport whose commands cannot trap that signal puts the guard elsewhere (``hosts/slurm.py``).
        """
        guarded = cmd(*guarded_argv(shlex.join(stop_argv), argv), sudo=sudo, timeout=timeout)
        line, prefix = self.wrap(guarded)  # sudo -S puts the password first on stdin
        return self._execute(line, stdin=joined_stdin(prefix, stdin), timeout=timeout, stdout=stdout, stderr=stderr)

    @abc.abstractmethod
    def _put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        """Copy a local file to the host (atomically: temporary name, then rename)."""

    @abc.abstractmethod
    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file from the host to the local machine (FileNotFoundError if missing)."""

    @abc.abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """Contents of a file on the host (FileNotFoundError if missing)."""

    @abc.abstractmethod
    def _write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """Write a file on the host atomically (write to a temporary name, then rename)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a path exists on the host (symbolic links are followed)."""

    def connect(self, *, attempts: int | None = None) -> None:
        """Open the connection now rather than on first use (no-op for local hosts).

        ``attempts`` overrides the transport's retry count (1: a single try, for polling).
        Raises :class:`~workload.errors.ConnectError` when the host cannot be reached.
        """

    def close(self) -> None:
        """Release the connection; the object may reconnect on next use."""

    def interrupt(self, *, grace_s: float = 2.0) -> None:
        """Stop every command this host object is running now (SIGTERM, SIGKILL after ``grace_s``).

        Their ``run`` calls then return (killed by a signal). Called from another thread when the
        user presses Ctrl-C or a fleet stops; transports that can stop commands override it. The
        stop hooks of :meth:`on_interrupt` run too, whichever transport overrides this (see
        :meth:`__init_subclass__`).
        """
        _finish_stop_hooks(self._start_stop_hooks(grace_s), grace_s)

    # -- stop hooks: work that runs outside the transport's own commands -------------------------
    _stop_hooks: dict[int, Callable[[float], None]] | None = None
    _stop_hooks_lock = threading.Lock()
    _stop_hook_ids = itertools.count()

    @contextlib.contextmanager
    def on_interrupt(self, stop: Callable[[float], None]) -> Iterator[None]:
        """While the with-block runs, :meth:`interrupt` also calls ``stop(grace_s)``.

        For work this host's transport does not track because it runs through another channel or
        host (a container host's commands in a container, which killing their ``docker exec``
        clients does not end): ``stop`` ends it, gently first, forcibly after ``grace_s``.
        It runs in its own thread, beside the transport's own stopping; it must be safe to call more
        than once and must not raise (errors are ignored).
        """
        with self._stop_hooks_lock:
            if self._stop_hooks is None:
                self._stop_hooks = {}
            key = next(self._stop_hook_ids)
            self._stop_hooks[key] = stop
        try:
            yield
        finally:
            with self._stop_hooks_lock:
                if self._stop_hooks is not None:
                    self._stop_hooks.pop(key, None)

    def _start_stop_hooks(self, grace_s: float) -> list[threading.Thread]:
        with self._stop_hooks_lock:
            hooks = list((self._stop_hooks or {}).values())
        threads = [
            threading.Thread(target=_call_quietly, args=(hook, grace_s), name=f"stop-{self.name}", daemon=True)
            for hook in hooks
        ]
        for thread in threads:
            thread.start()
        return threads

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Make every transport's ``interrupt`` run the stop hooks too, without each calling ``super()``."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("interrupt")
        if own is None or getattr(own, "_runs_stop_hooks", False):
            return

        @functools.wraps(own)
        def interrupt(self: Host, *, grace_s: float = 2.0) -> None:
            hooks = self._start_stop_hooks(grace_s)
            try:
                own(self, grace_s=grace_s)
            finally:
                _finish_stop_hooks(hooks, grace_s)

        setattr(interrupt, "_runs_stop_hooks", True)  # noqa: B010  (a function attribute; mypy-clean)
        setattr(cls, "interrupt", interrupt)  # noqa: B010  (assigning to a method)

    def time_left_s(self) -> float | None:
        """Seconds this host may still be used (a scheduler's time limit, see ``hosts/slurm.py``); None: no limit."""
        return None

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- shared behaviour ------------------------------------------------------------------------
    @property
    def identity(self) -> HostIdentity:
        if self._identity is None:
            out = self._raw_check("id -u; id -un; printf '%s\\n' \"$HOME\"; uname -n")
            uid, user, home, node = ([*out.splitlines(), "", "", "", ""])[:4]
            self._identity = HostIdentity(
                user=user.strip(), uid=int(uid.strip() or -1), home=home.strip() or "/", node=node.strip()
            )
        return self._identity

    @property
    def is_root(self) -> bool:
        return self.identity.uid == 0

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        """Copy a local file to the host (atomically: temporary name, then rename)."""
        self.forget_facts()
        self._put(local_path, remote_path, mode=mode)

    def write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """Write a file on the host atomically (write to a temporary name, then rename)."""
        self.forget_facts()
        self._write_bytes(path, data, mode=mode)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", "replace")

    def write_text(self, path: str, text: str, *, mode: int | None = None) -> None:
        self.write_bytes(path, text.encode("utf-8"), mode=mode)

    # -- remembered facts ------------------------------------------------------------------------
    #: Results of ``readonly`` commands (with their scope) while :meth:`remembering_facts` is
    #: active, by shell line and stdin; None outside it.
    _fact_memo: dict[tuple[str, bytes | None], tuple[str | None, CommandResult]] | None = None

    @contextlib.contextmanager
    def remembering_facts(self) -> Iterator[None]:
        """Within the block, a ``readonly`` command that already ran returns its first result.

        A step reads the same facts in its preflight, plan, re-plan and verify, and the next step
        many of them again; on a remote host each read is a round trip and a process on the host.
        Nothing here can go stale through this object: any command that is not ``readonly``, any
        file write, and :meth:`forget_facts` forget every remembered result (a reboot is a command
        too); a command with a :attr:`~workload.commands.Command.scope` forgets only the facts of
        that scope. Only for stretches where the host changes through this object alone: work
        done through another channel (the docker SDK), or by another process on the host, would not
        be noticed (code that waits for another process calls :meth:`forget_facts`). Nested blocks
        share the outer memo.
        """
        if self._fact_memo is not None:
            yield
            return
        self._fact_memo = {}
        try:
            yield
        finally:
            self._fact_memo = None

    def forget_facts(self) -> None:
        """Forget every remembered fact (see :meth:`remembering_facts`)."""
        if self._fact_memo:
            self._fact_memo.clear()

    def prefetch(self, commands: Iterable[Command]) -> int:
        """Run the ``readonly`` commands not remembered yet in one round trip; remember each result.

        For callers about to read many facts (an installer before it plans): the reads that follow
        get the remembered results, as if each had run alone at this moment. Only inside
        :meth:`remembering_facts` (elsewhere nothing would keep the results); commands with stdin,
        secrets or a sudo password are left to run on their own. When the batch itself fails (a
        timeout, a cut-off reply) nothing is remembered, so each read then runs on its own as usual.
        Returns how many results were remembered.
        """
        memo = self._fact_memo
        if memo is None:
            return 0
        todo: dict[str, Command] = {}
        for command in commands:
            if not command.readonly or command.input is not None or command.secrets():
                continue
            line, stdin = self.wrap(command)
            if stdin is None and (line, None) not in memo:
                todo.setdefault(line, command)
        if len(todo) < 2:
            return 0
        boundary = batch.new_boundary()
        lines = list(todo)
        limit = DEFAULT_CAPTURE_LIMIT * len(lines)
        out = OutputCollector("stdout", None, [], limit)
        err = OutputCollector("stderr", None, [], limit)
        timeouts = [c.timeout for c in todo.values()]
        timeout = None if None in timeouts else sum(t for t in timeouts if t is not None)
        started = time.monotonic()
        try:
            code, timed_out = self._execute(
                batch.batch_script(lines, boundary), stdin=None, timeout=timeout, stdout=out, stderr=err
            )
        except ConnectionLost as lost:
            if lost.command is not None:
                raise
            what = f"reading {len(lines)} facts: " + "; ".join(c.display() for c in todo.values())
            raise ConnectionLost(self.name, f"{lost.problem} while {what}", command=what, hint=lost.hint) from lost
        out.close()
        err.close()
        parts: list[batch.BatchedResult] | None = None
        if code == 0 and not timed_out and not out.truncated and not err.truncated:
            parts = batch.split_batch(out.text(), err.text(), boundary, len(lines))
        if parts is None:
            return 0
        each_s = (time.monotonic() - started) / len(lines)
        for line, part in zip(lines, parts, strict=True):
            command = todo[line]
            result = CommandResult(
                host=self.name,
                command=command.display(),
                argv=command.masked_argv(),
                returncode=part.returncode,
                stdout=part.stdout,
                stderr=part.stderr,
                duration_s=each_s,
            )
            memo[(line, None)] = (command.scope, result)
        return len(parts)

    def wrap(self, command: Command) -> tuple[str, bytes | None]:
        """The shell line and stdin for ``command`` on this host, with sudo applied.

        No sudo when the connecting user already is the wanted user (root needs no sudo).
        Otherwise ``sudo -n`` (never prompts: fails with "a password is required", which
        :func:`raise_for_result` turns into a hint), or, when :attr:`sudo_password` is set and sudo
        really asks for one, ``sudo -S -k`` with the password as the first line of stdin.
        ``-k`` makes sudo ignore cached credentials, so the password line is always consumed and
        never reaches the command's own stdin; for the same reason the password is only sent when
        a probe showed that ``sudo -n`` is refused.
        """
        line = command.shell_line()
        stdin = command.input.encode() if command.input is not None else None
        wants_root = command.sudo and not self.is_root
        wants_user = command.user is not None and command.user != self.identity.user
        if wants_root or wants_user:
            prefix = ["sudo"]
            if self.sudo_password is not None and not self._sudo_is_passwordless():
                # -S reads the password from stdin; -p '' keeps the prompt out of stderr.
                prefix += ["-S", "-k", "-p", ""]
                stdin = (self.sudo_password.value + "\n").encode() + (stdin or b"")
            else:
                prefix += ["-n"]
            if wants_user:
                prefix += ["-u", command.user or "root"]
            prefix += ["-H", "--", "sh", "-c", line]
            line = shlex.join(prefix)
        return line, stdin

    def _sudo_is_passwordless(self) -> bool:
        if self._sudo_passwordless is None:
            out = OutputCollector("stdout", None, [], 4096)
            err = OutputCollector("stderr", None, [], 4096)
            code, timed_out = self._execute("sudo -n true", stdin=None, timeout=60, stdout=out, stderr=err)
            self._sudo_passwordless = code == 0 and not timed_out
        return self._sudo_passwordless

    def run(
        self,
        command: Command,
        *,
        on_line: LineSink | None = None,
        capture_limit: int = DEFAULT_CAPTURE_LIMIT,
    ) -> CommandResult:
        """Run a command; return its result whatever the exit code.

        Output is streamed line by line to ``on_line`` (or :attr:`default_sink`) as it arrives,
        with secrets masked; at most ``capture_limit`` bytes of each stream are kept (the tail).
        """
        secrets = command.secrets() + ([self.sudo_password.value] if self.sudo_password else [])
        sink = on_line if on_line is not None else self.default_sink
        out = OutputCollector("stdout", sink, secrets, capture_limit)
        err = OutputCollector("stderr", sink, secrets, capture_limit)
        line, stdin = self.wrap(command)
        memo = self._fact_memo
        if memo is not None:
            if command.readonly:
                if (remembered := memo.get((line, stdin))) is not None:
                    return remembered[1]
            elif command.scope is None:
                memo.clear()  # it may change what any fact would read
            else:
                for key in [k for k, (scope, _) in memo.items() if scope == command.scope]:
                    del memo[key]
        started = time.monotonic()
        try:
            code, timed_out = self._execute(line, stdin=stdin, timeout=command.timeout, stdout=out, stderr=err)
        except ConnectionLost as lost:
            if lost.command is not None:
                raise
            raise ConnectionLost(
                self.name,
                f"{lost.problem} while running: {command.display()}",
                command=command.display(),
                hint=lost.hint,
            ) from lost
        out.close()
        err.close()
        result = CommandResult(
            host=self.name,
            command=command.display(),
            argv=command.masked_argv(),
            returncode=TIMEOUT_EXIT if timed_out else code,
            stdout=out.text(),
            stderr=err.text(),
            duration_s=time.monotonic() - started,
            timed_out=timed_out,
            truncated=out.truncated or err.truncated,
        )
        if memo is not None and command.readonly and not timed_out:
            memo[(line, stdin)] = (command.scope, result)
        return result

    def check(self, command: Command, *, on_line: LineSink | None = None, hint: str | None = None) -> CommandResult:
        """Run a command; raise :class:`CommandFailed` unless it exits 0."""
        result = self.run(command, on_line=on_line)
        raise_for_result(result, hint=hint, sudo_used=command.sudo or command.user is not None)
        return result

    def _raw_check(self, shell_line: str) -> str:
        """Run a fixed shell line of our own (no sudo, no identity lookup); return stdout."""
        out = OutputCollector("stdout", None, [], DEFAULT_CAPTURE_LIMIT)
        err = OutputCollector("stderr", None, [], DEFAULT_CAPTURE_LIMIT)
        code, timed_out = self._execute(shell_line, stdin=None, timeout=60, stdout=out, stderr=err)
        out.close()
        err.close()
        if code != 0 or timed_out:
            raise CommandFailed(self.name, shell_line, code, out.text(), err.text(), argv=("sh", "-c", shell_line))
        return out.text()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def joined_stdin(prefix: bytes | None, stdin: bytes | None) -> bytes | None:
    """What a wrapped command reads: the sudo password line (``prefix``, from :meth:`Host.wrap`), then ``stdin``."""
    return None if prefix is None and stdin is None else (prefix or b"") + (stdin or b"")


def probe(host: Host, *argv: str) -> CommandResult:
    """Run a read-only query command (facts); never sudo, short timeout."""
    return host.run(cmd(*argv, timeout=120, readonly=True))
