"""The same-architecture rule's data and merge (workload/mlperf/gpu_architecture.py), and its use on v6.0 Hopper."""

from __future__ import annotations

import pytest

from workload.mlperf.gpu_architecture import architecture, borrowed_fields, runs_precision
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.rounds.v6_0.systems import v60_files
from workload.mlperf.system import HostSystem


@pytest.mark.parametrize(
    ("name", "arch"),
    [
        ("NVIDIA H100 80GB HBM3", "Hopper"),
        ("NVIDIA H200", "Hopper"),
        ("NVIDIA GH200 480GB", "Hopper"),
        ("NVIDIA B300 SXM6 AC", "Blackwell"),
        ("NVIDIA GB200", "Blackwell"),
        ("NVIDIA A100-SXM4-40GB", "Ampere"),
        ("NVIDIA L4", None),
    ],
)
def test_architecture_of_nvidia_smi_names(name: str, arch: str | None) -> None:
    assert architecture(name) == arch


def test_hopper_runs_fp8_not_fp4_and_other_values_are_no_precision() -> None:
    assert runs_precision("Hopper", "fp8") and not runs_precision("Hopper", "fp4")
    assert runs_precision("Blackwell", "fp4") and runs_precision("Hopper", "enable")


def test_borrowed_fields_keep_every_own_value_and_take_only_what_own_lacks() -> None:
    frame = {
        "precision": "fp4",
        "offline_expected_qps": 376,
        "gpu_batch_size": {"llama2-70b": 2048},
        "min_duration": 2400000,
        "trtllm_build_flags": {"max_input_len": 1024, "gemm_plugin": "fp4", "max_num_tokens": 3584},
    }
    own = {
        "precision": "fp8",
        "offline_expected_qps": 115.2,
        "gpu_batch_size": {"llama2-70b-interactive": 512},
        "trtllm_build_flags": {"max_num_tokens": 1536, "gemm_swiglu_plugin": "fp8"},
    }
    assert borrowed_fields(frame, own, "Hopper") == {
        "min_duration": 2400000,
        "trtllm_build_flags": {"max_input_len": 1024, "max_num_tokens": 1536, "gemm_swiglu_plugin": "fp8"},
        "precision": "fp8",
        "offline_expected_qps": 115.2,
        "gpu_batch_size": {"llama2-70b": 512},
    }
    # the frame's throughput never stays when own has none: it is another GPU's
    assert "offline_expected_qps" not in borrowed_fields(frame, {"precision": "fp8"}, "Hopper")


def test_v60_h200x1_interactive_leaves_out_the_blackwell_frames_fp4_gemm_plugin() -> None:
    # v6.0's nearest one-GPU Interactive file is B200-SXM-180GBx1's, whose build flags say gemm_plugin: fp4
    table = load_table(harness_round="v6.0")
    frame = table.skus["B200_SXM_180GB"].configs["llama2-70b"]["Interactive"]["k_99"][1]
    assert (frame.fields.trtllm_build_flags or {}).get("gemm_plugin") == "fp4"
    host = HostSystem("NVIDIA H200", 143771, 1, "AMD EPYC 9575F 64-Core Processor", 64, 2, 1, 2_200_000_000_000)
    files = v60_files(host, table, "llama2-70b", ["Interactive"], ["k_99"], allow_untuned=True)
    (config,) = files.files
    body = config.text.split("import code.common.constants")[1]
    assert "fp4" not in body and "model_fields.precision: 'fp8'" in body and not files.tuned
