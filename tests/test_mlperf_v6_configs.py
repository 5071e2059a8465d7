"""NVIDIA's published v6.0 / v6.1 values reach an unknown machine with the same GPUs, in the round's own format.

The expectation tables below are written by hand from NVIDIA's files (sources per row); the project's values come
from ``gpuconfigs/v6.0`` (round-aware table) and ``gpuconfigs/v6.1`` (per-file parts). The generated files are then
fed to the rounds' stand-in harnesses (tests/fixtures/harness/rounds/, real Python, no Docker): the harness accepts
them, detects the custom system, and runs with NVIDIA's values.

Sources:
- v6.0, the public fork ``gbeezybez/inference_results_v6.0`` @ ``ab33b214`` (NVIDIA's ``closed/NVIDIA/configs``):
  every single-node config file the index holds, each row naming its file (``EXPECTED_V60``; the values are the
  dict ``EXPORTS`` maps ``WorkloadSetting(Custom, AccuracyTarget(0.99|0.999), MaxP)`` to, NVIDIA's expressions such
  as ``4638 * 3`` written as NVIDIA wrote them). ``GB200...x4/Server/llama2-70b.py`` is a harness-only config (188
  QPS, no engine values) that NVIDIA's scaleout runs over servers of the x1 file (``run_scaleout.sh --atomic-system
  ...x1``; harness system = atomic system x DP ranks): its row names both. Which files are single-node, and why the
  others are not used: tests/test_mlperf_v60_coverage.py.
- v6.1, the public fork ``intel-ai-tce/inference_results_v6.1`` @ ``5174fca8``:
  ``configs/gpt_oss_120b/B200-SXM-180GBx8/TRTLLM/Offline/trtllm-serve-ifb-1gpu.yaml`` (max_batch_size 896,
  max_num_tokens 13914, max_seq_len 35840, kv_cache_config fp8 / 0.95), ``configs/llama2_70b/B300-SXM-270GBx8/
  TRTLLM/Offline/server-topology.json`` (dp_multiplicity 8, gpus_per_dp_rank 1), ``configs/llama2_70b/
  GB300-NVL72_GB300-288GB_aarch64x8/TRTLLM/Offline/harness.py`` (440 QPS, min_query_count 49152).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_round import make_round_tree
from workload.errors import ProfileError
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.gpuconfigs_v61 import load_table61
from workload.mlperf.system import HostSystem
from workload.mlperf.v6_systems import NotTuned, v60_files, v61_files

B200, B300, GB200, GB300, H200 = "NVIDIA B200", "NVIDIA B300 SXM6 AC", "NVIDIA GB200", "NVIDIA GB300", "NVIDIA H200"
GB2, GB3 = "GB200-NVL72_GB200-186GB_aarch64", "GB300-NVL72_GB300-288GB_aarch64"

# (GPU, count, benchmark file stem, scenario, accuracy, NVIDIA's files under closed/NVIDIA/configs/ (the count's
# own first, then the servers' config a harness-only file runs over), NVIDIA's values (field by field; dicts: subset))
EXPECTED_V60: list[tuple[str, int, str, str, str, tuple[str, ...], dict[str, Any]]] = [
    (
        B200,
        1,
        "llama2-70b",
        "Interactive",
        "k_99",
        ("B200-SXM-180GBx1/Interactive/llama2-70b.py",),
        {
            "gpu_batch_size": {"llama2-70b": 768},
            "server_target_qps": 26,
            "min_duration": 1200000,
            "precision": "fp4",
            "tensor_parallelism": 1,
            "trtllm_build_flags": {"max_num_tokens": 768, "gemm_plugin": "fp4"},
            "trtllm_runtime_flags": {"max_num_tokens": 768, "kvcache_free_gpu_mem_frac": 0.95},
        },
    ),
    (
        B200,
        1,
        "llama2-70b",
        "Interactive",
        "k_99_9",
        ("B200-SXM-180GBx1/Interactive/llama2-70b.py",),
        {"server_target_qps": 26, "gpu_batch_size": {"llama2-70b": 768}},
    ),
    (
        B200,
        4,
        "llama3_1-405b",
        "Offline",
        "k_99",
        ("B200-SXM-180GBx4/Offline/llama3_1-405b.py",),
        {
            "offline_expected_qps": 1.09,
            "tensor_parallelism": 2,
            "pipeline_parallelism": 2,
            "min_duration": 600000,
            "gpu_batch_size": {"llama3.1-405b": 2048},
            "trtllm_build_flags": {"max_num_tokens": 5120, "max_seq_len": 22000},
            "trtllm_runtime_flags": {"max_num_tokens": 1536},
        },
    ),
    (
        B200,
        4,
        "llama3_1-405b",
        "Server",
        "k_99",
        ("B200-SXM-180GBx4/Server/llama3_1-405b.py",),
        {"server_target_qps": 0.65, "trtllm_build_flags": {"max_num_tokens": 1024}, "tensor_parallelism": 2},
    ),
    (
        B200,
        4,
        "gpt-oss-120b",
        "Server",
        "k_99",
        ("B200-SXM-180GBx4/Server/gpt-oss-120b.py",),
        {
            "server_target_qps": 9,
            "tensor_parallelism": 4,
            "moe_expert_parallelism": 4,
            "min_query_count": 25584,
            "gpu_batch_size": {"gpt-oss-120b": 1024},
            "use_graphs": True,
            "trtllm_runtime_flags": {
                "max_concurrency": 1024,
                "moe_backend": "TRTLLM",
                "kvcache_free_gpu_mem_frac": 0.9,
            },
        },
    ),
    (
        B300,
        2,
        "llama3_1-405b",
        "Offline",
        "k_99",
        ("B300-SXM-270GBx2/Offline/llama3_1-405b.py",),
        {
            "offline_expected_qps": 0.75,
            "tensor_parallelism": 2,
            "pipeline_parallelism": 1,
            "min_query_count": 8313,
            "readiness_timeout": 900,
            "trtllm_build_flags": {"torch_compile_config": {"enable_userbuffers": False}},
        },
    ),
    (
        B300,
        8,
        "deepseek-r1",
        "Server",
        "k_99",
        ("B300-SXM-270GBx8/Server/deepseek-r1.py",),
        {
            "server_target_qps": 9.5,
            "gpu_batch_size": {"deepseek-r1": 640},
            "tensor_parallelism": 8,
            "moe_expert_parallelism": 8,
            "min_query_count": 105312,
            "use_graphs": True,
            "trtllm_build_flags": {"max_seq_len": 3140 + 32 * 1024, "enable_attention_dp": True},
            "trtllm_runtime_flags": {
                "moe_backend": "CUTEDSL",
                "max_concurrency": 10240,
                "enable_chunked_context": False,
            },
        },
    ),
    (
        GB200,
        1,
        "llama2-70b",
        "Offline",
        "k_99",
        (f"{GB2}x1/Offline/llama2-70b.py",),
        {
            "offline_expected_qps": 49,
            "gpu_batch_size": {"llama2-70b": 2048},
            "min_duration": 2400000,
            "traffic_distribution_policy": "isl_load_balancing",
            "vboost_slider": 1,
            "trtllm_runtime_flags": {"max_concurrency": 2048, "stream_interval": 50},
        },
    ),
    (
        GB200,
        1,
        "llama2-70b",
        "Server",
        "k_99",
        (f"{GB2}x1/Server/llama2-70b.py",),
        {"server_target_qps": 49, "harness_use_hf_tokenizer": True},
    ),
    (
        GB200,
        4,
        "llama2-70b",
        "Server",
        "k_99",
        (f"{GB2}x4/Server/llama2-70b.py", f"{GB2}x1/Server/llama2-70b.py"),
        {
            # the x4 file (harness_config) ...
            "server_target_qps": 188,
            "min_duration": 2400000,
            "traffic_distribution_policy": "isl_load_balancing",
            "trtllm_runtime_flags": {"max_concurrency": 2048, "num_postprocess_workers": 4},
            # ... over the servers' x1 file (scaleout's atomic system)
            "gpu_batch_size": {"llama2-70b": 2048},
            "tensor_parallelism": 1,
            "trtllm_build_flags": {"max_num_tokens": 3584},
        },
    ),
    (
        GB200,
        1,
        "llama2-70b",
        "Interactive",
        "k_99",
        (f"{GB2}x1/Interactive/llama2-70b.py",),
        {
            "server_target_qps": 310,
            "gpu_batch_size": {"llama2-70b": 4096},
            "trtllm_runtime_flags": {"kvcache_free_gpu_mem_frac": 0.85, "cache_transceiver_backend": "UCX"},
        },
    ),
    (
        GB200,
        1,
        "llama3_1-8b",
        "Offline",
        "k_99",
        (f"{GB2}x1/Offline/llama3_1-8b.py",),
        {"offline_expected_qps": 83.0, "gpu_batch_size": {"llama3_1-8b": 2048}},
    ),
    (
        GB200,
        1,
        "llama3_1-8b",
        "Server",
        "k_99",
        (f"{GB2}x1/Server/llama3_1-8b.py",),
        {"server_target_qps": 14.28, "trtllm_runtime_flags": {"kvcache_free_gpu_mem_frac": 0.9}},
    ),
    (
        GB200,
        1,
        "gpt-oss-120b",
        "Offline",
        "k_99",
        (f"{GB2}x1/Offline/gpt-oss-120b.py",),
        {
            "offline_expected_qps": 10,
            "gpu_batch_size": {"gpt-oss-120b": 128 * 4},
            "min_query_count": 6396,
            "moe_expert_parallelism": 1,
            "trtllm_build_flags": {"max_num_tokens": 4638 * 3, "max_seq_len": 15536 + 10240},
            "trtllm_runtime_flags": {"kvcache_free_gpu_mem_frac": 0.98, "max_concurrency": 512 + 1024},
        },
    ),
    (
        GB200,
        1,
        "gpt-oss-120b",
        "Interactive",
        "k_99",
        (f"{GB2}x1/Interactive/gpt-oss-120b.py",),
        {
            "server_target_qps": 24,
            "warmup_iterations": 5,
            "trtllm_runtime_flags": {"max_num_tokens": 4638 * 10, "cache_transceiver_max_tokens": 15536 + 10240 + 16},
        },
    ),
    (
        GB200,
        4,
        "gpt-oss-120b",
        "Interactive",
        "k_99",
        (f"{GB2}x4/Interactive/gpt-oss-120b.py",),
        {
            "server_target_qps": 38,
            "tensor_parallelism": 4,
            "moe_expert_parallelism": 4,
            "gpu_batch_size": {"gpt-oss-120b": 192},
            "min_query_count": 6396 * 4,
            "trtllm_build_flags": {"enable_attention_dp": True},
            "trtllm_runtime_flags": {"max_concurrency": 256 + 1024},
        },
    ),
    (
        GB200,
        4,
        "llama3_1-405b",
        "Offline",
        "k_99",
        (f"{GB2}x4/Offline/llama3_1-405b.py",),
        {
            "offline_expected_qps": 1.17,
            "tensor_parallelism": 1,
            "pipeline_parallelism": 4,
            "gpu_batch_size": {"llama3.1-405b": 64},
            "trtllm_build_flags": {"max_num_tokens": 512, "gemm_allreduce_plugin": "float16"},
            "trtllm_runtime_flags": {"num_postprocess_workers": 2},
        },
    ),
    (
        GB200,
        4,
        "llama3_1-405b",
        "Server",
        "k_99",
        (f"{GB2}x4/Server/llama3_1-405b.py",),
        {
            "server_target_qps": 1.1,
            "tensor_parallelism": 2,
            "pipeline_parallelism": 2,
            "gpu_batch_size": {"llama3.1-405b": 256},
            "trtllm_build_flags": {"max_num_tokens": 1536},
            "readiness_timeout": 600,
        },
    ),
    (
        GB200,
        4,
        "llama3_1-405b",
        "Interactive",
        "k_99",
        (f"{GB2}x4/Interactive/llama3_1-405b.py",),
        {
            "server_target_qps": 17.7,
            "tensor_parallelism": 4,
            "min_query_count": 49878,
            "gpu_batch_size": {"llama3.1-405b": 128},
            "trtllm_runtime_flags": {"cache_transceiver_backend": "UCX", "max_concurrency": 2048},
        },
    ),
    (
        GB300,
        1,
        "llama2-70b",
        "Offline",
        "k_99",
        (f"{GB3}x1/Offline/llama2-70b.py",),
        {
            "offline_expected_qps": 60,
            "gpu_batch_size": {"llama2-70b": 3072},
            "min_duration": 2400000,
            "trtllm_build_flags": {"max_num_tokens": 4608, "torch_compile_config": {"enable_userbuffers": True}},
            "trtllm_runtime_flags": {"max_concurrency": 3072, "stream_interval": 50},
        },
    ),
    (
        GB300,
        1,
        "llama2-70b",
        "Server",
        "k_99",
        (f"{GB3}x1/Server/llama2-70b.py",),
        {"server_target_qps": 59, "gpu_batch_size": {"llama2-70b": 3072}, "harness_use_hf_tokenizer": True},
    ),
    (
        GB300,
        1,
        "llama2-70b",
        "Interactive",
        "k_99",
        (f"{GB3}x1/Interactive/llama2-70b.py",),
        {
            "server_target_qps": 360,
            "gpu_batch_size": {"llama2-70b": 4096},
            "trtllm_runtime_flags": {"max_num_tokens": 4352, "kvcache_free_gpu_mem_frac": 0.85},
        },
    ),
    (
        GB300,
        1,
        "gpt-oss-120b",
        "Server",
        "k_99",
        (f"{GB3}x1/Server/gpt-oss-120b.py",),
        {
            "server_target_qps": 11.5,
            "gpu_batch_size": {"gpt-oss-120b": 128 * 7},
            "trtllm_runtime_flags": {"stream_interval": 20, "max_concurrency": 512 + 1024},
        },
    ),
    (
        GB300,
        2,
        "llama3_1-405b",
        "Server",
        "k_99",
        (f"{GB3}x2/Server/llama3_1-405b.py",),
        {
            "server_target_qps": 0.8,
            "tensor_parallelism": 2,
            "min_query_count": 8313,
            "readiness_timeout": 900,
            "trtllm_build_flags": {"max_num_tokens": 1024, "gemm_plugin": "fp4"},
            "trtllm_runtime_flags": {"workers_per_core": 1},
        },
    ),
    (
        GB300,
        2,
        "llama3_1-405b",
        "Interactive",
        "k_99",
        (f"{GB3}x2/Interactive/llama3_1-405b.py",),
        {"server_target_qps": 17.7, "tensor_parallelism": 2, "gpu_batch_size": {"llama3.1-405b": 64}},
    ),
    (
        GB300,
        4,
        "llama3_1-405b",
        "Server",
        "k_99",
        (f"{GB3}x4/Server/llama3_1-405b.py",),
        {
            "server_target_qps": 17.7,
            "tensor_parallelism": 4,
            "gpu_batch_size": {"llama3.1-405b": 256},
            "trtllm_runtime_flags": {"use_low_precision_moe_combine": True, "max_concurrency": 256},
        },
    ),
]


def subset(expected: dict[str, Any], actual: dict[str, Any], where: str = "") -> None:
    for key, value in expected.items():
        assert key in actual, f"{where}{key} missing"
        if isinstance(value, dict):
            subset(value, actual[key], f"{where}{key}.")
        else:
            assert actual[key] == value, f"{where}{key}: {actual[key]!r} != NVIDIA's {value!r}"


@pytest.mark.parametrize(("gpu", "count", "stem", "scenario", "accuracy", "files", "nvidia"), EXPECTED_V60)
def test_v60_values_for_an_unknown_machine_are_nvidias(
    gpu: str, count: int, stem: str, scenario: str, accuracy: str, files: tuple[str, ...], nvidia: dict[str, Any]
) -> None:
    resolved = load_table(harness_round="v6.0").resolve(gpu, count, stem, scenario, high_accuracy=accuracy == "k_99_9")
    assert resolved.scaled_from is None
    assert resolved.source_file == f"closed/NVIDIA/configs/{files[0]}"
    assert all(f"closed/NVIDIA/configs/{f}" in resolved.source() for f in files)
    subset(nvidia, resolved.fields)


def test_v60_another_count_scales_throughput_only_and_says_so() -> None:
    resolved = load_table(harness_round="v6.0").resolve(B200, 8, "llama3_1-405b", "Offline")
    assert resolved.fields["offline_expected_qps"] == pytest.approx(2.18)
    assert resolved.fields["tensor_parallelism"] == 2 and resolved.scaled_from == 4
    assert "scaled from x4 to x8" in resolved.source()


def test_v60_has_no_hopper_file_and_the_v61_table_none_either() -> None:
    with pytest.raises(ProfileError, match=r"gpuconfigs/v6\.0: no entry for the GPU 'NVIDIA H200'"):
        load_table(harness_round="v6.0").sku_for_gpu(H200)
    assert load_table61().sku_for_gpu(H200) is None


def test_v61_parts_for_an_unknown_machine_are_nvidias_and_borrowed_parts_are_marked() -> None:
    table = load_table61()
    gptoss = table.resolve(B200, 183359, 8, "gpt-oss-120b", "Offline")
    serve = gptoss.parts["trtllm_serve"]
    assert serve.tuned and "gpt_oss_120b/B200-SXM-180GBx8/TRTLLM/Offline/trtllm-serve-ifb-1gpu.yaml" in serve.source
    subset(
        {
            "max_batch_size": 896,
            "max_num_tokens": 13914,
            "max_seq_len": 35840,
            "backend": "pytorch",
            "kv_cache_config": {"dtype": "fp8", "free_gpu_memory_fraction": 0.95},
        },
        serve.values,
    )
    llama = table.resolve(B300, 275040, 8, "llama2-70b", "Offline")
    assert llama.parts["topology"].tuned and llama.parts["topology"].values["dp_multiplicity"] == 8
    harness = llama.parts["harness"]
    assert not harness.tuned and "GB300-NVL72_GB300-288GB_aarch64x8" in harness.source and not llama.tuned
    subset({"offline_expected_qps": 440, "min_query_count": 49152}, harness.values)
    halved = table.resolve(B300, 275040, 4, "llama2-70b", "Offline").parts["harness"]
    assert halved.values["offline_expected_qps"] == 220 and "scaled from x8 to x4" in halved.note


# ---- the generated files in the stand-in harnesses ----------------------------------------------------------


def host(gpu: str, mib: int, count: int, cpu: str = "AMD EPYC 9575F 64-Core Processor") -> HostSystem:
    return HostSystem(gpu, mib, count, cpu, 64, 2, 1, 2_200_000_000_000)


def write(nvidia: Path, files: Any) -> None:
    for generated in files:
        path = nvidia / generated.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated.text)


def standin(tmp_path: Path, version: str, system: HostSystem) -> tuple[Path, Path]:
    nvidia = make_round_tree(tmp_path / "repo", version)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(json.dumps(system.to_json()))
    return nvidia, scratch


def run(nvidia: Path, scratch: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": f"{nvidia / 'standin-bin'}:/usr/bin:/bin", "MLPERF_SCRATCH_PATH": str(scratch), **env}
    return subprocess.run(argv, cwd=nvidia, env=environment, capture_output=True, text=True, timeout=120)


def test_v60_generated_system_is_detected_and_runs_with_nvidias_values(tmp_path: Path) -> None:
    system = host(B200, 183359, 4)
    nvidia, scratch = standin(tmp_path, "v6.0", system)
    files = v60_files(
        system, load_table(harness_round="v6.0"), "llama3.1-405b", ["Offline", "Server"], ["k_99"], allow_untuned=False
    )
    assert files.tuned and files.system_id == "WL_B200-SXM-180GBx4"
    write(nvidia, files.files)
    done = run(
        nvidia,
        scratch,
        [
            sys.executable,
            "-m",
            "code.main",
            "--action=run_harness",
            "--benchmarks=llama3.1-405b",
            "--scenarios=Offline,Server",
            f"--log_dir={tmp_path}/logs",
        ],
        SYSTEM_NAME=files.system_id,
    )
    assert done.returncode == 0, done.stderr
    assert "Detected system ID: WL_B200-SXM-180GBx4" in done.stderr
    assert "configs/WL_B200-SXM-180GBx4/Offline/llama3_1-405b.py" in done.stderr
    user_conf = nvidia / "build/loadgen-configs/WL_B200-SXM-180GBx4_TRT/llama3.1-405b"
    assert "target_qps = 1.09" in (user_conf / "Offline/user.conf").read_text()
    assert "target_qps = 0.65" in (user_conf / "Server/user.conf").read_text()
    assert (tmp_path / "logs/WL_B200-SXM-180GBx4_TRT/llama3.1-405b/Server/mlperf_log_summary.txt").exists()


def test_v60_a_field_the_harness_lacks_fails_the_import_like_nvidias(tmp_path: Path) -> None:
    system = host(B200, 183359, 4)
    nvidia, scratch = standin(tmp_path, "v6.0", system)
    files = v60_files(
        system, load_table(harness_round="v6.0"), "llama3.1-405b", ["Offline"], ["k_99"], allow_untuned=False
    )
    write(nvidia, files.files)
    config = nvidia / "configs/WL_B200-SXM-180GBx4/Offline/llama3_1-405b.py"
    config.write_text(config.read_text().replace("llm_fields.tensor_parallelism", "llm_fields.tensor_paralelism"))
    done = run(
        nvidia,
        scratch,
        [
            sys.executable,
            "-m",
            "code.main",
            "--action=run_harness",
            "--benchmarks=llama3.1-405b",
            "--scenarios=Offline",
        ],
        SYSTEM_NAME=files.system_id,
    )
    assert done.returncode != 0 and "has no attribute 'tensor_paralelism'" in done.stderr


def test_v60_hopper_is_refused_naming_v50_or_runs_untuned_when_allowed(tmp_path: Path) -> None:
    system = host(H200, 143771, 8)
    table = load_table(harness_round="v6.0")
    with pytest.raises(NotTuned, match=r"last round NVIDIA tunes it in is v5\.0.*RequireCustomSystemSupport=true"):
        v60_files(system, table, "llama2-70b", ["Offline"], ["k_99"], allow_untuned=False)
    files = v60_files(system, table, "llama2-70b", ["Offline"], ["k_99"], allow_untuned=True)
    assert not files.tuned and files.system_id == "WL_H200-SXM-141GBx8"
    (config,) = files.files
    assert (
        "# UNTUNED: NVIDIA publishes no NVIDIA H200 config in v6.0 (the last round NVIDIA tunes it in is v5.0)"
        in config.text
    )
    assert "UNTUNED" in files.notes[-1]
    nvidia, scratch = standin(tmp_path, "v6.0", system)
    write(nvidia, files.files)
    done = run(
        nvidia,
        scratch,
        [sys.executable, "-m", "code.main", "--action=run_harness", "--benchmarks=llama2-70b", "--scenarios=Offline"],
        SYSTEM_NAME=files.system_id,
    )
    assert done.returncode == 0, done.stderr
    # GB200x1's 49 QPS scaled to 8 GPUs: the donor's throughput per GPU, not a guess.
    assert (
        "target_qps = 392"
        in (nvidia / "build/loadgen-configs/WL_H200-SXM-141GBx8_TRT/llama2-70b-99/Offline/user.conf").read_text()
    )


def test_v60_an_unknown_system_without_system_name_falls_back_to_minimal_configs(tmp_path: Path) -> None:
    # What the adapter must never let happen silently: NVIDIA's harness runs an unknown machine on minimal settings.
    system = host(B200, 183359, 1)
    nvidia, scratch = standin(tmp_path, "v6.0", system)
    done = run(
        nvidia,
        scratch,
        [sys.executable, "-m", "code.main", "--action=run_harness", "--benchmarks=bert", "--scenarios=Offline"],
    )
    assert done.returncode == 0, done.stderr
    assert "Runtime system not found in built-ins" in done.stderr
    assert "Loading minimal configs as default." in done.stderr
    assert (nvidia / "build/loadgen-configs/UNREGISTERED_x86_64_NVIDIA_B200x1_TRT/bert-99/Offline/user.conf").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_v61_generated_configs_serve_and_run_under_system_name(tmp_path: Path) -> None:
    system = host(B300, 275040, 2)
    nvidia, scratch = standin(tmp_path, "v6.1", system)
    port = free_port()
    files = v61_files(system, load_table61(), "llama2-70b", ["Offline"], allow_untuned=True, base_port=port)
    assert files.system_id == "WL_B300-SXM-270GBx2" and not files.tuned
    write(nvidia, files.files)
    (scratch / "models/Llama2/fp4-quantized-modelopt/llama2-70b-chat-hf-torch-fp4").mkdir(parents=True)
    (scratch / "standin_server_load_s").write_text("0.2")
    env = {"SYSTEM_NAME": files.system_id, "PYTHONPATH": str(nvidia / "src")}
    args = ["--benchmarks=llama2-70b", "--scenarios=Offline", f"--log_dir={tmp_path}/logs"]
    server = subprocess.Popen(
        [sys.executable, "-m", "nv_mlpinf.main", "run_llm_server", *args, "--server_in_foreground"],
        cwd=nvidia,
        env={"PATH": f"{nvidia / 'standin-bin'}:/usr/bin:/bin", "MLPERF_SCRATCH_PATH": str(scratch), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        done = run(nvidia, scratch, [sys.executable, "-m", "nv_mlpinf.main", "run_harness", *args, "--test_run"], **env)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    assert (
        f"Loading configs from {nvidia}/configs/llama2_70b/WL_B300-SXM-270GBx2/TRTLLM/Offline/harness.py" in done.stderr
    )
    log = (tmp_path / "logs/trtllm_serve_0.log").read_text()
    assert f"--port {port}" in log and (tmp_path / "logs/trtllm_serve_1.log").exists()
    summary = (tmp_path / "logs/WL_B300-SXM-270GBx2_TRT/llama2-70b-99/Offline/mlperf_log_summary.txt").read_text()
    assert "Samples per second: 107.8" in summary  # GB300x8's 440 QPS scaled to 2 GPUs, 98 % of it achieved


def test_v61_without_a_config_the_harness_names_the_file_it_wanted(tmp_path: Path) -> None:
    system = host(B300, 275040, 2)
    nvidia, scratch = standin(tmp_path, "v6.1", system)
    done = run(
        nvidia,
        scratch,
        [sys.executable, "-m", "nv_mlpinf.main", "run_harness", "--benchmarks=llama2-70b", "--scenarios=Server"],
        SYSTEM_NAME="WL_B300-SXM-270GBx2",
        PYTHONPATH=str(nvidia / "src"),
    )
    assert done.returncode != 0
    assert (
        "Expected config: " in done.stderr
        and "configs/llama2_70b/WL_B300-SXM-270GBx2/TRTLLM/Server/harness.py" in done.stderr
    )
