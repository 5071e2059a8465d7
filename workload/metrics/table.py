"""Console rendering of a Collection (rich is imported inside: it is only needed to print).

Up to ``MAX_ROWS`` results get a row each; a larger collection (a fleet folder of thousands of
results: unreadable as rows, and ~2 ms of rich layout per row) gets one row per host, benchmark,
scenario and mode, with the count, the headline's median and range, and how many were VALID / passed.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from workload.metrics.collection import Collection
from workload.metrics.compare import headline_of
from workload.metrics.model import BenchmarkResult

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text


_MODES = {"PerformanceOnly": "perf", "AccuracyOnly": "accuracy", "SubmissionRun": "submission"}
#: the most results shown one row each
MAX_ROWS = 100


def _mode(result: BenchmarkResult) -> str:
    """The Mode cell: ``perf``, ``accuracy``, ``TEST01`` (a compliance verdict) ... and, for the LoadGen run
    of a compliance test or a power ranging run, that kind first (``TEST01 perf``, ``ranging perf``)."""
    mode = _MODES.get(result.test_mode or "", result.test_mode or "?")
    first = result.headline or (result.metrics[0] if result.metrics else None)
    kind = first.metadata.get("run_kind") if first is not None else None
    return f"{kind} {mode}" if isinstance(kind, str) and kind != mode else mode


def _system(result: BenchmarkResult) -> str:
    """The System cell: the system the result was measured on (``H200-SXM-141GBx8_TRT``), else ``-``."""
    return result.system or "-"


def _value(value: float, unit: str) -> str:
    if unit == "ns":
        return f"{value / 1e6:,.3f} ms"
    return f"{value:,.2f} {unit}".strip()


def render_table(collection: Collection) -> Table:
    """One row per result: [host], [system], benchmark, scenario, mode, headline, validity, accuracy (grouped
    past MAX_ROWS). The System column is shown when any result names its system (the folder of a submission
    tree or of NVIDIA's harness logs, or its metadata): two results of one benchmark on two systems differ."""
    from rich.table import Table
    from rich.text import Text

    if len(collection.results) > MAX_ROWS:
        return _grouped_table(collection)

    show_host = bool(collection.hosts)
    show_system = any(r.system for r in collection.results)
    table = Table(title=Text("MLPerf results"), show_lines=False)
    if show_host:
        table.add_column("Host")
    if show_system:
        table.add_column("System")
    for name in ("Benchmark", "Scenario", "Mode", "Headline", "Validity", "Accuracy"):
        table.add_column(name, justify="right" if name == "Headline" else "left")
    for result in collection.results:
        metric = headline_of(result)
        headline = _value(metric.value, metric.unit) if metric else "-"
        # Cells are Text, never markup: names and values come from result files (see workload.cli.console).
        validity_text = result.validity or "-"
        colour = "green" if validity_text == "VALID" else "red" if validity_text != "-" else ""
        validity = Text(validity_text, style=colour)
        if result.accuracy_pass is None:
            accuracy = Text("-")
        else:
            judged = [c for c in result.accuracy_checks if c.value is not None and c.passed is not None]
            shown = [c for c in judged if not c.passed] or judged[:1]  # the failures, else the primary figure
            figures = ", ".join(f"{c.name} {c.value:.5g}" for c in shown if c.value is not None)
            label: tuple[str, str] = ("PASS", "green") if result.accuracy_pass else ("FAIL", "red")
            if result.accuracy_pass and any(not c.passed for c in shown):
                label = ("PASS (open division)", "yellow")  # below the closed targets, taken for open
            accuracy = Text.assemble(label, f" {figures}" if figures else "")
        row: list[str | Text] = [
            result.benchmark_full or result.model or result.label.split(" ")[0],
            result.scenario or "?",
            _mode(result),
            headline,
            validity,
            accuracy,
        ]
        cells = ([result.host or "-"] if show_host else []) + ([_system(result)] if show_system else []) + row
        table.add_row(*[Text(c) if isinstance(c, str) else c for c in cells])
    return table


def _grouped_table(collection: Collection) -> Table:
    """One row per (host, system, benchmark, scenario, mode): count, headline median and range, VALID, PASS counts."""
    from rich.table import Table
    from rich.text import Text

    groups: dict[tuple[str, str, str, str, str], list[BenchmarkResult]] = {}
    for result in collection.results:
        key = (
            result.host or "-",
            _system(result),
            result.benchmark_full or result.model or result.label.split(" ")[0],
            result.scenario or "?",
            _mode(result),
        )
        groups.setdefault(key, []).append(result)
    show_host = bool(collection.hosts)
    show_system = any(r.system for r in collection.results)
    table = Table(title=Text(f"MLPerf results ({len(collection.results)} results in {len(groups)} groups)"))
    if show_host:
        table.add_column("Host")
    if show_system:
        table.add_column("System")
    for name in ("Benchmark", "Scenario", "Mode", "Results", "Headline (median)", "Min - max", "Validity", "Accuracy"):
        table.add_column(name, justify="right" if name in ("Results", "Headline (median)", "Min - max") else "left")
    for (host, system, benchmark, scenario, mode), results in groups.items():
        headlines = [m for m in map(headline_of, results) if m is not None]
        headline = spread = "-"
        if headlines:
            values = sorted(m.value for m in headlines)
            unit = headlines[0].unit
            headline = _value(statistics.median(values), unit)
            spread = f"{_bare(values[0], unit)} - {_bare(values[-1], unit)}"
        judged = [r for r in results if r.validity is not None]
        valid = sum(1 for r in judged if r.validity == "VALID")
        validity = Text("-") if not judged else _counted(valid, len(judged), "VALID", "INVALID")
        scored = [r for r in results if r.accuracy_pass is not None]
        passed = sum(1 for r in scored if r.accuracy_pass)
        accuracy = Text("-") if not scored else _counted(passed, len(scored), "PASS", "FAIL")
        row = [benchmark, scenario, mode, str(len(results)), headline, spread]
        cells = [Text(c) for c in ([host] if show_host else []) + ([system] if show_system else []) + row]
        table.add_row(*cells, validity, accuracy)
    return table


def _bare(value: float, unit: str) -> str:
    """:func:`_value` without the unit (ns shown as ms, like the median next to it)."""
    return f"{value / 1e6:,.3f}" if unit == "ns" else f"{value:,.2f}"


def _counted(good: int, total: int, yes: str, no: str) -> Text:
    """``12 VALID`` (green) or ``10 VALID, 2 INVALID`` (green, red)."""
    from rich.text import Text

    parts: list[str | tuple[str, str]] = [(f"{good} {yes}", "green")] if good else []
    if total - good:
        parts += [", "] if parts else []
        parts.append((f"{total - good} {no}", "red"))
    return Text.assemble(*parts)
