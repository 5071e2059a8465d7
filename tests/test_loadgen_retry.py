"""The one automatic retry of a LoadGen performance test that a tool-picked target made INVALID.

Rules (:func:`workload.loadgen.retry.retry_fix`) are checked on detail-log values named as in
LoadGen's ``mlperf_log_detail.txt`` (the keys of ``shared/reference/data/*_detail.txt``); the
executor path runs real LoadGen with a Server latency bound no CPU can meet, so the first attempt
is INVALID for real, and checks both attempts are kept and reported while only the second is a result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen_verdicts import judge_executor_result
from tests.test_loadgen_executor import make_ctx, make_step
from workload.cli import invoke
from workload.hosts.local import LocalHost
from workload.loadgen.logs import detail_values
from workload.loadgen.retry import attempt_lines, retry_fix, with_fix
from workload.loadgen.settings import RunSettings
from workload.metrics import collect
from workload.report.data import load_run
from workload.report.html import render

pytestmark = pytest.mark.timeout(240)


def server_values(**extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "result_validity": "INVALID",
        "effective_target_qps": 50.0,
        "result_completed_samples_per_sec": 40.0,
        "result_perf_constraints_met": False,
        "early_stopping_met": False,
        "result_min_duration_met": True,
        "result_min_queries_met": True,
    }
    return values | extra


def test_server_over_its_latency_bound_retries_at_a_lower_load() -> None:
    fix = retry_fix("Server", server_values(), RunSettings())
    assert fix is not None and "p99 latency over the bound" in fix.reason
    assert fix.changes == {"server_target_qps": 24.0}  # 0.6 x the completed 40/s
    assert fix.parameters() == {"ServerTargetQps": 24.0} and fix.describe() == "ServerTargetQps=24"
    assert with_fix(RunSettings(), fix).server_target_qps == 24.0


def test_a_bound_find_performance_picked_is_doubled_with_the_lower_load() -> None:
    values = server_values(effective_target_latency_ns=150e6)
    fix = retry_fix("Server", values, RunSettings())
    assert fix is not None and fix.changes == {"server_target_qps": 24.0, "server_target_latency_ms": 300.0}
    assert fix.describe() == "ServerTargetQps=24, ServerTargetLatencyMs=300"
    mine = retry_fix("Server", values, RunSettings(server_target_latency_ms=150))
    assert mine is not None and mine.changes == {"server_target_qps": 24.0}  # the user's bound stays


def test_server_early_stopping_alone_also_lowers_the_load() -> None:
    fix = retry_fix("Server", server_values(result_perf_constraints_met=True), RunSettings())
    assert fix is not None and "early stopping" in fix.reason and fix.changes == {"server_target_qps": 24.0}


def test_a_user_target_is_never_changed_and_valid_results_never_retry() -> None:
    assert retry_fix("Server", server_values(), RunSettings(server_target_qps=50)) is None
    assert retry_fix("Server", server_values(result_validity="VALID"), RunSettings()) is None
    assert retry_fix("Server", {}, RunSettings()) is None  # no detail values: nothing to compute from


def test_offline_that_ended_early_raises_its_target() -> None:
    values = {
        "result_validity": "INVALID",
        "result_min_duration_met": False,
        "effective_target_qps": 30.0,
        "result_samples_per_second": 100.0,
    }
    fix = retry_fix("Offline", values, RunSettings())
    assert fix is not None and fix.changes == {"offline_target_qps": 150.0}  # max(2 x 30, 1.5 x 100)
    assert retry_fix("Offline", values, RunSettings(offline_target_qps=30)) is None
    # INVALID for another reason (no duration/query shortfall): no target would fix it
    assert retry_fix("Offline", values | {"result_min_duration_met": True}, RunSettings()) is None


def test_stream_scenarios_lower_the_expected_latency() -> None:
    values = {
        "result_validity": "INVALID",
        "result_min_duration_met": False,
        "effective_target_latency_ns": 40e6,
        "result_90.00_percentile_latency_ns": 10e6,
    }
    fix = retry_fix("SingleStream", values, RunSettings())
    assert fix is not None and fix.changes == {"single_stream_target_latency_ms": 5.0}
    multi = {k: v for k, v in values.items() if not k.startswith("result_90")}
    multi["result_99.00_percentile_per_query_latency_ns"] = 80e6
    fix = retry_fix("MultiStream", multi, RunSettings())
    assert fix is not None and fix.changes == {"multi_stream_target_latency_ms": 20.0}


def test_the_executor_retries_once_and_keeps_both_attempts(tmp_path: Path) -> None:
    # A 0.01 ms p99 bound: every attempt breaks it, so the first is INVALID and the retry too.
    step = make_step(
        Scenarios="Server",
        TestModes="PerformanceOnly",
        ServerTargetLatencyMs=0.01,
        MinDurationMs=500,
        MinQueryCount=40,
        SampleCount=64,
        SequenceLength=16,
    )
    lines: list[str] = []
    ctx = make_ctx(LocalHost(), tmp_path, lines)
    step.apply(ctx, step.plan(ctx))
    step.verify(ctx)
    (final,) = ctx.results
    # The retry changed what retry_fix computes for the first attempt, and ran with it.
    assert not judge_executor_result(ctx.host_dir, final, "Server").valid
    record = json.loads((final / "attempts.json").read_text())
    first, second = record["attempts"]
    assert first["validity"] == "INVALID" and second["validity"] == "INVALID"
    assert "p99 latency over the bound" in second["retried_because"]
    kept = ctx.host_dir / first["folder"]
    assert kept.parent.parent.parent.parent.parent.parent.name == "superseded"
    first_target = detail_values(kept / "mlperf_log_detail.txt")["effective_target_qps"]
    second_target = detail_values(final / "mlperf_log_detail.txt")["effective_target_qps"]
    assert second_target == pytest.approx(second["changed"]["ServerTargetQps"])
    assert second_target < first_target
    assert any("retrying once with ServerTargetQps=" in line for line in lines)
    assert any("attempt 1 INVALID, attempt 2 INVALID" in line for line in lines)
    (line,) = attempt_lines("local", ctx.results)
    assert line.startswith("retried: [local] Server PerformanceOnly: INVALID -> INVALID (first: p99 latency over")
    assert "retry with ServerTargetQps=" in line
    # The superseded attempt is kept for the record but is not a result of the run.
    assert len(collect(ctx.host_dir).results) == 1
    # ... and the report shows both attempts
    out = tmp_path / "out"
    assert invoke(["results", str(ctx.host_dir), "--output", str(out)]) == 6
    (row,) = load_run(out).results
    assert [a["validity"] for a in row.attempts] == ["INVALID", "INVALID"]
    assert "retried: INVALID → INVALID" in render([load_run(out)])


def test_a_user_set_target_is_reported_invalid_without_a_retry(tmp_path: Path) -> None:
    step = make_step(
        Scenarios="Server",
        TestModes="PerformanceOnly",
        ServerTargetLatencyMs=0.01,
        ServerTargetQps=20,
        MinDurationMs=500,
        MinQueryCount=40,
        SampleCount=64,
        SequenceLength=16,
    )
    ctx = make_ctx(LocalHost(), tmp_path)
    step.apply(ctx, step.plan(ctx))
    (final,) = ctx.results
    assert detail_values(final / "mlperf_log_detail.txt")["result_validity"] == "INVALID"
    assert not (final / "attempts.json").exists() and not (ctx.host_dir / "superseded").exists()
