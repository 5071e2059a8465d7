"""What a command on a host gives back: its result, the bounded line collector, the errors it raises.

Moved out of :mod:`workload.hosts.base` (which re-exports every name): these values are shared by
every transport and by callers of ``run``; the :class:`~workload.hosts.base.Host` contract uses them.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

from workload.commands import MASK, mask_text
from workload.errors import EXIT_STEP_FAILED, CommandFailed, CommandTimeout, ConnectError, WorkloadError

#: Called for each output line: ``(stream, line)`` with stream ``"stdout"`` or ``"stderr"``.
LineSink = Callable[[str, str], None]

#: Exit code reported for a command killed at its timeout (the same as coreutils ``timeout``).
TIMEOUT_EXIT = 124

#: Bytes of each stream kept in a CommandResult. Output beyond this streams to the sink and the
#: step log but is not held in memory (a 10 GB build log must not exhaust the controller).
DEFAULT_CAPTURE_LIMIT = 8 * 1024 * 1024

#: A "line" longer than this is cut and delivered in pieces, so output without newlines (a progress
#: bar, ``head -c 1G /dev/zero``) cannot grow an unbounded buffer either.
MAX_LINE_BYTES = 64 * 1024


class ConnectionLost(ConnectError):
    """The connection broke while a command or a file transfer was in progress.

    Transports raise it with ``command=None``; :meth:`Host.run` re-raises it naming the (masked)
    command, so the message says what was running. The host reconnects on its next use, so the
    caller may re-run an idempotent step.
    """

    def __init__(self, host: str, problem: str, *, command: str | None = None, hint: str | None = None) -> None:
        super().__init__(host, problem, hint=hint)
        self.command = command


class FileTransferError(WorkloadError):
    """A file could not be read or written on a host (permission denied, no space, a directory...).

    A missing file is reported as :class:`FileNotFoundError` instead, because callers test for it.
    """

    exit_code = EXIT_STEP_FAILED

    def __init__(self, host: str, path: str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path}: {problem}", host=host, hint=hint)
        self.path = path


@dataclass(frozen=True)
class CommandResult:
    """What a finished command gave: exit code, captured output (possibly truncated), timing."""

    host: str
    command: str  # masked display form
    returncode: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    truncated: bool = False
    #: The command's arguments as they may be shown (secrets masked).
    argv: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class OutputCollector:
    """Splits a byte stream into lines, forwards each to a sink, keeps a bounded tail.

    Transports feed raw chunks with :meth:`feed`; :meth:`text` returns what was kept. Memory use is
    bounded by ``limit`` whatever the size of the output.
    """

    def __init__(self, stream: str, sink: LineSink | None, secrets: list[str], limit: int) -> None:
        self.stream = stream
        self.sink = sink
        self.secrets = secrets
        self.limit = limit
        self._pending = b""
        self._kept: collections.deque[str] = collections.deque()
        self._kept_bytes = 0
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        for raw in lines:
            self._line(raw.decode("utf-8", "replace") + "\n")
        while len(self._pending) > MAX_LINE_BYTES:
            # Cut at a UTF-8 character boundary so no character is split into two replacement marks.
            cut = MAX_LINE_BYTES
            while cut > 0 and (self._pending[cut] & 0xC0) == 0x80:
                cut -= 1
            piece, self._pending = self._pending[:cut], self._pending[cut:]
            self._line(piece.decode("utf-8", "replace"))

    def aside(self, raw: bytes, label: str) -> None:
        """Show one line to the sink after ``label``, masked like the output, without keeping it in
        :meth:`text`: it is not the command's output (an SSH login shell's own startup messages)."""
        if self.sink is not None:
            line = mask_text(mask_secrets(raw.decode("utf-8", "replace"), self.secrets))
            self.sink(self.stream, f"{label} {line}")

    def close(self) -> None:
        if self._pending:
            self._line(self._pending.decode("utf-8", "replace"))
            self._pending = b""

    def _line(self, line: str) -> None:
        line = mask_text(mask_secrets(line, self.secrets))
        if self.sink is not None:
            self.sink(self.stream, line.rstrip("\n"))
        self._kept.append(line)
        self._kept_bytes += len(line)
        while self._kept_bytes > self.limit and len(self._kept) > 1:
            self._kept_bytes -= len(self._kept.popleft())
            self.truncated = True

    def text(self) -> str:
        return "".join(self._kept)


def mask_secrets(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


def raise_for_result(result: CommandResult, *, hint: str | None = None, sudo_used: bool = False) -> None:
    """Raise the right error for a failed result (shared by ``check`` and callers of ``run``)."""
    if result.timed_out:
        raise CommandTimeout(
            result.host,
            result.command,
            None,
            result.stdout,
            result.stderr,
            argv=result.argv,
            duration_s=result.duration_s,
            reason=f"was killed at its timeout after {result.duration_s:.1f}s",
            hint=hint,
        )
    if result.returncode != 0:
        if sudo_used and "a password is required" in result.stderr:
            hint = hint or (
                "sudo needs a password on this host: give it with --sudo-password-env VAR "
                "(or --ask-sudo-password), or allow passwordless sudo for this user"
            )
        elif sudo_used and "incorrect password attempt" in result.stderr:
            hint = hint or "the sudo password was refused: check --sudo-password-env / --ask-sudo-password"
        elif sudo_used and "is not in the sudoers file" in result.stderr:
            hint = hint or "this user may not use sudo here: connect as root or as a user listed in /etc/sudoers"
        raise CommandFailed(
            result.host,
            result.command,
            result.returncode,
            result.stdout,
            result.stderr,
            argv=result.argv,
            duration_s=result.duration_s,
            hint=hint,
        )
