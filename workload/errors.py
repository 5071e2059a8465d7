"""The one exception family of the project.

Every error a user can cause or meet derives from :class:`WorkloadError`. Library code raises
these; only the CLI turns them into a message and an exit code (``exit_code`` below, documented
in the README). Anything that is not a ``WorkloadError`` is a bug and is reported as such.
"""

from __future__ import annotations

from workload import exit_codes as _codes
from workload.commands import mask_text

# Exit codes: their one table is workload/exit_codes.py (README and --help are made from it).
EXIT_OK = _codes.EXIT_OK
EXIT_INTERNAL = _codes.EXIT_INTERNAL
EXIT_USAGE = _codes.EXIT_USAGE
EXIT_CONNECT = _codes.EXIT_CONNECT
EXIT_STEP_FAILED = _codes.EXIT_STEP_FAILED
EXIT_REBOOT_REQUIRED = _codes.EXIT_REBOOT_REQUIRED
EXIT_INVALID_RESULTS = _codes.EXIT_INVALID_RESULTS
EXIT_REGRESSION = _codes.EXIT_REGRESSION
EXIT_OUTPUT = _codes.EXIT_OUTPUT
EXIT_HISTORY = _codes.EXIT_HISTORY
EXIT_INTERRUPTED = _codes.EXIT_INTERRUPTED


class WorkloadError(Exception):
    """Base of all expected errors: fields, turned into text only when shown.

    ``problem`` says what went wrong, in words, without saying where; ``host`` and ``step`` say
    where (None: not known where it was raised, or not about one host/step); ``hint`` says what
    to do. Code that decides by an error (the engine: whose host, which step) reads these fields,
    never the text. :meth:`render` builds the text from them (``[host] step: problem``, then
    ``  hint: ...``) each time it is asked, so context added later is part of it; ``str(err)``
    is that text. The CLI is the one place that shows it to the user.
    """

    exit_code: int = EXIT_INTERNAL

    def __init__(
        self, problem: str, *, host: str | None = None, step: str | None = None, hint: str | None = None
    ) -> None:
        # Messages are shown and logged (console, host.log, run.json): URL passwords a step put into
        # its message are masked here, once; the run masks its own secret values where it shows them.
        problem = mask_text(problem)
        super().__init__(problem)
        self.problem = problem
        self.host = host
        self.step = step
        self.hint = mask_text(hint) if hint is not None else None

    def describe(self) -> str:
        """The problem in words without where it happened (subclasses add their details: output lines)."""
        return self.problem

    @property
    def message(self) -> str:
        """``[host] step: problem`` (the parts that are known), without the hint."""
        return self.message_in()

    def message_in(self, host: str | None = None, step: str | None = None) -> str:
        """The message for a line that already names ``host`` and ``step``: those parts left out."""
        shown_host = self.host if self.host != host else None
        shown_step = self.step if self.step != step else None
        where = " ".join(part for part in (f"[{shown_host}]" if shown_host else "", shown_step or "") if part)
        if not where:
            return self.describe()
        return f"{where}: {self.describe()}" if shown_step else f"{where} {self.describe()}"

    def render(self) -> str:
        """The complete text: :attr:`message`, then the hint on its own line."""
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message

    def fields(self) -> dict[str, object]:
        """The error as data (run.json): its kind, where, the problem, the hint."""
        return {
            "kind": type(self).__name__,
            "host": self.host,
            "step": self.step,
            "problem": self.describe(),
            "hint": self.hint,
        }

    def __str__(self) -> str:
        return self.render()


class UsageError(WorkloadError):
    """Bad command-line input (unknown option value, unreadable file, ...)."""

    exit_code = EXIT_USAGE


class NoBaseline(UsageError):
    """The history holds no run that ``compare --baseline`` names (``--if-no-baseline`` decides what follows)."""


class ProfileError(WorkloadError):
    """A profile that cannot be loaded, resolved or validated.

    ``location`` names the place, e.g. ``PERF-GPU-MLPERF.json: Actions[1].Parameters.Model``.
    """

    exit_code = EXIT_USAGE

    def __init__(self, location: str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(problem, hint=hint)
        self.location = location

    def describe(self) -> str:
        return f"{mask_text(self.location)}: {self.problem}" if self.location else self.problem


class ConnectError(WorkloadError):
    """A host could not be reached, authenticated, or its connection was lost."""

    exit_code = EXIT_CONNECT

    host: str

    def __init__(self, host: str, problem: str, *, hint: str | None = None) -> None:
        super().__init__(problem, host=host, hint=hint)


def _tail(text: str, lines: int) -> list[str]:
    return [line for line in text.splitlines() if line.strip()][-lines:]


class CommandFailed(WorkloadError):
    """A command exited non-zero where success was required.

    Keeps the command's whole result as fields: ``host``, ``command`` (the masked display form),
    ``argv`` (the masked arguments), ``returncode`` (None when it was killed), ``stdout``,
    ``stderr`` (masked as they streamed), ``duration_s``; :attr:`tail` is the last lines of output
    the message shows.
    """

    exit_code = EXIT_STEP_FAILED
    host: str

    def __init__(
        self,
        host: str,
        command: str,
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        *,
        argv: tuple[str, ...] = (),
        duration_s: float | None = None,
        reason: str | None = None,
        hint: str | None = None,
        tail_lines: int = 12,
    ) -> None:
        self.command = mask_text(command)
        self.argv = tuple(mask_text(a) for a in argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.duration_s = duration_s
        self.tail_lines = tail_lines
        what = reason or f"exited with code {returncode}"
        super().__init__(f"command {what}: {command}", host=host, hint=hint)

    @property
    def tail(self) -> list[str]:
        """The last lines of output (stderr's, or stdout's when stderr is empty), masked."""
        lines = _tail(self.stderr, self.tail_lines) or _tail(self.stdout, self.tail_lines)
        return [mask_text(line) for line in lines]

    def describe(self) -> str:
        tail = self.tail
        if not tail:
            return self.problem
        return "\n".join([self.problem, "  last output:", *(f"    {line}" for line in tail)])

    def fields(self) -> dict[str, object]:
        return {
            **super().fields(),
            "problem": self.problem,
            "command": self.command,
            "argv": list(self.argv),
            "exit_code": self.returncode,
            "last_output": self.tail,
        }


class CommandTimeout(CommandFailed):
    """A command ran past its timeout and was killed."""


class FactError(WorkloadError):
    """A fact about a host could not be read or parsed."""

    exit_code = EXIT_STEP_FAILED


class StepError(WorkloadError):
    """A profile step failed: planning, applying or verifying it."""

    exit_code = EXIT_STEP_FAILED

    step: str

    def __init__(self, step: str, problem: str, *, host: str | None = None, hint: str | None = None) -> None:
        super().__init__(problem, host=host, step=step, hint=hint)


class RebootRequired(WorkloadError):
    """The local host must be rebooted before the profile can go on; re-run to resume."""

    exit_code = EXIT_REBOOT_REQUIRED


class ResultsError(WorkloadError):
    """A result file could not be parsed (names the file)."""

    exit_code = EXIT_USAGE


class BenchmarkFailed(WorkloadError):
    """The benchmark itself failed or produced fewer results than expected."""

    exit_code = EXIT_STEP_FAILED


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


class HistoryError(WorkloadError):
    """The run-history database could not be opened, migrated, read or written (names its URL, masked).

    Its own exit code (9): 3 means a host could not be reached, and CI must tell the two apart.
    ``run`` and ``results --record`` never exit with it (they warn and keep their verdict).
    """

    exit_code = EXIT_HISTORY
