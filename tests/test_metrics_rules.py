"""MLPerf's rules as data (workload/metrics/rules/vX.Y.json): loading, lookup, round detection, the checker's
accuracy patterns on every benchmark's accuracy.txt format, and results judged by them end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workload.metrics import thresholds
from workload.metrics.collection import collect
from workload.metrics.rules import (
    ROUNDS,
    RulesError,
    detect_round,
    known_anywhere,
    override_round,
    rules_for,
)

RULES_DIR = Path(__file__).parent.parent / "workload" / "metrics" / "rules"
SUMMARY = (
    Path(__file__).parent
    / "fixtures/results/published/v4.1/closed/Google/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99/Server"
    / "performance/run_1/mlperf_log_summary.txt"
)


def test_every_round_from_v3_1_to_v6_1_loads_and_names_its_source() -> None:
    assert ROUNDS == ("v3.1", "v4.0", "v4.1", "v5.0", "v5.1", "v6.0", "v6.1")
    for name in ROUNDS:
        rules = rules_for(name)
        data = json.loads((RULES_DIR / f"{name}.json").read_text())
        assert data["source"]["repository"] == "mlcommons/inference"
        assert data["source"]["path"].startswith("tools/submission/submission_checker")
        assert rules.benchmarks and rules.patterns and rules.min_duration_ms == 600000
        for bench in rules.benchmarks.values():
            assert bench.scenarios, bench.name
            assert all(t.lower is not None or t.upper is not None for t in bench.targets), bench.name
    assert rules_for("4.1") is rules_for("v4.1")


def test_unknown_round_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(RulesError, match=r"unknown MLPerf Inference round 'v9\.9'; known: v3\.1, .*v6\.1"):
        rules_for("v9.9")
    with pytest.raises(RulesError), override_round("v2.0"):
        pass


@pytest.mark.parametrize(
    ("round_name", "name", "found"),
    [
        ("v4.1", "resnet50", "resnet"),  # the checker's model_mapping
        ("v4.1", "ssd-resnet34", "retinanet"),
        ("v5.1", "llama3_1-405b", "llama3.1-405b"),
        ("v4.1", "gptj", "gptj-99"),  # no suffix: the 99 % variant
        ("v4.1", "bert-99.9", "bert-99.9"),
        ("v6.0", "mixtral-8x7b-99", "mixtral-8x7b"),  # a suffix the round does not use
        ("v6.0", "RESNET50", "resnet"),
        ("v3.1", "efficientnet-lite4", "resnet"),  # the checker's guess for image classifiers
        ("v6.0", "gptj-99", None),  # gone since v5.1
        ("v6.0", "qwen3.6-27b", None),
    ],
)
def test_benchmark_lookup_aliases_and_variants(round_name: str, name: str, found: str | None) -> None:
    bench = rules_for(round_name).benchmark(name)
    assert (bench.name if bench else None) == found


def test_targets_are_the_checkers_products() -> None:
    whisper = rules_for("v6.0").benchmark("whisper")
    assert whisper is not None and whisper.target("ACCURACY").lower == (100.0 - 2.0671) * 0.99  # type: ignore[union-attr]
    deepseek = rules_for("v5.1").benchmark("deepseek-r1")
    assert deepseek is not None
    tps = deepseek.target("TOKENS_PER_SAMPLE")
    assert tps is not None and (tps.lower, tps.upper) == (0.9 * 3886.2274, 1.1 * 3886.2274)
    gpt_oss = rules_for("v6.0").benchmark("gpt-oss-120b")
    assert gpt_oss is not None
    upper_only = gpt_oss.target("TOKENS_PER_SAMPLE")
    assert upper_only is not None and upper_only.lower is None and not upper_only.required
    assert rules_for("v4.1").benchmark("mixtral-8x7b").target("gsm8k_accuracy").lower == 73.78 * 0.99  # type: ignore[union-attr]
    assert rules_for("v5.0").benchmark("mixtral-8x7b").target("gsm8k_accuracy").lower == 73.66 * 0.99  # type: ignore[union-attr]
    assert thresholds.target("bert-99.9", "F1") == (90.874 * 0.999, None)
    assert thresholds.target("gpt-oss-120b", "TOKENS_PER_SAMPLE") == (float("-inf"), 1.1 * 9999)
    assert thresholds.target("nobench", "F1") is None


@pytest.mark.parametrize(
    ("round_name", "benchmark", "scenario", "key"),
    [
        ("v3.1", "gptj-99", "Server", "result_scheduled_samples_per_sec"),
        ("v4.0", "llama2-70b-99", "Server", "result_completed_samples_per_sec"),
        ("v4.0", "llama2-70b-99", "Offline", "result_tokens_per_second"),
        ("v4.1", "gptj-99", "Offline", "result_inferred_tokens_per_second"),
        ("v4.1", "resnet", "Server", "result_completed_samples_per_sec"),
        ("v4.1", "resnet", "SingleStream", "early_stopping_latency_ss"),
        ("v5.0", "retinanet", "MultiStream", "early_stopping_latency_ms"),
        ("v5.1", "llama3.1-8b-edge", "SingleStream", "result_90.00_percentile_latency_ns"),
        ("v5.1", "llama2-70b-99", "Interactive", "result_completed_tokens_per_second"),
        ("v6.0", "whisper", "Offline", "result_tokens_per_second"),
        ("v6.0", "wan-2.2-t2v-a14b", "SingleStream", "early_stopping_latency_ss"),
    ],
)
def test_headline_key_per_round(round_name: str, benchmark: str, scenario: str, key: str) -> None:
    rules = rules_for(round_name)
    assert rules.headline_key(rules.benchmark(benchmark), scenario) == key


def test_token_latency_limits_per_scenario() -> None:
    llama2 = rules_for("v5.1").benchmark("llama2-70b-99")
    assert llama2 is not None
    assert llama2.token_limits("Server") == (2000 * 10**6, 200 * 10**6)
    assert llama2.token_limits("Interactive") == (450 * 10**6, 40 * 10**6)
    interactive_v50 = rules_for("v5.0").benchmark("llama2-70b-interactive-99")
    assert interactive_v50 is not None and interactive_v50.token_limits("Server") == (450 * 10**6, 40 * 10**6)
    gpt_oss = rules_for("v6.1").benchmark("gpt-oss-120b")
    assert gpt_oss is not None and gpt_oss.token_limits("Interactive") == (2000 * 10**6, 15 * 10**6)
    assert rules_for("v4.1").benchmark("gptj-99").token_limits("Server") is None  # type: ignore[union-attr]


def test_detect_round_from_loadgen_seed_path_words_and_benchmark() -> None:
    assert detect_round(loadgen_version="4.1 @ 2ed9555be0") == ("v4.1", "LoadGen 4.1 @ 2ed9555be0")
    assert detect_round(loadgen_version="5.1.0 @ abc", path="/x/v4.0/closed")[0] == "v5.1"
    assert detect_round(qsl_rng_seed=13281865557512327830)[0] == "v4.0"
    assert detect_round(path="/data/inference_results_v3.1/closed/Intel/results/x/bert-99/Offline")[0] == "v3.1"
    assert detect_round(scheduled_headline=True, benchmark="bert-99")[0] == "v4.0"
    assert detect_round(benchmark="gptj-99") == ("v5.0", "newest round knowing gptj-99")
    assert detect_round(benchmark="rnnt")[0] == "v4.0"
    assert detect_round()[0] == "v6.1"
    with override_round("v4.1"):
        assert detect_round(loadgen_version="6.0.1 @ x") == ("v4.1", "--round")
    assert detect_round(loadgen_version="6.0.1 @ x")[0] == "v6.0"
    assert known_anywhere("gptj") and known_anywhere("rnnt") and known_anywhere("qwen3.6-27b")  # v6.1 (issue 31)
    assert not known_anywhere("qwen9-1t")


@pytest.mark.parametrize(
    ("round_name", "lines", "expected"),
    [
        ("v6.0", ["accuracy=75.730%, good=37865, total=50000"], {"acc": 75.730}),
        ("v6.0", ['{"accuracy": 0.7275, "count": 788379}'], {"acc": 0.7275}),  # rgat
        ("v6.0", ["mAP=37.358%"], {"mAP": 37.358}),  # retinanet, yolo
        ("v6.0", ["AUC=80.31"], {"AUC": 80.31}),
        ("v6.0", ["{'Total': 0.5461, 'Car': 0.71}"], {"mAP": 0.5461}),  # pointpainting
        ("v6.0", ['{"exact_match": 83.1, "f1": 90.9}'], {"F1": 90.9}),
        ("v6.0", ["Accuracy: mean = 0.86236, kidney = 0.9350, tumor = 0.7897"], {"DICE": 0.86236}),
        ("v6.0", ["Word Error Rate: 2.0575%, accuracy=97.9425%"], {"ACCURACY": 97.9425}),  # whisper
        ("v6.0", ["{'rouge1': '44.43', 'rouge2': '22.04', 'rougeL': '28.62', 'tokens_per_sample': 294.5}"],
         {"ROUGE1": 44.43, "ROUGE2": 22.04, "ROUGEL": 28.62, "TOKENS_PER_SAMPLE": 294.5}),
        ("v6.0", ["{'rouge1': np.float64(44.43), 'gen_len': np.int64(8)}"], {"ROUGE1": 44.43}),
        ("v6.0", ["{", "    'FID_SCORE': '23.18',", "    'CLIP_SCORE': '31.75',", "}"],
         {"FID_SCORE": 23.18, "CLIP_SCORE": 31.75}),  # SDXL: a multi-line dict with quoted strings
        ("v6.0", ["{'gsm8k': 73.5, 'mbxp': 60.5, 'rougeLsum': 42.1}"],
         {"gsm8k_accuracy": 73.5, "mbxp_accuracy": 60.5, "ROUGELSUM": 42.1}),
        ("v6.0", ["{'exact_match': 89.5, 'tokens_per_sample': 650.2}"],
         {"exact_match": 89.5, "TOKENS_PER_SAMPLE": 650.2}),
        ("v6.0", ['{"f1": 0.7912, "precision": 0.8}'], {"F1_HIERARCHICAL": 0.7912}),  # qwen3-vl
        ("v6.0", ["metric/lifetime_ne/rating: 0.8661", "metric/lifetime_accuracy/rating: 0.6960",
                  "metric/lifetime_gauc/rating: 0.7861"],
         {"DLRM_NE": 0.8661, "DLRM_ACC": 0.6960, "DLRM_AUC": 0.7861}),
        ("v6.0", ["{'vbench_score': 70.9}"], {"vbench_score": 70.9}),
        # the v4.1 checker's patterns are older: no quoted ROUGE, no 'Total', no {"accuracy"
        ("v4.1", ["{'rouge1': '44.43'}", "{'Total': 0.5461}", '{"accuracy": 0.7275}'], {}),
        ("v3.1", ["Word Error Rate: 7.45%, accuracy=92.55%"], {"WER": 92.55}),
    ],
)  # fmt: skip
def test_the_checkers_patterns_read_every_accuracy_format(
    round_name: str, lines: list[str], expected: dict[str, float]
) -> None:
    assert rules_for(round_name).accuracy_figures(lines) == expected


ACCURACY_ONLY = [
    ("deepseek-r1", "{'exact_match': 81.9, 'tokens_per_sample': 3901.5}", True),
    ("deepseek-r1", "{'exact_match': 79.1, 'tokens_per_sample': 3901.5}", False),
    ("gpt-oss-120b", "{'exact_match': 83.5, 'tokens_per_sample': 10500.0}", True),
    ("gpt-oss-120b", "{'exact_match': 83.5, 'tokens_per_sample': 11000.0}", False),  # over 1.1 x 9999
    ("whisper", "Word Error Rate: 2.0575%, accuracy=97.9425%", True),
    ("qwen3-vl-235b-a22b", '{"f1": 0.7912}', True),
    ("dlrm-v3", "metric/lifetime_ne/rating: 0.8661\nmetric/lifetime_accuracy/rating: 0.6960\n"
     "metric/lifetime_gauc/rating: 0.7861", True),
    ("dlrm-v3", "metric/lifetime_ne/rating: 0.8661", False),  # the others were not printed
    ("wan-2.2-t2v-a14b", "{'vbench_score': 70.9}", True),
    ("yolo-95", "mAP=51.2%", True),
    ("yolo-99", "mAP=51.2%", False),
    ("pointpainting", "{'Total': 0.5461}", True),
    ("stable-diffusion-xl", "{\n    'FID_SCORE': '23.18',\n    'CLIP_SCORE': '31.75',\n}", True),
    ("stable-diffusion-xl", "{'FID_SCORE': 24.5, 'CLIP_SCORE': 31.75}", False),  # above FID's upper limit
    ("llama3.1-8b", "{'rouge1': 38.8, 'rouge2': 15.95, 'rougeL': 24.5, 'rougeLsum': 35.8, 'gen_len': 8200000}", True),
]  # fmt: skip


@pytest.mark.parametrize(("benchmark", "text", "passed"), ACCURACY_ONLY)
def test_an_accuracy_txt_alone_is_judged_by_the_round(tmp_path: Path, benchmark: str, text: str, passed: bool) -> None:
    folder = tmp_path / "v6.0" / "closed" / "X" / "results" / "sys" / benchmark / "Offline" / "accuracy"
    folder.mkdir(parents=True)
    (folder / "accuracy.txt").write_text(text + "\nhash=abc123\n")
    collection = collect(tmp_path)
    assert collection.issues == []
    (r,) = collection.results
    assert r.test_mode == "AccuracyOnly" and r.accuracy_pass is passed and r.failed is not passed
    assert r.metrics[0].metadata["mlperf_round"] == "v6.0"
    if not passed:
        assert r.invalid_reasons and all("accuracy" in reason for reason in r.invalid_reasons)


def test_a_required_figure_the_script_did_not_print_fails(tmp_path: Path) -> None:
    folder = tmp_path / "v6.0" / "sys" / "dlrm-v3" / "Offline" / "accuracy"
    folder.mkdir(parents=True)
    (folder / "accuracy.txt").write_text("metric/lifetime_ne/rating: 0.8661\n")
    (r,) = collect(tmp_path).results
    assert any("DLRM_AUC = missing is below the threshold 0.785843" in x for x in r.invalid_reasons)
    assert any("reported no DLRM_AUC" in f for f in r.fixes)


def test_a_compliance_accuracy_txt_holding_only_its_hash_is_no_result(tmp_path: Path) -> None:
    folder = tmp_path / "sys" / "resnet50" / "Offline" / "TEST01" / "accuracy"
    folder.mkdir(parents=True)
    (folder / "accuracy.txt").write_text("hash=1f2e3d\n")
    collection = collect(tmp_path)
    assert collection.results == [] and collection.issues == []


def test_unknown_benchmark_is_reported_with_loadgens_own_key_and_a_warning(tmp_path: Path) -> None:
    folder = tmp_path / "sys" / "qwen9-1t" / "Server" / "performance" / "run_1"
    folder.mkdir(parents=True)
    (folder / "mlperf_log_summary.txt").write_text(SUMMARY.read_text())
    (r,) = collect(tmp_path).results
    assert r.headline is not None and (r.headline.name, r.headline.value) == ("tokens_per_second", 21588.35)
    assert r.validity == "VALID" and not r.failed
    assert any("'qwen9-1t' is unknown to every MLPerf Inference round (v3.1-v6.1)" in n for n in r.notes)
    assert "mlperf_benchmark" not in r.metrics[0].metadata
