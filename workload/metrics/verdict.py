"""Why a result is INVALID or failed accuracy, what to change, and the overall :class:`Verdict`.

Reasons come from LoadGen's own flags (``result_min_duration_met``, ``result_min_queries_met``,
``result_perf_constraints_met``, ``early_stopping_met``, ``result_invalid_reason``, logged errors);
fixes name what to change and, where the log holds enough numbers, the value to try (Offline:
expected QPS -> the measured QPS). What to change depends on who wrote the result: for LoadGen
logs of the NVIDIA harness (or any other tool) it is the ``user.conf`` key (``bert.Server.target_qps``)
and the harness flag that writes it; for our LoadGen runner (the LoadGenExecutor of
PERF-CPU-MLPERF), which rewrites its user.conf from the profile on every run, it is the profile
parameter (``--parameters OfflineTargetQps=224``).

The verdict fails on any INVALID result, failed or unknown accuracy, and any result file that could
not be (fully) read: CI must not pass a run it could not judge.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workload.metrics.model import AccuracyCheck, BenchmarkResult, ParseIssue
from workload.metrics.raw import RUNNER_LOADGEN, Scalar, finite_float

#: the words of a result's note when it ran shorter than its round's min_duration (Verdict counts them)
TEST_RUN = "a test run, not valid for submission"

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
#: (scenario, user.conf key) -> the LoadGenExecutor parameter our runner writes that key from (same units:
#: ms for latencies and durations, queries per second for rates); see workload/actions/loadgen_executor.py
_RUNNER_PARAMETER = {
    ("Offline", "target_qps"): "OfflineTargetQps",
    ("Server", "target_qps"): "ServerTargetQps",
    ("Server", "target_latency"): "ServerTargetLatencyMs",
    ("SingleStream", "target_latency"): "SingleStreamTargetLatencyMs",
    ("MultiStream", "target_latency"): "MultiStreamTargetLatencyMs",
    ("Offline", "min_duration"): "MinDurationMs",
    ("Server", "min_duration"): "MinDurationMs",
    ("SingleStream", "min_duration"): "MinDurationMs",
    ("MultiStream", "min_duration"): "MinDurationMs",
    ("Offline", "min_query_count"): "MinQueryCount",
    ("Server", "min_query_count"): "MinQueryCount",
    ("SingleStream", "min_query_count"): "MinQueryCount",
    ("MultiStream", "min_query_count"): "MinQueryCount",
}
#: accuracy figures that measure the output length (a valid range), not its quality
_LENGTH_FIGURES = frozenset({"TOKENS_PER_SAMPLE", "GEN_LEN", "GEN_NUM"})


def _num(values: Mapping[str, Scalar], key: str) -> float | None:
    """``values[key]`` as a finite float, else None (the arithmetic below needs finite numbers)."""
    return finite_float(values.get(key))


def _flag(values: Mapping[str, Scalar], key: str) -> bool | None:
    value = values.get(key)
    return value if isinstance(value, bool) else None


def _fmt(number: float) -> str:
    return f"{number:.6g}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.4g} ms"


def _conf(model: str | None, scenario: str, key: str, value: str | None, runner: str | None = None) -> str:
    """Where to change ``key``: the user.conf line ``bert.Server.target_qps = 100`` (spaces around '=' needed)
    with the NVIDIA harness flag, or, for our LoadGen runner, the profile parameter to pass."""
    parameter = _RUNNER_PARAMETER.get((scenario, key)) if runner == RUNNER_LOADGEN else None
    if parameter is not None:
        shown = f"`--parameters {parameter}={value}`" if value is not None else f"the {parameter} parameter"
        return f"{shown} (LoadGenExecutor parameter: its runner rewrites user.conf from it on every run)"
    line = f"{model or '*'}.{scenario}.{key}"
    text = f"`{line} = {value}`" if value is not None else f"`{line}`"
    flag = _NVIDIA_FLAG.get((scenario, key))
    return f"{text} in user.conf" + (f" (NVIDIA harness: {flag})" if flag else "")


#: (detail-log key, prefix in the reason) of LoadGen's early-stopping words
_EARLY_STOPPING_TEXTS = (
    ("early_stopping_result", ""),
    ("early_stopping_ttft_result", "TTFT: "),
    ("early_stopping_tpot_result", "TPOT: "),
)
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
    runner: str | None = None,
) -> tuple[list[str], list[str]]:
    """Reasons and fixes for a performance result that LoadGen marked INVALID.

    ``runner`` is :data:`~workload.metrics.raw.RUNNER_LOADGEN` for results of our LoadGen runner: fixes
    then name the LoadGenExecutor parameter instead of the user.conf key (see the module docstring).
    """
    reasons: list[str] = []
    fixes: list[str] = []
    scen = scenario or "*"

    def conf(conf_scenario: str, key: str, value: str | None) -> str:
        return _conf(model, conf_scenario, key, value, runner)

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
                    + conf("Offline", "target_qps", str(suggestion))
                )
            else:
                fixes.append("raise the expected QPS: " + conf("Offline", "target_qps", None))
        elif scen == "Server":
            fixes.append(
                "raise the target QPS so LoadGen generates more queries: " + conf("Server", "target_qps", None)
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
                    f"queries: " + conf(scen, "target_latency", f"{measured / 1e6:.3g}")
                )
            else:
                fixes.append("lower the expected latency: " + conf(scen, "target_latency", None))

    if _flag(values, "result_min_queries_met") is False:
        text = "min query count not met"
        if queries is not None and min_queries is not None:
            text += f": {int(queries)} processed, {int(min_queries)} required"
        reasons.append(text)
        if scen in ("Offline", "Server"):
            fixes.append("raise the target QPS (more queries per run): " + conf(scen, "target_qps", None))
        else:
            fixes.append("raise min_duration or lower the expected latency: " + conf(scen, "min_duration", None))

    if _flag(values, "result_perf_constraints_met") is False:
        pct = _num(values, "effective_target_latency_percentile") or 0.99
        label = f"{pct * 100:.2f}"
        bound = _num(values, "effective_target_latency_ns")
        ttft_bound = _num(values, "requested_server_ttft_latency")
        tpot_bound = _num(values, "requested_server_tpot_latency")
        parts: list[str] = []
        if ttft_bound is None and tpot_bound is None:
            # LoadGen checks the sample latency only without token latencies; LLM runs are judged on TTFT/TPOT
            latency = _num(values, f"result_{label}_percentile_latency_ns")
            over = _num(values, "result_overlatency_query_count")
            if latency is not None and bound:
                parts.append(f"p{pct * 100:g} latency {_ms(latency)} exceeds the {_ms(bound)} bound")
            if over is not None and queries:
                parts.append(f"{int(over)} of {int(queries)} queries over the bound")
        ttft = _num(values, f"result_first_token_{label}_percentile_latency_ns")
        if ttft is not None and ttft_bound and ttft > ttft_bound:
            parts.append(f"TTFT p{pct * 100:g} {_ms(ttft)} exceeds {_ms(ttft_bound)}")
        tpot = _num(values, f"result_time_per_output_token_{label}_percentile_ns")
        if tpot is not None and tpot_bound and tpot > tpot_bound:
            parts.append(f"TPOT p{pct * 100:g} {_ms(tpot)} exceeds {_ms(tpot_bound)}")
        reasons.append("latency constraint not met" + (": " + "; ".join(parts) if parts else ""))
        lower_qps = str(math.floor(target_qps * 0.9)) if target_qps and target_qps >= 10 else None
        fixes.append(
            "lower the Server target QPS (about 10 % per try until VALID): " + conf("Server", "target_qps", lower_qps)
        )

    if _flag(values, "early_stopping_met") is False:
        # LLM runs (token latencies) have one early-stopping result per token latency instead of one
        words: list[str] = []
        needed: tuple[int, int] | None = None
        for key, prefix in _EARLY_STOPPING_TEXTS:
            detail = values.get(key)
            if not isinstance(detail, str) or not detail.strip():
                continue
            words.append(prefix + " ".join(detail.replace("*", " ").split()))
            more = _queries_needed(detail)
            if more is not None and (needed is None or more[1] > needed[1]):
                needed = more
        reasons.append("early stopping not met" + (": " + "; ".join(words) if words else ""))
        longer: str | None = None
        if needed is not None and min_dur:
            done, total = needed
            # queries scale with run time; 10 % headroom for the early-stopping bound moving with q
            longer = str(math.ceil(min_dur * total / max(done, 1) * 1.1))
        # a Server run that also broke its latency bound needs a lower QPS (above), not a longer run
        server_too_short = scen == "Server" and _flag(values, "result_perf_constraints_met") is not False
        if server_too_short or scen in ("SingleStream", "MultiStream"):
            fixes.append("run longer so enough queries are processed: " + conf(scen, "min_duration", longer))

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


def explain_accuracy(
    checks: Iterable[AccuracyCheck],
    benchmark_full: str | None,
    problems: Sequence[str] = (),
    given_fixes: Sequence[str] = (),
) -> tuple[list[str], list[str]]:
    """Reasons (metric, value, target) and fixes for failed accuracy checks; the fix matches the failing figure.

    ``problems`` are the checker's own words on why it failed besides the figure (accuracy.json
    ``problems``: samples without an answer ...); they are reasons of their own, and a figure that
    reaches its target is then not called "below the threshold". ``given_fixes`` (accuracy.json ``fixes``) are the
    checker's own advice: when there are any, they are the fixes instead of the generic ones.
    """
    reasons: list[str] = []
    fixes: list[str] = []
    failed = [c for c in checks if c.passed is False]
    for check in failed:
        value = "missing" if check.value is None else _fmt(check.value)
        within = (
            check.value is not None
            and check.threshold is not None
            and check.value >= check.threshold
            and (check.upper_limit is None or check.value <= check.upper_limit)
        )
        if within and problems:
            continue  # the figure is fine: the problems below are why it failed
        if within:
            reasons.append(f"accuracy {check.name} = {value} reaches its target but the check is marked failed")
        elif check.upper_limit is not None and check.threshold is not None:
            reasons.append(
                f"accuracy {check.name} = {value} is outside [{_fmt(check.threshold)}, {_fmt(check.upper_limit)}]"
            )
        elif check.threshold is not None:
            reasons.append(f"accuracy {check.name} = {value} is below the threshold {_fmt(check.threshold)}")
        else:
            reasons.append(f"accuracy {check.name} = {value} failed its check")
        fix = _accuracy_fix(check, benchmark_full)
        if fix not in fixes:
            fixes.append(fix)
    if failed and problems:
        reasons.extend(f"accuracy check: {problem}" for problem in problems)
        fixes.append(
            "every sample must be answered with the model's full output: find the SUT's errors in the run's "
            "log, then run the AccuracyOnly test again"
        )
    if failed and given_fixes:
        fixes = list(dict.fromkeys(given_fixes))
    return reasons, fixes


def _accuracy_fix(check: AccuracyCheck, benchmark_full: str | None) -> str:
    """What to do about one failed accuracy figure."""
    if check.value is None:
        return f"the accuracy script reported no {check.name}: rerun it on mlperf_log_accuracy.json and read its output"
    if check.name.upper() in _LENGTH_FIGURES:
        return (
            f"{check.name} measures the output length, not its quality: check the generation settings "
            "(maximum output tokens, end-of-sequence handling) against the reference implementation"
        )
    if benchmark_full and benchmark_full.endswith("99.9"):
        return "a 99.9 % target needs the high-accuracy engine: run with --config_ver=high_accuracy"
    return "check the engine precision/calibration and the preprocessed data against the reference"


def explain_unknown_accuracy(checks: Sequence[AccuracyCheck], benchmark_full: str | None) -> tuple[str, str]:
    """Reason and fix for an AccuracyOnly result whose accuracy could not be judged (no figure, or no target)."""
    figures = [c for c in checks if c.value is not None]
    if not figures:
        return (
            "accuracy unknown: no accuracy figure found (accuracy.txt, accuracy.json or metadata.json 'accuracy')",
            "keep the accuracy script's output (accuracy.txt) or the harness's metadata.json next to the LoadGen logs",
        )
    names = ", ".join(c.name for c in figures)
    return (
        f"accuracy unknown: no target known for {names} of benchmark {benchmark_full or '(not named)'}",
        "name the benchmark (<system>/<benchmark>/<Scenario> folders, e.g. bert-99) so its MLPerf target applies, "
        "or keep the harness's metadata.json (it holds the targets) next to the results",
    )


@dataclass(frozen=True)
class Verdict:
    """The overall outcome. ``ok`` only when there is a result, every result passed and every file was read."""

    ok: bool
    total: int
    valid: int
    invalid: int
    accuracy_failed: int
    failures: tuple[str, ...] = field(default_factory=tuple)
    #: The concrete fixes for each failure (same order as ``failures``).
    fixes: tuple[tuple[str, ...], ...] = field(default_factory=tuple)
    #: AccuracyOnly results whose accuracy could not be judged (they fail like a failed check)
    accuracy_unknown: int = 0
    #: result files that could not be (fully) read: each is a failure naming the file
    unreadable_files: int = 0
    #: results that ran shorter than their round's min_duration: a test run, not valid for submission
    test_runs: int = 0

    @classmethod
    def from_results(cls, results: Sequence[BenchmarkResult], issues: Sequence[ParseIssue] = ()) -> Verdict:
        """Judge ``results`` and the parse ``issues`` met while reading them (each issue is a failure)."""
        valid = sum(1 for r in results if r.is_performance and r.validity == "VALID")
        invalid = sum(1 for r in results if r.is_performance and r.validity != "VALID")
        acc_failed = sum(1 for r in results if r.accuracy_pass is False)
        acc_unknown = sum(1 for r in results if not r.is_performance and r.accuracy_pass is None)
        failures: list[str] = []
        fixes: list[tuple[str, ...]] = []
        for r in results:
            if r.failed:
                why = "; ".join(r.invalid_reasons) if r.invalid_reasons else "validity unknown"
                failures.append(f"{r.label}: {why}")
                fixes.append(tuple(r.fixes))
        for issue in issues:
            failures.append(f"unreadable: {issue}")
            fixes.append(())
        return cls(
            ok=bool(results) and not failures,
            total=len(results),
            valid=valid,
            invalid=invalid,
            accuracy_failed=acc_failed,
            failures=tuple(failures),
            fixes=tuple(fixes),
            accuracy_unknown=acc_unknown,
            unreadable_files=len({issue.path for issue in issues}),
            test_runs=sum(1 for r in results if any(TEST_RUN in note for note in r.notes)),
        )

    def lines(self) -> list[str]:
        """Plain-text verdict for the console: a headline line, then one line per failure."""
        if self.total == 0 and not self.failures:
            return ["verdict: no results found"]
        head = (
            f"verdict: {'OK' if self.ok else 'FAILED'} - {self.total} result(s): {self.valid} VALID, "
            f"{self.invalid} not VALID, {self.accuracy_failed} accuracy failure(s)"
        )
        if self.accuracy_unknown:
            head += f", {self.accuracy_unknown} accuracy unknown"
        if self.unreadable_files:
            head += f", {self.unreadable_files} unreadable file(s)"
        lines = [head]
        for index, failure in enumerate(self.failures):
            lines.append(f"  {failure}")
            fixes = self.fixes[index] if index < len(self.fixes) else ()
            lines.extend(f"    fix: {fix}" for fix in fixes)
        if self.test_runs:
            lines.append(f"  note: {self.test_run_note()}")
        return lines

    def test_run_note(self) -> str:
        """Said wherever the verdict shows when a result ran shorter than its round's min_duration."""
        return f"{self.test_runs} result(s) ran shorter than the round's min_duration: {TEST_RUN}"

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "total": self.total,
            "valid": self.valid,
            "invalid": self.invalid,
            "accuracy_failed": self.accuracy_failed,
            "accuracy_unknown": self.accuracy_unknown,
            "unreadable_files": self.unreadable_files,
            "failures": list(self.failures),
            "test_runs": self.test_runs,
        }
