"""Golden tests on real published MLPerf Inference result files (tests/fixtures/results/published, see SOURCES).

Every value is asserted exactly as the file prints it; targets are the submission checker's own
products (``76.46 * 0.99``), as :mod:`workload.metrics.rules` keeps them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workload.cli.results_cmd import results_command
from workload.metrics.collection import collect
from workload.metrics.model import BenchmarkResult

PUB = Path(__file__).parent / "fixtures" / "results" / "published"


def main() -> click.Group:
    group = click.Group("workload")
    group.add_command(results_command)
    return group


def one(path: Path) -> BenchmarkResult:
    collection = collect(path)
    assert collection.issues == []
    assert len(collection.results) == 1, [r.source for r in collection.results]
    return collection.results[0]


def meta(result: BenchmarkResult) -> dict[str, object]:
    return dict(result.metrics[0].metadata)


def checks(result: BenchmarkResult) -> dict[str, tuple[float | None, float | None, float | None, bool | None]]:
    return {c.name: (c.value, c.threshold, c.upper_limit, c.passed) for c in result.accuracy_checks}


# (folder under published/, round, scenario, headline name, headline value as printed, validity)
PERFORMANCE = [
    ("v3.1/closed/ASUSTeK/results/ESC4000A_E12_L4x8_TRT/rnnt/Server/performance/run_1",
     "v3.1", "Server", "scheduled_samples_per_second", 30512.68, "VALID"),
    ("v3.1/closed/GigaComputing/results/GIGABYTE-G593-SD0_H100-SXM-80GBx8_TRT/resnet50/Offline/performance/run_1",
     "v3.1", "Offline", "samples_per_second", 706531, "VALID"),
    ("v3.1/closed/Supermicro/results/SYS_821GE_TNHR_H100_SXM_80GBx8_TRT/dlrm-v2-99/Server/performance/run_1",
     "v3.1", "Server", "scheduled_samples_per_second", 327051.07, "VALID"),
    ("v4.0/closed/Dell/results/XR7620_L4x1_TRT/retinanet/MultiStream/performance/run_1",
     "v4.0", "MultiStream", "early_stopping_latency_ns", 40480256, "VALID"),
    ("v4.0/closed/Fujitsu/results/GX2560M7_H100_SXM_80GBx4_TRT/gptj-99/Server/performance/run_1",
     "v4.0", "Server", "scheduled_samples_per_second", 85.91, "VALID"),
    ("v4.0/closed/Wiwynn/results/ES200G2_L40Sx2_TRT/3d-unet-99/SingleStream/performance/run_1",
     "v4.0", "SingleStream", "early_stopping_latency_ns", 497711153, "VALID"),
    ("v4.1/closed/Cisco/results/C240M7_L40Sx2_TRT/resnet50/Server/performance/run_1",
     "v4.1", "Server", "samples_per_second", 91209.12, "VALID"),
    ("v4.1/closed/Lenovo/results/Lenovo_2xL4_TRT/resnet50/SingleStream/performance/run_1",
     "v4.1", "SingleStream", "early_stopping_latency_ns", 386829, "VALID"),
    ("v4.0/closed/Qualcomm/results/g293_q16_ultra_pp/bert-99/server/performance/run_1",
     "v4.0", "Server", "scheduled_samples_per_second", 27694.89, "VALID"),
    ("v4.1/closed/Intel/results/1-node-2S-EMR-PyTorch/gptj-99/Server/performance/run_1",
     "v4.1", "Server", "inferred_tokens_per_second", 113.74, "VALID"),
    ("v4.1/closed/Oracle/results/GH200-GraceHopper-Superchip_GH200-96GB_aarch64x1_TRT/gptj-99.9/Offline/performance/run_1",
     "v4.1", "Offline", "inferred_tokens_per_second", 2695.15, "VALID"),
    ("v4.1/closed/Google/results/DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99/Server/performance/run_1",
     "v4.1", "Server", "tokens_per_second", 21588.35, "VALID"),
    ("v4.1/closed/AMD/results/8xMI300X_2xEPYC-9374F/llama2-70b-99/Server/performance/run_1",
     "v4.1", "Server", "tokens_per_second", 21028.23, "VALID"),
    ("v4.1/closed/RedHat/results/L40S-RedHat-OpenShift/llama2-70b-99.9/Offline/performance/run_1",
     "v4.1", "Offline", "tokens_per_second", 1717.77, "VALID"),
    ("v4.1/closed/Google/results/tpu_v6_x4_flax/stable-diffusion-xl/server/performance/run_1",
     "v4.1", "Server", "samples_per_second", 4.49, "VALID"),
    ("v4.1/closed/UntetherAI/results/h13_u3_slim/resnet50/singlestream/performance/run_1",
     "v4.1", "SingleStream", "early_stopping_latency_ns", 120438, "VALID"),
    ("v4.1/closed/UntetherAI/results/h13_u3_slim/resnet50/multistream/performance/run_1",
     "v4.1", "MultiStream", "early_stopping_latency_ns", 212477, "VALID"),
    # a v5.0 test submission run with v4.1's seeds: judged by v4.1 (completed samples, not the scheduled headline)
    ("v5.0/closed/MLCommons/results/gh_ubuntu_x86-nvidia-gpu-TensorRT-default_config/resnet50/server/performance/run_1",
     "v4.1", "Server", "samples_per_second", 73015.26, "VALID"),
    ("v5.0/open/Community/results/default-reference-cpu-tvm-onnx_v1.19.2-default_config/resnet50/offline/performance/run_1",
     "v5.0", "Offline", "samples_per_second", 1.6996, "VALID"),
    ("v5.1/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99/Interactive/performance/run_1",
     "v5.1", "Interactive", "tokens_per_second", 8840.42, "VALID"),
    ("v6.0/open/MLCommons/results/gh_macos-latest_x86-reference-cpu-onnxruntime_v1.25.0-default_config/resnet50/offline/performance/run_1",
     "v6.0", "Offline", "samples_per_second", 22.191, "VALID"),
]  # fmt: skip


@pytest.mark.parametrize(("folder", "round_name", "scenario", "name", "value", "validity"), PERFORMANCE)
def test_published_performance_headline_round_and_validity(
    folder: str, round_name: str, scenario: str, name: str, value: float, validity: str
) -> None:
    r = one(PUB / folder)
    assert (r.scenario, r.validity, r.test_mode) == (scenario, validity, "PerformanceOnly")
    assert r.headline is not None and (r.headline.name, r.headline.value) == (name, value)
    assert meta(r)["mlperf_round"] == round_name
    assert not r.failed and r.invalid_reasons == []
    # the unit MLCommons reports the headline in (the checker's UNIT_DICT / SPECIAL_UNIT_DICT)
    unit = meta(r)["mlperf_checker_unit"]
    if name == "early_stopping_latency_ns":
        assert unit == "Latency (ms)"
    elif name == "tokens_per_second":
        assert unit == "Tokens/s"
    elif scenario == "Offline" and name == "samples_per_second":
        assert unit == "Samples/s"


# (folder, round, {figure: (value as printed, lower target, upper limit, passed)})
ACCURACY = [
    ("v3.1/closed/ASUSTeK/results/ESC4000A_E12_L4x8_TRT/rnnt/Offline/accuracy", "v3.1",
     {"WER": (92.55225596969493, (100 - 7.452) * 0.99, None, True)}),
    ("v3.1/closed/HPE/results/HPE_ProLiant_DL320_Gen11_L4x4_TRT/resnet50/Offline/accuracy", "v3.1",
     {"acc": (76.078, 76.46 * 0.99, None, True)}),
    ("v3.1/closed/Quanta_Cloud_Technology/results/D54U_3U_H100_PCIe_80GBx4_TRT/bert-99/Offline/accuracy", "v3.1",
     {"F1": (90.35676151551918, 90.874 * 0.99, None, True), "exact_match": (82.92336802270577, None, None, None)}),
    ("v4.0/closed/Dell/results/XR7620_L4x1_TRT/retinanet/MultiStream/accuracy", "v4.0",
     {"mAP": (37.413, 37.55 * 0.99, None, True)}),
    ("v4.0/closed/Wiwynn/results/ES200G2_L40Sx2_TRT/3d-unet-99/SingleStream/accuracy", "v4.0",
     {"DICE": (0.86236, 0.86170 * 0.99, None, True)}),
    ("v4.1/closed/Cisco/results/C240M7_L40Sx2_TRT/bert-99/Offline/accuracy", "v4.1",
     {"F1": (90.23535730698143, 90.874 * 0.99, None, True)}),
    # the checker compares the printed number with rgat's target as a fraction (0.7286 x 0.99), as this does
    ("v6.0/open/Lattix/results/DynamoNPU/rgat/offline/accuracy", "v6.0",
     {"acc": (71.094, 0.7286 * 0.99, None, True)}),
    ("v4.1/closed/Intel/results/1-node-2S-EMR-PyTorch/resnet50/Offline/accuracy", "v4.1",
     {"acc": (75.730, 76.46 * 0.99, None, True)}),
    ("v4.1/closed/Intel/results/1-node-2S-EMR-PyTorch/retinanet/Offline/accuracy", "v4.1",
     {"mAP": (37.357, 37.55 * 0.99, None, True)}),
    ("v4.1/closed/Intel/results/1-node-2S-EMR-PyTorch/dlrm-v2-99/Offline/accuracy", "v4.1",
     {"AUC": (80.24119408703937, 80.31 * 0.99, None, True)}),
    ("v4.1/closed/Intel/results/1-node-2S-EMR-PyTorch/gptj-99/Offline/accuracy", "v4.1",
     {"ROUGE1": (43.0704, 42.9865 * 0.99, None, True), "ROUGE2": (20.1637, 20.1235 * 0.99, None, True),
      "ROUGEL": (29.9748, 29.9881 * 0.99, None, True), "GEN_LEN": (4103762, 4016878 * 0.9, None, True),
      "ROUGELSUM": (40.2514, None, None, None)}),
    ("v4.1/closed/Google/results/tpu_v6_x4_flax/stable-diffusion-xl/offline/accuracy", "v4.1",
     {"CLIP_SCORE": (31.738648088574408, 31.68631873, 31.81331801, True),
      "FID_SCORE": (23.499357657650307, 23.01085758, 23.95007626, True)}),
    ("v4.1/closed/Google/results/DGX-H100_H100-SXM-80GBx8_TRT/mixtral-8x7b/Offline/accuracy", "v4.1",
     {"ROUGE1": (45.3671, 45.4911 * 0.99, None, True), "gsm8k_accuracy": (73.1, 73.78 * 0.99, None, True),
      "mbxp_accuracy": (59.88, 60.12 * 0.99, None, True),
      "TOKENS_PER_SAMPLE": (145.9, 145.9 * 0.9, 145.9 * 1.1, True)}),
    ("v4.0/closed/Qualcomm/results/g293_q16_ultra_pp/bert-99/offline/accuracy", "v4.0",
     {"F1": (90.28408874066913, 90.874 * 0.99, None, True), "exact_match": (82.88552507095554, None, None, None)}),
    ("v5.1/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99.9/Interactive/accuracy", "v5.1",
     {"ROUGE1": (44.4542, 44.4312 * 0.999, None, True), "ROUGEL": (28.6112, 28.6162 * 0.999, None, True),
      "TOKENS_PER_SAMPLE": (301.1, 294.45 * 0.9, 294.45 * 1.1, True)}),
    ("v6.0/open/MLCommons/results/gh_macos-latest_x86-reference-cpu-onnxruntime_v1.25.0-default_config/resnet50/offline/accuracy",
     "v6.0", {"acc": (76.000, 76.46 * 0.99, None, True)}),
]  # fmt: skip


@pytest.mark.parametrize(("folder", "round_name", "figures"), ACCURACY)
def test_published_accuracy_txt_alone_gives_a_judged_result(
    folder: str, round_name: str, figures: dict[str, tuple[float, float | None, float | None, bool | None]]
) -> None:
    r = one(PUB / folder)
    assert r.test_mode == "AccuracyOnly" and r.accuracy_pass is True and not r.failed
    assert meta(r)["mlperf_round"] == round_name
    found = checks(r)
    for name, expected in figures.items():
        assert found[name] == expected, name


def test_interactive_is_kept_apart_from_server_with_its_own_limits(tmp_path: Path) -> None:
    src = PUB / "v5.1/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99/Interactive/performance/run_1"
    text = (src / "mlperf_log_summary.txt").read_text()
    # the same run filed under Server and under Interactive: two results, each judged by its scenario
    for scenario in ("Server", "Interactive"):
        target = tmp_path / "sys" / "llama2-70b-99" / scenario / "performance" / "run_1"
        target.mkdir(parents=True)
        (target / "mlperf_log_summary.txt").write_text(text)
    results = {r.scenario: r for r in collect(tmp_path).results}
    assert set(results) == {"Server", "Interactive"}
    assert all(r.validity == "VALID" for r in results.values())  # TTFT p99 436 ms, TPOT p99 39.5 ms
    # a TTFT p99 of 460 ms is within Server's 2 s but over Interactive's 450 ms (v5.1 LLM_LATENCY_LIMITS)
    slow = text.replace(
        "99.00 percentile first token latency (ns)   : 435976100",
        "99.00 percentile first token latency (ns)   : 460000000",
    )
    for scenario in ("Server", "Interactive"):
        (tmp_path / "sys" / "llama2-70b-99" / scenario / "performance" / "run_1" / "mlperf_log_summary.txt").write_text(
            slow
        )
    results = {r.scenario: r for r in collect(tmp_path).results}
    assert results["Server"].validity == "VALID"
    interactive = results["Interactive"]
    assert interactive.validity == "INVALID" and interactive.failed
    assert meta(interactive)["loadgen_validity"] == "VALID"
    assert interactive.invalid_reasons == [
        "LoadGen says VALID, but the v5.1 submission checker rejects it: TTFT p99 460 ms exceeds v5.1's "
        "Interactive limit 450 ms for llama2-70b-99"
    ]


def test_round_override_changes_the_rules(tmp_path: Path) -> None:
    # the mixtral accuracy of v4.1 judged by v5.0's targets (gsm8k 73.66 x 0.99, tokens/sample 144.84 x 0.9)
    src = PUB / "v4.1/closed/Google/results/DGX-H100_H100-SXM-80GBx8_TRT/mixtral-8x7b/Offline/accuracy"
    target = tmp_path / "sys" / "mixtral-8x7b" / "Offline" / "accuracy"
    shutil.copytree(src, target)
    runner = CliRunner()
    out = runner.invoke(main(), ["results", str(tmp_path), "--round", "v5.0", "--json"])
    assert out.exit_code == 0, out.output
    assert '"mlperf_round":"v5.0"' in out.stdout.replace(" ", "")
    bad = runner.invoke(main(), ["results", str(tmp_path), "--round", "v2.1"])
    assert bad.exit_code == 2 and "unknown MLPerf Inference round 'v2.1'" in bad.output


def test_whole_published_tree_exits_zero() -> None:
    out = CliRunner().invoke(main(), ["results", str(PUB)])
    assert out.exit_code == 0, out.output
    assert "verdict: OK" in out.output


def test_sources_lists_every_fixture_file_from_many_submitters() -> None:
    rows = [
        line.split("\t")
        for line in (PUB / "SOURCES").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    listed = {row[0] for row in rows}
    present = {p.relative_to(PUB).as_posix() for p in PUB.rglob("*") if p.is_file() and p.name != "SOURCES"}
    assert listed == present
    for _, repository, path, commit in rows:
        assert repository.startswith("mlcommons/") and path and len(commit) == 40
    submitters = {row[0].split("/")[2] for row in rows}
    assert len(submitters) >= 20, submitters


def test_loadgen_6_time_per_output_token_lines_read_like_time_to_output_token(tmp_path: Path) -> None:
    src = PUB / "v5.1/closed/AMD/results/8xMI300X_2xEPYC_9575F/llama2-70b-99/Interactive/performance/run_1"
    text = (src / "mlperf_log_summary.txt").read_text()
    renamed = text.replace("Time to Output Token", "Time per Output Token").replace(
        "time to output token", "time per output token"
    )
    assert renamed != text
    values = {}
    for name, content in (("old", text), ("new", renamed)):
        folder = tmp_path / name / "llama2-70b-99" / "Interactive" / "performance" / "run_1"
        folder.mkdir(parents=True)
        (folder / "mlperf_log_summary.txt").write_text(content)
        values[name] = {m.name: m.value for m in one(tmp_path / name).metrics}
    assert values["new"] == values["old"]
    assert values["new"]["tpot_p99_ns"] == 39507635 and values["new"]["tpot_mean_ns"] == 32102490
