"""The exit codes of ``workload``: the one table that ``--help``, the README and the code share.

Each code has a constant (imported by :mod:`workload.errors`, where the exceptions carry them), a
short meaning for ``workload --help`` and the full meaning the README's table shows. A test
(``tests/test_exit_codes.py``) checks that the README's table is exactly :func:`readme_rows`, so
the two cannot drift. This module imports nothing: ``workload --help`` reads it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CONNECT = 3
EXIT_STEP_FAILED = 4
EXIT_REBOOT_REQUIRED = 5
EXIT_INVALID_RESULTS = 6
EXIT_REGRESSION = 7
EXIT_OUTPUT = 8
EXIT_HISTORY = 9
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class ExitCode:
    code: int
    #: a few words, for ``workload --help``
    short: str
    #: the whole meaning, for the README's table (Markdown)
    meaning: str


EXIT_CODES: tuple[ExitCode, ...] = (
    ExitCode(
        EXIT_OK,
        "ok",
        "every step succeeded, every result VALID, every accuracy check passed, every result file read",
    ),
    ExitCode(
        EXIT_INTERNAL,
        "internal error (a bug; the traceback file is named)",
        "internal error (a bug: the traceback is written to a file that the message names)",
    ),
    ExitCode(
        EXIT_USAGE,
        "bad input",
        "bad input: profile, parameters, options, inventory (the message names the file and JSON path)",
    ),
    ExitCode(EXIT_CONNECT, "cannot connect", "a host could not be reached or authenticated"),
    ExitCode(
        EXIT_STEP_FAILED,
        "a step failed (plan --strict: a step would fail)",
        "a step failed (the message names host, step, command, exit code and the last output lines)",
    ),
    ExitCode(
        EXIT_REBOOT_REQUIRED,
        "reboot needed (re-run to resume)",
        "the local machine must reboot (driver install); reboot and run the same command again to resume",
    ),
    ExitCode(
        EXIT_INVALID_RESULTS,
        "results INVALID or accuracy failed",
        "a result INVALID, an accuracy check failed or could not be judged (no figure or no target), or a result "
        "file could not be read (the file is named; for results, the reason and the fix are printed); "
        "`--allow-invalid` reports without failing",
    ),
    ExitCode(EXIT_REGRESSION, "regression (compare)", "`workload compare` found a regression past the threshold"),
    ExitCode(
        EXIT_OUTPUT,
        "an output file could not be written (disk full)",
        "a file of the run folder could not be written (disk full, read-only): the path is named; the verdict of "
        "what was collected is still printed",
    ),
    ExitCode(
        EXIT_HISTORY,
        "the run history could not be opened, read or written",
        "the run history could not be opened, read or written (`history`, `compare --baseline`: a corrupt or "
        "non-SQLite file, a history that does not exist, an unreachable or locked database past its timeout; the "
        "URL is named with its secrets masked); `run` and `results --record` only warn and keep their own exit code",
    ),
    ExitCode(
        EXIT_INTERRUPTED,
        "interrupted (Ctrl-C or SIGTERM)",
        "interrupted (Ctrl-C or SIGTERM): nothing new starts, the running commands are killed (also on remote "
        "hosts, also when the connection is lost), finished steps and collected results are kept, `summary.json` "
        'says `"interrupted": true` with a failed verdict',
    ),
)


def help_text() -> str:
    """The exit codes as ``workload --help`` lists them: ``Exit codes: 0 ok, 1 internal error ..., 130 ...``."""
    return "Exit codes: " + ", ".join(f"{entry.code} {entry.short}" for entry in EXIT_CODES) + "."


def readme_rows() -> list[str]:
    """The README's exit-code table, header included, one Markdown line per row."""
    return ["| code | meaning |", "|---|---|", *(f"| {e.code} | {e.meaning} |" for e in EXIT_CODES)]
