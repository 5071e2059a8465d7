"""MLPerf Inference v6.1 "endpoints" results: a scenario folder written by MLCommons' inference-endpoint client.

Layout (``mlcommons/inference_results_v6.1``, e.g. ``closed/NVIDIA/results/<system>/deepseek-r1/Server``;
read by the submission checker's ``parsers/endpoints_parser.py``)::

    config.yaml                         the client's run configuration (settings.runtime.min_duration_ms ...)
    performance/result_summary.json     n_samples_issued/completed/failed, duration_ns, state, complete,
                                        qps, tps, and ttft/tpot/latency/output_sequence_lengths series with
                                        percentiles and early_stopping_percentiles (ns); online (Poisson) runs
                                        also legacy_loadgen_window_duration_ns and run_config.load_pattern
                                        .target_qps (reported as effective_target_qps)
    accuracy/accuracy_results.json      accuracy_scores[]: dataset_name, score, dataset_type, response_counts ...
    report.txt, metrics/final_snapshot.json, measurements.json   human report, client metrics, measurement
                                        description (not needed for the verdict)

There is no validity field. :func:`build` computes one as the submission checker judges a run (see
:mod:`.endpoint_rules` for the limits and their source) and says so in the metadata (``validity_rule``):
the run completed, no sample failed and every issued sample completed, the run lasted the minimum
duration, the early-stopping 99th percentiles of TTFT and TPOT (LLM Server/Interactive) or of the
latency (other Server runs) are within the benchmark's limits, and the accuracy reached its target.
The figures go through the LoadGen key space (``result_completed_tokens_per_second`` ...), as the
checker maps them, so names, headline and table are those of a LoadGen result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from workload.metrics import build as build_mod
from workload.metrics import submission
from workload.metrics.model import (
    AccuracyCheck,
    BenchmarkResult,
    Categorization,
    MetadataValue,
    ParseIssue,
    Relativity,
)
from workload.metrics.parsers import endpoint_rules
from workload.metrics.raw import PRIO_DETAIL, RawResult, finite_float
from workload.safefile import TooLarge, read_regular

SUMMARY = "performance/result_summary.json"
ACCURACY = "accuracy/accuracy_results.json"
CONFIG_FILES = ("config.yaml", "config.yml")
#: the largest file read (a result_summary.json is ~15 kB)
_MAX_BYTES = 16 << 20
_SERIES = {
    "latency": (
        "result_{}_percentile_latency_ns",
        "result_min_latency_ns",
        "result_max_latency_ns",
        "result_mean_latency_ns",
    ),
    "ttft": (
        "result_first_token_{}_percentile_latency_ns",
        "result_first_token_min_latency_ns",
        "result_first_token_max_latency_ns",
        "result_first_token_mean_latency_ns",
    ),
    "tpot": (
        "result_time_per_output_token_{}_percentile_ns",
        "result_time_to_output_token_min",
        "result_time_to_output_token_max",
        "result_time_to_output_token_mean",
    ),
}
_RULE = (
    "computed (endpoints results have no validity field), as the MLPerf submission checker judges a run: "
    "complete, no failed samples, minimum duration, early-stopping p99 TTFT/TPOT/latency within limits, "
    "accuracy at target"
)


def _load(path: str, raw: RawResult) -> Any:
    try:
        data = read_regular(path, _MAX_BYTES)
    except FileNotFoundError:
        return None
    except TooLarge:
        raw.issue(path, f"file is larger than any result file ({_MAX_BYTES} bytes), skipped")
        return None
    except OSError as exc:
        raw.issue(path, f"cannot read: {exc.strerror or exc}")
        return None
    if path.endswith((".yaml", ".yml")):
        return _yaml_scalars(data.decode("utf-8", errors="replace"))
    parsed = raw.load_json(path, data.decode("utf-8", errors="replace"))
    if parsed is not None and not isinstance(parsed, dict):
        raw.issue(path, "expected a JSON object")
        return None
    return parsed if isinstance(parsed, dict) else None


_YAML_LINE = re.compile(r"^( *)([A-Za-z_][\w.-]*):(?: +(.*?))?\s*$")


def _yaml_scalars(text: str) -> dict[str, str]:
    """``dotted.key -> scalar text`` of a block-style YAML mapping (list items and flow values skipped).

    The client writes config.yaml with a YAML dumper (block mappings, one key per line); only a few
    scalars are needed, so this avoids a YAML dependency.
    """
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.split("\n"):
        match = _YAML_LINE.match(line)
        if match is None:
            continue
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        if value:
            found[path] = value.strip("'\"")
        else:
            stack.append((indent, key))
    return found


def _number(value: object) -> float | None:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return finite_float(value)


def _pct_key(text: str) -> str | None:
    try:
        return f"{float(text):.2f}"
    except ValueError:
        return None


def _series(raw: RawResult, summary: dict[str, Any], path: str) -> dict[str, float]:
    """Put the latency series into ``raw`` in LoadGen keys; return the early-stopping p99 of each series."""
    early: dict[str, float] = {}
    for name, (pct_key, min_key, max_key, mean_key) in _SERIES.items():
        series = summary.get(name)
        if not isinstance(series, dict):
            continue
        for key, field in ((min_key, "min"), (max_key, "max"), (mean_key, "avg")):
            number = _number(series.get(field))
            if number is not None:
                raw.put(key, number, PRIO_DETAIL, path)
        percentiles = series.get("percentiles")
        if isinstance(percentiles, dict):
            for pct, value in percentiles.items():
                label, number = _pct_key(str(pct)), _number(value)
                if label is not None and number is not None:
                    raw.put(pct_key.format(label), number, PRIO_DETAIL, path)
        es = series.get("early_stopping_percentiles")
        if isinstance(es, dict):
            for pct, value in es.items():
                number = _number(value)
                if _pct_key(str(pct)) == "99.00" and number is not None:
                    early[name] = number
    return early


def _accuracy(results: dict[str, Any], path: str, raw: RawResult) -> tuple[float | None, float | None, str]:
    """(score, mean output tokens per sample, how the score was taken) from accuracy_results.json."""
    scores = results.get("accuracy_scores")
    entries = [
        e
        for e in (scores if isinstance(scores, list) else [])
        if isinstance(e, dict) and e.get("dataset_type", "accuracy") == "accuracy"
    ]
    if not entries:
        raw.issue(path, 'no "accuracy_scores" entry of dataset_type "accuracy"')
        return None, None, ""
    values = [_number(e.get("score")) for e in entries]
    if any(v is None for v in values):
        raw.issue(path, '"score" of an accuracy_scores entry is not a number')
        return None, None, ""
    tokens: float | None = None
    lengths = [e.get("output_sequence_lengths") for e in entries]
    totals = [_number(x.get("total")) for x in lengths if isinstance(x, dict)]
    samples = [_number(e.get("total_samples")) for e in entries]
    if len(totals) == len(entries) and all(t is not None for t in totals) and all(s for s in samples):
        tokens = sum(t for t in totals if t is not None) / sum(s for s in samples if s is not None)
    if len(values) == 1:
        return values[0], tokens, f"score of {entries[0].get('dataset_name') or 'the accuracy dataset'}"
    average = _number(results.get("average_accuracy"))
    if average is not None:
        return average, tokens, f"average_accuracy of {len(values)} datasets"
    return sum(v for v in values if v is not None) / len(values), tokens, f"mean score of {len(values)} datasets"


def _judge(
    summary: dict[str, Any], config: dict[str, str], early: dict[str, float], benchmark: str | None, scenario: str
) -> tuple[list[str], list[str]]:
    """(reasons the run is not valid, notes) for the performance side (submission checker rules)."""
    reasons: list[str] = []
    notes: list[str] = []
    state = summary.get("state")
    if summary.get("complete") is not True or (isinstance(state, str) and state != "complete"):
        reasons.append(f"the run did not complete (complete={summary.get('complete')!r}, state={state!r})")
    issued, completed = _number(summary.get("n_samples_issued")), _number(summary.get("n_samples_completed"))
    failed = _number(summary.get("n_samples_failed"))
    if failed is None or failed != 0:
        reasons.append(f"n_samples_failed is {summary.get('n_samples_failed')!r}: every sample must succeed")
    if issued is None or completed is None or completed < issued:
        reasons.append(f"{completed!r} of {issued!r} issued samples completed")
    minimum = endpoint_rules.min_duration_ms()
    configured = _number(config.get("settings.runtime.min_duration_ms"))
    if configured is not None and configured < minimum:
        reasons.append(f"min_duration_ms is {configured:g} in config.yaml (< {minimum} ms)")
    duration = _number(summary.get("duration_ns"))
    if duration is None or duration / 1e6 < minimum:
        reasons.append(f"the run lasted {duration!r} ns (< {minimum} ms)")
    elif configured is not None and duration / 1e6 < configured:
        notes.append(f"the run lasted {duration / 1e9:.1f} s, less than config.yaml's min_duration_ms {configured:g}")
    limits = endpoint_rules.latency_limits(benchmark, scenario)
    for series, limit in limits.items():
        value = early.get(series)
        if value is None:
            reasons.append(f"no early-stopping 99th percentile of {series} (insufficient samples)")
        elif not value < limit:
            reasons.append(
                f"early-stopping p99 {series} {value / 1e6:.2f} ms is not below the limit {limit / 1e6:g} ms"
            )
    if not limits and scenario in ("Server", "Interactive"):
        notes.append(f"no {scenario} latency limit known for {benchmark}: latency not judged")
    return reasons, notes


def build(
    directory: str, names: list[str], host: str | None, extra_metadata: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], BenchmarkResult | None]:
    """The result of the endpoints scenario folder ``directory`` (``names``: its files found by the walk;
    ``extra_metadata`` as :func:`workload.metrics.build.build` takes it)."""
    raw = RawResult(directory=directory)
    ident = build_mod.layout_identity(directory)
    if not ident:  # Interactive (not a LoadGen scenario): the folder name is the truth, the layout the same
        parent, scenario = os.path.split(directory.rstrip("/"))
        if scenario.lower() == "interactive":
            ident = build_mod.layout_identity(os.path.join(parent, "Server"))
            ident["scenario"] = "Interactive"
    scenario = ident.get("scenario") or os.path.basename(directory.rstrip("/"))
    benchmark = ident.get("benchmark_full")
    for key in ("benchmark_full", "system"):
        raw.put_ident(key, ident.get(key), PRIO_DETAIL)
    config: dict[str, str] = {}
    for name in CONFIG_FILES:
        loaded = _load(os.path.join(directory, name), raw)
        if loaded is not None:
            config = loaded
            raw.files.append(os.path.join(directory, name))
            break
    summary_path = os.path.join(directory, SUMMARY)
    summary = _load(summary_path, raw) if SUMMARY in names else None
    accuracy_path = os.path.join(directory, ACCURACY)
    results = _load(accuracy_path, raw) if ACCURACY in names else None
    if summary is None and results is None:
        return raw.issues, None
    raw.put_ident("scenario", scenario, PRIO_DETAIL)
    raw.put_ident(
        "test_mode",
        "SubmissionRun"
        if summary is not None and results is not None
        else "PerformanceOnly"
        if summary is not None
        else "AccuracyOnly",
        PRIO_DETAIL,
    )
    reasons: list[str] = []
    notes: list[str] = []
    extra: list[submission.MetricSpec] = []
    if summary is not None:
        raw.files.append(summary_path)
        early = _series(raw, summary, summary_path)
        reasons, notes = _judge(summary, config, early, benchmark, scenario)
        offline = scenario == "Offline"
        qps, tps = _number(summary.get("qps")), _number(summary.get("tps"))
        if qps is not None:
            key = "result_samples_per_second" if offline else "result_completed_samples_per_sec"
            raw.put(key, qps, PRIO_DETAIL, summary_path)
        if tps is not None:
            if endpoint_rules.reports_tokens(benchmark):
                key = "result_tokens_per_second" if offline else "result_completed_tokens_per_second"
                raw.put(key, tps, PRIO_DETAIL, summary_path)
                if scenario == "Interactive":
                    raw.put("scenario_key", key, PRIO_DETAIL, summary_path)
            else:
                extra.append(
                    (
                        "tokens_per_second",
                        tps,
                        "tokens/s",
                        Relativity.HIGHER_IS_BETTER,
                        Categorization.PERFORMANCE,
                        3,
                        "endpoints tps",
                    )
                )
        configured = _number(config.get("settings.runtime.min_duration_ms"))
        if configured is not None:
            raw.put("effective_min_duration_ms", configured, PRIO_DETAIL, summary_path)
        # Server/Interactive: the Poisson rate asked for (run_config in the summary, else config.yaml), and the
        # window QPS/TPS were measured over when the client used LoadGen's Server definition (use_legacy_...).
        run_config = summary.get("run_config")
        pattern = run_config.get("load_pattern") if isinstance(run_config, dict) else None
        asked = _number(pattern.get("target_qps")) if isinstance(pattern, dict) else None
        if asked is None:
            asked = _number(config.get("settings.load_pattern.target_qps"))
        if asked is not None and not offline:
            raw.put("effective_target_qps", asked, PRIO_DETAIL, summary_path)
        window = _number(summary.get("legacy_loadgen_window_duration_ns"))
        if window is not None:
            notes.append(
                "qps/tps as LoadGen's Server 'completed' rate: (completed - 1) / window and tokens / window, the "
                "window from the first issue to the completion of the last-issued sample "
                "(use_legacy_loadgen_qps_metrics)"
            )
            extra.append(
                (
                    "legacy_loadgen_window_duration_ns",
                    window,
                    "ns",
                    Relativity.UNDEFINED,
                    Categorization.PERFORMANCE,
                    3,
                    "endpoints legacy_loadgen_window_duration_ns",
                )
            )
        for key, label, unit in (
            ("n_samples_issued", "samples_issued", "samples"),
            ("n_samples_completed", "samples_completed", "samples"),
            ("n_samples_failed", "samples_failed", "samples"),
            ("duration_ns", "duration_ns", "ns"),
        ):
            value = _number(summary.get(key))
            if value is not None:
                extra.append(
                    (label, value, unit, Relativity.UNDEFINED, Categorization.PERFORMANCE, 3, f"endpoints {key}")
                )
        for series, value in early.items():
            extra.append(
                (
                    f"{series}_p99_early_stopping_ns",
                    value,
                    "ns",
                    Relativity.LOWER_IS_BETTER,
                    Categorization.PERFORMANCE,
                    3,
                    f"early-stopping estimate of the 99th percentile {series}",
                )
            )
    accuracy_ok: bool | None = None
    if results is not None:
        raw.files.append(accuracy_path)
        score, tokens, how = _accuracy(results, accuracy_path, raw)
        for name, value in ((endpoint_rules.accuracy_metric(benchmark), score), ("TOKENS_PER_SAMPLE", tokens)):
            if value is None:
                continue
            target = endpoint_rules.accuracy_target(benchmark, name)
            if target is None and name == "TOKENS_PER_SAMPLE":
                continue  # only judged where the round sets a range for it
            low, high = (target.lower, target.upper) if target is not None else (None, None)
            passed = None if target is None else target.passes(value)
            raw.add_accuracy(AccuracyCheck(name=name, value=value, threshold=low, upper_limit=high, passed=passed))
        checks = [c.passed for c in raw.accuracy]
        accuracy_ok = None if not checks or None in checks else all(checks)
        raw.accuracy_pass = accuracy_ok
        if how:
            notes.append(f"accuracy: {how}")
        if accuracy_ok is False:
            reasons.append("the accuracy is below its target")
        elif accuracy_ok is None and score is not None:
            reasons.append(f"no accuracy target known for {benchmark}: the run cannot be judged valid")
    if summary is not None:
        raw.put("result_validity", "VALID" if not reasons else "INVALID", PRIO_DETAIL, summary_path)
    meta: dict[str, MetadataValue] = {"validity_rule": _RULE, "result_format": "mlcommons-endpoints"}
    version = summary.get("version") if summary is not None else None
    if isinstance(version, str):
        meta["endpoints_version"] = version
    result = build_mod.build(raw, host=host, extra_metadata={**(extra_metadata or {}), **meta})
    if result is None:
        return raw.issues, None
    # the extra figures share the result's context (tool, scenario name, times, host, the one metadata dict)
    first = result.metrics[0].__dict__ if result.metrics else None
    context = (
        {k: first[k] for k in build_mod.CONTEXT_FIELDS}
        if first is not None
        else {
            "tool_name": "MLPerf",
            "tool_version": result.loadgen_version,
            "scenario_name": result.model or "",
            "start_time": None,
            "end_time": None,
            "host": host,
            "metadata": {},
        }
    )
    added = build_mod.metrics_of(
        ((n, v, u, Relativity(r), Categorization(c), d, verb) for n, v, u, r, c, verb, d in extra), context
    )
    return raw.issues, result.model_copy(
        update={
            "invalid_reasons": reasons,  # the checker's reasons replace LoadGen-based explanations
            "fixes": [],
            "notes": [*notes, *(n for n in result.notes if "min_duration" not in n)],
            "metrics": [*result.metrics, *added],
        }
    )


def is_endpoints_name(name: str) -> bool:
    """Whether a job file name is one of this format's (the walk names them relative to the scenario folder)."""
    return name in (SUMMARY, ACCURACY)
