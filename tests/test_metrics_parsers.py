"""Golden tests: every result file type, VALID and INVALID, all scenarios, v4.0/v4.1, LLM, accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workload.metrics.collection import collect
from workload.metrics.model import BenchmarkResult, Categorization, Relativity

FIX = Path(__file__).parent / "fixtures" / "results"
NV = FIX / "nvidia" / "logs"
H200 = NV / "2024.07.24-15.41.28" / "H200-SXM-141GBx8_TRT"
A100 = "DGX-A100_A100-SXM4-40GBx8_TRT"


def one(path: Path) -> BenchmarkResult:
    collection = collect(path)
    assert collection.issues == []
    assert len(collection.results) == 1
    return collection.results[0]


def values(result: BenchmarkResult) -> dict[str, float]:
    names = [m.name for m in result.metrics]
    assert len(names) == len(set(names)), "a metric appears twice"
    return {m.name: m.value for m in result.metrics}


def test_nvidia_server_detail_and_summary_merge_without_duplicates() -> None:
    r = one(H200 / "bert-99" / "Server")
    v = values(r)
    assert (r.model, r.benchmark_full, r.scenario, r.system) == ("bert", "bert-99", "Server", "H200-SXM-141GBx8_TRT")
    assert r.validity == "VALID" and r.headline is not None
    # detail log says 57609.3 (6 digits); the summary's 57609.27 is the same number, more precise
    assert r.headline.name == "samples_per_second" and r.headline.value == 57609.27
    assert v["samples_per_second_p99"] == 57609.27
    assert v["scheduled_samples_per_second"] == 57615
    assert v["latency_p99_ns"] == 80785950 and v["latency_p99_9_ns"] == 84311419
    assert v["PerformanceMode_p99"] == 1.0 and v["valid"] == 1.0
    assert v["early_stopping_met"] == 1.0 and v["min_duration_met"] == 1.0 and v["perf_constraints_met"] == 1.0
    assert v["effective_target_qps"] == 57600
    m = next(m for m in r.metrics if m.name == "latency_p99_ns")
    assert (m.unit, m.relativity) == ("ns", Relativity.LOWER_IS_BETTER)
    assert m.metadata["scenario"] == "Server" and m.metadata["benchmark_full"] == "bert-99"
    assert m.tool_version == "4.1 @ 2ed9555be0" and m.scenario_name == "bert"
    assert m.start_time is not None and m.end_time is not None
    assert 599 < (m.end_time - m.start_time).total_seconds() < 601


def test_offline_summary_only_v41() -> None:
    r = one(H200 / "bert-99" / "Offline")
    v = values(r)
    assert r.validity == "VALID" and r.headline is not None
    assert (r.headline.name, r.headline.value, r.headline.unit) == ("samples_per_second", 73309.5, "samples/s")
    assert r.headline.relativity is Relativity.HIGHER_IS_BETTER
    assert v["loadgen_warnings"] == 8 and v["loadgen_errors"] == 0
    assert v["effective_samples_per_query"] == 49632000


def test_llm_server_tokens_ttft_tpot() -> None:
    r = one(H200 / "llama2-70b-99" / "Server")
    v = values(r)
    assert r.model == "llama2-70b" and r.headline is not None
    assert (r.headline.name, r.headline.value, r.headline.unit) == ("tokens_per_second", 29228.22, "tokens/s")
    # VirtualClient's name for Server is result[scenario_key] = completed samples/s (NVIDIA's key for every
    # benchmark), under "samples_per_second_p99"; the token rate keeps its own clear name only
    assert v["samples_per_second"] == 100.35 and v["samples_per_second_p99"] == 100.35
    assert "tokens_per_second_p99" not in v
    assert v["ttft_p99_ns"] == 452744202 and v["tpot_p99_ns"] == 146040006
    assert v["ttft_mean_ns"] == 198269106 and v["tpot_mean_ns"] == 123263268


def test_real_llm_server_virtualclient_name_is_completed_samples() -> None:
    v = values(one(FIX / "loadgen" / "llm_server_valid"))
    assert v["tokens_per_second"] == 1190.29 and v["samples_per_second"] == 297.176  # detail log's precision
    assert v["samples_per_second_p99"] == 297.176 and "tokens_per_second_p99" not in v


def test_virtualclient_name_and_value_follow_scenario_key(tmp_path: Path) -> None:
    # NVIDIA's llama2 Offline metadata.json: scenario_key is the token rate, which VC names samples_per_second_p99
    (tmp_path / "metadata.json").write_text(json.dumps({
        "benchmark_full": "llama2-70b-99", "benchmark_short": "llama2-70b", "scenario": "Offline",
        "test_mode": "PerformanceOnly", "result_validity": "VALID", "scenario_key": "result_tokens_per_second",
        "result_tokens_per_second": 1234.5, "result_samples_per_second": 4.25,
    }))  # fmt: skip
    r = one(tmp_path)
    spec = {m.name: m for m in r.metrics}
    assert r.headline is not None and (r.headline.name, r.headline.value) == ("tokens_per_second", 1234.5)
    vc = spec["samples_per_second_p99"]
    assert (vc.value, vc.unit, vc.relativity) == (1234.5, "tokens/s", Relativity.HIGHER_IS_BETTER)
    assert spec["samples_per_second"].value == 4.25 and "tokens_per_second_p99" not in spec


def test_nvidia_metadata_wrong_types_are_named_issues(tmp_path: Path) -> None:
    src = NV / "2024.11.15-04.30.00" / A100 / "bert-99" / "Offline" / "metadata.json"
    data = json.loads(src.read_text())
    data["accuracy_pass"] = "true"
    data["accuracy"][0].update({"value": "90.2", "pass": 1, "threshold": None})
    data["early_stopping_met"] = "yes"
    data["result_validity"] = "valid"
    data["benchmark_short"] = 7
    (tmp_path / "metadata.json").write_text(json.dumps(data))
    collection = collect(tmp_path)
    path = str(tmp_path / "metadata.json")
    assert {i.path for i in collection.issues} == {path}
    assert sorted(i.problem for i in collection.issues) == [
        "accuracy[0].pass is 1, not true or false",
        "accuracy[0].value is '90.2', not a finite number",
        "accuracy_pass is 'true', not true or false",
        "benchmark_short is 7, not a string",
        "early_stopping_met is 'yes', not true or false",
        "result_validity is 'valid', not 'VALID' or 'INVALID'",
    ]
    (r,) = collection.results  # what could be read is still a result: the F1 figure without a verdict
    assert r.accuracy_pass is None and r.failed


def test_v40_server_headline_is_scheduled() -> None:
    r = one(FIX / "v4.0")
    assert (r.system, r.benchmark_full, r.scenario) == ("DGX-H100_H100-SXM-80GBx8_TRT", "bert-99", "Server")
    assert r.headline is not None and r.headline.name == "scheduled_samples_per_second"
    assert r.headline.value == 55982.68
    assert values(r)["samples_per_second"] == 55978.81


def test_nvidia_metadata_server_value_from_scenario_key() -> None:
    r = one(NV / "2024.11.15-03.56.48" / A100 / "bert-99" / "Server")
    v = values(r)
    assert r.headline is not None and r.headline.value == 25405.6
    assert r.config_name == "DGX-A100_A100-SXM4-40GBx8_TRT-custom_k_99_MaxP-Server"
    assert v["samples_per_second_p99"] == 25405.6 and v["PerformanceMode_p99"] == 1.0
    assert v["satisfies_query_constraint"] == 0.0
    assert r.validity == "VALID" and not r.failed  # satisfies_query_constraint false is not a validity signal


def test_nvidia_metadata_singlestream_invalid() -> None:
    r = one(NV / "2024.11.15-03.56.48" / A100 / "bert-99" / "SingleStream")
    v = values(r)
    assert r.validity == "INVALID" and r.failed
    assert r.headline is not None and (r.headline.name, r.headline.value) == ("latency_p90_ns", 1924537)
    assert v["latency_ns_p99"] == 1924537 and v["PerformanceMode_p99"] == 0.0
    assert r.invalid_reasons


def test_nvidia_accuracy_metadata_plus_accuracy_txt() -> None:
    r = one(NV / "2024.11.15-04.30.00" / A100 / "bert-99" / "Offline")
    v = values(r)
    assert r.test_mode == "AccuracyOnly" and r.validity is None and r.accuracy_pass is True
    assert v["accuracy_f1"] == 90.2147015680108  # metadata.json wins over accuracy.txt's 90.3567...
    assert v["accuracy_exact_match"] == 82.92336802270577  # only in accuracy.txt
    assert v["AccuracyValue_p99"] == 90.2147015680108 and v["ThresholdValue_p99"] == 89.96526
    assert v["AccuracyThresholdRatio_p99"] == pytest.approx(1.00277264321818)
    assert v["AccuracyMode_p99"] == 1.0 and v["accuracy_pass"] == 1.0
    assert all(m.categorization is Categorization.ACCURACY for m in r.metrics)
    assert not any(m.name.startswith(("samples_per_second", "valid")) for m in r.metrics)


def test_accuracy_fail_99_9_suffix_and_reason() -> None:
    r = one(NV / "2024.11.15-05.00.00" / A100 / "bert-99.9" / "Offline")
    v = values(r)
    assert r.accuracy_pass is False and r.failed
    assert v["AccuracyMode_p99_9"] == 0.0 and "AccuracyMode_p99" not in v
    assert any("F1 = 90.2147 is below the threshold 90.7831" in x for x in r.invalid_reasons)
    assert any("high_accuracy" in f for f in r.fixes)


def test_accuracy_txt_dice_pass_and_rouge_range_fail() -> None:
    dice = one(FIX / "accuracy_txt" / "3d-unet-99")
    assert dice.accuracy_pass is True and values(dice)["accuracy_dice"] == 0.8617
    rouge = one(FIX / "accuracy_txt" / "llama2-70b-99")
    v = values(rouge)
    assert v["accuracy_rouge1"] == 44.4312 and v["accuracy_gen_len"] == 7231284
    assert rouge.accuracy_pass is False
    assert v["accuracy_tokens_per_sample_upper_limit"] == 294.45 * 1.1  # the checker's own product
    assert any("TOKENS_PER_SAMPLE = 249.2 is outside [265.005, 323.895]" in x for x in rouge.invalid_reasons)


def test_accuracy_json_pass_and_fail() -> None:
    ok = one(FIX / "cpu")
    v = values(ok)
    assert ok.model == "minilm" and ok.scenario == "Offline" and ok.validity == "VALID"
    assert v["accuracy_cosine_similarity_min"] == 0.9991 and v["accuracy_cosine_similarity_min_threshold"] == 0.999
    assert v["accuracy_cosine_similarity_mean"] == 0.9998 and v["accuracy_samples"] == 1024
    assert ok.accuracy_pass is True and not ok.failed
    bad = one(FIX / "cpu_fail")
    assert bad.accuracy_pass is False and bad.failed
    assert any("cosine_similarity_min = 0.9871 is below the threshold 0.999" in x for x in bad.invalid_reasons)


@pytest.mark.parametrize(
    ("case", "scenario", "validity", "headline"),
    [
        ("offline_valid", "Offline", "VALID", "samples_per_second"),
        ("offline_invalid", "Offline", "INVALID", "samples_per_second"),
        ("server_valid", "Server", "VALID", "samples_per_second"),
        ("server_invalid", "Server", "INVALID", "samples_per_second"),
        ("singlestream_valid", "SingleStream", "VALID", "latency_p90_ns"),
        ("multistream_valid", "MultiStream", "VALID", "per_query_latency_p99_ns"),
        ("multistream_invalid", "MultiStream", "INVALID", "per_query_latency_p99_ns"),
        ("llm_server_valid", "Server", "VALID", "tokens_per_second"),
    ],
)
def test_real_loadgen_outputs(case: str, scenario: str, validity: str, headline: str) -> None:
    r = one(FIX / "loadgen" / case)
    assert (r.scenario, r.validity, r.test_mode) == (scenario, validity, "PerformanceOnly")
    assert r.headline is not None and r.headline.name == headline and r.headline.value > 0
    assert (validity == "INVALID") == bool(r.invalid_reasons)
    assert any("test run" in n for n in r.notes)  # min_duration < 600 s


@pytest.mark.parametrize("case", ["offline_valid", "server_invalid", "singlestream_valid", "multistream_valid"])
def test_summary_fallback_matches_detail(case: str, tmp_path: Path) -> None:
    """The summary alone gives the same headline and validity as the detail log."""
    src = FIX / "loadgen" / case
    full = one(src)
    (tmp_path / "mlperf_log_summary.txt").write_bytes((src / "mlperf_log_summary.txt").read_bytes())
    alone = one(tmp_path)
    assert alone.validity == full.validity and alone.scenario == full.scenario
    assert alone.headline is not None and full.headline is not None
    assert alone.headline.name == full.headline.name
    assert alone.headline.value == pytest.approx(full.headline.value, rel=1e-3)


def test_accuracy_only_loadgen_summary_is_a_result_without_metrics() -> None:
    r = one(FIX / "loadgen" / "offline_accuracy")
    assert r.test_mode == "AccuracyOnly" and r.validity is None and r.headline is None
    assert r.metrics == [] and r.accuracy_pass is None
    # no accuracy figure next to the logs: the accuracy run cannot be judged, so it is not a pass
    assert r.failed and r.invalid_reasons == [
        "accuracy unknown: no accuracy figure found (accuracy.txt, accuracy.json or metadata.json 'accuracy')"
    ]


def test_whole_tree_counts_and_hosts() -> None:
    collection = collect(FIX, host="gpu-1")
    assert collection.issues == []
    # the published files (tests/fixtures/results/published, published_mirrors) have golden tests of their own
    # 25, plus 8 of the published submission trees under trees/
    published = ("/published/", "/published_mirrors/")
    assert len([r for r in collection.results if not any(p in r.source for p in published)]) == 33
    assert {m.host for m in collection.metrics} == {"gpu-1"}
    assert collection.hosts == ["gpu-1"]


def test_missing_path_and_unknown_file_are_issues(tmp_path: Path) -> None:
    missing = collect(tmp_path / "nope")
    assert missing.results == [] and "no such file" in missing.issues[0].problem
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    assert "not a known result file" in collect(other).issues[0].problem
