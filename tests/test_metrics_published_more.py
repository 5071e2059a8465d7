"""More golden tests on real published MLPerf Inference results: v5.0, v5.1 and v6.0 of NVIDIA, Intel, AMD,
Dell and ASUSTeK (tests/fixtures/results/published_mirrors, see its SOURCES).

Values are asserted exactly as the files print them; targets are the submission checker's products
(reference x 0.99 / 0.999, tokens per sample x 0.9 / 1.1), as :mod:`workload.metrics.rules` keeps them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.test_metrics_published import main, meta, one
from workload.metrics.collection import collect
from workload.metrics.model import BenchmarkResult
from workload.metrics.rules import detect_round

PUB = Path(__file__).parent / "fixtures" / "results" / "published_mirrors"
NV50 = "v5.0/closed/NVIDIA/results/B200-SXM-180GBx8_TRT"
GH50 = "v5.0/closed/NVIDIA/results/GH200-GraceHopper-Superchip_GH200-144GB_aarch64x1_TRT"
INTEL50 = "v5.0/closed/Intel/results/1-node-2S-GNR_128C"
MANGO50 = "v5.0/closed/MangoBoost/results/32xMI300X_2xEPYC_9534/llama2-70b-99/Server"
NV51 = "v5.1/closed/NVIDIA/results/GB200-NVL72_GB200-186GB_aarch64x72_TRT"
AMD60 = "v6.0/closed/AMD/results/8xMI355X_2xEPYC_9575F"
DELL60 = "v6.0/closed/Dell/results"
EDGE60 = "v6.0/open/NVIDIA/results/Jetson-Thor/llama3.1-8b-edge/SingleStream"
OSS60 = "v6.0/open/Supermicro_RedHat/results/8xMI350X_2xEPYC-9575F/gpt-oss-120b/Server"
WAN60 = "v6.0/open/AMD/results/8xMI355X_2xEPYC_9597F/wan-2.2-t2v-a14b/SingleStream"
L8B61 = "v6.1/closed/Intel/results/1-node-2S-GNR_128C/llama3_1-8b/Server"


def values(result: BenchmarkResult) -> dict[str, float]:
    return {m.name: m.value for m in result.metrics}


# (folder, round, scenario, headline name, value as printed, checker unit)
PERFORMANCE = [
    (f"{NV50}/llama2-70b-interactive-99/Server/performance/run_1", "v5.0", "Server", "tokens_per_second", 59409.25,
     "Tokens/s"),
    (f"{NV50}/llama3_1-405b/Offline/performance/run_1", "v5.0", "Offline", "tokens_per_second", 1526.29, "Tokens/s"),
    (f"{NV50}/mixtral-8x7b/Server/performance/run_1", "v5.0", "Server", "tokens_per_second", 126844.55, "Tokens/s"),
    (f"{NV50}/stable-diffusion-xl/Server/performance/run_1", "v5.0", "Server", "samples_per_second", 28.44,
     "Queries/s"),
    (f"{GH50}/dlrm-v2-99.9/Server/performance/run_1", "v5.0", "Server", "samples_per_second", 50991.71, "Queries/s"),
    # a four-node network SUT: TTFT p99 1.80 s and TPOT p99 148 ms within v5.0's Server 2 s / 200 ms
    (f"{MANGO50}/performance/run_1", "v5.0", "Server", "tokens_per_second", 93039.93, "Tokens/s"),
    (f"{INTEL50}/retinanet/Server/performance/run_1", "v5.0", "Server", "samples_per_second", 580.88, "Queries/s"),
    (f"{NV51}/deepseek-r1/Server/performance/run_1", "v5.1", "Server", "tokens_per_second", 167578.06, "Tokens/s"),
    (f"{NV51}/llama3.1-405b/Interactive/performance/run_1", "v5.1", "Interactive", "tokens_per_second", 9921.02,
     "Tokens/s"),
    (f"{AMD60}/llama2-70b-99.9/Interactive/performance/run_1", "v6.0", "Interactive", "tokens_per_second", 73608.25,
     "Tokens/s"),
    (f"{DELL60}/1-node-2S-GNR_86C/rgat/Offline/performance/run_1", "v6.0", "Offline", "samples_per_second", 14283.7,
     "Samples/s"),
    # LoadGen 6.0's "90.0th percentile": the headline is the early-stopping 90.0th percentile estimate
    (f"{DELL60}/Dell_Pro_Max_GB10x1/yolo-95/singlestream/performance/run_1", "v6.0", "SingleStream",
     "early_stopping_latency_ns", 611926848, "Latency (ms)"),
    # whisper's official metric is tokens/s (RESULT_FIELD_BENCHMARK_OVERWRITE), so is its unit
    (f"{DELL60}/1-node-2S-GNR_86C/whisper/Offline/performance/run_1", "v6.0", "Offline", "tokens_per_second",
     1414.26, "Tokens/s"),
    (f"{DELL60}/Dell_Pro_Max_GB10x1/yolo-95/multistream/performance/run_1", "v6.0", "MultiStream",
     "early_stopping_latency_ns", 4891380208, "Latency (ms)"),
    # TTFT p99 1.91 s / TPOT p99 96.4 ms against v6.1's Server 2 s / 100 ms for llama3.1-8b; round by the seeds
    (f"{L8B61}/performance/run_1", "v6.1", "Server", "tokens_per_second", 1139.51, "Tokens/s"),
    # an LLM SingleStream: v6.0's RESULT_FIELD_BENCHMARK_OVERWRITE names the 90th percentile latency
    (f"{EDGE60}/performance/run_1", "v6.0", "SingleStream", "latency_p90_ns", 1357552837, "Latency (ms)"),
    (f"{OSS60}/performance/run_1", "v6.0", "Server", "tokens_per_second", 58373.27, "Tokens/s"),
    # only the 90.0th early-stopping estimate (100 queries): "Not enough queries ... for 99.0th percentile"
    (f"{WAN60}/performance/run_1", "v6.0", "SingleStream", "early_stopping_latency_ns", 27384519297, "Latency (s)"),
]  # fmt: skip


@pytest.mark.parametrize(("folder", "round_name", "scenario", "name", "value", "unit"), PERFORMANCE)
def test_published_performance(folder: str, round_name: str, scenario: str, name: str, value: float, unit: str) -> None:
    r = one(PUB / folder)
    assert (r.scenario, r.validity, r.test_mode) == (scenario, "VALID", "PerformanceOnly")
    assert r.headline is not None and (r.headline.name, r.headline.value) == (name, value)
    assert meta(r)["mlperf_round"] == round_name
    assert meta(r)["mlperf_checker_unit"] == unit
    assert not r.failed and r.invalid_reasons == []


# (folder, round, {figure: (value as printed, lower target, upper limit, passed)})
ACCURACY = [
    (f"{NV50}/llama3_1-405b/Offline/accuracy", "v5.0",
     {"exact_match": (90.12750165453342, 90.1335 * 0.99, None, True),
      "ROUGEL": (21.985172700345778, 21.6666 * 0.99, None, True),
      "TOKENS_PER_SAMPLE": (655.9, 684.68 * 0.9, 684.68 * 1.1, True)}),
    (f"{NV50}/stable-diffusion-xl/Offline/accuracy", "v5.0",
     {"CLIP_SCORE": (31.79539393246174, 31.68631873, 31.81331801, True),
      "FID_SCORE": (23.691262382725427, 23.01085758, 23.95007626, True)}),
    # 80.233 against the 99.9 target 80.31 x 0.999 = 80.22969: passes by 0.003
    (f"{GH50}/dlrm-v2-99.9/Server/accuracy", "v5.0", {"AUC": (80.233, 80.31 * 0.999, None, True)}),
    (f"{MANGO50}/accuracy", "v5.0",
     {"ROUGE1": (44.4557, 44.4312 * 0.99, None, True), "ROUGE2": (22.0578, 22.0352 * 0.99, None, True),
      "ROUGEL": (28.672, 28.6162 * 0.99, None, True),
      "TOKENS_PER_SAMPLE": (295.1, 294.45 * 0.9, 294.45 * 1.1, True)}),
    (f"{INTEL50}/retinanet/Server/accuracy", "v5.0", {"mAP": (37.383, 37.55 * 0.99, None, True)}),
    (f"{INTEL50}/3d-unet-99/Offline/accuracy", "v5.0", {"DICE": (0.86175, 0.86170 * 0.99, None, True)}),
    (f"{NV51}/llama3.1-405b/Interactive/accuracy", "v5.1",
     {"exact_match": (90.01325281270684, 90.1335 * 0.99, None, True),
      "ROUGEL": (21.855611082897884, 21.6666 * 0.99, None, True),
      "TOKENS_PER_SAMPLE": (653.3, 684.68 * 0.9, 684.68 * 1.1, True)}),
    (f"{AMD60}/llama2-70b-99.9/Interactive/accuracy", "v6.0",
     {"ROUGE1": (44.5411, 44.4312 * 0.999, None, True), "ROUGE2": (22.1345, 22.0352 * 0.999, None, True),
      "ROUGEL": (28.9133, 28.6162 * 0.999, None, True),
      "TOKENS_PER_SAMPLE": (282.9, 294.45 * 0.9, 294.45 * 1.1, True)}),
    ("v6.0/closed/ASUSTeK/results/ESC8000A_E13P_RTX_PRO_6000_PCIE_96GBx8_TRT/whisper/Offline/accuracy", "v6.0",
     {"ACCURACY": (97.83967947314827, (100 - 2.0671) * 0.99, None, True)}),
    (f"{DELL60}/1-node-2S-GNR_86C/rgat/Offline/accuracy", "v6.0", {"acc": (72.54, 0.7286 * 0.99, None, True)}),
    (f"{DELL60}/Dell_Pro_Max_GB10x1/yolo-99/singlestream/accuracy", "v6.0",
     {"mAP": (53.108, 53.4 * 0.99, None, True)}),
    (f"{DELL60}/Dell_Pro_Max_GB10x1/yolo-95/multistream/accuracy", "v6.0",
     {"mAP": (53.108, 53.4 * 0.95, None, True)}),
    (f"{L8B61}/accuracy", "v6.1",
     {"ROUGE1": (38.6681, 38.7792 * 0.99, None, True), "ROUGE2": (15.9242, 15.9075 * 0.99, None, True),
      "ROUGEL": (24.5144, 24.4957 * 0.99, None, True), "ROUGELSUM": (35.7046, 35.793 * 0.99, None, True),
      "GEN_LEN": (8206137, 8167644 * 0.9, 8167644 * 1.1, True)}),
    # "'exact_match': 83.001" printed for the checker below the evaluator's own report
    (f"{OSS60}/accuracy", "v6.0", {"exact_match": (83.001, 83.13 * 0.99, None, True)}),
    (f"{WAN60}/accuracy", "v6.0", {"vbench_score": (69.98, 70.48 * 0.99, None, True)}),
]  # fmt: skip


@pytest.mark.parametrize(("folder", "round_name", "figures"), ACCURACY)
def test_published_accuracy(
    folder: str, round_name: str, figures: dict[str, tuple[float, float | None, float | None, bool | None]]
) -> None:
    r = one(PUB / folder)
    assert r.test_mode == "AccuracyOnly" and r.accuracy_pass is True and not r.failed
    assert meta(r)["mlperf_round"] == round_name
    found = {c.name: (c.value, c.threshold, c.upper_limit, c.passed) for c in r.accuracy_checks}
    for name, (value, lower, upper, passed) in figures.items():
        got = found[name]
        assert got[0] == value and got[3] is passed, name
        assert got[1] == pytest.approx(lower, rel=1e-12) if lower is not None else got[1] is None, name
        assert got[2] == pytest.approx(upper, rel=1e-12) if upper is not None else got[2] is None, name


def test_v50_llama2_interactive_benchmark_is_judged_by_its_own_token_limits(tmp_path: Path) -> None:
    # v5.0 had Interactive as a benchmark of its own (llama2-70b-interactive-99, Server): TTFT 450 ms, TPOT 40 ms
    src = PUB / NV50 / "llama2-70b-interactive-99/Server/performance/run_1/mlperf_log_summary.txt"
    slow = src.read_text().replace(
        "99.00 percentile first token latency (ns)   : 212337410",
        "99.00 percentile first token latency (ns)   : 460000000",
    )
    assert slow != src.read_text()
    for bench in ("llama2-70b-interactive-99", "llama2-70b-99"):
        run = tmp_path / "v5.0" / "sys" / bench / "Server" / "performance" / "run_1"
        run.mkdir(parents=True)
        (run / "mlperf_log_summary.txt").write_text(slow)
    results = {r.benchmark_full: r for r in collect(tmp_path).results}
    assert results["llama2-70b-99"].validity == "VALID"  # within Server's 2 s
    interactive = results["llama2-70b-interactive-99"]
    assert interactive.validity == "INVALID" and meta(interactive)["loadgen_validity"] == "VALID"
    assert any("TTFT p99 460 ms" in reason and "450 ms" in reason for reason in interactive.invalid_reasons)


def test_v60_compliance_inside_the_scenario_folder_keeps_its_identity() -> None:
    # v6.0 trees file compliance under the scenario: rgat/Offline/compliance/TEST01/verify_performance.txt,
    # next to rgat/Offline/TEST01/{performance/run_1,accuracy} (the compliance run's own logs)
    results = collect(PUB / DELL60 / "1-node-2S-GNR_86C" / "rgat" / "Offline").results
    by_mode = {r.test_mode: r for r in results}
    assert sorted(by_mode) == ["AccuracyOnly", "PerformanceOnly", "TEST01"]  # TEST01's LoadGen log: no result
    test01 = by_mode["TEST01"]
    assert (test01.benchmark_full, test01.scenario, test01.system) == ("rgat", "Offline", "1-node-2S-GNR_86C")
    assert test01.validity == "VALID"
    assert values(test01)["compliance_pass"] == 1.0


def test_v60_summary_mixing_time_per_and_time_to_output_token_lines() -> None:
    # LoadGen 6.0 prints "Min/Max/Mean Time per Output Token" but still "percentile time to output token"
    r = one(PUB / AMD60 / "llama2-70b-99.9/Interactive/performance/run_1")
    got = values(r)
    assert (got["tpot_mean_ns"], got["tpot_min_ns"], got["tpot_max_ns"]) == (34999429, 104083, 56060003)
    assert (got["tpot_p99_ns"], got["ttft_p99_ns"]) == (38889954, 447556635)


def test_whole_mirrored_tree_exits_zero() -> None:
    out = CliRunner().invoke(main(), ["results", str(PUB)])
    assert out.exit_code == 0, out.output
    assert "verdict: OK" in out.output


def test_sources_lists_every_fixture_file() -> None:
    rows = [
        line.split("\t")
        for line in (PUB / "SOURCES").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    present = {p.relative_to(PUB).as_posix() for p in PUB.rglob("*") if p.is_file() and p.name != "SOURCES"}
    assert {row[0] for row in rows} == present
    for local, repository, path, commit in rows:
        assert local.split("/", 1)[1] == path and repository.endswith(local.split("/")[0]) and len(commit) == 40


def test_open_division_accuracy_below_the_closed_targets_is_taken_as_the_checker_takes_it(tmp_path: Path) -> None:
    # llama3.1-8b-edge (open, Jetson Thor): ROUGE1 38.3796 < 39.06 x 0.99 ... ; the checker of every round logs
    # "accuracy not valid but taken for open" and accepts it; in the closed division the same file fails
    r = one(PUB / EDGE60 / "accuracy")
    assert r.accuracy_pass is True and not r.failed and r.invalid_reasons == []
    figures = {c.name: (c.value, c.passed) for c in r.accuracy_checks}
    assert figures["ROUGE1"] == (38.3796, False) and figures["ROUGELSUM"] == (35.5168, False)
    assert figures["GEN_LEN"] == (3112369, True)
    assert any("open division" in n and "ROUGE1 = 38.3796 is below the threshold 38.6694" in n for n in r.notes)
    closed = tmp_path / "closed" / "NVIDIA" / "results" / "Jetson-Thor" / "llama3.1-8b-edge" / "SingleStream"
    (closed / "accuracy").mkdir(parents=True)
    (closed / "accuracy" / "accuracy.txt").write_bytes((PUB / EDGE60 / "accuracy" / "accuracy.txt").read_bytes())
    c = one(closed / "accuracy")
    assert c.accuracy_pass is False and c.failed
    assert "accuracy ROUGE1 = 38.3796 is below the threshold 38.6694" in c.invalid_reasons
    out = CliRunner().invoke(main(), ["results", str(tmp_path)])
    assert out.exit_code == 6, out.output


def test_v60_test04_inside_the_scenario_folder() -> None:
    results = {r.test_mode: r for r in collect(PUB / WAN60).results}
    assert sorted(results) == ["AccuracyOnly", "PerformanceOnly", "TEST04"]
    test04 = results["TEST04"]
    assert (test04.benchmark_full, test04.scenario, test04.validity) == ("wan-2.2-t2v-a14b", "SingleStream", "VALID")


def test_v51_test01_verify_accuracy_fail_passes_by_the_baseline_compliance_delta() -> None:
    # ASUSTeK dlrm-v2-99.9 Server TEST01: verify_accuracy.txt says TEST FAIL (84 perf-log data mismatches),
    # the checker then compares baseline and compliance AUC (80.393 both): within 0.1 % for a 99.9 benchmark
    test01 = PUB / "v5.1/closed/ASUSTeK/compliance/ESC8000_H200_NVLx8_TRT/dlrm-v2-99.9/Server/TEST01"
    assert "TEST FAIL" in (test01 / "verify_accuracy.txt").read_text()
    r = one(test01.parent)
    assert (r.benchmark_full, r.scenario, r.test_mode, r.validity) == ("dlrm-v2-99.9", "Server", "TEST01", "VALID")
    got = values(r)
    assert got["compliance_pass"] == 1.0 and got["compliance_accuracy_pass"] == 1.0
    # "Reference score = 330555.0" (capitalised in TEST01's verify_performance.txt) is read as well
    assert (got["compliance_reference_score"], got["compliance_test_score"]) == (330555.0, 304108.0)


def test_hash_only_compliance_folder_is_no_result_and_no_issue() -> None:
    # Cisco llama3_1-405b TEST06/accuracy/accuracy.txt holds only the hash of the accuracy log
    folder = PUB / "v5.1/closed/Cisco/compliance/HGX-H100_H100-SXM-80GBx16_TRT/llama3_1-405b/Offline"
    collection = collect(folder)
    assert collection.results == [] and collection.issues == []


def test_v60_test01_with_verify_files_directly_in_the_scenario_folder() -> None:
    results = {r.test_mode: r for r in collect(PUB / DELL60 / "Dell_Pro_Max_GB10x1/yolo-95/multistream").results}
    assert sorted(results) == ["AccuracyOnly", "PerformanceOnly", "TEST01"]
    test01 = results["TEST01"]
    assert (test01.benchmark_full, test01.scenario, test01.validity) == ("yolo-95", "MultiStream", "VALID")
    got = values(test01)
    assert (got["compliance_accuracy_pass"], got["compliance_performance_pass"]) == (1.0, 1.0)
    assert got["compliance_test_score"] == 4897747008.0


def test_open_division_test_submission_gptj_reference_run() -> None:
    # MLCommons' own v5.0 test submission (open, one sample): v4.1's seeds, so judged by v4.1's rules; the
    # headline is the inferred tokens/s (gptj's official metric since v4.1); ROUGE far below the closed
    # targets, taken for open
    folder = (
        Path(__file__).parent
        / "fixtures"
        / "results"
        / "published"
        / ("v5.0/open/MLCommons/results/gh_action-reference-gpu-pytorch_v2.5.1-cu124/gptj-99/offline")
    )
    results = {r.test_mode: r for r in collect(folder).results}
    perf = results["PerformanceOnly"]
    assert perf.headline is not None
    assert (perf.headline.name, perf.headline.value) == ("inferred_tokens_per_second", 48.1652)
    assert (meta(perf)["mlperf_round"], meta(perf)["mlperf_checker_unit"], perf.validity) == (
        "v4.1",
        "Tokens/s",
        "VALID",
    )
    acc = results["AccuracyOnly"]
    assert acc.accuracy_pass is True and not acc.failed
    figures = {c.name: (c.value, c.passed) for c in acc.accuracy_checks}
    assert figures["ROUGE1"] == (32.2581, False) and figures["GEN_LEN"] == (264, False)


def test_v61_result_found_by_its_seeds_and_judged_by_the_v61_table() -> None:
    # Intel's v6.1 e2e-rag-qna: no detail log, path aside only the summary's seeds name the round; the checker's
    # v6.1 table (MODEL_CONFIG["v6.1"]) knows e2e-rag-qna: Offline headline result_samples_per_second in Tasks/s
    r = one(PUB / "v6.1/closed/Intel/results/1-node-2S-Xeon_6787P/e2e-rag-qna/Offline/performance/run_1")
    assert r.headline is not None and (r.headline.name, r.headline.value) == ("samples_per_second", 0.464076)
    assert (r.validity, r.failed) == ("VALID", False)
    assert meta(r)["mlperf_round_from"] == "qsl_rng_seed 2085463073848966840 (the v6.1 seed)"
    assert (meta(r)["mlperf_benchmark"], meta(r)["mlperf_checker_unit"]) == ("e2e-rag-qna", "Tasks/s")
    assert not any("is unknown to every MLPerf Inference round" in n for n in r.notes)


def test_the_seeds_name_the_round_before_a_lagging_loadgen_version() -> None:
    # v6.1 results were run with LoadGen 6.0.x carrying v6.1's seeds: the seeds are what the checker requires
    assert detect_round(loadgen_version="6.0.17 @ a468775ea2", qsl_rng_seed=2085463073848966840)[0] == "v6.1"
    assert detect_round(loadgen_version="6.0.17 @ a468775ea2")[0] == "v6.0"
    assert detect_round(loadgen_version="6.0.17 @ a468775ea2", qsl_rng_seed=12345)[0] == "v6.0"  # unknown seed


def test_v61_llama31_8b_server_tpot_over_the_limit_is_rejected(tmp_path: Path) -> None:
    src = PUB / L8B61 / "performance/run_1/mlperf_log_summary.txt"
    slow = src.read_text().replace(
        "99.00 percentile time to output token (ns)   : 96363771",
        "99.00 percentile time to output token (ns)   : 101000000",
    )
    run = tmp_path / "v6.1" / "closed" / "X" / "results" / "sys" / "llama3_1-8b" / "Server" / "performance" / "run_1"
    run.mkdir(parents=True)
    (run / "mlperf_log_summary.txt").write_text(slow)
    r = one(tmp_path)
    assert r.validity == "INVALID" and r.failed
    assert any("TPOT p99 101 ms" in reason and "100 ms" in reason for reason in r.invalid_reasons)


def test_v60_test09_output_length_verdict_in_the_scenario_folder() -> None:
    r = one(PUB / "v6.0/closed/AMD/results/8xMI355X_2xEPYC_9575F/gpt-oss-120b/Server/TEST09")
    assert (r.benchmark_full, r.scenario, r.test_mode, r.validity) == ("gpt-oss-120b", "Server", "TEST09", "VALID")
    assert values(r) == {"compliance_pass": 1.0, "compliance_output_len_pass": 1.0}


def test_a_test_folder_given_directly_is_read_as_what_it_holds() -> None:
    # rgat/Offline/compliance/TEST01 holds the verify file; rgat/Offline/TEST01 only the compliance run's logs,
    # which are then its result (issue 31: they were "no MLPerf results found")
    offline = PUB / DELL60 / "1-node-2S-GNR_86C" / "rgat" / "Offline"
    verdict = one(offline / "compliance" / "TEST01")
    assert (verdict.test_mode, verdict.validity, verdict.benchmark_full) == ("TEST01", "VALID", "rgat")
    run = one(offline / "TEST01")
    assert (run.test_mode, run.validity, run.benchmark_full, run.scenario) == (
        "PerformanceOnly",
        "VALID",
        "rgat",
        "Offline",
    )
    assert run.headline is not None and run.headline.metadata["run_kind"] == "TEST01"
