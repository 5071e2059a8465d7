"""One automatic retry of a performance test whose target the tool picked and LoadGen found INVALID.

Find-performance (:mod:`workload.loadgen.findperf`) picks targets from a few seconds of
measurement. On a shared machine a neighbour can take the CPU during the real test, and a target
that was right when measured is then wrong: the Server p99 breaks its bound, or an Offline /
SingleStream run ends before ``min_duration``. LoadGen's detail log says which constraint failed
and with which numbers; :func:`retry_fix` turns that into new targets for ONE more run of that
(scenario, PerformanceOnly) test. Both attempts are reported (``attempts.json``).

Only targets the user left unset are changed: a value given in the profile or with
``--parameters`` always wins, and its INVALID result is reported with the fix to make by hand
(:func:`workload.metrics.verdict.explain_invalid`). Durations and query counts are never changed:
they define how long the benchmark is, which is the user's choice.

The rules (LoadGen's detail-log keys; see ``loadgen/results.cc`` for when each flag is false):

* Offline, ``result_min_duration_met`` or ``result_min_queries_met`` false: LoadGen issued
  ``1.1 x min_duration x target_qps`` samples and they ran out early, so the target was below
  the real rate. New target = max(measured rate x 1.5, old target x 2).
* Server, ``result_perf_constraints_met`` false (p99 over the bound), or ``early_stopping_met``
  false (too many queries over the bound for early stopping to prove the percentile): the load
  was too high for the CPU left to us. New target = min(old x 0.6, completed rate x 0.6); a latency
  bound find-performance picked is doubled.
* Server, ``result_min_duration_met`` / ``result_min_queries_met`` false with the latency met:
  LoadGen generated too few queries for the time; new target = old x 1.5.
* SingleStream / MultiStream, ``result_min_duration_met`` or ``result_min_queries_met`` false: the
  expected latency (which sizes the query schedule) was too high. New = min(old, measured p90/p99) x 0.5.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.loadgen.settings import RunSettings, Scenario

#: (RunSettings field) -> the LoadGenExecutor profile parameter (for the report).
PARAMETER_OF = {
    "offline_target_qps": "OfflineTargetQps",
    "server_target_qps": "ServerTargetQps",
    "server_target_latency_ms": "ServerTargetLatencyMs",
    "single_stream_target_latency_ms": "SingleStreamTargetLatencyMs",
    "multi_stream_target_latency_ms": "MultiStreamTargetLatencyMs",
}
#: The latency percentile LoadGen judges each stream scenario by (SingleStream p90, MultiStream p99 per query).
_STREAM_LATENCY = {
    "SingleStream": "result_90.00_percentile_latency_ns",
    "MultiStream": "result_99.00_percentile_per_query_latency_ns",
}
OFFLINE_RAISE = 1.5
SERVER_LOWER = 0.6
SERVER_RAISE = 1.5
#: A Server latency bound picked by find-performance is doubled too when the retry lowers the load.
SERVER_BOUND_RAISE = 2.0
STREAM_LOWER = 0.5


@dataclass(frozen=True)
class RetryFix:
    """Why the first attempt is INVALID and the settings (RunSettings fields) the retry changes."""

    reason: str
    changes: dict[str, float] = field(default_factory=dict)

    def parameters(self) -> dict[str, float]:
        """The changes as profile parameters (``ServerTargetQps``), as a user would pass them."""
        return {PARAMETER_OF.get(key, key): value for key, value in self.changes.items()}

    def describe(self) -> str:
        return ", ".join(f"{name}={value:g}" for name, value in self.parameters().items())


def _num(values: Mapping[str, Any], key: str) -> float | None:
    value = values.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and number > 0 else None


def _false(values: Mapping[str, Any], key: str) -> bool:
    return values.get(key) is False


def _round(value: float) -> float:
    return float(f"{value:.4g}")


def retry_fix(scenario: Scenario, values: Mapping[str, Any], asked: RunSettings) -> RetryFix | None:
    """The retry for a performance result with detail-log ``values``, or None when there is none to make.

    ``asked`` are the settings before find-performance: a target set there is the user's and is
    never changed. None is returned for VALID results, for constraints no target fixes, and when
    the detail log lacks the numbers a new target is computed from.
    """
    if values.get("result_validity") == "VALID" or "result_validity" not in values:
        return None
    short = _false(values, "result_min_duration_met") or _false(values, "result_min_queries_met")
    if scenario == "Offline":
        target = _num(values, "effective_target_qps")
        measured = _num(values, "result_samples_per_second")
        if not short or asked.offline_target_qps is not None or target is None:
            return None
        new = max(target * 2.0, (measured or 0.0) * OFFLINE_RAISE)
        return RetryFix(
            f"the run ended before min_duration: target QPS {target:g} is below the "
            f"{measured or 0:g} samples/s measured",
            {"offline_target_qps": _round(new)},
        )
    if scenario == "Server":
        if asked.server_target_qps is not None:
            return None
        target = _num(values, "effective_target_qps")
        if target is None:
            return None
        latency_broken = _false(values, "result_perf_constraints_met")
        if latency_broken or _false(values, "early_stopping_met"):
            completed = _num(values, "result_completed_samples_per_sec") or target
            changes = {"server_target_qps": _round(min(target, completed) * SERVER_LOWER)}
            bound_ns = _num(values, "effective_target_latency_ns")
            if asked.server_target_latency_ms is None and bound_ns is not None:
                changes["server_target_latency_ms"] = _round(bound_ns / 1e6 * SERVER_BOUND_RAISE)
            what = "p99 latency over the bound" if latency_broken else "early stopping not met"
            return RetryFix(f"{what} at target QPS {target:g} (the CPU sustained less during the run)", changes)
        if short:
            return RetryFix(
                f"too few queries for min_duration at target QPS {target:g}",
                {"server_target_qps": _round(target * SERVER_RAISE)},
            )
        return None
    # SingleStream / MultiStream
    key = "single_stream_target_latency_ms" if scenario == "SingleStream" else "multi_stream_target_latency_ms"
    if not short or getattr(asked, key) is not None:
        return None
    expected_ns = _num(values, "effective_target_latency_ns")
    measured_ns = _num(values, _STREAM_LATENCY[scenario])
    base = min(x for x in (expected_ns, measured_ns, math.inf) if x is not None)
    if not math.isfinite(base):
        return None
    return RetryFix(
        "the run ended before min_duration: the expected latency sized too short a query schedule",
        {key: _round(base / 1e6 * STREAM_LOWER)},
    )


def with_fix(settings: RunSettings, fix: RetryFix) -> RunSettings:
    """``settings`` with the retry's targets set (find-performance then leaves them alone)."""
    return settings.model_copy(update=dict(fix.changes))


def attempt_lines(host: str, folders: list[Path]) -> list[str]:
    """One console line per retried test among the result ``folders`` (their ``attempts.json``)."""
    lines = []
    for folder in folders:
        path = folder / "attempts.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        attempts = [a for a in record.get("attempts", []) if isinstance(a, dict)] if isinstance(record, dict) else []
        if len(attempts) < 2:
            continue
        sequence = " -> ".join(str(a.get("validity") or "no result") for a in attempts)
        changed = ", ".join(f"{k}={v}" for k, v in (attempts[-1].get("changed") or {}).items())
        lines.append(
            f"retried: [{host}] {record.get('scenario')} {record.get('mode')}: {sequence} "
            f"(first: {attempts[-1].get('retried_because')}; retry with {changed})"
        )
    return lines
