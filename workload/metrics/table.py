"""Console rendering of a Collection (rich is imported inside: it is only needed to print)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workload.metrics.collection import Collection
from workload.metrics.compare import headline_of

if TYPE_CHECKING:
    from rich.table import Table


_MODES = {"PerformanceOnly": "perf", "AccuracyOnly": "accuracy", "SubmissionRun": "submission"}


def _value(value: float, unit: str) -> str:
    if unit == "ns":
        return f"{value / 1e6:,.3f} ms"
    return f"{value:,.2f} {unit}".strip()


def render_table(collection: Collection) -> Table:
    """One row per result: benchmark, scenario, mode, headline, validity, accuracy."""
    from rich.table import Table

    show_host = bool(collection.hosts)
    table = Table(title="MLPerf results", show_lines=False)
    if show_host:
        table.add_column("Host")
    for name in ("Benchmark", "Scenario", "Mode", "Headline", "Validity", "Accuracy"):
        table.add_column(name, justify="right" if name == "Headline" else "left")
    for result in collection.results:
        metric = headline_of(result)
        headline = _value(metric.value, metric.unit) if metric else "-"
        validity = result.validity or "-"
        validity = f"[green]{validity}[/]" if validity == "VALID" else f"[red]{validity}[/]" if validity != "-" else "-"
        if result.accuracy_pass is None:
            accuracy = "-"
        else:
            judged = [c for c in result.accuracy_checks if c.value is not None and c.passed is not None]
            shown = [c for c in judged if not c.passed] or judged[:1]  # the failures, else the primary figure
            figures = ", ".join(f"{c.name} {c.value:.5g}" for c in shown if c.value is not None)
            accuracy = ("[green]PASS[/]" if result.accuracy_pass else "[red]FAIL[/]") + (
                f" {figures}" if figures else ""
            )
        row = [
            result.benchmark_full or result.model or result.label.split(" ")[0],
            result.scenario or "?",
            _MODES.get(result.test_mode or "", result.test_mode or "?"),
            headline,
            validity,
            accuracy,
        ]
        table.add_row(*([result.host or "-"] if show_host else []), *row)
    return table
