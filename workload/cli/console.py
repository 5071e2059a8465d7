"""Console rendering of a run: progress per host, plans, summaries (rich).

Everything printed here is **plain text**: host names, paths, step labels, messages, result
values come from outside (profiles, inventories, result files, remote output) and may contain
``[`` ... ``]``, which rich would read as markup (``[/]`` even raises). The consoles made by
:func:`make_console` have markup off, and every styled piece is a :class:`rich.text.Text` built by
:func:`styled` from ``(text, style)`` parts, so no string is ever parsed as markup, whatever
console it is printed on.

One host: a line per step as it starts and finishes. Several hosts on a terminal: one live
progress line per host (current step, step count, elapsed time), failures printed above the
lines as they happen. Several hosts without a terminal (CI logs): one ``[host]``-prefixed line
per event, since a live display would print nothing until the end there.
"""

from __future__ import annotations

import shlex
import threading
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TaskID, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from workload.commands import Secrets, mask_text
from workload.steps import StepParameters

if TYPE_CHECKING:
    from workload.cli.progress import ActivityTicker
    from workload.commands import Command
    from workload.engine import HostOutcome, StepOutcome
    from workload.steps import Step, StepPlan

STATUS_STYLE: dict[str, tuple[str, str]] = {
    "changed": ("changed", "green"),
    "unchanged": ("no change", "cyan"),
    "failed": ("FAILED", "red"),
    "skipped": ("skipped", "yellow"),
    "planned": ("planned", "blue"),
    "reboot": ("reboot needed", "yellow"),
    "interrupted": ("interrupted", "yellow"),
}

HOST_STYLE = {"ok": "green", "failed": "red", "interrupted": "yellow", "reboot-required": "yellow"}

#: A piece of console output: plain text, or (text, rich style name).
Part = str | tuple[str, str] | Text


def styled(*parts: Part) -> Text:
    """One line of console output from plain pieces and ``(text, style)`` pieces.

    No piece is ever parsed as markup: ``styled(("error: ", "red"), message)`` prints the
    message exactly, brackets and all. This is the only way styled text is made for the console.
    """
    return Text.assemble(*parts)


def plain(text: object) -> Text:
    """``text`` as literal console text (for table cells and titles: never markup)."""
    return Text(str(text))


class _TextFieldColumn(ProgressColumn):
    """A progress column showing a task field that holds a :class:`Text` (never parsed as markup)."""

    def __init__(self, field: str, width: int | None = None) -> None:
        super().__init__()
        self.field = field
        self.width = width

    def render(self, task: Task) -> Text:
        text = task.fields.get(self.field)
        shown = text.copy() if isinstance(text, Text) else Text(str(text or ""))
        if self.width is not None:
            shown.truncate(self.width, pad=True)
        return shown


class ConsoleReporter:
    """Renders engine events (a :class:`workload.engine.Reporter`); thread-safe.

    ``verbose`` echoes every command output line (always in the step logs anyway);
    ``total_steps`` (steps per host) lets the progress line say "step 3/7"; ``planning`` words a
    step that could not be planned as what it is for ``plan``: a step that would fail if run now.
    """

    def __init__(
        self,
        console: Console,
        *,
        hosts: list[str],
        verbose: int = 0,
        show_parameters: bool = False,
        total_steps: int | None = None,
        planning: bool = False,
        secrets: Secrets | None = None,
    ) -> None:
        self.console = console
        #: the run's secret values, masked in every text shown (with URL passwords)
        self.secrets = secrets
        self.planning = planning
        self.verbose = verbose
        self.show_parameters = show_parameters
        self.total_steps = total_steps
        self.multi = len(hosts) > 1
        self._lock = threading.Lock()
        self._step_number: dict[str, int] = dict.fromkeys(hosts, 0)
        self.progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        if self.multi and console.is_terminal:
            width = min(max(len(h) for h in hosts), 40)
            self.progress = Progress(
                SpinnerColumn(finished_text=Text("·", style="bold")),
                _TextFieldColumn("host_text", width),
                _TextFieldColumn("line"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            for name in hosts:
                # host/description: the plain texts (for callers); host_text/line: what is shown.
                self._tasks[name] = self.progress.add_task(
                    "waiting", host=name, host_text=styled((name, "bold")), line=styled(("waiting", "dim")), total=None
                )
        # One host (or no terminal): a live line / periodic line per running activity (workload.cli.progress).
        self.ticker: ActivityTicker | None = None
        if not planning and self.progress is None:
            from workload.cli.progress import ActivityTicker

            self.ticker = ActivityTicker(console)

    def __enter__(self) -> ConsoleReporter:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
        if self.ticker is not None:
            self.ticker.close()

    def _count(self, host: str) -> str:
        number = self._step_number.get(host, 0)
        return f"{number}/{self.total_steps}" if self.total_steps else str(number)

    def step_started(self, host: str, step: Step) -> None:
        with self._lock:
            self._step_number[host] = self._step_number.get(host, 0) + 1
            if self.progress is not None:
                line = f"{self._count(host)} {step.label}"
                self.progress.update(self._tasks[host], description=line, line=styled(line))
            else:
                self.console.print(styled((f"[{host}]", "bold"), f" -> {step.label}"), highlight=False)
                if self.ticker is not None:
                    self.ticker.start(host, step.label)
                if self.show_parameters and not self.multi:
                    for key, value in shown_parameters(step, self.secrets).items():
                        self.console.print(styled((f"      {key} = {value!r}", "dim")))

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        with self._lock:
            if self.ticker is not None:
                self.ticker.stop(host)
            status = STATUS_STYLE.get(outcome.status, (outcome.status, ""))
            message = mask_text(outcome.message, self.secrets)
            detail = ""
            if outcome.status == "unchanged" and message:
                detail = f": {message}"
            elif outcome.status == "changed" and outcome.plan is not None and outcome.plan.changed:
                detail = f": {changes_in_words(outcome.plan, self.secrets)}"  # what changed, not only that it did
            if self.multi:
                self._multi_step_finished(host, step, outcome, status, detail, message)
                return
            if outcome.status == "planned" and outcome.plan is not None:
                render_plan(self.console, outcome.plan, indent="    ", full=self.verbose > 0, secrets=self.secrets)
                return
            if outcome.status in ("failed", "interrupted"):
                if self.planning and outcome.status == "failed":
                    self.console.print(styled("    ", ("would fail if run now:", "red")))
                else:
                    self.console.print(styled("    ", status, f" after {outcome.duration_s:.1f}s"))
                for line in message.splitlines():
                    self.console.print(styled("    ", (line, "red")), highlight=False)
                return
            self.console.print(styled("    ", status, f"{detail} ({outcome.duration_s:.1f}s)"))

    def _multi_step_finished(
        self, host: str, step: Step, outcome: StepOutcome, status: tuple[str, str], detail: str, message: str
    ) -> None:
        prefix = (f"[{host}]", "bold")
        if self.progress is not None:
            # Only what needs attention goes above the live lines; the rest is in host.log.
            if outcome.status in ("failed", "interrupted"):
                first = message.splitlines()[0] if message else ""
                self.progress.console.print(styled(prefix, f" {step.label} ", status, f": {first}"), highlight=False)
            return
        self.console.print(styled(prefix, f" {step.label}: ", status, f"{detail} ({outcome.duration_s:.1f}s)"))
        if outcome.status in ("failed", "interrupted"):
            for line in message.splitlines():
                self.console.print(styled(prefix, "   ", (line, "red")), highlight=False)

    def line(self, host: str, text: str) -> None:
        if self.ticker is not None and text.startswith("-> "):
            self.ticker.start(host, mask_text(text[3:], self.secrets))
        if self.verbose <= 0 and not text.startswith("->"):
            return
        with self._lock:
            target = self.progress.console if self.progress is not None else self.console
            target.print(styled((f"[{host}]", "dim"), f" {mask_text(text, self.secrets)}"), highlight=False)

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        with self._lock:
            style = HOST_STYLE.get(outcome.status, "yellow")
            text = styled((outcome.status, style), f" ({outcome.steps_done} step(s) done)")
            if outcome.reason and outcome.status != "ok":
                text.append(f": {_shorten(mask_text(outcome.reason, self.secrets), 80)}")
            if self.progress is not None:
                # A total makes the task "finished": its elapsed time stops at the host's end.
                self.progress.update(self._tasks[host], description=text.plain, line=text, total=1, completed=1)
            elif self.multi:
                self.console.print(
                    styled((f"[{host}]", "bold"), " ", text, f" in {outcome.duration_s:.1f}s"), highlight=False
                )


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def changes_in_words(plan: StepPlan, secrets: Secrets | None = None) -> str:
    """What a plan changes, in one line (masked): its first change, ``(+N more)`` when there are
    others, ``; then reboot`` when it needs one. For a step's line in ``run`` and ``plan``'s summary."""
    text = mask_text(plan.changes[0].summary, secrets) if plan.changes else "nothing"
    if len(plan.changes) > 1:
        text += f" (+{len(plan.changes) - 1} more)"
    if plan.reboot_required:
        text += "; then reboot"
    return text


def shown_parameters(step: Step, secrets: Secrets | None = None) -> dict[str, object]:
    """A step's resolved parameters as they may be shown (secrets masked), without the engine's
    generic ones left at their defaults."""
    from workload.params import display_parameters

    generic = set(StepParameters.model_fields) - step.params.model_fields_set - {"Scenario"}
    shown = {k: v for k, v in step.params.model_dump(exclude_none=True).items() if k not in generic}
    return display_parameters(shown, secrets)


def make_console(*, stderr: bool = False) -> Console:
    """The console of a command: terminal width on a terminal; in logs (CI, pipes) unwrapped lines."""
    # markup=False: a str printed on it is shown as it is (see the module docstring).
    console = Console(highlight=False, stderr=stderr, markup=False)
    if not console.is_terminal:
        # Logs are grepped: long lines stay whole (soft wrap); tables get 140 columns.
        console = Console(highlight=False, stderr=stderr, width=140, soft_wrap=True, markup=False)
    return console


def compact_command(command: Command, secrets: Secrets | None = None) -> str:
    """A command's masked display with embedded shell scripts shortened to a label.

    An argument after ``-c`` that is long or spans lines is shown as ``<script NAME, N chars>``
    (NAME is the ``$0`` given after it); any other argument that spans lines as ``<N-line argument,
    M chars>``. ``plan`` shows this by default; ``plan -v`` and the step
    logs show every command in full.
    """
    from workload.commands import masked_arg

    argv = [masked_arg(arg, secrets) for arg in command.argv]
    parts: list[str] = []
    for index, text in enumerate(argv):
        after_c = index > 0 and argv[index - 1] == "-c"
        if after_c and (len(text) > 100 or "\n" in text.strip()):
            name = argv[index + 1] if index + 1 < len(argv) else "sh"
            parts.append(f"<script {name}, {len(text)} chars>")
        elif "\n" in text.strip():
            # A program handed to a script as an argument (the server probe's Python): one line, not fifty.
            parts.append(f"<{len(text.strip().splitlines())}-line argument, {len(text)} chars>")
        else:
            parts.append(shlex.quote(text))
    shown = " ".join(parts)
    if command.env:
        shown = (
            "env "
            + " ".join(shlex.quote(f"{k}={masked_arg(v, secrets)}") for k, v in command.env.items())
            + " "
            + shown
        )
    if command.cwd:
        shown = f"cd {shlex.quote(masked_arg(command.cwd, secrets))} && {shown}"
    return shown


def render_plan(
    console: Console, plan: StepPlan, *, indent: str = "", full: bool = False, secrets: Secrets | None = None
) -> None:
    """A plan in words: each change with its exact (masked) commands, or the no-op reason.

    Changes of a deferred tail (:attr:`~workload.steps.Change.decided_after`) get one
    ``decided after ...:`` line above the first of them.

    Every text is masked (:func:`~workload.commands.mask_text` with the run's ``secrets``): steps write
    parameter values, such as a repository URL with a token, into summaries and notes.
    """
    if not plan.changed:
        console.print(
            styled(indent, ("no change", "cyan"), f": {mask_text(plan.noop_reason or 'nothing to do', secrets)}")
        )
    waiting_for: str | None = None
    for change in plan.changes:
        if change.decided_after is not None and change.decided_after != waiting_for:
            # The deferred tail: said once, above its first change.
            console.print(styled(indent, ("decided after", "yellow"), f" {mask_text(change.decided_after, secrets)}:"))
        waiting_for = change.decided_after
        console.print(styled(indent, ("+", "green"), f" {mask_text(change.summary, secrets)}"))
        for command in change.commands:
            shown = command.display(secrets) if full else compact_command(command, secrets)
            console.print(styled(f"{indent}    $ {shown}"), highlight=False, soft_wrap=True)
    if plan.reboot_required:
        console.print(
            styled(
                indent,
                ("then reboot", "yellow"),
                " (remote hosts are rebooted and resumed; local runs stop, exit 5)",
            )
        )
    for note in plan.notes:
        console.print(styled((f"{indent}note: {mask_text(note, secrets)}", "dim")))


def hosts_table(outcomes: list[HostOutcome], main_metric: dict[str, str], *, total_steps: int | None = None) -> Table:
    """The fleet summary: host, steps done, result (with the reason when not ok), time, main metric."""
    table = Table(title="Hosts", show_lines=False)
    for column in ("host", "steps done", "result", "time", "main metric"):
        table.add_column(column, overflow="fold")
    for outcome in outcomes:
        style = HOST_STYLE.get(outcome.status, "yellow")
        result = styled((outcome.status, style))
        if outcome.status != "ok" and outcome.reason:
            result.append(f": {_shorten(outcome.reason, 100)}")
        total = total_steps if total_steps is not None else len(outcome.steps)
        table.add_row(
            plain(outcome.name),
            plain(f"{outcome.steps_done}/{total}"),
            result,
            plain(f"{outcome.duration_s:.1f}s"),
            plain(main_metric.get(outcome.name, "-")),
        )
    ok = sum(1 for o in outcomes if o.status == "ok")
    table.caption = plain(f"{ok} of {len(outcomes)} host(s) ok")
    return table
