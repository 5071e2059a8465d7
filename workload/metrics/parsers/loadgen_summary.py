"""LoadGen ``mlperf_log_summary.txt``: the human summary; used where no detail log is present.

Lines are ``label : value`` with irregular spacing (``Samples per second: X``, ``Completed samples per
second    : X``); each known label is mapped onto the detail-log key it prints, so results read from
a summary look the same as results read from a detail log. Percentile labels are matched by pattern.

Version difference: LoadGen <= 4.0 prints ``Scheduled samples per second`` as the Server headline
(before ``Result is``) and Completed under Additional Stats; 4.1+ prints Completed first. The
position is recorded on the RawResult so the headline follows the version that wrote the file.
An AccuracyOnly summary holds only the warning/error lines: that is a result without perf metrics.
LLM runs (token latencies) print a "TTFT Early Stopping Result:" and a "TPOT Early Stopping Result:"
block instead of one "Early Stopping Result:"; each lands on the detail-log key LoadGen gives it.
A value that is not a finite number (``Samples per second: nan``) is an issue naming the line, never a metric.
"""

from __future__ import annotations

import re

from workload.metrics.raw import PRIO_SUMMARY, RawResult, Scalar, finite

_LABELS: dict[str, str] = {
    "samples per second": "result_samples_per_second",
    "completed samples per second": "result_completed_samples_per_sec",
    "scheduled samples per second": "result_scheduled_samples_per_sec",
    "tokens per second": "result_tokens_per_second",
    "completed tokens per second": "result_completed_tokens_per_second",
    "tokens per second (inferred)": "result_inferred_tokens_per_second",
    "completed tokens per second (inferred)": "result_inferred_completed_tokens_per_second",
    "result is": "result_validity",
    "performance constraints satisfied": "result_perf_constraints_met",
    "min duration satisfied": "result_min_duration_met",
    "min queries satisfied": "result_min_queries_met",
    "early stopping satisfied": "early_stopping_met",
    "qps w/ loadgen overhead": "result_qps_with_loadgen_overhead",
    "qps w/o loadgen overhead": "result_qps_without_loadgen_overhead",
    "min latency (ns)": "result_min_latency_ns",
    "max latency (ns)": "result_max_latency_ns",
    "mean latency (ns)": "result_mean_latency_ns",
    "min first token latency (ns)": "result_first_token_min_latency_ns",
    "max first token latency (ns)": "result_first_token_max_latency_ns",
    "mean first token latency (ns)": "result_first_token_mean_latency_ns",
    "min time to output token (ns)": "result_time_to_output_token_min",
    "max time to output token (ns)": "result_time_to_output_token_max",
    "mean time to output token (ns)": "result_time_to_output_token_mean",
    # LoadGen 6.0 renamed "Time to Output Token" to "Time per Output Token" in the summary
    "min time per output token (ns)": "result_time_to_output_token_min",
    "max time per output token (ns)": "result_time_to_output_token_max",
    "mean time per output token (ns)": "result_time_to_output_token_mean",
    "samples_per_query": "effective_samples_per_query",
    "target_qps": "effective_target_qps",
    "target_latency (ns)": "effective_target_latency_ns",
    "ttft_latency (ns)": "requested_server_ttft_latency",
    "tpot_latency (ns)": "requested_server_tpot_latency",
    "max_async_queries": "effective_max_async_queries",
    "min_duration (ms)": "effective_min_duration_ms",
    "max_duration (ms)": "effective_max_duration_ms",
    "min_query_count": "effective_min_query_count",
    "max_query_count": "effective_max_query_count",
    "performance_sample_count": "effective_performance_sample_count",
    # the round's seeds (the submission checker's MODEL_CONFIG "seeds"): they tell the round of a summary
    "qsl_rng_seed": "effective_qsl_rng_seed",
}
_PERCENTILE = re.compile(
    r"^(\d+(?:\.\d+)?) percentile (latency|first token latency|time (?:to|per) output token) \(ns\)$"
)
_HEADLINE_PCT = re.compile(r"^(\d+(?:\.\d+)?)(?:th)? percentile latency \(ns\)$")
_ESTIMATE = re.compile(r"^\* early stopping (\d+(?:\.\d+)?)(?:th)? percentile estimate$")
_COUNT_LINE = re.compile(r"^(no|\d+) (warnings|errors) encountered", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
#: early-stopping block heading (lower case, without the colon) -> the detail-log key of its text
_EARLY_STOPPING_BLOCKS = {
    "early stopping result": "early_stopping_result",
    "ttft early stopping result": "early_stopping_ttft_result",
    "tpot early stopping result": "early_stopping_tpot_result",
}


def _pct(text: str) -> str:
    return f"{float(text):.2f}"


def _number(text: str) -> Scalar | None:
    text = text.strip()
    low = text.lower()
    if low in ("yes", "true"):
        return True
    if low in ("no", "false"):
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read the summary ``text`` (from ``path``) into ``raw``."""
    section = "head"
    seen_validity = False
    understood = 0
    in_recommendations = False
    in_early_stopping = False
    early_stopping: dict[str, list[str]] = {}
    block: list[str] = []
    scenario: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or not stripped.strip("="):
            continue
        count = _COUNT_LINE.match(stripped)
        if count:
            n = 0 if count.group(1).lower() == "no" else int(count.group(1))
            raw.put("num_warnings" if count.group(2).lower() == "warnings" else "num_errors", n, PRIO_SUMMARY, path)
            understood += 1
            continue
        low = stripped.lower()
        if low in ("additional stats", "test parameters used"):
            if raw.detail_ok and section == "head":
                # everything below is in the detail log already, to the same precision (integers)
                understood += 1
                break
            section = low
            in_recommendations = False
            continue
        if low == "recommendations:":
            in_recommendations, in_early_stopping = True, False
            continue
        if low.endswith("early stopping result:"):
            in_recommendations, in_early_stopping = False, True
            block = early_stopping.setdefault(
                _EARLY_STOPPING_BLOCKS.get(_SPACES.sub(" ", low[:-1]), "early_stopping_result"), []
            )
            continue
        if stripped.startswith("*") or (in_early_stopping and ":" not in stripped):
            estimate = _ESTIMATE.match(_SPACES.sub(" ", low.split(":", 1)[0]))
            if estimate and ":" in stripped:
                value = _number(stripped.split(":", 1)[1])
                # the first estimate is the scenario's own percentile (SS 90th, MS 99th)
                es_key = "early_stopping_latency_ss" if scenario == "SingleStream" else "early_stopping_latency_ms"
                if value is not None and not isinstance(value, bool) and es_key not in raw.values:
                    raw.put(es_key, value, PRIO_SUMMARY, path)
            if in_recommendations:
                raw.recommendations.append(stripped.lstrip("* ").strip())
            elif in_early_stopping:
                block.append(stripped)
            continue
        in_early_stopping = False
        if ":" not in stripped:
            continue
        label, _, value_text = stripped.partition(":")
        label = _SPACES.sub(" ", label.strip().lower())
        value_text = value_text.strip()
        if label == "sut name":
            raw.put("sut_name", value_text, PRIO_SUMMARY, path)
            understood += 1
            continue
        if label == "scenario":
            scenario = value_text
            raw.put_ident("scenario", value_text, PRIO_SUMMARY)
            raw.put("effective_scenario", value_text, PRIO_SUMMARY, path)
            understood += 1
            continue
        if label == "mode":
            raw.put_ident("test_mode", value_text, PRIO_SUMMARY)
            raw.put("effective_test_mode", value_text, PRIO_SUMMARY, path)
            understood += 1
            continue
        if label == "result is":
            seen_validity = True
            if value_text.upper() in ("VALID", "INVALID"):
                raw.put("result_validity", value_text.upper(), PRIO_SUMMARY, path)
                understood += 1
            continue
        key = _LABELS.get(label)
        if key is None:
            match = _PERCENTILE.match(label)
            headline = _HEADLINE_PCT.match(label) if section == "head" else None
            if headline and scenario == "MultiStream":
                key = f"result_{_pct(headline.group(1))}_percentile_per_query_latency_ns"
            elif headline:
                key = f"result_{_pct(headline.group(1))}_percentile_latency_ns"
            elif match:
                pct, kind = _pct(match.group(1)), match.group(2)
                if kind == "latency":
                    key = f"result_{pct}_percentile_latency_ns"
                elif kind == "first token latency":
                    key = f"result_first_token_{pct}_percentile_latency_ns"
                else:
                    key = f"result_time_per_output_token_{pct}_percentile_ns"
        if key is None:
            continue
        value = _number(value_text)
        if value is None:
            continue
        if not finite(value):
            shown = stripped.partition(":")[0].strip()
            raw.issue(path, f"{shown!r} ({key}) is {value_text!r}, not a finite number; the value was ignored")
            continue
        if key == "result_scheduled_samples_per_sec" and section == "head" and not seen_validity:
            raw.scheduled_headline = True
        # the MultiStream "Per-query latency:" block in Additional Stats is the per-query distribution
        if scenario == "MultiStream" and section == "additional stats" and key.startswith("result_"):
            key = key.replace("_percentile_latency_ns", "_percentile_per_query_latency_ns")
            key = key.replace("result_min_latency_ns", "result_min_query_latency_ns")
            key = key.replace("result_max_latency_ns", "result_max_query_latency_ns")
            key = key.replace("result_mean_latency_ns", "result_mean_query_latency_ns")
        raw.put(key, value, PRIO_SUMMARY, path)
        understood += 1
    if understood == 0:
        raw.issue(path, "no MLPerf summary fields found (not a LoadGen summary, or empty)")
        return
    raw.files.append(path)
    for es_key, lines in early_stopping.items():
        if lines:
            raw.put(es_key, " ".join(lines), PRIO_SUMMARY, path)
    if raw.recommendations and "result_invalid_reason" not in raw.values:
        raw.put("result_invalid_reason", " ".join(raw.recommendations), PRIO_SUMMARY, path)
