"""INVALID reasons and fixes in words, with the user.conf key and a computed value."""

from __future__ import annotations

from pathlib import Path

from workload.metrics.collection import collect
from workload.metrics.model import BenchmarkResult
from workload.metrics.verdict import Verdict, explain_invalid

FIX = Path(__file__).parent / "fixtures" / "results"


def result(path: Path) -> BenchmarkResult:
    (only,) = collect(path).results
    return only


def test_offline_min_duration_suggests_measured_qps() -> None:
    r = result(FIX / "reference" / "offline_invalid")  # the reference LoadGen run: 3541.36 samples/s, expected 2000
    assert r.invalid_reasons == ["min duration not met: the run ended before min_duration (2000 ms)"]
    assert len(r.fixes) == 1
    assert "measured 3541.36 samples/s (was 2000, 4400 samples issued)" in r.fixes[0]
    assert "`*.Offline.target_qps = 3542`" in r.fixes[0] and "--offline_expected_qps" in r.fixes[0]


def test_server_latency_constraint_names_bound_and_lower_qps() -> None:
    r = result(FIX / "loadgen" / "server_invalid")
    assert r.invalid_reasons[0].startswith("latency constraint not met: p99 latency")
    assert "exceeds the 0.1 ms bound" in r.invalid_reasons[0] and "100 of 100 queries" in r.invalid_reasons[0]
    assert any("early stopping not met" in x for x in r.invalid_reasons)
    assert any("`*.Server.target_qps = 180`" in f for f in r.fixes)  # 200 - 10 %
    assert not any("min_duration" in f for f in r.fixes)  # the latency bound is the problem, not the length


def test_multistream_errors_and_early_stopping() -> None:
    r = result(FIX / "loadgen" / "multistream_invalid")
    text = " | ".join(r.invalid_reasons)
    assert "min duration not met" in text and "Only processed 161 queries" in text
    assert "LoadGen logged an error: error_runtime: Ending early" in text
    assert any("MultiStream.target_latency" in f for f in r.fixes)
    # ceil(400 ms x 662 / 161 x 1.1) = 1810 ms
    assert any("`*.MultiStream.min_duration = 1810`" in f for f in r.fixes)


def test_model_specific_key_and_ttft() -> None:
    values = {
        "result_validity": "INVALID",
        "result_perf_constraints_met": False,
        "effective_target_qps": 101,
        "result_first_token_99.00_percentile_latency_ns": 2_500_000_000,
        "requested_server_ttft_latency": 2_000_000_000,
        "result_time_per_output_token_99.00_percentile_ns": 150_000_000,
        "requested_server_tpot_latency": 200_000_000,
    }
    reasons, fixes = explain_invalid(values, scenario="Server", model="llama2-70b")
    assert "TTFT p99 2500 ms exceeds 2000 ms" in reasons[0] and "TPOT" not in reasons[0]
    assert "`llama2-70b.Server.target_qps = 90`" in fixes[0]


def test_verdict_ok_only_when_everything_passes() -> None:
    good = collect(FIX / "nvidia" / "logs" / "2024.07.24-15.41.28").results
    assert Verdict.from_results(good).ok
    assert not Verdict.from_results([]).ok
    bad = good + collect(FIX / "cpu_fail").results
    verdict = Verdict.from_results(bad)
    assert not verdict.ok and verdict.accuracy_failed == 1 and verdict.invalid == 0
    assert "cosine_similarity_min" in verdict.failures[0]
    assert verdict.lines()[0].startswith("verdict: FAILED")


def test_verdict_lines_give_every_reason_and_its_fix() -> None:
    lines = Verdict.from_results([result(FIX / "loadgen" / "offline_invalid")]).lines()
    assert lines[0].startswith("verdict: FAILED - 1 result(s): 0 VALID, 1 not VALID")
    assert "min duration not met" in lines[1]
    fixes = [line for line in lines if line.startswith("    fix: ")]
    assert fixes and "Offline.target_qps" in fixes[0]
