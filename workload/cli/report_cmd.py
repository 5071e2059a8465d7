"""``workload report``: the HTML report of one or more run folders."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Where to write the report (default: RUN_DIR/report.html for one run; needed for several).",
)
def report_command(run_dirs: tuple[Path, ...], output: Path | None) -> int:
    """Write an HTML report of RUN_DIR (or of several runs, side by side).

    \b
    One self-contained file that works offline (no scripts, no downloads): the verdict first,
    the headline metric of every result per host, INVALID reasons with their fixes and retries,
    throughput/latency per host with fleet outliers in red, latency percentiles, GPU and host
    telemetry over time. `workload run` writes one into every run folder.

    \b
    Examples:
      workload report workload-runs/20261123-133746-PERF-CPU-MLPERF
      workload report workload-runs/*-PERF-GPU-MLPERF -o fleet.html
    """
    from workload.errors import UsageError
    from workload.report.write import write_report

    if len(run_dirs) > 1 and output is None:
        raise UsageError("several run folders go into one report: name it with --output FILE")
    path = write_report(list(run_dirs), output)
    click.echo(f"report: {path}")
    return 0
