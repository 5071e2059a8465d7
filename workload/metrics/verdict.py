"""Why a result is INVALID or failed accuracy, what to change, and the overall :class:`Verdict`.

Reasons come from LoadGen's own flags (``result_min_duration_met``, ``result_min_queries_met``,
``result_perf_constraints_met``, ``early_stopping_met``, ``result_invalid_reason``, logged errors);
fixes name the ``user.conf`` key to change (``bert.Server.target_qps``) and, where the log holds
enough numbers, the value to try (Offline: expected QPS -> the measured QPS). The NVIDIA harness flag
is named too, since that harness writes user.conf from its own config.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workload.metrics.model import AccuracyCheck, BenchmarkResult
from workload.metrics.raw import Scalar

_NVIDIA_FLAG = {
    ("Offline", "target_qps"): "--offline_expected_qps",
    ("Server", "target_qps"): "--server_target_qps",
    ("SingleStream", "target_latency"): "--single_stream_expected_latency_ns (ns)",
    ("MultiStream", "target_latency"): "--multi_stream_expected_latency_ns (ns)",
    ("Offline", "min_duration"): "--min_duration",
    ("Server", "min_duration"): "--min_duration",
    ("SingleStream", "min_duration"): "--min_duration",
    ("MultiStream", "min_duration"): "--min_duration",
}


def _num(values: Mapping[str, Scalar], key: str) -> float | None:
    value = values.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _flag(values: Mapping[str, Scalar], key: str) -> bool | None:
    value = values.get(key)
    return value if isinstance(value, bool) else None


def _fmt(number: float) -> str:
    return f"{number:.6g}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.4g} ms"


def _conf(model: str | None, scenario: str, key: str, value: str | None) -> str:
    """``bert.Server.target_qps = 100`` (user.conf needs the spaces around '=')."""
    line = f"{model or '*'}.{scenario}.{key}"
    text = f"`{line} = {value}`" if value is not None else f"`{line}`"
    flag = _NVIDIA_FLAG.get((scenario, key))
    return f"{text} in user.conf" + (f" (NVIDIA harness: {flag})" if flag else "")


_ONLY = re.compile(r"Only processed (\d+) queries.*?at least (\d+) queries", re.DOTALL)
_MORE = re.compile(r"Processed (\d+) queries.*?at least (\d+) more queries", re.DOTALL)


def _queries_needed(text: str) -> tuple[int, int] | None:
    """(processed, needed in total) from LoadGen's early-stopping words, if it says."""
    match = _ONLY.search(text)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = _MORE.search(text)
    if match:
        return int(match.group(1)), int(match.group(1)) + int(match.group(2))
    return None


def explain_invalid(
    values: Mapping[str, Scalar],
    *,
    scenario: str | None,
    model: str | None,
    errors: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """Reasons and fixes for a performance result that LoadGen marked INVALID."""
    reasons: list[str] = []
    fixes: list[str] = []
    scen = scenario or "*"
    min_dur = _num(values, "effective_min_duration_ms")
    target_qps = _num(values, "effective_target_qps")
    measured_qps = _num(values, "result_samples_per_second")
    if measured_qps is None:
        measured_qps = _num(values, "result_completed_samples_per_sec")
    queries = _num(values, "result_query_count")
    min_queries = _num(values, "effective_min_query_count")

    if _flag(values, "result_min_duration_met") is False:
        text = "min duration not met: the run ended before min_duration"
        if min_dur is not None:
            text += f" ({_fmt(min_dur)} ms)"
        reasons.append(text)
        if scen == "Offline":
            if measured_qps:
                spq = _num(values, "effective_samples_per_query")
                # LoadGen issues 1.1 x min_duration x target_qps samples; at the measured rate that lasts
                # >= min_duration once target_qps >= measured / 1.1, so the measured QPS is a safe target.
                suggestion = math.ceil(measured_qps)
                if min_queries and min_dur:
                    suggestion = max(suggestion, math.ceil(min_queries / (1.1 * min_dur / 1000)))
                was = (
                    f" (was {_fmt(target_qps)}" + (f", {int(spq)} samples issued)" if spq else ")")
                    if target_qps
                    else ""
                )
                fixes.append(
                    f"raise the expected QPS to the measured {_fmt(measured_qps)} samples/s{was}: "
                    + _conf(model, "Offline", "target_qps", str(suggestion))
                )
            else:
                fixes.append("raise the expected QPS: " + _conf(model, "Offline", "target_qps", None))
        elif scen == "Server":
            fixes.append(
                "raise the target QPS so LoadGen generates more queries: " + _conf(model, "Server", "target_qps", None)
            )
        elif scen in ("SingleStream", "MultiStream"):
            key = (
                "result_90.00_percentile_latency_ns"
                if scen == "SingleStream"
                else ("result_99.00_percentile_per_query_latency_ns")
            )
            measured = _num(values, key)
            expected = _num(values, "effective_target_latency_ns")
            if measured:
                was = f" (was {_ms(expected)})" if expected else ""
                fixes.append(
                    f"lower the expected latency to the measured {_ms(measured)}{was} so LoadGen generates enough "
                    f"queries: " + _conf(model, scen, "target_latency", f"{measured / 1e6:.3g}")
                )
            else:
                fixes.append("lower the expected latency: " + _conf(model, scen, "target_latency", None))

    if _flag(values, "result_min_queries_met") is False:
        text = "min query count not met"
        if queries is not None and min_queries is not None:
            text += f": {int(queries)} processed, {int(min_queries)} required"
        reasons.append(text)
        if scen in ("Offline", "Server"):
            fixes.append("raise the target QPS (more queries per run): " + _conf(model, scen, "target_qps", None))
        else:
            fixes.append(
                "raise min_duration or lower the expected latency: " + _conf(model, scen, "min_duration", None)
            )

    if _flag(values, "result_perf_constraints_met") is False:
        pct = _num(values, "effective_target_latency_percentile") or 0.99
        latency_key = f"result_{pct * 100:.2f}_percentile_latency_ns"
        latency = _num(values, latency_key)
        bound = _num(values, "effective_target_latency_ns")
        over = _num(values, "result_overlatency_query_count")
        parts: list[str] = []
        if latency is not None and bound:
            parts.append(f"p{pct * 100:g} latency {_ms(latency)} exceeds the {_ms(bound)} bound")
        ttft, ttft_bound = (
            _num(values, "result_first_token_99.00_percentile_latency_ns"),
            _num(values, "requested_server_ttft_latency"),
        )
        if ttft is not None and ttft_bound and ttft > ttft_bound:
            parts.append(f"TTFT p99 {_ms(ttft)} exceeds {_ms(ttft_bound)}")
        tpot, tpot_bound = (
            _num(values, "result_time_per_output_token_99.00_percentile_ns"),
            _num(values, "requested_server_tpot_latency"),
        )
        if tpot is not None and tpot_bound and tpot > tpot_bound:
            parts.append(f"TPOT p99 {_ms(tpot)} exceeds {_ms(tpot_bound)}")
        if over is not None and queries:
            parts.append(f"{int(over)} of {int(queries)} queries over the bound")
        reasons.append("latency constraint not met" + (": " + "; ".join(parts) if parts else ""))
        lower_qps = str(math.floor(target_qps * 0.9)) if target_qps and target_qps >= 10 else None
        fixes.append(
            "lower the Server target QPS (about 10 % per try until VALID): "
            + _conf(model, "Server", "target_qps", lower_qps)
        )

    if _flag(values, "early_stopping_met") is False:
        detail = values.get("early_stopping_result")
        text = "early stopping not met"
        if isinstance(detail, str) and detail.strip():
            text += ": " + " ".join(detail.replace("*", " ").split())
        reasons.append(text)
        needed = _queries_needed(detail if isinstance(detail, str) else "")
        longer: str | None = None
        if needed is not None and min_dur:
            done, total = needed
            # queries scale with run time; 10 % headroom for the early-stopping bound moving with q
            longer = str(math.ceil(min_dur * total / max(done, 1) * 1.1))
        # a Server run that also broke its latency bound needs a lower QPS (above), not a longer run
        server_too_short = scen == "Server" and _flag(values, "result_perf_constraints_met") is not False
        if server_too_short or scen in ("SingleStream", "MultiStream"):
            fixes.append("run longer so enough queries are processed: " + _conf(model, scen, "min_duration", longer))

    for error in errors:
        reasons.append(f"LoadGen logged an error: {error.strip()}")
    if errors and not fixes:
        fixes.append("fix the errors in mlperf_log_detail.txt (one LoadGen test per process; one user.conf)")

    invalid_reason = values.get("result_invalid_reason")
    if isinstance(invalid_reason, str) and invalid_reason.strip():
        said = invalid_reason.strip()
        if not fixes:
            fixes.append(f"LoadGen recommends: {said}")
        elif not reasons:
            reasons.append(f"LoadGen says: {said}")
    if not reasons:
        reasons.append("LoadGen marked the result INVALID without naming a constraint; see mlperf_log_detail.txt")
    return reasons, fixes


def explain_accuracy(checks: Iterable[AccuracyCheck], benchmark_full: str | None) -> tuple[list[str], list[str]]:
    """Reasons (metric, value, threshold) and fixes for failed accuracy checks."""
    reasons: list[str] = []
    for check in checks:
        if check.passed is not False:
            continue
        value = "missing" if check.value is None else _fmt(check.value)
        if check.upper_limit is not None and check.threshold is not None:
            reasons.append(
                f"accuracy {check.name} = {value} is outside [{_fmt(check.threshold)}, {_fmt(check.upper_limit)}]"
            )
        elif check.threshold is not None:
            reasons.append(f"accuracy {check.name} = {value} is below the threshold {_fmt(check.threshold)}")
        else:
            reasons.append(f"accuracy {check.name} = {value} failed its check")
    fixes: list[str] = []
    if reasons:
        if benchmark_full and benchmark_full.endswith("99.9"):
            fixes.append("a 99.9 % target needs the high-accuracy engine: run with --config_ver=high_accuracy")
        else:
            fixes.append("check the engine precision/calibration and the preprocessed data against the reference")
    return reasons, fixes


@dataclass(frozen=True)
class Verdict:
    """The overall outcome. ``ok`` only when there is a result and every result passed."""

    ok: bool
    total: int
    valid: int
    invalid: int
    accuracy_failed: int
    failures: tuple[str, ...] = field(default_factory=tuple)
    #: The concrete fixes for each failure (same order as ``failures``).
    fixes: tuple[tuple[str, ...], ...] = field(default_factory=tuple)

    @classmethod
    def from_results(cls, results: Sequence[BenchmarkResult]) -> Verdict:
        valid = sum(1 for r in results if r.is_performance and r.validity == "VALID")
        invalid = sum(1 for r in results if r.is_performance and r.validity != "VALID")
        acc_failed = sum(1 for r in results if r.accuracy_pass is False)
        failures: list[str] = []
        fixes: list[tuple[str, ...]] = []
        for r in results:
            if r.failed:
                why = "; ".join(r.invalid_reasons) if r.invalid_reasons else "validity unknown"
                failures.append(f"{r.label}: {why}")
                fixes.append(tuple(r.fixes))
        return cls(
            ok=bool(results) and not failures,
            total=len(results),
            valid=valid,
            invalid=invalid,
            accuracy_failed=acc_failed,
            failures=tuple(failures),
            fixes=tuple(fixes),
        )

    def lines(self) -> list[str]:
        """Plain-text verdict for the console: a headline line, then one line per failure."""
        if self.total == 0:
            return ["verdict: no results found"]
        head = (
            f"verdict: {'OK' if self.ok else 'FAILED'} - {self.total} result(s): {self.valid} VALID, "
            f"{self.invalid} not VALID, {self.accuracy_failed} accuracy failure(s)"
        )
        lines = [head]
        for index, failure in enumerate(self.failures):
            lines.append(f"  {failure}")
            fixes = self.fixes[index] if index < len(self.fixes) else ()
            lines.extend(f"    fix: {fix}" for fix in fixes)
        return lines

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "total": self.total,
            "valid": self.valid,
            "invalid": self.invalid,
            "accuracy_failed": self.accuracy_failed,
            "failures": list(self.failures),
        }
