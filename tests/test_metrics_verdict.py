"""INVALID reasons and fixes in words, with the user.conf key and a computed value."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

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


def _copy_with(src: Path, dst: Path, name: str, old: str, new: str) -> Path:
    """``dst`` holding ``src``'s ``name`` with ``old`` replaced by ``new`` (which must occur)."""
    dst.mkdir(parents=True, exist_ok=True)
    text = (src / name).read_text()
    assert old in text
    (dst / name).write_text(text.replace(old, new))
    return dst


def test_nan_headline_of_an_invalid_summary_is_a_named_issue_and_the_result_still_fails(tmp_path: Path) -> None:
    src = FIX / "loadgen" / "offline_invalid"
    old = next(
        line for line in (src / "mlperf_log_summary.txt").read_text().splitlines() if "Samples per second" in line
    )
    _copy_with(src, tmp_path / "nan", "mlperf_log_summary.txt", old, "Samples per second: nan")
    collection = collect(tmp_path)
    (r,) = collection.results  # kept: its validity and constraint flags are readable
    assert r.validity == "INVALID" and r.headline is None and "min duration not met" in r.invalid_reasons[0]
    (issue,) = collection.issues
    assert issue.path.endswith("mlperf_log_summary.txt")
    assert issue.problem == (
        "'Samples per second' (result_samples_per_second) is 'nan', not a finite number; the value was ignored"
    )
    verdict = Verdict.from_results(collection.results, collection.issues)
    assert not verdict.ok and verdict.invalid == 1 and verdict.unreadable_files == 1


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1e999", "9" * 400], ids=lambda b: b[:9])
def test_non_finite_numbers_in_a_detail_log_are_named_issues(tmp_path: Path, bad: str) -> None:
    src = FIX / "loadgen" / "offline_valid"
    text = (src / "mlperf_log_detail.txt").read_text()
    old = re.search(r'"key": "result_samples_per_second", "value": ([^,]+),', text)
    assert old is not None
    (tmp_path / "mlperf_log_detail.txt").write_text(text.replace(old.group(0), old.group(0).replace(old.group(1), bad)))
    collection = collect(tmp_path)
    (r,) = collection.results
    assert r.validity == "VALID" and "samples_per_second" not in {m.name for m in r.metrics}
    (issue,) = collection.issues
    assert issue.path.endswith("mlperf_log_detail.txt")
    assert issue.problem.startswith("result_samples_per_second is ") and "not a finite number" in issue.problem


def test_non_finite_numbers_in_metadata_json_are_named_issues(tmp_path: Path) -> None:
    src = FIX / "nvidia" / "logs" / "2024.11.15-03.56.48" / "DGX-A100_A100-SXM4-40GBx8_TRT" / "bert-99" / "Server"
    data = json.loads((src / "metadata.json").read_text())
    data["result_completed_samples_per_sec"] = float("nan")
    data["effective_min_duration_ms"] = float("inf")
    data["result_validity"] = "INVALID"
    data["early_stopping_met"] = False
    (tmp_path / "metadata.json").write_text(json.dumps(data))
    collection = collect(tmp_path)
    (r,) = collection.results
    assert r.validity == "INVALID" and r.invalid_reasons[0].startswith("early stopping not met")
    assert sorted(i.problem for i in collection.issues) == [
        "effective_min_duration_ms is inf, not a finite number; the value was ignored",
        "result_completed_samples_per_sec (the scenario_key) is nan, not a finite number",
    ]


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), float("-inf"), 10**400], ids=["nan", "inf", "-inf", "huge"]
)
def test_explain_invalid_never_does_arithmetic_on_non_finite_numbers(bad: float) -> None:
    values = {
        key: bad
        for key in ("effective_min_duration_ms", "effective_target_qps", "result_samples_per_second",
                    "result_completed_samples_per_sec", "result_query_count", "effective_min_query_count",
                    "effective_samples_per_query", "result_90.00_percentile_latency_ns",
                    "effective_target_latency_ns", "effective_target_latency_percentile")
    }  # fmt: skip
    flags = {"result_min_duration_met": False, "result_min_queries_met": False,
             "result_perf_constraints_met": False, "early_stopping_met": False}  # fmt: skip
    for scenario in ("Offline", "Server", "SingleStream", "MultiStream"):
        reasons, fixes = explain_invalid({**values, **flags}, scenario=scenario, model="bert")
        assert reasons and fixes and not any("nan" in text or "inf" in text for text in reasons + fixes)


def test_a_corrupt_result_file_fails_the_verdict_and_is_named(tmp_path: Path) -> None:
    shutil.copytree(FIX / "loadgen" / "offline_valid", tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metadata.json").write_text('{"benchmark_full": "bert-99", "scenario": "Off')
    collection = collect(tmp_path)
    assert [r.validity for r in collection.results] == ["VALID"]
    assert Verdict.from_results(collection.results).ok  # the results alone pass ...
    verdict = Verdict.from_results(collection.results, collection.issues)  # ... the unread file does not
    assert not verdict.ok and verdict.unreadable_files == 1
    bad = str(tmp_path / "bad" / "metadata.json")
    assert verdict.failures == (f"unreadable: {bad}: {collection.issues[0].problem}",)
    assert verdict.lines()[0].endswith("0 accuracy failure(s), 1 unreadable file(s)")
    assert verdict.as_dict()["unreadable_files"] == 1


def test_accuracy_only_with_unknown_accuracy_is_not_a_pass() -> None:
    r = result(FIX / "loadgen" / "offline_accuracy")
    verdict = Verdict.from_results([r])
    assert not verdict.ok and verdict.accuracy_unknown == 1 and verdict.accuracy_failed == 0
    assert "accuracy unknown" in verdict.failures[0] and "accuracy.txt" in verdict.fixes[0][0]
    assert verdict.lines()[0].endswith("0 accuracy failure(s), 1 accuracy unknown")


def test_accuracy_figure_without_a_known_target_is_unknown(tmp_path: Path) -> None:
    src = FIX / "nvidia" / "logs" / "2024.11.15-04.30.00" / "DGX-A100_A100-SXM4-40GBx8_TRT" / "bert-99" / "Offline"
    target = tmp_path / "sys" / "mybench" / "Offline"
    target.mkdir(parents=True)
    shutil.copy(src / "accuracy.txt", target)
    (target / "mlperf_log_summary.txt").write_text("SUT name : x\nScenario : Offline\nMode     : AccuracyOnly\n")
    r = result(tmp_path)
    assert r.test_mode == "AccuracyOnly" and r.accuracy_pass is None and r.failed
    assert r.invalid_reasons == ["accuracy unknown: no target known for exact_match, F1 of benchmark mybench"]


def test_loadgen_runner_results_name_the_profile_parameter_not_user_conf() -> None:
    # a real run of workload.loadgen.runner (OfflineTargetQps=1): its user.conf is rewritten on every run
    r = result(FIX / "loadgen_executor")
    assert r.invalid_reasons == ["min duration not met: the run ended before min_duration (1500 ms)"]
    (fix,) = r.fixes
    assert fix.startswith("raise the expected QPS to the measured 99.3") and "(was 1, 1 samples issued)" in fix
    assert "`--parameters OfflineTargetQps=100`" in fix and "LoadGenExecutor parameter" in fix
    assert "minilm-int8.Offline.target_qps" not in fix and "NVIDIA harness" not in fix
    assert "effective_settings.json" in r.files


def test_loadgen_runner_parameters_for_every_scenario() -> None:
    from workload.actions.loadgen_executor import LoadGenParameters
    from workload.metrics.raw import RUNNER_LOADGEN

    flags = {"result_min_duration_met": False, "result_min_queries_met": False, "early_stopping_met": False,
             "effective_min_duration_ms": 1000, "early_stopping_result": "Processed 10 queries. Would need to "
             "run at least 90 more queries", "result_90.00_percentile_latency_ns": 2_000_000,
             "result_99.00_percentile_per_query_latency_ns": 3_000_000}  # fmt: skip
    named: set[str] = set()
    for scenario in ("Offline", "Server", "SingleStream", "MultiStream"):
        _, fixes = explain_invalid(flags, scenario=scenario, model="minilm-int8", runner=RUNNER_LOADGEN)
        assert fixes and all("user.conf`" not in f and "NVIDIA harness" not in f for f in fixes)
        named.update(a or b for a, b in re.findall(r"--parameters (\w+)=|the (\w+) parameter", " ".join(fixes)))
    assert named == {"OfflineTargetQps", "ServerTargetQps", "SingleStreamTargetLatencyMs",
                     "MultiStreamTargetLatencyMs", "MinDurationMs"}  # fmt: skip
    assert named <= set(LoadGenParameters.model_fields)  # real parameter names of the LoadGenExecutor


def test_llm_server_reasons_use_token_latencies_and_both_early_stopping_results() -> None:
    r = result(FIX / "loadgen" / "llm_server_invalid")  # real LoadGen: TTFT bound 0.1 ms, far too tight
    latency, early = r.invalid_reasons
    # token-latency runs are judged on TTFT/TPOT only: the sample-latency bound is not their constraint
    assert latency == "latency constraint not met: TTFT p99 792.6 ms exceeds 0.1 ms"
    # LoadGen judged TPOT first and stopped there (its TTFT result is empty): the words are TPOT's
    assert early.startswith("early stopping not met: TPOT: Run unsuccessful. Processed 288 queries.")
    assert "TTFT:" not in early
    assert any("`*.Server.target_qps = 270`" in f for f in r.fixes)


def test_accuracy_json_problems_are_the_reason(tmp_path: Path) -> None:
    from workload.loadgen.accuracy import AccuracyResult, write_accuracy

    missing = "3 of 256 samples have no answer in the accuracy log"
    checked = AccuracyResult(value=0.9995, mean=0.9998, threshold=0.999, passed=False, samples=253,
                             problems=(missing,))  # fmt: skip
    write_accuracy(tmp_path, checked, model="minilm-int8", scenario="Offline")
    r = result(tmp_path)
    assert r.accuracy_pass is False and r.failed
    assert r.invalid_reasons == [f"accuracy check: {missing}"]  # not "below the threshold": 0.9995 >= 0.999
    assert len(r.fixes) == 1 and "every sample must be answered" in r.fixes[0]


def test_accuracy_fix_matches_the_failing_figure(tmp_path: Path) -> None:
    def metadata(benchmark: str, entries: list[dict[str, object]]) -> BenchmarkResult:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        (folder / "metadata.json").write_text(json.dumps({
            "benchmark_full": benchmark, "benchmark_short": "llama2-70b", "scenario": "Offline",
            "test_mode": "AccuracyOnly", "accuracy": entries, "accuracy_pass": False,
        }))  # fmt: skip
        return result(folder)

    rouge_ok = {"name": "ROUGE1", "value": 44.5, "threshold": 44.3868, "pass": True}
    tokens_bad = {"name": "TOKENS_PER_SAMPLE", "value": 400.0, "threshold": 265.005, "upper_limit": 323.895,
                  "pass": False}  # fmt: skip
    r = metadata("llama2-70b-99.9", [rouge_ok, tokens_bad])
    assert r.invalid_reasons == ["accuracy TOKENS_PER_SAMPLE = 400 is outside [265.005, 323.895]"]
    assert len(r.fixes) == 1 and "output length" in r.fixes[0] and "high_accuracy" not in r.fixes[0]
    rouge_bad = {**rouge_ok, "value": 44.0, "pass": False}
    r = metadata("llama2-70b-99.9", [rouge_bad])
    assert r.fixes == ["a 99.9 % target needs the high-accuracy engine: run with --config_ver=high_accuracy"]


def test_overall_accuracy_fail_without_a_failing_figure_still_says_why(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text(json.dumps({
        "benchmark_full": "bert-99", "scenario": "Offline", "test_mode": "AccuracyOnly", "accuracy_pass": False,
        "accuracy": [{"name": "F1", "value": 90.5, "threshold": 89.96526, "pass": True}],
    }))  # fmt: skip
    r = result(tmp_path)
    assert r.failed and r.invalid_reasons == [
        "the accuracy check is marked failed (accuracy_pass false) though no figure failed its target"
    ]
