"""``workload history``: list and filter recorded runs, or follow one metric per SKU over time.

Only click is imported at module level; SQLAlchemy loads when the command runs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from workload.cli.history_hook import history_option
from workload.commands import mask_text

#: the most runs one listing shows (a bound the databases' integers hold: SQLite overflows past 2**63)
MAX_LIMIT = 1_000_000

if TYPE_CHECKING:
    from workload.history import RunRow, TrendPoint


def _when(row_time: Any) -> str:
    return row_time.strftime("%Y-%m-%d %H:%M") if row_time is not None else "?"


@click.command("history")
@history_option
@click.option("--profile", default=None, help="Only runs of this profile.")
@click.option("--sku", default=None, help="Only runs with a host of this SKU (inventory label sku=...).")
@click.option("--metric", default=None, help="Only runs that measured this metric (e.g. samples_per_second).")
@click.option("--since", default=None, metavar="WHEN", help="Only runs started since: 2026-11-01, 12h, 7d, 2w.")
@click.option("--tag", default=None, help="Only runs with this --tag.")
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=50, show_default=True, help="At most this many runs."
)
@click.option("--trend", "trend", default=None, metavar="METRIC", help="METRIC of every run, per SKU, oldest first.")
@click.option("--benchmark", default=None, help="With --trend: only this benchmark (bert-99, minilm...).")
@click.option("--scenario", default=None, help="With --trend: only this scenario (Offline, Server...).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def history_command(
    history: str | None,
    profile: str | None,
    sku: str | None,
    metric: str | None,
    since: str | None,
    tag: str | None,
    limit: int,
    trend: str | None,
    benchmark: str | None,
    scenario: str | None,
    as_json: bool,
) -> int:
    """List the recorded runs (newest first), or --trend METRIC per SKU over time.

    \b
    Every `workload run` is recorded (and `workload results PATH --record`): run id, profile,
    masked parameters, hosts with their facts (SKU, GPU, driver, CUDA, harness round, CPU),
    start/end, exit code and every metric. The history is a SQLite file in your data directory,
    or a shared PostgreSQL database: --history postgresql://USER@HOST/DB (or $WORKLOAD_HISTORY).

    \b
    Examples:
      workload history --profile PERF-GPU-MLPERF --since 7d
      workload history --trend samples_per_second --scenario Offline
      workload history --sku ND96isr_H100_v5 --json
    """
    from workload.errors import UsageError
    from workload.history import open_history, parse_since

    if (benchmark or scenario) and trend is None:
        raise UsageError("--benchmark and --scenario filter a --trend: give --trend METRIC")
    when = parse_since(since) if since else None
    with open_history(history, read_only=True) as store:
        if trend is not None:
            points = store.trend(trend, sku=sku, profile=profile, since=when, benchmark=benchmark, scenario=scenario)
            _print_trend(trend, points, as_json, store.url)
            return 0
        rows = store.runs(profile=profile, sku=sku, metric=metric, since=when, tag=tag, limit=limit)
        _print_runs(rows, as_json, store.url)
    return 0


def _print_runs(rows: list[RunRow], as_json: bool, url: str) -> None:
    if as_json:
        click.echo(mask_text(json.dumps({"history": url, "runs": [r.as_dict() for r in rows]}, indent=2)))
        return
    from rich.table import Table

    from workload.cli.console import make_console, plain, styled

    console = make_console()
    table = Table(title=f"{len(rows)} run(s) in {url}")
    for column in ("Run", "Started (UTC)", "Profile", "Tag", "Hosts", "Exit", "Metrics"):
        table.add_column(column, overflow="fold")
    for r in rows:
        hosts = ", ".join(
            h.name + (f" ({h.sku})" if h.sku else f" ({h.gpu_count}x {h.gpu_model})" if h.gpu_model else "")
            for h in r.hosts
        )
        exit_text = "?" if r.exit_code is None else str(r.exit_code)
        style = "green" if r.exit_code == 0 else "red"
        table.add_row(
            plain(r.run_id),
            _when(r.started_at),
            plain(r.profile or ""),
            plain(r.tag or ""),
            plain(hosts),
            styled((exit_text, style)),
            str(r.metric_count),
        )
    console.print(table)


def _print_trend(metric: str, points: list[TrendPoint], as_json: bool, url: str) -> None:
    if as_json:
        document = {"history": url, "metric": metric, "points": [p.as_dict() for p in points]}
        click.echo(mask_text(json.dumps(document, indent=2)))
        return
    from rich.table import Table

    from workload.cli.console import make_console, plain
    from workload.metrics.units import readable

    console = make_console()
    if not points:
        console.print(f"no run in {url} measured {metric}", markup=False)
        return
    groups: dict[tuple[str, str, str, str], list[TrendPoint]] = {}
    for p in points:
        groups.setdefault((p.sku or "(no SKU)", p.benchmark or "?", p.scenario or "?", p.mode or "?"), []).append(p)
    for (sku, bench, scen, mode), members in groups.items():
        values = [p.value for p in members]
        table = Table(title=plain(f"{metric}: {sku} - {bench} {scen} {mode}"))
        for column in ("Started (UTC)", "Run", "Tag", "Host", "Value", "vs first"):
            table.add_column(column)
        first = members[0].value
        for p in members:
            change = f"{(p.value - first) / abs(first) * 100:+.2f} %" if first else ""
            table.add_row(
                _when(p.started_at),
                plain(p.run_id),
                plain(p.tag or ""),
                plain(p.host or ""),
                readable(p.value, p.unit, like=values),
                change,
            )
        console.print(table)
