"""``workload results``: re-read and judge MLPerf results (``compare`` is in :mod:`workload.cli.compare_cmd`).

Only click is imported at module level; the metrics layer and rich load when a command runs.
Exit codes: 0 ok, 2 nothing parseable / bad path, 6 INVALID, accuracy failed or unknown, or a
result file unreadable (unless ``--allow-invalid``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from workload.cli.history_hook import record_options

if TYPE_CHECKING:
    from rich.console import Console

    from workload.metrics.collection import Collection

#: what ``results`` needs after parsing (rich: ~0.25 s), imported while the workers parse
_DISPLAY_MODULES = ("workload.cli.console", "workload.metrics.table", "workload.metrics.verdict", "rich.text")
_RESULT_FILES = (
    "metadata.json, mlperf_log_detail.txt, mlperf_log_summary.txt, accuracy.txt, accuracy.json, "
    "verify_*.txt of TEST0x folders, performance/result_summary.json, accuracy/accuracy_results.json"
)


def _fail(ctx: click.Context, code: int, message: str) -> None:
    """Say ``error: message`` and exit with ``code`` (never 0: an error is not a success)."""
    click.echo(f"error: {message}", err=True)
    ctx.exit(code or 1)


def _load(
    ctx: click.Context,
    path: Path,
    host: str | None = None,
    *,
    then_import: tuple[str, ...] = (),
    round_name: str | None = None,
) -> Collection:
    """Results under ``path`` (a run folder's metrics.jsonl, or raw result files); exit 2 if none.

    The modules named in ``then_import`` (the display's) are imported while worker processes parse.
    ``round_name`` (``--round``) judges raw result files by that MLPerf round's rules instead of the
    round detected from the files; an unknown round is exit 2.
    """
    from workload.errors import EXIT_USAGE
    from workload.metrics.collection import collect
    from workload.metrics.outputs import load_run
    from workload.metrics.rules import RulesError, override_round

    if not path.exists():
        _fail(ctx, EXIT_USAGE, f"{path}: no such file or directory")

    def import_display() -> None:
        for name in then_import:
            importlib.import_module(name)

    try:
        with override_round(round_name):
            collection = (
                collect(path, host=host, while_parsing=import_display)
                if host
                else load_run(path, while_parsing=import_display)
            )
    except RulesError as exc:
        _fail(ctx, EXIT_USAGE, str(exc))
        raise  # not reached: _fail exits
    if not collection.results:
        for issue in collection.issues:
            click.echo(f"warning: {issue}", err=True)
        if collection.issues:  # files were found: the warnings say why none gave a result, not that none is there
            _fail(ctx, EXIT_USAGE, f"{path}: no MLPerf result could be read (see the warnings above)")
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
@click.option("--record", is_flag=True, help="Record these results in the run history (see --history, --tag).")
@record_options
@click.option(
    "--round",
    "round_name",
    default=None,
    metavar="vX.Y",
    help="Judge by this MLPerf Inference round's rules (v3.1 ... v6.1) instead of the round detected from the "
    "files (LoadGen version, a vX.Y folder, the benchmark).",
)
@click.pass_context
def results_command(
    ctx: click.Context,
    path: Path,
    output: Path | None,
    as_json: bool,
    allow_invalid: bool,
    host: str | None,
    record: bool,
    history: str | None,
    tag: str | None,
    junit: Path | None,
    round_name: str | None,
) -> int:
    """Parse and judge MLPerf results under PATH.

    \b
    PATH is a NVIDIA harness build/logs tree, a LoadGen output folder, a published MLPerf
    submission tree (any round v3.1-v6.1), a previous run folder or a single result file.
    Headline, limits and accuracy targets follow the result's MLPerf round (see --round).
    Every INVALID result is explained (which constraint failed) with the setting to change.
    Exit 0 if every result is VALID and passed accuracy and every result file was read,
    6 if not (unreadable files are named), 2 if nothing could be parsed.
    """
    collection = _load(ctx, path, host, then_import=_DISPLAY_MODULES, round_name=round_name)
    from workload.cli.console import make_console, styled
    from workload.cli.history_hook import record as record_results
    from workload.cli.history_hook import write_junit
    from workload.errors import EXIT_INVALID_RESULTS, EXIT_OK, EXIT_USAGE, ResultsError
    from workload.metrics.outputs import OutputContext, replaced_results, write_outputs
    from workload.metrics.table import render_table
    from workload.metrics.verdict import Verdict

    verdict = Verdict.from_results(collection.results, collection.issues)  # it names the unreadable files
    # with --json, stdout carries only JSON lines; everything for humans goes to stderr
    console = make_console(stderr=as_json)
    if as_json:
        for result in collection.results:  # a result's metrics at a time: they are made when read
            for metric in result.metrics:
                click.echo(_metric_json(metric))
    else:
        console.print(render_table(collection))
    _print_explanations(console, collection)
    head, *failures = verdict.lines()
    console.print(styled(head))
    _print_lines(console, failures)
    if output is not None:
        # A folder written before keeps other hosts' results; this write replaces those of its own
        # hosts (a second `results X --output DIR` without --host replaces the first): said, not silent.
        try:
            replaced = replaced_results(output, {r.host for r in collection.results})
            written = write_outputs(output, collection.results, OutputContext(), issues=collection.issues)
        except ResultsError as exc:
            _fail(ctx, EXIT_USAGE, f"--output {output}: {exc}")
            return EXIT_USAGE  # not reached: _fail exits
        console.print("wrote " + ", ".join(str(p) for p in written), markup=False)
        if replaced:
            console.print(
                f"note: {output} held {replaced} result(s) of the same host(s) from an earlier write; "
                "they were replaced (results of other hosts were kept)",
                markup=False,
            )
    code = EXIT_OK if verdict.ok or allow_invalid else EXIT_INVALID_RESULTS
    if junit is not None:
        console.print(f"wrote {write_junit(junit, collection, suite=path.name)}", markup=False)
    if record or tag is not None:  # a tag names a recorded run, so it records too
        record_results(
            path,
            collection,
            command="results",
            exit_code=code,
            ok=verdict.ok,
            history=history,
            tag=tag,
            echo=console.out,
        )
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
