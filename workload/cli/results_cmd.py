"""``workload results`` and ``workload compare``: re-read, judge and compare MLPerf results.

Only click is imported at module level; the metrics layer and rich load when a command runs.
Exit codes: 0 ok, 2 nothing parseable / bad path, 6 INVALID, accuracy failed or unknown, or a
result file unreadable (unless ``--allow-invalid``), 7 a regression or a slow host (compare).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from workload.cli.numbers import FiniteFloatRange

if TYPE_CHECKING:
    from rich.console import Console

    from workload.metrics.collection import Collection

#: what ``results`` needs after parsing (rich: ~0.25 s), imported while the workers parse
_DISPLAY_MODULES = ("workload.cli.console", "workload.metrics.table", "workload.metrics.verdict", "rich.text")
_RESULT_FILES = "metadata.json, mlperf_log_detail.txt, mlperf_log_summary.txt, accuracy.txt, accuracy.json"


def _fail(ctx: click.Context, code: int, message: str) -> None:
    click.echo(f"error: {message}", err=True)
    ctx.exit(code)


def _load(ctx: click.Context, path: Path, host: str | None = None, *, then_import: tuple[str, ...] = ()) -> Collection:
    """Results under ``path`` (a run folder's metrics.jsonl, or raw result files); exit 2 if none.

    The modules named in ``then_import`` (the display's) are imported while worker processes parse.
    """
    from workload.errors import EXIT_USAGE
    from workload.metrics.collection import collect
    from workload.metrics.outputs import load_run

    if not path.exists():
        _fail(ctx, EXIT_USAGE, f"{path}: no such file or directory")

    def import_display() -> None:
        for name in then_import:
            importlib.import_module(name)

    collection = (
        collect(path, host=host, while_parsing=import_display) if host else load_run(path, while_parsing=import_display)
    )
    if not collection.results:
        for issue in collection.issues:
            click.echo(f"warning: {issue}", err=True)
        _fail(ctx, EXIT_USAGE, f"{path}: no MLPerf results found (looked for {_RESULT_FILES} at any depth)")
    return collection


def _print_explanations(console: Console, collection: Collection) -> None:
    from workload.cli.console import styled
    from workload.metrics.table import MAX_ROWS

    if len(collection.results) > MAX_ROWS:
        _print_grouped_explanations(console, collection)
        return
    for result in collection.results:
        if not (result.invalid_reasons or result.notes):
            continue
        console.print(styled("\n", (result.label, "bold"), f" ({result.source})"))
        for reason in result.invalid_reasons:
            console.print(styled("  ", ("why:", "red"), f" {reason}"))
        for fix in result.fixes:
            console.print(styled("  ", ("fix:", "green"), f" {fix}"))
        for note in result.notes:
            console.print(styled((f"  note: {note}", "dim")))


def _print_grouped_explanations(console: Console, collection: Collection) -> None:
    """Each distinct reason, fix and note once, with how many results it applies to and one of them."""
    from workload.cli.console import styled

    seen: dict[tuple[str, str], list[str]] = {}
    for result in collection.results:
        for kind, texts in (("why", result.invalid_reasons), ("fix", result.fixes), ("note", result.notes)):
            for text in texts:
                seen.setdefault((kind, text), []).append(result.label)
    style = {"why": ("why:", "red"), "fix": ("fix:", "green"), "note": ("note:", "dim")}
    if seen:
        console.print(styled("\n", ("Explanations", "bold"), f" (grouped: {len(collection.results)} results)"))
    for (kind, text), labels in seen.items():
        where = f"{len(labels)} result(s), e.g. {labels[0]}" if len(labels) > 1 else labels[0]
        console.print(styled("  ", style[kind], f" {text} ", (f"({where})", "dim")))


def _print_lines(console: Console, lines: list[str]) -> None:
    """Plain lines (file paths, failures), written as they are: thousands of them take rich seconds to lay out."""
    if lines:
        console.file.write("\n".join(lines) + "\n")


@click.command("results")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Write metrics.jsonl, metrics.csv (VirtualClient columns) and summary.json here.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON metric per line on stdout instead of the table.")
@click.option(
    "--allow-invalid",
    is_flag=True,
    help="Exit 0 even if a result is INVALID, failed accuracy or a result file could not be read.",
)
@click.option("--host", default=None, help="Host name to record on every metric (default: from the run folder).")
@click.pass_context
def results_command(
    ctx: click.Context, path: Path, output: Path | None, as_json: bool, allow_invalid: bool, host: str | None
) -> int:
    """Parse and judge MLPerf results under PATH.

    \b
    PATH is a NVIDIA harness build/logs tree, a LoadGen output folder, a previous run folder
    or a single result file. Every INVALID result is explained (which constraint failed) with
    the setting to change. Exit 0 if every result is VALID and passed accuracy and every result
    file was read, 6 if not (unreadable files are named), 2 if nothing could be parsed.
    """
    collection = _load(ctx, path, host, then_import=_DISPLAY_MODULES)
    from workload.cli.console import make_console, styled
    from workload.errors import EXIT_INVALID_RESULTS, EXIT_OK
    from workload.metrics.outputs import OutputContext, write_outputs
    from workload.metrics.table import render_table
    from workload.metrics.verdict import Verdict

    verdict = Verdict.from_results(collection.results, collection.issues)  # it names the unreadable files
    # with --json, stdout carries only JSON lines; everything for humans goes to stderr
    console = make_console(stderr=as_json)
    if as_json:
        for metric in collection.metrics:
            click.echo(_metric_json(metric))
    else:
        console.print(render_table(collection))
    _print_explanations(console, collection)
    head, *failures = verdict.lines()
    console.print(styled(head))
    _print_lines(console, failures)
    if output is not None:
        written = write_outputs(output, collection.results, OutputContext(), issues=collection.issues)
        console.print(styled("wrote " + ", ".join(str(p) for p in written)))
    code = EXIT_OK if verdict.ok or allow_invalid else EXIT_INVALID_RESULTS
    if code:
        ctx.exit(code)
    return code


def _metric_json(metric: Any) -> str:
    """One metric as a JSON line. Names from undecodable bytes (a folder named in another
    encoding reads as lone surrogates) are written as ``\\udcXX`` escapes instead of failing."""
    try:
        text: str = metric.model_dump_json()
    except ValueError:
        import json

        text = json.dumps(metric.model_dump(mode="python"), separators=(",", ":"), default=str)
    return text


def _fmt(value: float, unit: str) -> str:
    return f"{value:.6g} {unit}".strip()


@click.command("compare")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path), required=False)
@click.option(
    "--threshold",
    "threshold",
    type=FiniteFloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Percent change that counts as a regression (or a slow host with --hosts).",
)
@click.option("--hosts", "by_host", is_flag=True, help="Compare the hosts of RUN_A against their median.")
@click.option("--all", "show_all", is_flag=True, help="Also list metrics without a better direction (settings).")
@click.pass_context
def compare_command(
    ctx: click.Context, run_a: Path, run_b: Path | None, threshold: float, by_host: bool, show_all: bool
) -> int:
    """Compare RUN_B against RUN_A metric by metric, or the hosts of one run (--hosts).

    \b
    A regression is a change past --threshold percent in the wrong direction (throughput
    down, latency up, VALID/PASS lost). Exit 7 on a regression or a slow host, else 0.
    """
    from rich.table import Table

    from workload.cli.console import make_console, plain, styled
    from workload.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
    from workload.metrics.compare import compare, compare_hosts
    from workload.metrics.model import Relativity

    console = make_console()
    if by_host:
        if run_b is not None:
            _fail(ctx, EXIT_USAGE, "--hosts compares the hosts of one run: give a single RUN")
        fleet = compare_hosts(_load(ctx, run_a), threshold)
        if not fleet.deviations:
            _fail(ctx, EXIT_USAGE, f"{run_a}: no benchmark/scenario ran on two or more hosts; nothing to compare")
        table = Table(title=plain(f"Hosts against the fleet median (threshold {threshold:g} %)"))
        for column in ("Host", "Benchmark", "Scenario", "Metric", "Value", "Median", "Change", ""):
            table.add_column(column)
        for d in fleet.deviations:
            flag = styled(("SLOW", "red")) if d.slow else plain("")
            table.add_row(
                *map(
                    plain,
                    (
                        d.host,
                        d.benchmark,
                        d.scenario,
                        d.metric,
                        _fmt(d.value, d.unit),
                        _fmt(d.median, d.unit),
                        f"{d.deviation_pct:+.2f} %",
                    ),
                ),
                flag,
            )
        console.print(table)
        if fleet.slow_hosts:
            console.print(styled(f"slow hosts: {', '.join(fleet.slow_hosts)}"))
            ctx.exit(EXIT_REGRESSION)
        return EXIT_OK

    if run_b is None:
        _fail(ctx, EXIT_USAGE, "give two runs to compare (RUN_A RUN_B), or one run with --hosts")
        return EXIT_USAGE  # not reached: _fail exits
    result = compare(_load(ctx, run_a), _load(ctx, run_b), threshold)
    if not result.changes:
        _fail(ctx, EXIT_USAGE, "the two runs have no metric in common (different benchmarks or scenarios?)")
    table = Table(title=plain(f"{run_a} -> {run_b} (threshold {threshold:g} %)"))
    for column in ("Metric", "A", "B", "Change", ""):
        table.add_column(column)
    for change in result.changes:
        if change.relativity is Relativity.UNDEFINED and not show_all:
            continue
        pct = "n/a" if change.change_pct is None else f"{change.change_pct:+.2f} %"
        flag = (
            styled(("REGRESSION", "red"))
            if change.regression
            else styled(("better", "green"))
            if change.improvement
            else plain("")
        )
        cells = (change.label, _fmt(change.before, change.unit), _fmt(change.after, change.unit), pct)
        table.add_row(*map(plain, cells), flag)
    console.print(table)
    for key in result.only_in_a:
        console.print(styled(f"only in A: {' '.join(k for k in key if k)}"))
    for key in result.only_in_b:
        console.print(styled(f"only in B: {' '.join(k for k in key if k)}"))
    if result.regressions:
        console.print(styled(f"{len(result.regressions)} regression(s) past {threshold:g} %"))
        ctx.exit(EXIT_REGRESSION)
    console.print(styled("no regression"))
    return EXIT_OK
