"""Console rendering of a run: progress per host, plans, summaries (rich)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from workload.engine import HostOutcome, StepOutcome
    from workload.steps import Step, StepPlan

STATUS_STYLE = {
    "changed": "[green]changed[/]",
    "unchanged": "[cyan]no change[/]",
    "failed": "[red]FAILED[/]",
    "skipped": "[yellow]skipped[/]",
    "planned": "[blue]planned[/]",
    "reboot": "[yellow]reboot needed[/]",
}


class ConsoleReporter:
    """Step-by-step lines for one host; a live progress line per host for several.

    ``verbose`` echoes every command output line (always in the step logs anyway).
    """

    def __init__(self, console: Console, *, hosts: list[str], verbose: int = 0, show_parameters: bool = False) -> None:
        self.console = console
        self.verbose = verbose
        self.show_parameters = show_parameters
        self.multi = len(hosts) > 1
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self.progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        if self.multi:
            self.progress = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.fields[host]:<22}"),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            for name in hosts:
                self._tasks[name] = self.progress.add_task("waiting", host=name, total=None)

    def __enter__(self) -> ConsoleReporter:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def step_started(self, host: str, step: Step) -> None:
        with self._lock:
            self._started[host] = time.monotonic()
            if self.progress is not None:
                self.progress.update(self._tasks[host], description=escape(step.label))
            else:
                self.console.print(f"[bold][{escape(host)}][/] -> {escape(step.label)}")
                if self.show_parameters:
                    for key, value in step.params.model_dump(exclude_none=True).items():
                        self.console.print(f"      [dim]{escape(key)} = {escape(repr(value))}[/]")

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        with self._lock:
            status = STATUS_STYLE.get(outcome.status, outcome.status)
            detail = ""
            if outcome.status == "unchanged" and outcome.message:
                detail = f": {escape(outcome.message)}"
            if self.progress is not None:
                if outcome.status == "failed":
                    self.progress.console.print(f"[bold][{escape(host)}][/] {escape(step.label)} {status}")
                return
            if outcome.status == "planned" and outcome.plan is not None:
                render_plan(self.console, outcome.plan, indent="    ")
                return
            if outcome.status == "failed":
                self.console.print(f"    {status} after {outcome.duration_s:.1f}s")
                for line in outcome.message.splitlines():
                    self.console.print(f"    [red]{escape(line)}[/]")
                return
            self.console.print(f"    {status}{detail} ({outcome.duration_s:.1f}s)")

    def line(self, host: str, text: str) -> None:
        if self.verbose <= 0 and not text.startswith("->"):
            return
        with self._lock:
            target = self.progress.console if self.progress is not None else self.console
            target.print(f"[dim][{escape(host)}][/] {escape(text)}", highlight=False)

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        with self._lock:
            if self.progress is not None:
                label = {"ok": "[green]done[/]", "failed": "[red]failed[/]"}.get(outcome.status, outcome.status)
                self.progress.update(self._tasks[host], description=f"{label} ({outcome.steps_done} steps)")


def render_plan(console: Console, plan: StepPlan, *, indent: str = "") -> None:
    """A plan in words: each change with its exact (masked) commands, or the no-op reason."""
    if not plan.changed:
        console.print(f"{indent}[cyan]no change[/]: {escape(plan.noop_reason or 'nothing to do')}")
    for change in plan.changes:
        console.print(f"{indent}[green]+[/] {escape(change.summary)}")
        for command in change.commands:
            console.print(f"{indent}    $ {escape(command.display())}", highlight=False, soft_wrap=True)
    if plan.reboot_required:
        console.print(
            f"{indent}[yellow]then reboot[/] (remote hosts are rebooted and resumed; local runs stop, exit 5)"
        )
    for note in plan.notes:
        console.print(f"{indent}[dim]note: {escape(note)}[/]")


def hosts_table(outcomes: list[HostOutcome], main_metric: dict[str, str]) -> Table:
    table = Table(title="Hosts", show_lines=False)
    for column in ("host", "steps done", "result", "time", "main metric"):
        table.add_column(column)
    for outcome in outcomes:
        style = {"ok": "green", "failed": "red"}.get(outcome.status, "yellow")
        table.add_row(
            escape(outcome.name),
            f"{outcome.steps_done}/{len(outcome.steps)}",
            f"[{style}]{outcome.status}[/]",
            f"{outcome.duration_s:.1f}s",
            escape(main_metric.get(outcome.name, "-")),
        )
    return table
