"""Hopper with RequireCustomSystemSupport=true against NVIDIA's real v5.1 and v6.0 code (issue 27 items 4 and 5).

NVIDIA's v5.1 configs tune Blackwell only; a Hopper machine runs v5.0's values (the last Hopper values NVIDIA
published, fp8) marked untuned. The file we generate for it must carry every field NVIDIA's v5.1 code needs: the
``generate_engines`` config step (tests/nvidia_engine_config.py: NVIDIA's ``code/main.py`` loading our file,
``code/llmlib/config.py`` building ``TrtllmEndpointConfig`` from it, ``code/llmlib/builder.py``'s flag checks) runs
on it without error. Before, the file lacked ``llm_gen_config_path`` and the step stopped with a TypeError at
``code/llmlib/config.py`` line 178. NVIDIA's GPU detection runs too (nvmitten, through the CUDA stand-in describing
the machine's GPUs): it must name our system by ``SYSTEM_NAME``.

NVIDIA's tree is staged and the step run by tests/upstream_nvidia.py (``stage_round``, ``run_in_round``); stand-ins
(tests/upstream_standins/, each naming the upstream import it serves): CUDA, TensorRT, NVTX, and torch, scipy,
matplotlib and ONNX absent (failing on use).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import upstream_nvidia as up
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.rounds.v5_1 import custom_files, custom_system_id
from workload.mlperf.rounds.v6_0.systems import v60_files
from workload.mlperf.system import HostSystem

STEP = Path(__file__).resolve().parent / "nvidia_engine_config.py"
#: (nvidia-smi name, MiB, bytes as CUDA reports them, compute capability)
HOPPERS = {
    "H200": ("NVIDIA H200", 143771, 150754820096, (9, 0)),
    "H100": ("NVIDIA H100 80GB HBM3", 81559, 85520809984, (9, 0)),
}


def engine_config_step(
    harness_round: str,
    tmp_path: Path,
    configs: Path,
    system_id: str,
    gpu: tuple[str, int, int, tuple[int, int]],
    count: int,
    *args: str,
) -> subprocess.CompletedProcess[str]:
    """NVIDIA's generate_engines config step (tests/nvidia_engine_config.py) on ``configs`` in a staged copy of the
    round's tree (staged once per test), on ``count`` GPUs like ``gpu`` as the CUDA stand-in reports them."""
    root = tmp_path / harness_round / "closed" / "NVIDIA"
    if not root.exists():
        up.stage_round(harness_round, tmp_path)
    name, _, memory_bytes, sm = gpu
    gpus = up.cuda_gpus(name, memory_bytes, sm, count)
    return up.run_in_round(root, ["python3", str(STEP), str(configs), system_id, *args], system_id=system_id, gpus=gpus)


@pytest.mark.parametrize(("hopper", "count"), [("H200", 8), ("H100", 8)])
def test_v51_hopper_untuned_files_pass_nvidias_generate_engines_config_step_in_fp8(
    tmp_path: Path, hopper: str, count: int
) -> None:
    gpu = HOPPERS[hopper]
    system = HostSystem(gpu[0], gpu[1], count, "AMD EPYC 9575F 64-Core Processor", 64, 2, 1, 2_200_000_000_000)
    sku = load_table(harness_round="v5.0").sku_for_gpu(gpu[0])
    system_id = custom_system_id(system, sku)
    configs = tmp_path / "configs"
    v50 = load_table(harness_round="v5.0")
    every = [
        ("llama2-70b", "Offline", "k_99"),
        ("llama2-70b", "Server", "k_99_9"),
        ("llama3_1-405b", "Offline", "k_99"),
    ]
    # the configs NVIDIA's v5.0 has for this Hopper (H100: no llama3.1-405b)
    cases = [c for c in every if v50.entry_problem(gpu[0], c[0], c[1], high_accuracy=c[2] == "k_99_9") is None]
    assert cases
    for model, scenario, accuracy in cases:
        files = custom_files(
            system, sku, model, [scenario], [WorkloadSetting("Custom", accuracy, "MaxP")], allow_untuned=True
        )
        for generated, provenance in files:
            assert all(p.untuned and "v5.0" in p.untuned for p in provenance)
            path = configs / generated.path.removeprefix("configs/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(generated.text)
    for model, scenario, accuracy in cases:
        target = "0.999" if accuracy == "k_99_9" else "0.99"
        done = engine_config_step("v5.1", tmp_path, configs, system_id, gpu, count, model, scenario, target)
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert result["system_id"] == system_id  # NVIDIA's detection took our SYSTEM_NAME
        assert result["core_type"] == "trtllm_endpoint" and result["precision"] == "fp8"
        assert result["gen_config_path"] == f"code/{model}/tensorrt/generation_config.json"
        assert "fp4" not in up.leaves(result["build_flags"]) + up.leaves(result["checkpoint_flags"])
        theirs = v50.resolve(gpu[0], count, model, scenario, high_accuracy=accuracy == "k_99_9").fields
        flags = theirs.get("trtllm_build_flags", {})
        assert result["build_flags"]["tensor_parallelism"] == flags.get("tensor_parallelism", 1)
        assert result["build_flags"]["max_batch_size"] == next(iter(theirs["gpu_batch_size"].values()))
        assert result["build_flags"]["max_num_tokens"] == flags["max_num_tokens"]


@pytest.mark.parametrize("hopper", ["H200", "H100"])
def test_v60_hopper_untuned_files_pass_nvidias_generate_engines_config_step_in_fp8(tmp_path: Path, hopper: str) -> None:
    # issue 27 item 5: the same step on NVIDIA's v6.0 code, for the files rounds/v6_0/systems.py writes for a Hopper
    # (v5.0's fp8 values with v6.0's fields, never Blackwell's fp4)
    gpu = HOPPERS[hopper]
    system = HostSystem(gpu[0], gpu[1], 8, "AMD EPYC 9575F 64-Core Processor", 64, 2, 1, 2_200_000_000_000)
    files = v60_files(
        system, load_table(harness_round="v6.0"), "llama2-70b", ["Offline", "Server"], ["k_99"], allow_untuned=True
    )
    assert not files.tuned and len(files.files) == 2
    configs = tmp_path / "configs"
    for generated in files.files:
        path = configs / generated.path.removeprefix("configs/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(generated.text)
    v50 = load_table(harness_round="v5.0")
    for scenario in ("Offline", "Server"):
        done = engine_config_step("v6.0", tmp_path, configs, files.system_id, gpu, 8, "llama2-70b", scenario, "0.99")
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert result["system_id"] == files.system_id and result["precision"] == "fp8"
        assert "fp4" not in up.leaves(result["build_flags"]) + up.leaves(result["runtime_flags"])
        theirs = v50.resolve(gpu[0], 8, "llama2-70b", scenario).fields
        assert result["build_flags"]["max_batch_size"] == next(iter(theirs["gpu_batch_size"].values()))
        assert result["build_flags"]["max_num_tokens"] == theirs["trtllm_build_flags"]["max_num_tokens"]
