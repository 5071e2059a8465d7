"""A result judged by its round's rules (:mod:`workload.metrics.rules`): headline key, accuracy, latency limits.

Called by :mod:`workload.metrics.build` once a folder's files are parsed:

- :func:`headline_key`: the round's official key for the benchmark and scenario (``result_fields``
  with the benchmark's override: tokens/s for LLMs, the early-stopping estimate for SingleStream and
  MultiStream); for a benchmark no round knows, LoadGen's own result key (what its summary prints
  first), with a note saying so.
- :func:`resolve_accuracy`: every figure judged against the round's target (lower bound, upper
  limit); a required figure the accuracy script did not print fails, as in the checker.
- :func:`rule_violations`: what the submission checker of the round rejects in a run LoadGen called
  VALID: an LLM's TTFT/TPOT 99th percentile over the scenario's limit (Interactive has its own), a
  Server latency target above the benchmark's bound.
"""

from __future__ import annotations

import re

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import RUNNER_LOADGEN, RawResult, Scalar, finite_float
from workload.metrics.rules import ROUNDS, Benchmark, RoundRules, known_anywhere

#: a result's own headline key, set by a parser whose format the checker reads by other rules than LoadGen's
#: (the endpoints client: RESULT_FIELD_ENDPOINTS); :func:`headline_key` takes it before the round's table
FORCED_HEADLINE = "workload_headline_key"


def _has(values: dict[str, Scalar], key: str) -> bool:
    value = values.get(key)
    return isinstance(value, int | float) and not isinstance(value, bool)


def loadgen_key(values: dict[str, Scalar], scenario: str | None, scheduled_headline: bool) -> str | None:
    """LoadGen's own result key for ``scenario`` (the first figure its summary prints), if present."""
    if scenario == "Offline":
        return next((k for k in ("result_tokens_per_second", "result_samples_per_second") if _has(values, k)), None)
    if scenario == "Server":
        version = values.get("loadgen_version")
        old = scheduled_headline or values.get("scenario_key") == "result_scheduled_samples_per_sec"
        if isinstance(version, str) and re.match(r"^(?:[0-3]\.|4\.0\b)", version):
            old = True
        order = ["result_completed_tokens_per_second"]
        order += (
            ["result_scheduled_samples_per_sec", "result_completed_samples_per_sec"]
            if old
            else ["result_completed_samples_per_sec", "result_scheduled_samples_per_sec"]
        )
        return next((k for k in order if _has(values, k)), None)
    if scenario == "SingleStream":
        pct = values.get("effective_target_latency_percentile")
        pct_f = float(pct) if isinstance(pct, int | float) and not isinstance(pct, bool) and 0 < pct < 1 else 0.9
        key = f"result_{pct_f * 100:.2f}_percentile_latency_ns"
        return key if _has(values, key) else None
    if scenario == "MultiStream":
        key = "result_99.00_percentile_per_query_latency_ns"
        return key if _has(values, key) else None
    scenario_key = values.get("scenario_key")
    return scenario_key if isinstance(scenario_key, str) and _has(values, scenario_key) else None


def headline_key(
    raw: RawResult,
    scenario: str | None,
    rules: RoundRules,
    bench: Benchmark | None,
    name: str | None,
) -> tuple[str | None, list[str]]:
    """(the detail-log key of the official metric, notes). ``scenario`` is the MLPerf one (Interactive too)."""
    values = raw.values
    notes: list[str] = []
    forced = values.get(FORCED_HEADLINE)
    if isinstance(forced, str):
        if _has(values, forced):
            return forced, notes
        return None, [f"the checker's headline {forced} is not in the files: no headline"]
    logged = "Server" if scenario == "Interactive" else scenario
    own = loadgen_key(values, logged, raw.scheduled_headline)
    if bench is None:
        if raw.runner == RUNNER_LOADGEN:
            return own, notes  # our LoadGen runner's own model: no MLPerf benchmark to look up
        if name and not known_anywhere(name):
            notes.append(
                f"benchmark {name!r} is unknown to every MLPerf Inference round ({ROUNDS[0]}-{ROUNDS[-1]}): "
                f"headline is LoadGen's own result key ({own or 'none found'}), accuracy has no target"
            )
        elif name:
            notes.append(
                f"benchmark {name!r} is not one of {rules.round}'s: headline is LoadGen's own result key "
                f"({own or 'none found'})"
            )
        return own, notes
    key = rules.headline_key(bench, scenario)
    if key is not None and _has(values, key):
        return key, notes
    if test_mode_is_accuracy(values):
        return own, notes
    if key is not None and own is not None:
        notes.append(f"{rules.round}'s headline {key} is not in the files: headline is LoadGen's own {own}")
    return own, notes


def test_mode_is_accuracy(values: dict[str, Scalar]) -> bool:
    return values.get("effective_test_mode") == "AccuracyOnly"


def resolve_accuracy(
    raw: RawResult, bench: Benchmark | None, scenario: str | None = None
) -> tuple[list[AccuracyCheck], bool | None]:
    """Every accuracy figure with its target and verdict, and the overall pass (None: not judged).

    A figure that already carries a verdict or a threshold (NVIDIA's metadata.json, accuracy.json) keeps
    it; the others take the round's target of the benchmark for ``scenario`` (``get_accuracy_values(model,
    scenario)``: qwen3-vl's Interactive scores an 8k subset with its own target). When accuracy.txt was
    read, a figure the round requires but the script did not print is a failed check (the checker's ``acc_seen``).
    """
    checks: list[AccuracyCheck] = []
    for check in raw.accuracy:
        value = check.value
        if check.passed is None and value is not None:
            target = bench.target(check.name, scenario) if bench is not None and check.threshold is None else None
            if target is not None:
                check = AccuracyCheck(
                    name=check.name,
                    value=value,
                    threshold=target.lower,
                    upper_limit=target.upper,
                    passed=target.passes(value),
                )
            elif check.threshold is not None:
                ok = value >= check.threshold and (check.upper_limit is None or value <= check.upper_limit)
                check = check.model_copy(update={"passed": ok})
        checks.append(check)
    if bench is not None and raw.accuracy_texts and raw.accuracy_pass is None:
        have = {c.name.lower() for c in checks if c.value is not None}
        for target in bench.targets_for(scenario):
            if target.required and target.metric.lower() not in have:
                checks.append(
                    AccuracyCheck(
                        name=target.metric, value=None, threshold=target.lower, upper_limit=target.upper, passed=False
                    )
                )
    known = [c.passed for c in checks if c.passed is not None]
    overall = raw.accuracy_pass
    if overall is None:
        overall = all(known) if known else None
    elif False in known:
        overall = False  # a failed entry fails the result even where the file's overall flag says pass
    return checks, overall


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.6g} ms"


def rule_violations(
    values: dict[str, Scalar], scenario: str | None, rules: RoundRules, bench: Benchmark | None
) -> list[str]:
    """Why the round's submission checker rejects a run LoadGen called VALID (empty: it does not)."""
    if bench is None:
        return []
    found: list[str] = []
    limits = bench.token_limits(scenario)
    if limits is not None:
        for label, key, limit in (
            ("TTFT", "result_first_token_99.00_percentile_latency_ns", limits[0]),
            ("TPOT", "result_time_per_output_token_99.00_percentile_ns", limits[1]),
        ):
            measured = finite_float(values.get(key))
            if measured is not None and measured > limit:
                limit_text = f"{rules.round}'s {scenario} limit {_ms(limit)}"
                found.append(f"{label} p99 {_ms(measured)} exceeds {limit_text} for {bench.name}")
    target = finite_float(values.get("effective_target_latency_ns"))
    bound = bench.server_latency_ns
    if scenario == "Server" and bound is not None and target is not None and target > bound:
        found.append(f"the Server latency target {_ms(target)} is above {rules.round}'s bound {_ms(bound)}")
    return found
