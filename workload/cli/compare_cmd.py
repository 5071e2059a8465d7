"""``workload compare``: two runs, a run against its history (``--baseline``), or one run's hosts.

Only click is imported at module level. Exit codes: 0 no regression and nothing missing, 7 a
regression past ``--threshold``, a result or metric missing from the new run (unless
``--allow-missing``; so is a value that is not a finite number) or a slow host (``--hosts``), 2 bad input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from workload.cli.history_hook import history_option
from workload.cli.numbers import FiniteFloatRange

if TYPE_CHECKING:
    from workload.metrics.compare import Comparison, MetricChange, MetricKey


def _key_text(key: tuple[str, ...]) -> str:
    host, *rest = key
    text = " ".join(k for k in rest if k)
    return f"[{host}] {text}" if host else text


def _side(change: MetricChange, which: str, *, best: bool = False) -> str:
    """One side's value (its median over iterations, or with ``best`` its best), scaled like the other side."""
    from workload.metrics.units import readable

    agg = change.a if which == "a" else change.b
    like = [*(change.a.values if change.a else ()), *(change.b.values if change.b else ())]
    value = change.before if which == "a" else change.after
    if best and agg is not None:
        value = agg.best
    return readable(value, change.unit, like=like)


def _counts(change: MetricChange) -> str:
    return f"{change.a.n if change.a else 1}/{change.b.n if change.b else 1}"


def _junit_cases(result: Comparison) -> list[Any]:
    from workload.metrics.junit import Case

    cases: dict[tuple[str, ...], Any] = {}

    def case(key: MetricKey) -> Any:
        host, bench, scen, mode, _ = key
        name = (f"{host}.{bench}" if host else bench, f"{scen or '?'} {mode or '?'}")
        return cases.setdefault(name, Case(*name))

    for change in result.changes:
        entry = case(change.key)
        pct = "n/a" if change.change_pct is None else f"{change.change_pct:+.2f} %"
        line = f"{change.key[4]}: {_side(change, 'a')} -> {_side(change, 'b')} ({pct})"
        if change.regression:
            entry.failures.append(f"why: regression past {result.threshold_pct:g} %: {line}")
        else:
            entry.output.append(line)
    for key in result.only_in_a:
        case(key).failures.append(f"why: missing from the new run: {key[4]}")
    for key, n in result.incomplete:
        case(key).failures.append(f"why: {key[4]} has {n} of {result.iterations} iterations")
    for key in result.unusable:
        case(key).failures.append(f"why: {key[4]}: a value is not a finite number")
    return list(cases.values())


@click.command("compare")
@click.argument("runs", nargs=-1, type=click.Path(path_type=Path), metavar="[RUN_A] [RUN_B]")
@click.option(
    "--threshold",
    "threshold",
    type=FiniteFloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Percent change that counts as a regression (or a slow host with --hosts).",
)
@click.option(
    "--confidence",
    type=FiniteFloatRange(min=0.5, max=0.999),
    default=0.95,
    show_default=True,
    help="Where a metric has two or more values on a side (iterations), its verdict comes from an "
    "interval at this confidence: regression, improvement, no change or cannot tell. Iterations of "
    "A and B that alternated in time are judged pair by pair (signed-rank interval of the ratios "
    "B_i/A_i), which needs enough pairs: 6 at 0.95 (5 reach 0.9375), 8 at 0.99; fewer pairs are "
    "judged unpaired, and the output says why.",
)
@click.option("--hosts", "by_host", is_flag=True, help="Compare the hosts of RUN_A against their median.")
@click.option(
    "--all", "show_all", is_flag=True, help="Every metric (default: the headline ones: figure, validity, accuracy)."
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="A result or metric missing from the new run (or with a value that is not a number) is not a failure.",
)
@click.option(
    "--iterations",
    type=click.IntRange(1),
    default=None,
    help="The new run had N iterations: every metric must have N values. Iterations are compared by their "
    "median, and judged by an interval (see --confidence).",
)
@click.option(
    "--baseline",
    metavar="last-good|RUN_ID|TAG",
    default=None,
    help="Compare RUN (default: the newest recorded run) against a run from the history: last-good (the "
    "newest run that exited 0 before RUN, with RUN's profile, result-changing parameters, SKUs and host "
    "count), a run id or a --tag. RUN's own results are never its baseline.",
)
@click.option(
    "--profile", default=None, help="With --baseline and no RUN: compare the newest recorded run of this profile."
)
@click.option(
    "--baseline-runs",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="With --baseline last-good: pool up to N qualifying runs (newest first) as the baseline; their "
    "values are its iterations, so N >= 2 gives an interval verdict even for a single-iteration RUN.",
)
@click.option(
    "--if-no-baseline",
    "if_no_baseline",
    type=click.Choice(["fail", "pass"]),
    default="fail",
    show_default=True,
    help="When the history has no baseline for RUN (a pipeline's first run): fail (exit 2) or pass "
    "(exit 0, saying that nothing was compared).",
)
@history_option
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON document.")
@click.option(
    "--junit",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also write JUnit XML: a test case per host, benchmark, scenario and mode.",
)
@click.pass_context
def compare_command(
    ctx: click.Context,
    runs: tuple[Path, ...],
    threshold: float,
    confidence: float,
    by_host: bool,
    show_all: bool,
    allow_missing: bool,
    iterations: int | None,
    baseline: str | None,
    profile: str | None,
    baseline_runs: int,
    if_no_baseline: str,
    history: str | None,
    as_json: bool,
    junit: Path | None,
) -> int:
    """Compare RUN_B against RUN_A (or RUN against --baseline from the history) metric by metric.

    \b
    A regression is a change past --threshold percent in the wrong direction (throughput
    down, latency up, VALID/PASS lost). With iterations (two or more values of a metric on a
    side) the verdict comes from a confidence interval of the change (--confidence): regression,
    improvement, no change, or cannot tell (too noisy to say; not a failure, named).

    \b
    Paired or unpaired (the "How" column, "paired"/"unpaired_because" in --json):
      paired    A's and B's iterations ran interleaved (A1 B1 A2 B2 ..., any order within
                a pair), read from their recorded start and end times: each pair began
                after both runs of the pair before it had ended. Each ratio B_i/A_i cancels
                the load both runs of a pair met; the interval is Wilcoxon's signed-rank
                (Hodges-Lehmann) one, with its exact coverage. N pairs reach at most
                1 - 2/2^N: 0.95 needs 6 pairs, 0.99 needs 8.
      unpaired  otherwise (runs one after the other, different counts, too few pairs for
                --confidence): the two sides' values as two samples (exact rank interval,
                or Student's t on the logs for small sides), with the reason.
    Interleave the iterations of a comparison whenever the machine is shared: run A and B
    in turns, each into its own folder (run --output-dir side-a, then --output-dir side-b,
    N times), and compare the two folders.

    A value that is not a finite number (NaN, infinity) is not judged: listed, a failure
    like a missing metric. A result or
    metric of the baseline that the new run lacks is a failure too (--allow-missing: only
    listed). Headline metrics by default (the figure, validity, accuracy), --all for every
    metric; VirtualClient's alias names of a figure are counted once. Settings that differ
    (target QPS, latency bound, min duration, MLPerf round) and the machine's load are named.
    Exit 7 on a regression, a missing result or a slow host (--hosts), else 0.

    \b
    Examples:
      workload compare runs/20261101-PERF-CPU-MLPERF runs/20261102-PERF-CPU-MLPERF
      workload compare --baseline last-good runs/20261102-PERF-CPU-MLPERF --junit compare.xml
      workload compare --baseline nightly-2026-11-01 --json
      workload compare side-a side-b --iterations 7 --confidence 0.95
    """
    from workload.cli.results_cmd import _fail, _load
    from workload.errors import EXIT_USAGE

    if by_host:
        if len(runs) != 1 or baseline:
            _fail(ctx, EXIT_USAGE, "--hosts compares the hosts of one run: give a single RUN (and no --baseline)")
        return _compare_hosts(ctx, runs[0], threshold, as_json)
    if baseline is not None:
        if len(runs) > 1:
            _fail(ctx, EXIT_USAGE, "--baseline compares one run with the history: give at most one RUN")
        from workload.errors import NoBaseline

        try:
            a, b, name_a, name_b = _from_history(
                ctx, runs[0] if runs else None, baseline, profile, history, baseline_runs
            )
        except NoBaseline as exc:
            if if_no_baseline == "fail":
                raise
            return _no_baseline(exc, as_json)
    else:
        if len(runs) != 2:
            _fail(ctx, EXIT_USAGE, "give two runs to compare (RUN_A RUN_B), one run with --baseline, or --hosts")
        a, b = _load(ctx, runs[0]), _load(ctx, runs[1])
        name_a, name_b = str(runs[0]), str(runs[1])
    from workload.runmeta import machine_load

    loads = (
        machine_load(runs[0]) if baseline is None else None,
        machine_load(runs[-1]) if runs and (baseline is None or len(runs) == 1) else None,
    )
    options = _Options(threshold, confidence, show_all, allow_missing, iterations, as_json, junit)
    return _report(ctx, a, b, name_a, name_b, options, loads)


def _no_baseline(exc: Exception, as_json: bool) -> int:
    """``--if-no-baseline pass``: say that nothing was compared, and why; exit 0."""
    import json

    from workload.errors import EXIT_OK

    line = f"no baseline, nothing compared (--if-no-baseline pass): {exc}"
    if as_json:
        click.echo(json.dumps({"baseline": None, "no_baseline": str(exc), "regressions": 0, "exit_code": EXIT_OK}))
    else:
        click.echo(line)
    return EXIT_OK


def _from_history(
    ctx: click.Context, run: Path | None, ref: str, profile: str | None, url: str | None, count: int = 1
) -> tuple[Any, Any, str, str]:
    """Baseline and candidate: RUN (or the newest recorded run) and the run ``ref`` names in the history.

    RUN is described as it would be recorded (:func:`workload.history.record.build_record`): its
    identity keeps its own record out of the choice, its kind and start time choose ``last-good``.
    """
    from workload.cli.history_hook import recording_off
    from workload.cli.results_cmd import _fail, _load
    from workload.errors import EXIT_USAGE
    from workload.history import RunRecord, open_history
    from workload.history.record import build_record

    if recording_off(url):  # 'off' is no database: never a SQLite file named "off" in the current folder
        _fail(
            ctx,
            EXIT_USAGE,
            f"--baseline {ref} needs a run history, and the history is off (--history or $WORKLOAD_HISTORY)",
        )
    with open_history(url, read_only=True) as store:
        if run is not None:
            b = _load(ctx, run)
            name_b = str(run)
            candidate = build_record(run, b, command="compare", exit_code=None, ok=None)
            exclude = None
        else:
            newest = store.runs(limit=1, profile=profile)
            if not newest:
                _fail(ctx, EXIT_USAGE, f"the history {store.url} has no run to compare; give a RUN folder")
            row = newest[0]
            exclude, name_b = row.run_id, f"{row.run_id} (history)"
            b = store.collection(row.run_id)
            candidate = RunRecord(
                run_id=row.run_id,
                command=row.command,
                results=(),
                profile=row.profile,
                started_at=row.started_at,
                identity=row.identity,
                kind=row.kind,
            )
        bases = store.baselines(ref, exclude=exclude, candidate=candidate, count=count if ref == "last-good" else 1)
        a = store.collection(bases[0].run_id)
        for more in bases[1:]:
            a.extend(store.collection(more.run_id))
    pooled = f" + {len(bases) - 1} earlier" if len(bases) > 1 else ""
    return a, b, f"{bases[0].run_id}{pooled} (history, {ref})", name_b


@dataclass(frozen=True)
class _Options:
    """How ``compare`` judges and shows (its command-line options)."""

    threshold: float
    confidence: float
    show_all: bool
    allow_missing: bool
    iterations: int | None
    as_json: bool
    junit: Path | None


def _load_text(load: dict[str, Any] | None) -> str:
    if load is None:
        return "unknown"
    parts = []
    if load.get("load_1m_at_start") is not None:
        parts.append(f"{load['load_1m_at_start']:g} at start")
    if load.get("load_1m_during") is not None:
        parts.append(f"{load['load_1m_during']:g} while it ran")
    if load.get("cpus") is not None:
        parts.append(f"{load['cpus']} CPU(s)")
    return ", ".join(parts) or "unknown"


def _setting_text(change: Any) -> str:
    from workload.metrics.units import readable

    def value(v: Any) -> str:
        return readable(v, change.unit) if isinstance(v, int | float) and change.unit else str(v)

    return f"{_key_text(change.key)}: {change.setting} {value(change.before)} -> {value(change.after)}"


def _interval_text(change: MetricChange) -> str:
    spread = change.interval
    if spread is None:
        return ""
    return f"{spread.low_pct:+.1f} .. {spread.high_pct:+.1f} %"


def _how_text(change: MetricChange) -> str:
    """How the interval was made: paired (its pairs) or unpaired (its method), and its coverage."""
    spread = change.interval
    if spread is None:
        return ""
    if spread.paired:
        return f"paired, {spread.pairs} pairs, {spread.achieved:.3g}"
    level = spread.achieved or spread.confidence
    return f"unpaired {spread.method}, {_counts(change)}, {level:.3g}"


def _unpaired_reasons(result: Comparison) -> dict[str, int]:
    """Each reason iterations were judged unpaired, with how many metrics it kept unpaired."""
    reasons: dict[str, int] = {}
    for change in result.changes:
        if change.interval is not None and change.interval.unpaired_because:
            reason = change.interval.unpaired_because
            reasons[reason] = reasons.get(reason, 0) + 1
    return reasons


def _report(
    ctx: click.Context,
    a: Any,
    b: Any,
    name_a: str,
    name_b: str,
    options: _Options,
    loads: tuple[dict[str, Any] | None, dict[str, Any] | None] = (None, None),
) -> int:
    import json

    from rich.table import Table

    from workload.cli.console import make_console, plain, styled
    from workload.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
    from workload.metrics.compare import compare

    threshold, show_all, allow_missing = options.threshold, options.show_all, options.allow_missing
    iterations, as_json, junit = options.iterations, options.as_json, options.junit
    result = compare(a, b, threshold, headline_only=not show_all, iterations=iterations, confidence=options.confidence)
    if not result.changes and (allow_missing or not result.only_in_a):
        from workload.cli.results_cmd import _fail

        _fail(ctx, EXIT_USAGE, f"{name_a} and {name_b} have no metric in common (different benchmarks or scenarios?)")
    failed = result.failed(allow_missing=allow_missing)
    code = EXIT_REGRESSION if failed else EXIT_OK
    console = make_console(stderr=as_json)
    if junit is not None:
        from workload.cli.history_hook import junit_write

        console.print(f"wrote {junit_write(junit, _junit_cases(result), suite=f'compare {name_b}')}", markup=False)
    if as_json:
        document = {
            "baseline": name_a,
            "new": name_b,
            "threshold_pct": threshold,
            "scope": "all" if show_all else "headline",
            "iterations": iterations,
            "changes": [c.as_dict() for c in result.changes],
            "missing": [_key_dict(k) for k in result.only_in_a],
            "missing_results": [_key_dict((*k, "")) for k in result.missing_results],
            "new_metrics": [_key_dict(k) for k in result.only_in_b],
            "incomplete": [{**_key_dict(k), "n": n} for k, n in result.incomplete],
            "unusable": [_key_dict(k) for k in result.unusable],
            "confidence": options.confidence,
            "settings_differ": [c.as_dict() for c in result.settings],
            "load": {"baseline": loads[0], "new": loads[1]},
            "regressions": len(result.regressions),
            "cannot_tell": len(result.cannot_tell),
            "allow_missing": allow_missing,
            "exit_code": code,
        }
        click.echo(json.dumps(document, indent=2))
        if code:
            ctx.exit(code)
        return code
    scope = "every metric" if show_all else "headline metrics"
    repeated = any((c.a and c.a.n > 1) or (c.b and c.b.n > 1) for c in result.changes)
    title = f"{name_a} -> {name_b} ({scope}, threshold {threshold:g} %)"
    if repeated:
        title += (
            f"\niterations: A and B are medians; best and N (A/B) beside them; "
            f"interval of the change (+ better) at {options.confidence:g} confidence; "
            f"How: paired (B_i/A_i of interleaved iterations) or unpaired, and the coverage"
        )
    if repeated and not console.is_terminal:
        console.width = max(console.width, 220)  # logs are grepped: a row of this wide table stays one line
    table = Table(title=plain(title))
    columns = (
        ("Metric", "A", "A best", "B", "B best", "N", "Change", "Interval", "How", "")
        if repeated
        else ("Metric", "A", "B", "Change", "")
    )
    for column in columns:
        table.add_column(column)
    for change in result.changes:
        pct = "n/a" if change.change_pct is None else f"{change.change_pct:+.2f} %"
        flag = (
            styled(("REGRESSION", "red"))
            if change.regression
            else styled(("better", "green"))
            if change.improvement
            else styled(("cannot tell", "yellow"))
            if change in result.cannot_tell
            else plain("")
        )
        if repeated:
            cells = (
                _side(change, "a"),
                _side(change, "a", best=True),
                _side(change, "b"),
                _side(change, "b", best=True),
            )
            table.add_row(
                plain(change.label),
                *map(plain, cells),
                plain(_counts(change)),
                plain(pct),
                plain(_interval_text(change)),
                plain(_how_text(change)),
                flag,
            )
        else:
            sides = (change.label, _side(change, "a"), _side(change, "b"), pct)
            table.add_row(*map(plain, sides), flag)
    console.print(table)
    whole = set(result.missing_results)
    for result_key in result.missing_results:  # a whole result once, not each of its metrics
        count = sum(1 for k in result.only_in_a if k[:4] == result_key)
        console.print(styled(("missing", "red"), f" from the new run: {_key_text(result_key)} ({count} metric(s))"))
    for key in result.only_in_a:
        if key[:4] not in whole:
            console.print(styled(("missing", "red"), f" from the new run: {_key_text(key)}"))
    for key, n in result.incomplete:
        console.print(styled(("incomplete", "red"), f": {_key_text(key)} has {n} of {iterations} iterations"))
    for key in result.unusable:
        console.print(styled(("unusable", "red"), f": {_key_text(key)}: a value is not a finite number"))
    for key in result.only_in_b:
        console.print(f"new in the new run: {_key_text(key)}", markup=False)
    for reason, count in _unpaired_reasons(result).items():
        console.print(f"unpaired ({reason}): {count} metric(s)", markup=False)
    for setting in result.settings:  # a result measured under other settings is another measurement
        console.print(styled(("settings differ", "yellow"), f": {_setting_text(setting)}"))
    if loads != (None, None):
        console.print(f"machine load (1-min): A {_load_text(loads[0])}; B {_load_text(loads[1])}", markup=False)
    if result.cannot_tell:
        console.print(
            f"{len(result.cannot_tell)} metric(s): cannot tell at {options.confidence:g} confidence (the interval "
            f"holds both no change and a change past -{threshold:g} %); more iterations narrow it",
            markup=False,
        )
    if result.regressions:
        console.print(f"{len(result.regressions)} regression(s) past {threshold:g} %", markup=False)
    if result.only_in_a:
        whole_count = len(result.missing_results)
        what = f"{len(result.only_in_a)} metric(s) missing from the new run ({whole_count} whole result(s))"
        console.print(what + ("; allowed by --allow-missing" if allow_missing else ""), markup=False)
    if result.incomplete:
        console.print(f"{len(result.incomplete)} metric(s) with fewer than {iterations} iterations", markup=False)
    if result.unusable:
        what = f"{len(result.unusable)} metric(s) with a value that is not a finite number"
        console.print(what + ("; allowed by --allow-missing" if allow_missing else ""), markup=False)
    if not failed:
        console.print("no regression", markup=False)
    if code:
        ctx.exit(code)
    return code


def _key_dict(key: tuple[str, ...]) -> dict[str, str | None]:
    host, bench, scen, mode, name = key
    return {"host": host or None, "benchmark": bench, "scenario": scen, "mode": mode, "metric": name or None}


def _compare_hosts(ctx: click.Context, run: Path, threshold: float, as_json: bool) -> int:
    import json

    from rich.table import Table

    from workload.cli.console import make_console, plain, styled
    from workload.cli.results_cmd import _fail, _load
    from workload.errors import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
    from workload.metrics.compare import compare_hosts
    from workload.metrics.units import readable

    fleet = compare_hosts(_load(ctx, run), threshold)
    if not fleet.deviations:
        _fail(ctx, EXIT_USAGE, f"{run}: no benchmark/scenario ran on two or more hosts; nothing to compare")
    code = EXIT_REGRESSION if fleet.slow_hosts else EXIT_OK
    if as_json:
        deviations = [d.__dict__ for d in fleet.deviations]
        click.echo(json.dumps({"threshold_pct": threshold, "deviations": deviations, "slow_hosts": fleet.slow_hosts}))
    else:
        console = make_console()
        table = Table(title=f"Hosts against the fleet median (threshold {threshold:g} %)")
        for column in ("Host", "Benchmark", "Scenario", "Metric", "Value", "Median", "Change", ""):
            table.add_column(column)
        for d in fleet.deviations:
            table.add_row(
                plain(d.host),
                plain(d.benchmark),
                plain(d.scenario),
                d.metric,
                readable(d.value, d.unit, like=[d.median]),
                readable(d.median, d.unit, like=[d.value]),
                f"{d.deviation_pct:+.2f} %",
                styled(("SLOW", "red")) if d.slow else plain(""),
            )
        console.print(table)
        if fleet.slow_hosts:
            console.print(f"slow hosts: {', '.join(fleet.slow_hosts)}", markup=False)
    if code:
        ctx.exit(code)
    return code
