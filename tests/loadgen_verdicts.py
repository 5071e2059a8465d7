"""What a test of a real, timing-dependent LoadGen run may assert: the decisions our code made.

Whether a performance run is VALID depends on the CPU it got: on a shared 2-core machine a
neighbour can take a core mid-run, stretch the Server tail latency past its bound or end an Offline
run before ``min_duration``. A test that asserts VALID judges the machine. These helpers assert
what the code decides instead:

* the run's verdict is LoadGen's own, read consistently: the summary's ``Result is`` equals the
  detail log's ``result_validity``, and it follows from the constraints LoadGen recorded beside it
  (LoadGen's ``loadgen/results.cc``: a performance result is VALID only when min duration, min query
  count, the scenario's performance constraint and early stopping are all met);
* a VALID run met each recorded constraint; an INVALID one names at least one it missed, and the
  tool's decision for it is the one retry with a computed fix (:func:`workload.loadgen.retry.retry_fix`)
  that moves the target the tool picked in the direction of the missed constraint, by the factor
  the code defines (``SERVER_LOWER``, ``OFFLINE_RAISE``, ``STREAM_LOWER``).

So an INVALID run fails a test only when the code would do the wrong thing with it: a verdict
that contradicts its own constraints, or an INVALID result no retry would fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workload.loadgen.logs import detail_values, summary_field
from workload.loadgen.retry import OFFLINE_RAISE, SERVER_LOWER, STREAM_LOWER, RetryFix, retry_fix
from workload.loadgen.settings import RunSettings, Scenario

#: The constraints LoadGen records for a performance run (detail-log keys; a scenario logs those that apply to it).
CONSTRAINTS = ("result_min_duration_met", "result_min_queries_met", "result_perf_constraints_met", "early_stopping_met")


@dataclass(frozen=True)
class Verdict:
    """A performance run as LoadGen judged it, and what the tool decides about it."""

    scenario: Scenario
    values: dict[str, Any]
    #: The recorded constraints that were not met (empty for a VALID run).
    missed: tuple[str, ...]
    #: The retry the tool makes for this result (None for a VALID one).
    fix: RetryFix | None

    @property
    def valid(self) -> bool:
        return self.values["result_validity"] == "VALID"


def judge(out: Path, scenario: Scenario, asked: RunSettings | dict[str, Any], *, retried: bool = False) -> Verdict:
    """Read the performance run in ``out`` and assert that its verdict and the tool's decision agree.

    ``asked`` are the settings the user gave (before find-performance): targets set there are the
    user's, never changed by a retry. Fails (AssertionError, with the run's summary) when the
    verdict contradicts LoadGen's recorded constraints, or when an INVALID result gets no retry or
    a retry that does not move the tool-picked target the way the missed constraint needs.
    ``retried``: ``out`` is already the one retry, whose INVALID result stands as it is.
    """
    settings = asked if isinstance(asked, RunSettings) else RunSettings.model_validate(asked)
    values = detail_values(out / "mlperf_log_detail.txt")
    summary = (out / "mlperf_log_summary.txt").read_text(encoding="utf-8", errors="replace")
    validity = values.get("result_validity")
    assert validity in ("VALID", "INVALID"), summary
    assert summary_field(out / "mlperf_log_summary.txt", "Result is") == validity, summary
    recorded = {key: values[key] for key in CONSTRAINTS if key in values}
    assert recorded, f"no constraint recorded in {out}/mlperf_log_detail.txt"
    missed = tuple(key for key, met in recorded.items() if met is not True)
    if validity == "VALID":
        assert not missed, f"VALID with {missed} not met\n{summary}"
        assert retry_fix(scenario, values, settings) is None
        return Verdict(scenario, values, missed, None)
    assert missed, f"INVALID with every recorded constraint met: {recorded}\n{summary}"
    if retried:
        return Verdict(scenario, values, missed, None)
    fix = retry_fix(scenario, values, settings)
    assert fix is not None, f"INVALID ({missed}) and no retry would fix it\n{summary}"
    _assert_fix_moves_the_target(scenario, values, missed, fix)
    return Verdict(scenario, values, missed, fix)


def _assert_fix_moves_the_target(scenario: str, values: dict[str, Any], missed: tuple[str, ...], fix: RetryFix) -> None:
    """The fix changes the target the way the missed constraint needs, by the code's own factor."""
    if scenario == "Offline":
        target = float(values["effective_target_qps"])
        measured = float(values.get("result_samples_per_second") or 0.0)
        assert fix.changes["offline_target_qps"] > target, fix
        assert fix.changes["offline_target_qps"] >= OFFLINE_RAISE * measured * (1 - 1e-3), fix
    elif scenario == "Server":
        target = float(values["effective_target_qps"])
        if {"result_perf_constraints_met", "early_stopping_met"} & set(missed):
            assert fix.changes["server_target_qps"] <= target * SERVER_LOWER * (1 + 1e-3), fix
        else:
            assert fix.changes["server_target_qps"] > target, fix
    else:
        key = "single_stream_target_latency_ms" if scenario == "SingleStream" else "multi_stream_target_latency_ms"
        expected_ms = float(values["effective_target_latency_ns"]) / 1e6
        assert fix.changes[key] <= expected_ms * STREAM_LOWER * (1 + 1e-3), fix


def judge_executor_result(host_dir: Path, folder: Path, scenario: Scenario) -> Verdict:
    """The final performance result of a ``LoadGenExecutor`` test, and the retry decision behind it.

    What the user asked is what the executor gave the first attempt's runner (its ``settings.json``;
    find-performance runs inside the runner).
    No ``attempts.json``: the one attempt must be VALID (an INVALID one that a retry would fix must
    have been retried). With it: the first attempt (kept under ``superseded/``) was INVALID, the
    retry changed exactly what :func:`retry_fix` computes for it, the retry ran with those values,
    and its verdict (VALID or not) is consistent. Returns the final result's verdict.
    """
    attempts_file = folder / "attempts.json"
    if not attempts_file.exists():
        verdict = judge(folder, scenario, _settings_of(folder))
        assert verdict.valid, f"{folder}: INVALID and not retried, though {verdict.fix} would fix it"
        return verdict
    record = json.loads(attempts_file.read_text(encoding="utf-8"))
    first, second = record["attempts"]
    asked = _settings_of(host_dir / first["folder"])
    earlier = judge(host_dir / first["folder"], scenario, asked)
    assert not earlier.valid and earlier.fix is not None
    assert second["changed"] == earlier.fix.parameters()
    ran_with = _settings_of(folder)
    assert {key: ran_with[key] for key in earlier.fix.changes} == earlier.fix.changes
    final = judge(folder, scenario, asked, retried=True)
    assert second["validity"] == final.values["result_validity"]
    return final


def _settings_of(folder: Path) -> dict[str, Any]:
    """The settings a runner was given (``settings.json`` in its output folder)."""
    loaded: dict[str, Any] = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    return loaded
