"""The one exception family of the project.

Every error a user can cause or meet derives from :class:`WorkloadError`. Library code raises
these; only the CLI turns them into a message and an exit code (``exit_code`` below, documented
in the README). Anything that is not a ``WorkloadError`` is a bug and is reported as such.
"""

from __future__ import annotations

from collections.abc import Sequence

from workload.commands import mask_text

# Exit codes (README "Exit codes" lists the same table).
EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CONNECT = 3
EXIT_STEP_FAILED = 4
EXIT_REBOOT_REQUIRED = 5
EXIT_INVALID_RESULTS = 6
EXIT_REGRESSION = 7
EXIT_OUTPUT = 8
EXIT_INTERRUPTED = 130


class WorkloadError(Exception):
    """Base of all expected errors. ``str(err)`` is the complete one-line-first message."""

    exit_code: int = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # Messages are shown and logged (console, host.log, run.json): URL passwords a step put into
        # its message are masked here, once; the run masks its own secret values where it shows them.
        message = mask_text(message)
        super().__init__(message)
        self.message = message
        self.hint = mask_text(hint) if hint is not None else None

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UsageError(WorkloadError):
    """Bad command-line input (unknown option value, unreadable file, ...)."""

    exit_code = EXIT_USAGE


class ProfileError(WorkloadError):
    """A profile that cannot be loaded, resolved or validated.

    ``location`` names the place, e.g. ``PERF-GPU-MLPERF.json: Actions[1].Parameters.Model``.
    """

    exit_code = EXIT_USAGE

    def __init__(self, location: str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{location}: {problem}" if location else problem, hint=hint)
        self.location = location
        self.problem = problem


class ConnectError(WorkloadError):
    """A host could not be reached, authenticated, or its connection was lost."""

    exit_code = EXIT_CONNECT

    def __init__(self, host: str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"[{host}] {problem}", hint=hint)
        self.host = host


def _tail(text: str, lines: int) -> list[str]:
    return [line for line in text.splitlines() if line.strip()][-lines:]


class CommandFailed(WorkloadError):
    """A command exited non-zero where success was required.

    The message names the host, the (masked) command, the exit code and the last lines of output.
    """

    exit_code = EXIT_STEP_FAILED

    def __init__(
        self,
        host: str,
        command: str,
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        *,
        reason: str | None = None,
        hint: str | None = None,
        tail_lines: int = 12,
    ) -> None:
        self.host = host
        self.command = command
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        what = reason or f"exited with code {returncode}"
        parts = [f"[{host}] command {what}: {command}"]
        tail = _tail(stderr, tail_lines) or _tail(stdout, tail_lines)
        if tail:
            parts.append("  last output:")
            parts.extend(f"    {line}" for line in tail)
        super().__init__("\n".join(parts), hint=hint)


class CommandTimeout(CommandFailed):
    """A command ran past its timeout and was killed."""


class FactError(WorkloadError):
    """A fact about a host could not be read or parsed."""

    exit_code = EXIT_STEP_FAILED


class StepError(WorkloadError):
    """A profile step failed: planning, applying or verifying it."""

    exit_code = EXIT_STEP_FAILED

    def __init__(self, step: str, problem: str, *, host: str | None = None, hint: str | None = None) -> None:
        where = f"[{host}] {step}" if host else step
        super().__init__(f"{where}: {problem}", hint=hint)
        self.step = step
        self.host = host


class RebootRequired(WorkloadError):
    """The local host must be rebooted before the profile can go on; re-run to resume."""

    exit_code = EXIT_REBOOT_REQUIRED


class ResultsError(WorkloadError):
    """A result file could not be parsed (names the file)."""

    exit_code = EXIT_USAGE


class BenchmarkFailed(WorkloadError):
    """The benchmark itself failed or produced fewer results than expected."""

    exit_code = EXIT_STEP_FAILED


class InvalidResults(WorkloadError):
    """Results were collected but at least one is INVALID or failed its accuracy check."""

    exit_code = EXIT_INVALID_RESULTS


class OutputError(WorkloadError):
    """The run folder or an output file could not be written (disk full, read-only, permissions).

    Names the path. What could be collected is kept: the benchmark's verdict is still printed.
    """

    exit_code = EXIT_OUTPUT

    @classmethod
    def from_os_error(cls, what: str, path: object, exc: OSError) -> OutputError:
        return cls(
            f"cannot write {what} {exc.filename or path}: {exc.strerror or exc}",
            hint="free space or pick a writable folder (--output-dir / --output)",
        )


class HostBug(WorkloadError):
    """An unexpected exception (a bug) on one host; the other hosts and the run folder are kept."""

    exit_code = EXIT_INTERNAL


class Interrupted(WorkloadError):
    """The user pressed Ctrl-C; what was collected so far is kept."""

    exit_code = EXIT_INTERRUPTED


def join_errors(errors: Sequence[WorkloadError]) -> str:
    """One message for several errors (one per host in a fleet run)."""
    return "\n".join(str(e) for e in errors)


class HistoryError(WorkloadError):
    """The run-history database could not be opened, migrated, read or written (names its URL, masked)."""

    exit_code = EXIT_CONNECT
