"""Turn one directory's :class:`RawResult` into a named, typed :class:`BenchmarkResult`.

Identity (model, benchmark, scenario, mode, system) comes from file contents first, then from the
NVIDIA layout ``<system>/<benchmark_full>/<Scenario>/`` (also under ``performance/run_1`` or
``accuracy`` as in the results repositories). Each detail-log key becomes at most one metric, so
values present in both metadata.json and the LoadGen logs are not duplicated.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from datetime import datetime

from workload.metrics import judge, names, submission, verdict
from workload.metrics.built import CONTEXT_FIELDS, Built, Row, metrics_of, result_of
from workload.metrics.model import (
    BenchmarkResult,
    Categorization,
    Metadata,
    MetadataValue,
    Relativity,
)
from workload.metrics.parsers import accuracy_txt
from workload.metrics.raw import RawResult, Scalar
from workload.metrics.rules import detect_round, rules_for

# Moved to built.py (the plain-data form and the one way a model is made of it); importable from here.
__all__ = ["CONTEXT_FIELDS", "Built", "Row", "build", "build_data", "layout_identity", "metrics_of", "result_of"]

SCENARIOS = {
    "offline": "Offline",
    "server": "Server",
    "singlestream": "SingleStream",
    "single-stream": "SingleStream",
    "single_stream": "SingleStream",
    "multistream": "MultiStream",
    "multi-stream": "MultiStream",
    "multi_stream": "MultiStream",
    "interactive": "Interactive",
}
# v6.0 trees also file compliance inside the scenario folder: ``<scenario>/compliance/TEST01/verify_*.txt``
_SKIP_DIRS = re.compile(r"^(run_\d+|performance|accuracy|compliance|ranging|TEST\d\d)$", re.IGNORECASE)
_RUN_KIND = re.compile(r"^(TEST\d\d|ranging)$", re.IGNORECASE)
_ACCURACY_LEVEL = re.compile(r"-99(\.9)?$")
_PERF_KEYS = (
    "result_validity",
    "result_samples_per_second",
    "result_completed_samples_per_sec",
    "result_90.00_percentile_latency_ns",
    "result_99.00_percentile_per_query_latency_ns",
    "result_tokens_per_second",
    "result_scheduled_samples_per_sec",
)


def layout_identity(directory: str) -> dict[str, str]:
    """Identity from the NVIDIA path layout, e.g. ``.../H200x8_TRT/bert-99/Server`` -> system, benchmark, scenario."""
    parts = [p for p in directory.replace("\\", "/").split("/") if p]
    while parts and _SKIP_DIRS.match(parts[-1]):
        parts.pop()
    if not parts or parts[-1].lower() not in SCENARIOS:
        return {}
    found = {"scenario": SCENARIOS[parts[-1].lower()]}
    if len(parts) >= 2 and parts[-2] not in ("/", ""):
        found["benchmark_full"] = parts[-2]
    if len(parts) >= 3 and parts[-3] not in ("/", ""):
        found["system"] = parts[-3]
    return found


def run_kind(directory: str) -> str | None:
    """What kind of run a result folder below the scenario folder holds, when it is not the scenario's own:
    ``TEST01`` (the LoadGen run of a compliance test: ``.../Offline/TEST01/performance/run_1``) or
    ``ranging`` (a power submission's ranging run: ``.../Offline/performance/ranging``); None otherwise."""
    parts = [p for p in directory.replace("\\", "/").split("/") if p]
    while parts and _SKIP_DIRS.match(parts[-1]):
        if _RUN_KIND.match(parts[-1]):
            return parts[-1] if parts[-1].upper().startswith("TEST") else "ranging"
        parts.pop()
    return None


def _scenario_name(value: str | None) -> str | None:
    if value is None:
        return None
    return SCENARIOS.get(value.lower(), value)


def _power_time(text: str) -> datetime | None:
    """LoadGen's ``power_begin`` format ``07-24-2024 22:03:41.678`` (sliced: strptime is slow)."""
    try:
        if len(text) < 19 or text[2] != "-" or text[5] != "-" or text[10] != " ":
            return None
        frac = text[20:26] if len(text) > 20 else ""
        micro = int(frac.ljust(6, "0")) if frac.isdigit() else 0
        return datetime(int(text[6:10]), int(text[0:2]), int(text[3:5]), int(text[11:13]), int(text[14:16]),
                        int(text[17:19]), micro)  # fmt: skip
    except ValueError:
        return None


def _parse_times(values: dict[str, Scalar]) -> tuple[datetime | None, datetime | None]:
    start: datetime | None = None
    text = values.get("test_datetime")
    if isinstance(text, str):
        try:
            start = datetime.fromisoformat(text)
        except ValueError:
            start = None
    begin, end = values.get("power_begin"), values.get("power_end")
    if start is not None and isinstance(begin, str) and isinstance(end, str):
        t0, t1 = _power_time(begin), _power_time(end)
        if t0 is not None and t1 is not None and t1 >= t0:
            return start, start + (t1 - t0)
    return start, None


#: detail-log key -> its metric spec, or None for keys that are not metrics of their own (see :func:`_spec_of`)
_SPECS: dict[str, names.Spec | None] = {}
_UNKNOWN = names.Spec("", "", names.UNDEFINED, 0, "")
#: keys reported elsewhere (validity metrics, the early-stopping estimate of the scenario)
_NOT_METRICS = frozenset({"result_validity", "early_stopping_latency_ss", "early_stopping_latency_ms"})


def _spec_of(key: str) -> names.Spec | None:
    """The spec of ``key`` as :data:`_SPECS` holds it (remembered for the first few thousand keys seen)."""
    spec = None if key in _NOT_METRICS else names.spec_for(key)
    if len(_SPECS) < 4096:  # keys come from files (metadata.json names its scenario_key): bounded
        _SPECS[key] = spec
    return spec


#: the scenario_key NVIDIA's harness writes into metadata.json, by scenario (first one present)
_NVIDIA_SCENARIO_KEYS = {
    "Offline": ("result_tokens_per_second", "result_samples_per_second"),  # tokens: llama2/mixtral
    "Server": ("result_completed_samples_per_sec", "result_scheduled_samples_per_sec"),  # scheduled: <= v4.0
    "SingleStream": ("result_90.00_percentile_latency_ns",),
    "MultiStream": ("result_99.00_percentile_per_query_latency_ns",),
}


def _vc_scenario_key(values: dict[str, Scalar], scenario: str | None) -> str | None:
    """The key VirtualClient reads its performance value from: metadata.json's ``scenario_key``, else the
    key NVIDIA's harness would name for this scenario; None when that value is not a number here."""

    def number(key: str) -> bool:
        value = values.get(key)
        return isinstance(value, int | float) and not isinstance(value, bool)

    given = values.get("scenario_key")
    if isinstance(given, str):
        return given if number(given) else None
    return next((k for k in _NVIDIA_SCENARIO_KEYS.get(scenario or "", ()) if number(k)), None)


def build(
    raw: RawResult, *, host: str | None = None, extra_metadata: Mapping[str, MetadataValue] | None = None
) -> BenchmarkResult | None:
    """The result of one directory, or None when nothing usable was parsed there.

    ``extra_metadata`` (a submission's system description, inventory labels) goes into the metadata of
    every metric under the keys the result does not set itself: parsed values win.
    """
    built = build_data(raw, host=host, extra_metadata=extra_metadata)
    return result_of(built) if built is not None else None


def build_data(
    raw: RawResult, *, host: str | None = None, extra_metadata: Mapping[str, MetadataValue] | None = None
) -> Built | None:
    """:func:`build`'s result as plain data (see :class:`Built`), or None when nothing usable was parsed."""
    if not raw.has_data:
        return None
    values = raw.values
    layout = layout_identity(raw.directory)
    ident = dict(layout)
    ident.update(raw.ident)
    benchmark_full = ident.get("benchmark_full")
    model = ident.get("model") or (_ACCURACY_LEVEL.sub("", benchmark_full) if benchmark_full else None)
    scenario = _scenario_name(ident.get("scenario"))
    if layout.get("scenario") == "Interactive" and scenario in (None, "Server"):
        scenario = "Interactive"  # LoadGen logs Interactive as Server: the folder is the truth
    version_value = values.get("loadgen_version")
    loadgen_version = version_value if isinstance(version_value, str) else None
    round_name, round_from = detect_round(
        loadgen_version=loadgen_version,
        path=raw.directory,
        benchmark=benchmark_full or model,
        scheduled_headline=raw.scheduled_headline,
        qsl_rng_seed=values.get("effective_qsl_rng_seed"),
    )
    rules = rules_for(round_name)
    bench = rules.benchmark(benchmark_full) or rules.benchmark(model)
    accuracy_txt.read_figures(raw, rules, [t.metric for t in bench.targets] if bench is not None else ())
    if not (values or raw.accuracy or raw.ident or raw.accuracy_pass is not None):
        return None  # e.g. a compliance accuracy.txt holding only its hash
    has_perf = any(k in values for k in _PERF_KEYS)
    test_mode = ident.get("test_mode") or ("PerformanceOnly" if has_perf else "AccuracyOnly" if raw.accuracy else None)
    config_name = ident.get("config_name")
    system = ident.get("system")
    validity_raw = values.get("result_validity")
    validity = validity_raw if validity_raw in ("VALID", "INVALID") else None
    if test_mode == "AccuracyOnly":
        validity = None  # LoadGen does not judge accuracy runs
    checks, accuracy_pass = judge.resolve_accuracy(raw, bench, scenario)
    open_taken: list[str] = []
    if accuracy_pass is False and submission.division_of(raw.directory) == "open":
        # the submission checker of every round: "accuracy not valid but taken for open" (the closed
        # targets bind the closed and network divisions only); the figures keep their own verdicts
        open_taken = verdict.explain_accuracy(checks, benchmark_full, raw.accuracy_problems)[0]
        accuracy_pass = True
    violations: list[str] = []
    if validity == "VALID" and test_mode != "AccuracyOnly":
        violations = judge.rule_violations(values, scenario, rules, bench)
        if violations:
            validity = "INVALID"  # LoadGen's own checks passed; the round's submission checker would reject it
    sut = values.get("sut_name")
    scenario_name = (
        model
        or benchmark_full
        or (sut if isinstance(sut, str) else None)
        or os.path.basename(raw.directory.rstrip("/"))
    )
    start, end = _parse_times(values)
    suffix = names.accuracy_suffix(benchmark_full, config_name)

    meta: Metadata = {
        "model": model,
        "benchmark_full": benchmark_full,
        "scenario": scenario,
        "test_mode": test_mode,
        "config_name": config_name,
        "system": system,
        "validity": validity,
        "host": host,
        "source": raw.directory,
        "loadgen_version": loadgen_version,
        "mlperf_round": round_name,
        "mlperf_round_from": round_from,
        "mlperf_benchmark": bench.name if bench is not None else None,
        "mlperf_checker_unit": rules.unit(bench, scenario) if bench and test_mode != "AccuracyOnly" else None,
        "loadgen_validity": validity_raw if violations else None,
        "run_kind": run_kind(raw.directory),
    }
    for extra in ("tensorrt_version", "sut_name"):
        if isinstance(values.get(extra), str):
            meta[extra] = values[extra]
    meta = {k: v for k, v in meta.items() if v is not None}
    for key, given in (extra_metadata or {}).items():
        meta.setdefault(key, given)
    context = {"tool_name": "MLPerf", "tool_version": loadgen_version, "scenario_name": scenario_name,
               "start_time": start, "end_time": end, "host": host, "metadata": meta}  # fmt: skip

    def metric(
        name: str, value: float, unit: str, rel: Relativity, cat: Categorization, verbosity: int, description: str
    ) -> Row:
        # the metrics are made at the end, all with the one context above
        return (name, value, unit, rel, cat, description, verbosity)

    perf_metrics: list[Row] = []
    headline: Row | None = None
    seen: set[str] = set()
    headline_notes: list[str] = []
    loadgen_scenario = "Server" if scenario == "Interactive" else scenario
    if test_mode != "AccuracyOnly":
        headline_key, headline_notes = judge.headline_key(raw, scenario, rules, bench, benchmark_full or model)
        if validity is not None:
            perf_metrics.append(
                metric(
                    "valid",
                    1.0 if validity == "VALID" else 0.0,
                    "VALID/INVALID",
                    names.HIGHER,
                    Categorization.PERFORMANCE,
                    1,
                    "LoadGen result_validity",
                )
            )
            perf_metrics.append(
                metric(
                    f"{names.VC_PERFORMANCE_MODE}{suffix}",
                    1.0 if validity == "VALID" else 0.0,
                    "VALID/INVALID",
                    names.HIGHER,
                    Categorization.PERFORMANCE,
                    1,
                    "VirtualClient name: 1 if VALID",
                )
            )
        seen.update(("valid",))
        if headline_key is not None:
            spec = names.spec_for(headline_key)
            raw_value = values[headline_key]
            if spec is not None and isinstance(raw_value, int | float):
                headline = metric(
                    spec.name,
                    float(raw_value),
                    spec.unit,
                    spec.relativity,
                    Categorization.PERFORMANCE,
                    1,
                    f"Headline: {spec.description or headline_key}",
                )
                perf_metrics.insert(0, headline)
                seen.add(spec.name)
        vc_key = _vc_scenario_key(values, loadgen_scenario)
        if vc_key is not None:
            # VirtualClient's name and value: result[scenario_key], named latency_ns if the key says latency,
            # else samples_per_second (so LLM Offline tokens/s are "samples_per_second_p99", as VC names them)
            vc_spec = names.spec_for(vc_key)
            perf_metrics.append(
                metric(
                    f"{names.VC_LATENCY if 'latency' in vc_key else names.VC_SAMPLES_PER_SECOND}{suffix}",
                    float(values[vc_key]),
                    vc_spec.unit if vc_spec else "",
                    vc_spec.relativity if vc_spec else names.UNDEFINED,
                    Categorization.PERFORMANCE,
                    1,
                    f"VirtualClient name for {vc_key} (the scenario_key)",
                )
            )
        # every other numeric key with a metric spec, once per metric name (the loop of the parse: ~50 keys a
        # result; the spec of a key is looked up in a plain dict, and the row written out, not built by calls)
        add, specs, isfinite = perf_metrics.append, _SPECS, math.isfinite
        for key, value in values.items():
            spec = specs.get(key, _UNKNOWN)
            if spec is _UNKNOWN:
                spec = _spec_of(key)
            if spec is None or isinstance(value, str) or spec.name in seen or not isfinite(value):
                continue
            seen.add(spec.name)
            add((spec.name, float(value), spec.unit, spec.relativity, Categorization.PERFORMANCE, spec.description,
                 spec.verbosity))  # fmt: skip
        es_key = {"SingleStream": "early_stopping_latency_ss", "MultiStream": "early_stopping_latency_ms"}.get(
            scenario or ""
        )
        es_value = values.get(es_key) if es_key else None
        if (
            isinstance(es_value, int | float)
            and not isinstance(es_value, bool)
            and es_value > 0
            and "early_stopping_latency_ns" not in seen
        ):
            perf_metrics.append(
                metric(
                    "early_stopping_latency_ns",
                    float(es_value),
                    "ns",
                    names.LOWER,
                    Categorization.PERFORMANCE,
                    1,
                    "Early-stopping latency estimate (official)",
                )
            )

    acc_metrics: list[Row] = []
    acc = Categorization.ACCURACY
    for check in checks:
        base = f"accuracy_{names.slug(check.name)}"
        if base in seen:
            continue
        seen.add(base)
        rel = names.UNDEFINED if check.upper_limit is not None else names.HIGHER
        if check.value is not None:
            acc_metrics.append(metric(base, check.value, "", rel, acc, 1, f"Accuracy {check.name}"))
        if check.threshold is not None:
            acc_metrics.append(
                metric(
                    f"{base}_threshold",
                    check.threshold,
                    "",
                    names.UNDEFINED,
                    acc,
                    3,
                    f"Accuracy target of {check.name}",
                )
            )
        if check.upper_limit is not None:
            acc_metrics.append(
                metric(
                    f"{base}_upper_limit",
                    check.upper_limit,
                    "",
                    names.UNDEFINED,
                    acc,
                    3,
                    f"Upper limit of {check.name}",
                )
            )
        if check.passed is not None:
            acc_metrics.append(
                metric(
                    f"{base}_pass",
                    1.0 if check.passed else 0.0,
                    "PASS/FAIL",
                    names.HIGHER,
                    acc,
                    3,
                    f"{check.name} within its target",
                )
            )
    if accuracy_pass is not None:
        acc_metrics.append(
            metric(
                "accuracy_pass",
                1.0 if accuracy_pass else 0.0,
                "PASS/FAIL",
                names.HIGHER,
                acc,
                1,
                "All accuracy checks passed",
            )
        )
        acc_metrics.append(
            metric(
                f"{names.VC_ACCURACY_MODE}{suffix}",
                1.0 if accuracy_pass else 0.0,
                "PASS/FAIL",
                names.HIGHER,
                acc,
                1,
                "VirtualClient name: 1 if accuracy passed",
            )
        )
    primary = next((c for c in checks if c.value is not None and c.threshold is not None), None)
    if primary is not None and primary.value is not None and primary.threshold is not None:
        acc_metrics.append(
            metric(
                f"{names.VC_ACCURACY_VALUE}{suffix}",
                primary.value,
                "",
                names.HIGHER,
                acc,
                1,
                f"VirtualClient name: {primary.name}",
            )
        )
        acc_metrics.append(
            metric(
                f"{names.VC_THRESHOLD_VALUE}{suffix}",
                primary.threshold,
                "",
                names.UNDEFINED,
                acc,
                1,
                f"VirtualClient name: {primary.name} target",
            )
        )
        if primary.threshold:
            acc_metrics.append(
                metric(
                    f"{names.VC_THRESHOLD_RATIO}{suffix}",
                    primary.value / primary.threshold,
                    "",
                    names.HIGHER,
                    acc,
                    1,
                    f"VirtualClient name: {primary.name} / target",
                )
            )

    reasons: list[str] = []
    fixes: list[str] = []
    notes: list[str] = list(headline_notes)
    if violations:
        reasons = [f"LoadGen says VALID, but the {rules.round} submission checker rejects it: {v}" for v in violations]
        fixes = [f"lower the {scenario} target QPS until the token latencies are within {rules.round}'s limits"]
    elif test_mode != "AccuracyOnly" and validity == "INVALID":
        reasons, fixes = verdict.explain_invalid(
            values, scenario=loadgen_scenario, model=model, errors=raw.errors, runner=raw.runner
        )
    elif test_mode != "AccuracyOnly" and validity is None:
        reasons = ["no validity found (no result_validity / 'Result is' line): the run may have been cut short"]
    acc_reasons, acc_fixes = (
        ([], [])
        if open_taken
        else verdict.explain_accuracy(checks, benchmark_full, raw.accuracy_problems, raw.accuracy_fixes)
    )
    notes += [f"open division, taken by the submission checker although {why}" for why in open_taken]
    if accuracy_pass is False and not acc_reasons:
        acc_reasons = ["the accuracy check is marked failed (accuracy_pass false) though no figure failed its target"]
    reasons += acc_reasons
    fixes += acc_fixes
    if test_mode == "AccuracyOnly" and accuracy_pass is None:
        unknown_reason, unknown_fix = verdict.explain_unknown_accuracy(checks, benchmark_full or model)
        reasons.append(unknown_reason)
        fixes.append(unknown_fix)
    min_dur = values.get("effective_min_duration_ms")
    if (
        test_mode != "AccuracyOnly"
        and isinstance(min_dur, int | float)
        and not isinstance(min_dur, bool)
        and (0 < min_dur < rules.min_duration_ms)
    ):
        notes.append(f"min_duration was {min_dur:g} ms (< {rules.min_duration_ms}): {verdict.TEST_RUN}")
    if validity == "VALID" and raw.errors:
        notes.append(f"LoadGen logged {len(raw.errors)} error(s); the submission checker rejects such logs")
    if values.get("satisfies_query_constraint") is False:
        notes.append("satisfies_query_constraint is false (NVIDIA heuristic; not a validity signal)")

    fields = {
        "model": model, "benchmark_full": benchmark_full, "scenario": scenario, "test_mode": test_mode,
        "system": system, "config_name": config_name, "validity": validity, "accuracy_pass": accuracy_pass,
        "accuracy_checks": checks, "invalid_reasons": reasons, "fixes": fixes, "notes": notes,
        "source": raw.directory, "files": [os.path.basename(f) for f in raw.files], "host": host,
        "loadgen_version": loadgen_version,
    }  # fmt: skip
    # the headline, when there is one, came first
    return Built(fields, context, perf_metrics + acc_metrics, headline is not None)
