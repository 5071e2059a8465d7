"""Metric names: LoadGen detail-log key -> (clear name, unit, relativity, verbosity, description).

Two naming schemes are emitted side by side: clear names (``samples_per_second``, ``latency_p99_ns``,
``ttft_p99_ns`` ...) and VirtualClient's (``PerformanceMode_p99``, ``samples_per_second_p99`` ...), whose
``_p99``/``_p99_9`` suffix is the *accuracy target* of the benchmark (bert-99 vs bert-99.9), derived
from ``benchmark_full``/``config_name`` - VC looked at the scenario field and always said ``_p99``.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from workload.metrics.model import Relativity

HIGHER = Relativity.HIGHER_IS_BETTER
LOWER = Relativity.LOWER_IS_BETTER
UNDEFINED = Relativity.UNDEFINED


class Spec(NamedTuple):
    """How one detail-log key becomes a metric."""

    name: str
    unit: str
    relativity: Relativity
    verbosity: int
    description: str


FIXED: dict[str, Spec] = {
    "result_samples_per_second": Spec("samples_per_second", "samples/s", HIGHER, 1, "Offline throughput"),
    "result_completed_samples_per_sec": Spec(
        "samples_per_second", "samples/s", HIGHER, 1, "Server throughput: completed samples per second"
    ),
    "result_scheduled_samples_per_sec": Spec(
        "scheduled_samples_per_second", "samples/s", HIGHER, 3, "Server: scheduled (issued) samples per second"
    ),
    "result_tokens_per_second": Spec("tokens_per_second", "tokens/s", HIGHER, 1, "Offline token throughput"),
    "result_completed_tokens_per_second": Spec(
        "tokens_per_second", "tokens/s", HIGHER, 1, "Server token throughput (completed tokens per second)"
    ),
    "result_inferred_tokens_per_second": Spec(
        "inferred_tokens_per_second", "tokens/s", HIGHER, 3, "Tokens per second inferred from samples (gptj)"
    ),
    "result_inferred_completed_tokens_per_second": Spec(
        "inferred_tokens_per_second", "tokens/s", HIGHER, 3, "Completed tokens per second inferred (gptj)"
    ),
    "result_qps_with_loadgen_overhead": Spec("qps_with_loadgen_overhead", "queries/s", HIGHER, 3, ""),
    "result_qps_without_loadgen_overhead": Spec("qps_without_loadgen_overhead", "queries/s", HIGHER, 3, ""),
    "result_query_count": Spec("query_count", "queries", UNDEFINED, 3, "Queries processed"),
    "result_overlatency_query_count": Spec("overlatency_query_count", "queries", LOWER, 3, "Queries over the bound"),
    "result_min_latency_ns": Spec("latency_min_ns", "ns", LOWER, 3, "Minimum sample latency"),
    "result_max_latency_ns": Spec("latency_max_ns", "ns", LOWER, 3, "Maximum sample latency"),
    "result_mean_latency_ns": Spec("latency_mean_ns", "ns", LOWER, 3, "Mean sample latency"),
    "result_min_query_latency_ns": Spec("per_query_latency_min_ns", "ns", LOWER, 3, "MultiStream min query latency"),
    "result_max_query_latency_ns": Spec("per_query_latency_max_ns", "ns", LOWER, 3, "MultiStream max query latency"),
    "result_mean_query_latency_ns": Spec("per_query_latency_mean_ns", "ns", LOWER, 3, "MultiStream mean query latency"),
    "result_first_token_min_latency_ns": Spec("ttft_min_ns", "ns", LOWER, 3, "Minimum time to first token"),
    "result_first_token_max_latency_ns": Spec("ttft_max_ns", "ns", LOWER, 3, "Maximum time to first token"),
    "result_first_token_mean_latency_ns": Spec("ttft_mean_ns", "ns", LOWER, 3, "Mean time to first token"),
    "result_time_to_output_token_min": Spec("tpot_min_ns", "ns", LOWER, 3, "Minimum time per output token"),
    "result_time_to_output_token_max": Spec("tpot_max_ns", "ns", LOWER, 3, "Maximum time per output token"),
    "result_time_to_output_token_mean": Spec("tpot_mean_ns", "ns", LOWER, 3, "Mean time per output token"),
    "result_perf_constraints_met": Spec("perf_constraints_met", "PASS/FAIL", HIGHER, 3, "Server latency bound met"),
    "result_min_duration_met": Spec("min_duration_met", "PASS/FAIL", HIGHER, 3, "Run lasted min_duration"),
    "result_min_queries_met": Spec("min_queries_met", "PASS/FAIL", HIGHER, 3, "Run processed min_query_count"),
    "early_stopping_met": Spec("early_stopping_met", "PASS/FAIL", HIGHER, 3, "Early-stopping criterion met"),
    "effective_min_duration_ms": Spec("effective_min_duration_ms", "ms", UNDEFINED, 5, "min_duration in effect"),
    "effective_min_query_count": Spec(
        "effective_min_query_count", "queries", UNDEFINED, 5, "min_query_count in effect"
    ),
    "effective_samples_per_query": Spec("effective_samples_per_query", "samples", UNDEFINED, 5, "Samples per query"),
    "effective_target_qps": Spec("effective_target_qps", "queries/s", UNDEFINED, 5, "target_qps in effect"),
    "effective_target_latency_ns": Spec("effective_target_latency_ns", "ns", UNDEFINED, 5, "Latency target in effect"),
    "satisfies_query_constraint": Spec(
        "satisfies_query_constraint", "PASS/FAIL", UNDEFINED, 5, "NVIDIA query-count heuristic; not a validity signal"
    ),
    "num_errors": Spec("loadgen_errors", "count", LOWER, 3, "Errors LoadGen logged (any makes a run non-compliant)"),
    "num_warnings": Spec("loadgen_warnings", "count", LOWER, 5, "Warnings LoadGen logged"),
    "accuracy_samples": Spec("accuracy_samples", "samples", UNDEFINED, 5, "Samples scored for accuracy"),
    # the official SingleStream / MultiStream figure since v2.0 (the submission checker's RESULT_FIELD_NEW)
    "early_stopping_latency_ss": Spec(
        "early_stopping_latency_ns", "ns", LOWER, 1, "Early-stopping 90th percentile latency estimate (official)"
    ),
    "early_stopping_latency_ms": Spec(
        "early_stopping_latency_ns", "ns", LOWER, 1, "Early-stopping 99th percentile per-query latency (official)"
    ),
}

PATTERNS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^result_(\d+\.\d+)_percentile_latency_ns$"), "latency_p{}_ns", "percentile sample latency"),
    (
        re.compile(r"^result_(\d+\.\d+)_percentile_per_query_latency_ns$"),
        "per_query_latency_p{}_ns",
        "percentile per-query latency",
    ),
    (
        re.compile(r"^result_first_token_(\d+\.\d+)_percentile_latency_ns$"),
        "ttft_p{}_ns",
        "percentile time to first token",
    ),
    (
        re.compile(r"^result_time_per_output_token_(\d+\.\d+)_percentile_ns$"),
        "tpot_p{}_ns",
        "percentile time per output token",
    ),
]


def pct_label(pct: str | float) -> str:
    """``"99.90"`` -> ``"99_9"``, ``"90.00"`` -> ``"90"`` (metric-name friendly)."""
    return f"{float(pct):g}".replace(".", "_")


@functools.lru_cache(maxsize=1024)
def spec_for(key: str) -> Spec | None:
    """The metric spec of a detail-log key, or None for keys that are not metrics."""
    spec = FIXED.get(key)
    if spec is not None:
        return spec
    for pattern, template, description in PATTERNS:
        match = pattern.match(key)
        if match:
            pct = match.group(1)
            verbosity = 1 if float(pct) in (90.0, 99.0) else 3
            return Spec(template.format(pct_label(pct)), "ns", LOWER, verbosity, f"{float(pct):g} {description}")
    return None


#: VirtualClient's names (each with the accuracy suffix of :func:`accuracy_suffix`) of figures that
#: metrics/build.py also emits under a clear name: the same number twice, which compare counts once
VC_PERFORMANCE_MODE = "PerformanceMode"
VC_SAMPLES_PER_SECOND = "samples_per_second"
VC_LATENCY = "latency_ns"
VC_ACCURACY_MODE = "AccuracyMode"
VC_ACCURACY_VALUE = "AccuracyValue"
VC_THRESHOLD_VALUE = "ThresholdValue"
VC_THRESHOLD_RATIO = "AccuracyThresholdRatio"
_VC_NAMES = (
    VC_PERFORMANCE_MODE, VC_SAMPLES_PER_SECOND, VC_LATENCY, VC_ACCURACY_MODE, VC_ACCURACY_VALUE,
    VC_THRESHOLD_VALUE, VC_THRESHOLD_RATIO,
)  # fmt: skip
_VC_ALIAS = re.compile(r"^(?:" + "|".join(_VC_NAMES) + r")_p99(?:_9)?$")


def is_vc_alias(name: str) -> bool:
    """A VirtualClient-named metric (``samples_per_second_p99``, ``latency_ns_p99_9``, ``PerformanceMode_p99``)."""
    return _VC_ALIAS.match(name) is not None


def accuracy_suffix(benchmark_full: str | None, config_name: str | None) -> str:
    """VirtualClient's metric suffix: ``_p99_9`` for 99.9 % accuracy targets, else ``_p99``."""
    if benchmark_full and benchmark_full.endswith("-99.9"):
        return "_p99_9"
    if config_name and ("k_99_9" in config_name or "-99.9" in config_name):
        return "_p99_9"
    return "_p99"


def slug(name: str) -> str:
    """Metric-name form of an accuracy figure's name: ``F1`` -> ``f1``, ``ROUGE-L`` -> ``rouge_l``."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_") or "value"
