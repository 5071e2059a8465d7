"""The ``workload`` command line: the only code that prints and decides exit codes.

Subcommands live in their own modules and are imported only when used, so ``workload --help``
starts fast (no docker, paramiko, pydantic or rich at start-up).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import Any

import click

from workload import __version__, exit_codes

#: Subcommand name -> "module:attribute" (a click.Command), imported on first use.
COMMANDS: dict[str, str] = {
    "run": "workload.cli.run_cmd:run_command",
    "plan": "workload.cli.run_cmd:plan_command",
    "profiles": "workload.cli.profile_cmd:profiles_command",
    "show": "workload.cli.profile_cmd:show_command",
    "results": "workload.cli.results_cmd:results_command",
    "compare": "workload.cli.compare_cmd:compare_command",
    "doctor": "workload.cli.doctor_cmd:doctor_command",
    "history": "workload.cli.history_cmd:history_command",
    "report": "workload.cli.report_cmd:report_command",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported when first needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command


HELP = """Set up GPU machines and run MLPerf Inference on them, from a JSON profile.

\b
A profile (VirtualClient's format) lists dependency steps (disks, results repository, NVIDIA
driver + CUDA + fabric manager, Docker, NVIDIA container toolkit) and action steps (the
benchmark). `workload` runs them in order on this machine or on remote hosts over SSH, then
parses the results into metrics files that CI can judge.

\b
Start here:
  workload profiles                            list the shipped profiles
  workload run --profile PERF-CPU-MLPERF       real MLPerf LoadGen on this CPU (1-4 minutes on 2 cores)
  workload plan --profile PERF-GPU-MLPERF      what the GPU profile would do here, changing nothing
  workload run --profile PERF-GPU-MLPERF --host ssh://azureuser@10.0.0.4
  workload results RUN_FOLDER                  re-read and judge results from anywhere

"""

#: ``workload --help``: the text above, then the exit codes from their one table (workload/exit_codes.py).
HELP = HELP + exit_codes.help_text() + "\n"


@click.group(cls=LazyGroup, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="workload")
def cli() -> None:
    pass


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, turn errors into one message and an exit code."""
    code = invoke(argv)
    _forget_handled_interrupt()
    sys.exit(code)


def _forget_handled_interrupt() -> None:
    """Keep the exit code :func:`invoke` chose after a Ctrl-C or SIGTERM it handled (130).

    CPython marks a KeyboardInterrupt "unhandled" for the whole process whenever one ends an
    ``eval``/``exec`` of a string (``Python/pythonrun.c`` ``run_eval_code_obj``), even when a caller
    catches it; ``namedtuple`` and ``dataclasses`` build their classes that way, so a Ctrl-C that lands
    while a module is being imported leaves the mark. Under ``python -m workload`` the interpreter then
    ends by killing itself with SIGINT after its clean-up, and the caller sees "killed by SIGINT"
    instead of our 130 (1 in 120 Ctrl-Cs under load; the console script exits through another path
    that ignores the mark). The same function clears the mark before it evaluates anything, so one
    evaluation of a constant string after the command clears it.
    """
    eval("None")  # a constant string: clears the mark, runs nothing (see above)


#: The command line being run (``workload`` + its arguments), for run.json; set by :func:`invoke`.
COMMAND_LINE: list[str] = []


def invoke(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code (tests call this).

    stdout and stderr are guarded first (:mod:`workload.cli.closed_output`): a reader that closes
    the pipe early costs the command its printing, never its work or its exit code.
    """
    COMMAND_LINE[:] = ["workload", *(sys.argv[1:] if argv is None else argv)]
    _print_any_text()
    from workload.cli.closed_output import closed_note, guarded_streams

    with guarded_streams() as (stdout, stderr):
        code = _invoke(argv)
        closed_note(stdout, stderr, code)
    return code


def _invoke(argv: list[str] | None) -> int:
    from workload.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, WorkloadError

    restore = _signals_as_interrupts()
    try:
        result: Any = cli.main(args=argv, prog_name="workload", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt as exc:
        from workload.interrupts import interrupt_reason

        click.echo(f"{interrupt_reason(exc)}: what finished so far is kept in the run folder", err=True)
        return EXIT_INTERRUPTED
    except WorkloadError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except Exception as exc:  # a bug: say so, keep the traceback in a file, not on the screen
        path = _write_debug_log()
        click.echo(f"internal error: {type(exc).__name__}: {exc}\n  details: {path}", err=True)
        return EXIT_INTERNAL
    finally:
        restore()
    return int(result or 0)


def _print_any_text() -> None:
    """Let stdout/stderr print any text: names from undecodable bytes (a non-UTF-8 argument, file
    or folder name arrives as lone surrogates) are written as backslash escapes instead of
    raising UnicodeEncodeError in the middle of a message, for every print of every command."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # a stream that cannot change stays as it is
                reconfigure(errors="backslashreplace")


def _signals_as_interrupts() -> Any:
    """Handle SIGTERM (CI cancellation, ``timeout``, ``docker stop``) exactly like Ctrl-C, and remember both.

    SIGTERM's default action would end this process at once: the benchmark it started would run on
    (local commands run in their own session, so the signal does not reach them) and no run.json
    would be written. Raising KeyboardInterrupt in the main thread takes Ctrl-C's path instead:
    the engine kills every host's commands, nothing new starts, the run folder is written, exit
    130. SIGINT keeps Python's KeyboardInterrupt (where Python installed it: an ignored SIGINT, as a
    background job gets it, stays ignored). The handler (:func:`workload.stop_signals.on_signal`)
    remembers every signal, so the waits stop even when CPython lost the first raise. Returns a
    function that puts the previous handlers back (tests call :func:`invoke` in-process).
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    from workload.stop_signals import on_signal

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, on_signal)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_signal)

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


def _write_debug_log() -> str:
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix="workload-debug-", suffix=".log", delete=False) as fh:
        traceback.print_exc(file=fh)
        return fh.name
