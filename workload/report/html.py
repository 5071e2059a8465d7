"""The report page: verdict first, then headline metrics, failures with fixes, plots, telemetry, trends.

:func:`render` takes one or more runs (:class:`~workload.report.data.RunData`) and an optional
``trends`` mapping (series name -> ``(time, value)`` points, e.g. a metric per SKU from the run
history) and returns one HTML document with inline CSS and SVG: no script, no external resource,
so it opens offline and in CI artefact viewers. Every text from outside (host names, reasons,
fixes, command lines) is escaped.

Fleet outliers: a host whose headline value is more than :data:`OUTLIER_PCT` % worse than the
median of the hosts with the same (benchmark, scenario) is drawn in red and named in the table.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from workload.commands import mask_text
from workload.metrics.verdict import TEST_RUN
from workload.monitors.stats import power_limit_only
from workload.report.data import PERCENTILES, ResultRow, RunData
from workload.report.svg import Bar, Series, bar_chart, esc, fmt, line_chart

#: A host this much worse than the fleet median of its (benchmark, scenario) is an outlier.
OUTLIER_PCT = 10.0
#: Trend points: (time as datetime or POSIX seconds, value).
TrendPoint = tuple[datetime | float, float]
#: (metric, unit) -> series label (benchmark, scenario, SKU) -> its points: one plot per metric and unit
Trends = Mapping[tuple[str, str], Mapping[str, Sequence[TrendPoint]]]
#: (metric, chart title, unit, devices: "gpu" for gpu<N>, "host" for the host sample)
TELEMETRY_CHARTS: tuple[tuple[str, str, str, str], ...] = (
    ("gpu_utilization", "GPU utilization", "%", "gpu"),
    ("power_draw", "GPU power draw", "W", "gpu"),
    ("temperature", "GPU temperature", "C", "gpu"),
    ("sm_clock", "SM clock", "MHz", "gpu"),
    ("memory_used", "GPU memory used", "MiB", "gpu"),
    ("cpu_utilization", "Host CPU utilization", "%", "host"),
    ("memory_used", "Host memory used", "MiB", "host"),
    ("load_1m", "Host load average (1 min)", "load", "host"),
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f;max-width:1100px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#555;font-size:13px}
.verdict{padding:14px 18px;border-radius:6px;font-size:18px;font-weight:600;margin:14px 0}
.ok{background:#e3f4e8;color:#14532d;border:1px solid #86c79a}
.failed{background:#fde8e6;color:#7f1d1d;border:1px solid #e8a39c}
.why{font-size:14px;font-weight:400;margin-top:6px;white-space:pre-wrap}
.note{padding:8px 14px;border-radius:6px;background:#fff7e0;color:#7a4b00;border:1px solid #e6c36a;margin:8px 0}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f6} td.num{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b91c1c;font-weight:600} .good{color:#166534;font-weight:600} .warn{color:#7a4b00;font-weight:600}
ul.fail li{margin-bottom:6px} .fix{color:#1e3a8a} code{background:#f4f4f6;padding:0 3px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
"""


def _validity(row: ResultRow) -> str:
    if row.is_performance:
        cls = "good" if row.validity == "VALID" else "bad"
        return f'<span class="{cls}">{esc(row.validity or "unknown")}</span>'
    if row.accuracy_pass is None:
        return '<span class="bad">accuracy unknown</span>'
    return '<span class="good">PASS</span>' if row.accuracy_pass else '<span class="bad">FAIL</span>'


def _headline_text(row: ResultRow) -> str:
    h = row.headline
    if not h or not isinstance(h.get("value"), int | float):
        return "-"
    value, unit = float(h["value"]), str(h.get("unit") or "")
    if unit == "ns":
        value, unit = value / 1e6, "ms"
    return f"{fmt(value)} {unit}".strip()


def _headline_value(row: ResultRow) -> tuple[float, str, bool] | None:
    """(value in display units, unit, higher is better) of a performance result's headline."""
    h = row.headline
    if not row.is_performance or not h or not isinstance(h.get("value"), int | float):
        return None
    value, unit = float(h["value"]), str(h.get("unit") or "")
    if unit == "ns":
        value, unit = value / 1e6, "ms"
    return value, unit, str(h.get("relativity")) != "LowerIsBetter"


def outliers(rows: Sequence[ResultRow]) -> dict[int, str]:
    """id(row) -> why it is a fleet outlier (see the module docstring); needs 3 or more hosts."""
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if _headline_value(row) is not None:
            groups.setdefault((row.benchmark, row.scenario), []).append(row)
    out: dict[int, str] = {}
    for group in groups.values():
        if len(group) < 3:
            continue
        values = [v[0] for v in map(_headline_value, group) if v is not None]
        median = statistics.median(values)
        for row in group:
            got = _headline_value(row)
            if got is None or median == 0:
                continue
            value, _, higher = got
            worse = (median - value) / median * 100 if higher else (value - median) / median * 100
            if worse > OUTLIER_PCT:
                out[id(row)] = f"{worse:.0f} % worse than the fleet median {fmt(median)}"
    return out


def _label(row: ResultRow, many_runs: bool) -> str:
    return f"{row.run_id} {row.host}" if many_runs else row.host


def _header(runs: Sequence[RunData]) -> str:
    first = runs[0]
    title = f"{first.profile} - {first.run_id}" if len(runs) == 1 else f"{len(runs)} runs"
    lines = [f"<h1>workload report: {esc(title)}</h1>"]
    for run in runs:
        meta = run.meta
        tool = meta.get("tool") or {}
        bits = [
            f"run <b>{esc(run.run_id)}</b>",
            f"profile {esc(run.profile)}",
            f"started {esc(meta.get('started_at') or '?')}",
            f"ended {esc(meta.get('ended_at') or '?')}",
            f"exit code {esc(meta.get('exit_code') if meta.get('exit_code') is not None else '?')}",
        ]
        if tool:
            bits.append(f"{esc(tool.get('name', 'workload'))} {esc(tool.get('version', '?'))}")
        lines.append(f'<div class="meta">{" · ".join(bits)}</div>')
    return "\n".join(lines)


def _exit_codes(runs: Sequence[RunData]) -> list[Any]:
    """Each run's exit code: run.json's, else summary.json's (written by every run since it says why)."""
    codes = [run.meta.get("exit_code", run.verdict.get("exit_code")) for run in runs]
    return [code for code in codes if code is not None]


def _run_ok(runs: Sequence[RunData], rows: Sequence[ResultRow]) -> bool:
    issues = sum(len(run.issues) for run in runs)
    said_ok = all(run.verdict.get("ok", True) is not False for run in runs)
    failed = [r for r in rows if r.failed]
    return bool(rows) and not failed and not issues and said_ok and all(code == 0 for code in _exit_codes(runs))


def _reasons(runs: Sequence[RunData]) -> list[str]:
    """Why each run failed, as its summary.json's verdict says (refusal, failed step and command,
    interrupt and its signal, INVALID results), prefixed with the run where there are several."""
    many = len(runs) > 1
    return [
        f"{run.run_id}: {failure}" if many else str(failure)
        for run in runs
        for failure in run.verdict.get("failures") or []
    ]


def _test_run_note(runs: Sequence[RunData], rows: Sequence[ResultRow]) -> str:
    count = sum(1 for row in rows if any(TEST_RUN in note for note in row.notes))
    if not count:
        return ""
    return (
        f'<div class="note" id="test-run">note: {count} result(s) ran shorter than the round\'s min_duration: '
        f"{esc(TEST_RUN)}</div>"
    )


def _verdict(runs: Sequence[RunData], rows: Sequence[ResultRow]) -> str:
    issues = sum(len(run.issues) for run in runs)
    codes = _exit_codes(runs)
    ok = _run_ok(runs, rows)
    valid = sum(1 for r in rows if r.is_performance and r.validity == "VALID")
    perf = sum(1 for r in rows if r.is_performance)
    acc = [r for r in rows if not r.is_performance]
    acc_ok = sum(1 for r in acc if r.accuracy_pass is True)
    text = (
        f"{'OK' if ok else 'FAILED'}: {valid} of {perf} performance result(s) VALID, "
        f"{acc_ok} of {len(acc)} accuracy check(s) passed"
    )
    if issues:
        text += f", {issues} unreadable file(s)"
    if not rows:
        text = "FAILED: no results" if not ok else text
    if codes and any(code != 0 for code in codes):
        text += f" (exit code {', '.join(str(c) for c in codes)})"
    why = "" if ok else "".join(f'<div class="why">why: {esc(reason)}</div>' for reason in _reasons(runs))
    state = "ok" if ok else "failed"
    return f'<div id="verdict" class="verdict {state}">{esc(text)}{why}</div>' + _test_run_note(runs, rows)


def _table(rows: Sequence[ResultRow], flagged: Mapping[int, str], many_runs: bool) -> str:
    columns = ("host", "benchmark", "scenario", "mode", "headline", "result", "notes")
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    body = []
    for row in rows:
        metric = row.headline.get("name", "") if row.headline else ""
        notes = []
        if id(row) in flagged:
            notes.append(f'<span class="bad">outlier: {esc(flagged[id(row)])}</span>')
        if row.attempts:
            seq = " → ".join(str(a.get("validity")) for a in row.attempts)
            notes.append(f"retried: {esc(seq)}")
        body.append(
            "<tr>"
            f"<td>{esc(_label(row, many_runs))}</td><td>{esc(row.benchmark)}</td><td>{esc(row.scenario)}</td>"
            f"<td>{esc(row.mode)}</td>"
            f'<td class="num" data-metric="{esc(metric)}">{esc(_headline_text(row))}</td>'
            f"<td>{_validity(row)}</td><td>{'<br>'.join(notes)}</td></tr>"
        )
    return f'<table id="results">{head}{"".join(body)}</table>'


def _failures(runs: Sequence[RunData], rows: Sequence[ResultRow], many_runs: bool) -> str:
    items = []
    for row in rows:
        if not row.failed and not row.attempts:
            continue
        title = f"{_label(row, many_runs)} {row.benchmark} {row.scenario} {row.mode}"
        parts = [f"<b>{esc(title)}</b>: {_validity(row)}"]
        parts += [f"<div>reason: {esc(reason)}</div>" for reason in row.reasons]
        parts += [f'<div class="fix">fix: {esc(fix)}</div>' for fix in row.fixes]
        for attempt in row.attempts:
            changed = attempt.get("changed") or {}
            what = ", ".join(f"{k}={v}" for k, v in changed.items())
            because = attempt.get("retried_because")
            parts.append(
                f"<div>attempt {esc(attempt.get('attempt'))}: {esc(attempt.get('validity'))}"
                + (f" (retried because {esc(because)}; {esc(what)})" if because else "")
                + "</div>"
            )
        items.append(f"<li>{''.join(parts)}</li>")
    for run in runs:
        for issue in run.issues:
            items.append(
                f"<li><b>unreadable</b>: {esc(issue.get('path', '?'))}: {esc(issue.get('problem', issue))}</li>"
            )
    if not items and not rows:
        return "<p>No result to judge: the run failed before it measured anything (why: see the verdict above).</p>"
    if not items and not _run_ok(runs, rows):
        return "<p>No result failed and no retry was needed; the run failed for the reasons in the verdict above.</p>"
    if not items:
        return "<p>Every result VALID and every accuracy check passed; no retries were needed.</p>"
    return f'<ul class="fail" id="failures">{"".join(items)}</ul>'


def _throughput_charts(rows: Sequence[ResultRow], flagged: Mapping[int, str], many_runs: bool) -> list[str]:
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if _headline_value(row) is not None:
            groups.setdefault((row.benchmark, row.scenario), []).append(row)
    charts = []
    for (benchmark, scenario), group in groups.items():
        values = [v for v in map(_headline_value, group) if v is not None]
        unit = values[0][1]
        name = group[0].headline.get("name", "") if group[0].headline else ""
        if unit == "ms" and name.endswith("_ns"):
            name = name[: -len("_ns")]  # shown in ms
        bars = [
            Bar(_label(row, many_runs), v[0], id(row) in flagged, "" if row.validity == "VALID" else "(INVALID)")
            for row, v in zip(group, values, strict=True)
        ]
        median = statistics.median(v[0] for v in values) if len(values) > 1 else None
        charts.append(
            bar_chart(
                bars,
                title=f"{benchmark} {scenario}: {name} per host",
                unit=unit,
                reference=median,
                reference_label=f"median {fmt(median)}" if median is not None else "",
            )
        )
    return charts


def _percentile_charts(rows: Sequence[ResultRow], many_runs: bool) -> list[str]:
    groups: dict[tuple[str, str], list[ResultRow]] = {}
    for row in rows:
        if row.percentiles:
            groups.setdefault((row.benchmark, row.scenario), []).append(row)
    labels = [label for _, label in PERCENTILES]
    charts = []
    for (benchmark, scenario), group in groups.items():
        series = [
            Series(
                _label(row, many_runs),
                [(float(i), row.percentiles[label]) for i, label in enumerate(labels) if label in row.percentiles],
            )
            for row in group
        ]
        charts.append(
            line_chart(
                series,
                title=f"{benchmark} {scenario}: latency percentiles",
                unit="ms",
                x_labels=[(float(i), label) for i, label in enumerate(labels)],
                x_title="percentile",
            )
        )
    return charts


def _seconds(stamp: str) -> float | None:
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except (TypeError, ValueError):
        return None


def _time_ticks(span_s: float) -> list[tuple[float, str]]:
    """Five ticks from 0 to ``span_s`` seconds, labelled in seconds."""
    if span_s <= 0:
        return [(0.0, "0")]
    return [(span_s * k / 4, f"{span_s * k / 4:.0f}") for k in range(5)]


def _host_summaries(summary: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """Each host's telemetry summary: ``{"hosts": {...}}``, or a run folder's older one-host summary."""
    if not summary:
        return {}
    hosts = summary.get("hosts")
    if isinstance(hosts, dict):
        return {str(k): v for k, v in hosts.items() if isinstance(v, dict)}
    return {"": summary}


def _host_telemetry(prefix: str, summary: Mapping[str, Any]) -> list[str]:
    """One host's part: throttling seen (or why there is no GPU part), its min/avg/max table, notes, errors."""
    parts: list[str] = []
    throttling = summary.get("throttling") or {}
    if summary.get("gpus"):
        seen = throttling.get("seen")
        only_the_limit = power_limit_only(throttling)
        text = (
            "yes: "
            + "; ".join(f"{d} {', '.join(r)}" for d, r in (throttling.get("devices") or {}).items())
            + only_the_limit
            if seen
            else "no"
        )
        cls = ("warn" if only_the_limit else "bad") if seen else "good"
        shown = f'<span class="{cls}">{esc(text)}</span>'
        parts.append(f'<p class="throttling">{esc(prefix)}GPU throttling seen: {shown}</p>')
    elif summary.get("devices") and "notes" not in summary:  # an older summary: no notes say why
        parts.append(f"<p>{esc(prefix)}no nvidia-smi on the host: host telemetry only</p>")
    rows = []
    for device, data in (summary.get("devices") or {}).items():
        for metric, st in (data.get("metrics") or {}).items():
            rows.append(
                f"<tr><td>{esc(device)} ({esc(data.get('name', ''))})</td><td>{esc(metric)}</td>"
                f'<td class="num">{esc(fmt(st["min"]))}</td><td class="num">{esc(fmt(st["avg"]))}</td>'
                f'<td class="num">{esc(fmt(st["max"]))}</td><td>{esc(st.get("unit", ""))}</td></tr>'
            )
    if rows:
        parts.append(
            '<table class="telemetry"><tr><th>device</th><th>metric</th><th>min</th><th>avg</th>'
            f"<th>max</th><th>unit</th></tr>{''.join(rows)}</table>"
        )
    for note in summary.get("notes") or []:
        parts.append(f"<p>{esc(prefix)}{esc(note)}</p>")
    if summary.get("failed_samples"):
        parts.append(f'<p class="bad">{esc(prefix)}{esc(str(summary["failed_samples"]))} sample(s) failed</p>')
    for error in summary.get("errors") or []:
        parts.append(f'<p class="bad">{esc(prefix)}telemetry: {esc(error)}</p>')
    return parts


def _telemetry(runs: Sequence[RunData]) -> str:
    parts: list[str] = []
    for run in runs:
        summary = run.telemetry
        if not summary and not run.samples:
            continue
        prefix = f"{run.run_id}: " if len(runs) > 1 else ""
        for host, host_summary in _host_summaries(summary).items():
            parts += _host_telemetry(f"{prefix}{host}: " if host else prefix, host_summary)
        charts = []
        start = min((s for s in (_seconds(r.get("time", "")) for r in run.samples) if s is not None), default=None)
        end = max((s for s in (_seconds(r.get("time", "")) for r in run.samples) if s is not None), default=None)
        ticks = _time_ticks(end - start) if start is not None and end is not None else []
        for metric, title, unit, kind in TELEMETRY_CHARTS:
            series: dict[str, list[tuple[float, float]]] = {}
            for record in run.samples:
                if (record.get("device") == "host") != (kind == "host"):
                    continue
                value = (record.get("values") or {}).get(metric)
                at = _seconds(record.get("time", ""))
                if isinstance(value, int | float) and at is not None and start is not None:
                    key = f"{record.get('host', '')} {record.get('device', '')}".strip()
                    series.setdefault(key, []).append((at - start, float(value)))
            if series:
                lines = [Series(k, v) for k, v in series.items()]
                x_title = "seconds since the first sample"
                charts.append(line_chart(lines, title=prefix + title, unit=unit, x_labels=ticks, x_title=x_title))
        if charts:
            parts.append(f'<div class="charts">{"".join(charts)}</div>')
    return "\n".join(parts) if parts else "<p>No telemetry was recorded for this run.</p>"


def time_labels(lo: float, hi: float, count: int = 4) -> list[tuple[float, str]]:
    """Up to ``count`` evenly spaced tick labels from ``lo`` to ``hi`` (epoch seconds, shown in UTC), each
    as precise as the span needs (days: the date; hours: date and minute; minutes: the second) and
    never the same text twice."""
    span = hi - lo
    if span <= 0:
        return [(lo, datetime.fromtimestamp(lo, UTC).strftime("%Y-%m-%d %H:%M"))]
    form = "%Y-%m-%d" if span >= 4 * 86400 else "%m-%d %H:%M" if span >= 600 else "%H:%M:%S"
    labels: list[tuple[float, str]] = []
    for k in range(count):
        at = lo + span * k / (count - 1)
        text = datetime.fromtimestamp(at, UTC).strftime(form)
        if not labels or labels[-1][1] != text:
            labels.append((at, text))
    return labels


def _trends(trends: Trends | None) -> str:
    if not trends:
        return "<p>No history given (the report of a single run shows no trend).</p>"
    charts = []
    for (metric, unit), by_label in sorted(trends.items()):
        series: list[Series] = []
        stamps: list[float] = []
        for name, points in by_label.items():
            pts = []
            for when, value in points:
                at = when.timestamp() if isinstance(when, datetime) else float(when)
                pts.append((at, float(value)))
                stamps.append(at)
            series.append(Series(name, sorted(pts)))
        if not stamps:
            continue
        labels = time_labels(min(stamps), max(stamps))
        title = f"{metric} ({unit})" if unit else metric
        charts.append(
            line_chart(series, title=title, unit=unit or "value", x_labels=labels, x_title="time (UTC)", legend="below")
        )
    if not charts:
        return "<p>The history holds no points for these series.</p>"
    return f'<div class="charts" id="trends">{"".join(charts)}</div>'


def _metadata(runs: Sequence[RunData]) -> str:
    rows = []
    for run in runs:
        meta = run.meta
        controller = meta.get("controller") or {}
        packages = controller.get("packages") or {}
        facts = [
            ("command line", mask_text(" ".join(str(a) for a in meta.get("command_line") or [])) or "?"),
            ("CPU", f"{controller.get('cpu_model') or '?'} x {controller.get('cpu_count') or '?'}"),
            ("load average at start", ", ".join(str(x) for x in controller.get("load_average") or []) or "?"),
            ("packages", ", ".join(f"{k} {v}" for k, v in packages.items() if v) or "?"),
        ]
        for key, value in facts:
            rows.append(f"<tr><td>{esc(run.run_id)}</td><th>{esc(key)}</th><td><code>{esc(value)}</code></td></tr>")
    return f'<table id="metadata">{"".join(rows)}</table>'


def render(runs: Sequence[RunData], *, trends: Trends | None = None) -> str:
    """The report of ``runs`` (one or more), with ``trends`` when the caller has a history to show."""
    if not runs:
        raise ValueError("render needs at least one run")
    many = len(runs) > 1
    rows = [row for run in runs for row in run.results]
    flagged = outliers(rows)
    charts = _throughput_charts(rows, flagged, many) + _percentile_charts(rows, many)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    body = [
        _header(runs),
        _verdict(runs, rows),
        "<h2>Results</h2>",
        _table(rows, flagged, many) if rows else "<p>No results were found in this run.</p>",
        "<h2>INVALID results, failed checks and retries</h2>",
        _failures(runs, rows, many),
        "<h2>Throughput and latency per host</h2>",
        f'<div class="charts">{"".join(charts)}</div>' if charts else "<p>No performance results to plot.</p>",
        "<h2>Telemetry</h2>",
        _telemetry(runs),
        "<h2>Trends</h2>",
        _trends(trends),
        "<h2>Run</h2>",
        _metadata(runs),
        f'<p class="meta">generated {esc(generated)} by workload; a self-contained file (no scripts, no downloads)</p>',
    ]
    title = esc(f"workload report - {runs[0].run_id}" if not many else f"workload report - {len(runs)} runs")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
