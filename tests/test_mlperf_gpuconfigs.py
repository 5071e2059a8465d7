"""NVIDIA's published v4.1 values reach the harness: the expectation table below, written from NVIDIA's files,
against the configs generated for an unknown machine and imported by the stand-in registry.

For every GPU in gpuconfigs/ (x1 and x8), bert, 3d-unet, gptj and llama2-70b, every scenario the harness
has configs for, and both accuracy targets, the table holds either NVIDIA's effective values (the class's
own, what it inherits from NVIDIA's classes and the scenario's base class) or why nothing is generated:
``UNPUBLISHED`` (NVIDIA's round has no class for that GPU, model and scenario) or ``NEEDS_2`` (NVIDIA's
smallest class is a TP2 engine that one GPU cannot run). A value taken from a class of another GPU count
(x8 from x1...) is NVIDIA's class value with throughput scaled, as the table says in its comment.

Sources (mlcommons/inference_results_v4.1): closed/NVIDIA/configs/bert/Server, bert/SingleStream,
gptj/Offline, gptj/Server, llama2-70b/Offline, llama2-70b/Server (__init__.py); bert/Offline as carried in
closed/Cisco/configs/bert/Offline/__init__.py and 3d-unet/Offline as carried in
closed/Dell/configs/3d-unet/Offline/__init__.py (copies of NVIDIA's classes; NVIDIA's own files are not in
our index); 3d-unet/SingleStream from NVIDIA's file of the 2023 layout (same class names). Base classes:
bert GPUBaseConfig precision int8, Offline 2 copy / 2 inference streams, Server 1 / 2, SingleStream bs 1,
1 / 1; 3d-unet int8, 1 / 1; gptj fp16, 1 / 1, tensor_parallelism 1; llama2-70b fp16, 1 / 1, TP 2, PP 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_harness import make_harness_tree
from workload.hosts.local import LocalHost
from workload.mlperf import custom_system
from workload.mlperf.catalog import model_info, workload_setting
from workload.mlperf.gpuconfigs import gpu_count_problem, load_table
from workload.mlperf.system import HostSystem

UNPUBLISHED = "unpublished"
NEEDS_2 = "needs 2 GPUs"
MODELS = ("bert", "3d-unet", "gptj", "llama2-70b")
GPU_NAMES = {
    "A100_SXM4_40GB": "NVIDIA A100-SXM4-40GB",
    "A100_SXM_80GB": "NVIDIA A100-SXM4-80GB",
    "H100_SXM_80GB": "NVIDIA H100 80GB HBM3",
    "H200_SXM_141GB": "NVIDIA H200",
}
# (batch size, throughput or latency, precision, use_fp8, copy streams, inference streams, TP, PP)
Row = tuple[int, float, str, bool | None, int, int, int | None, int | None]


def bert(bs: int, target: float, precision: str, fp8: bool | None, copy: int, infer: int) -> Row:
    return (bs, target, precision, fp8, copy, infer, None, None)


def unet(bs: int, target: float) -> Row:
    return (bs, target, "int8", None, 1, 1, None, None)


def gptj(bs: int, target: float) -> Row:
    return (bs, target, "fp16", True, 1, 1, 1, None)


def llama(bs: int, target: float, tp: int) -> Row:
    return (bs, target, "fp16", True, 1, 1, tp, 1)


def both(row: Row | str) -> dict[str, Row | str]:
    """NVIDIA's 99.9% class is ``class X_HighAccuracy(X): pass`` (3d-unet, gptj, llama2-70b)."""
    return {"k_99": row, "k_99_9": row}


# (sku, gpu count) -> model -> scenario -> accuracy -> expected
EXPECTED: dict[tuple[str, int], dict[str, dict[str, dict[str, Row | str]]]] = {
    ("A100_SXM4_40GB", 1): {
        # bert/Offline A100_SXM4_40GBx1 (bs 1024, 3400), _HighAccuracy fp16 1750
        "bert": {
            "Offline": {"k_99": bert(1024, 3400, "int8", None, 2, 2), "k_99_9": bert(1024, 1750, "fp16", None, 2, 2)},
            "Server": both(UNPUBLISHED),  # bert/Server has no A100_SXM4_40GB class
            "SingleStream": {
                "k_99": bert(1, 1700000, "int8", None, 1, 1),
                "k_99_9": bert(1, 1700000, "fp16", None, 1, 1),
            },
        },
        "3d-unet": {"Offline": both(unet(1, 2.9)), "SingleStream": both(unet(8, 657000000))},
        "gptj": {s: both(UNPUBLISHED) for s in ("Offline", "Server", "SingleStream")},
        "llama2-70b": {s: both(UNPUBLISHED) for s in ("Offline", "Server")},
    },
    ("A100_SXM4_40GB", 8): {
        # bert/Offline A100_SXM4_40GBx8 (30000), _HighAccuracy fp16 bs 1024 15000; SingleStream: x1 class
        "bert": {
            "Offline": {"k_99": bert(1024, 30000, "int8", None, 2, 2), "k_99_9": bert(1024, 15000, "fp16", None, 2, 2)},
            "Server": both(UNPUBLISHED),
            "SingleStream": {
                "k_99": bert(1, 1700000, "int8", None, 1, 1),
                "k_99_9": bert(1, 1700000, "fp16", None, 1, 1),
            },
        },
        "3d-unet": {"Offline": both(unet(1, 23)), "SingleStream": both(unet(8, 657000000))},  # SS: x1 class
        "gptj": {s: both(UNPUBLISHED) for s in ("Offline", "Server", "SingleStream")},
        "llama2-70b": {s: both(UNPUBLISHED) for s in ("Offline", "Server")},
    },
    ("A100_SXM_80GB", 1): {
        "bert": {
            # bert/Offline A100_SXM_80GBx1: bs 1280, 1 inference stream, 3500; _HighAccuracy bs 512 fp16 1750
            "Offline": {"k_99": bert(1280, 3500, "int8", None, 2, 1), "k_99_9": bert(512, 1750, "fp16", None, 2, 1)},
            # bert/Server: no x1 99% class (x8 25400 / 8); A100_SXM_80GBx1_HighAccuracy(x8_HighAccuracy) 1575
            "Server": {"k_99": bert(48, 3175, "int8", None, 4, 2), "k_99_9": bert(24, 1575, "fp16", None, 4, 2)},
            "SingleStream": {
                "k_99": bert(1, 1700000, "int8", None, 1, 1),
                "k_99_9": bert(1, 1700000, "fp16", None, 1, 1),
            },
        },
        "3d-unet": {"Offline": both(unet(8, 3.8)), "SingleStream": both(unet(8, 515000000))},
        "gptj": {s: both(UNPUBLISHED) for s in ("Offline", "Server", "SingleStream")},
        "llama2-70b": {s: both(UNPUBLISHED) for s in ("Offline", "Server")},
    },
    ("A100_SXM_80GB", 8): {
        "bert": {
            "Offline": {"k_99": bert(1280, 30000, "int8", None, 2, 1), "k_99_9": bert(512, 15000, "fp16", None, 2, 1)},
            # bert/Server A100_SXM_80GBx8: bs 48, 4 copy / 2 inference, 25400; _HighAccuracy bs 24 fp16 12820
            "Server": {"k_99": bert(48, 25400, "int8", None, 4, 2), "k_99_9": bert(24, 12820, "fp16", None, 4, 2)},
            "SingleStream": {
                "k_99": bert(1, 1700000, "int8", None, 1, 1),
                "k_99_9": bert(1, 1700000, "fp16", None, 1, 1),
            },
        },
        "3d-unet": {"Offline": both(unet(8, 30)), "SingleStream": both(unet(8, 515000000))},
        "gptj": {s: both(UNPUBLISHED) for s in ("Offline", "Server", "SingleStream")},
        "llama2-70b": {s: both(UNPUBLISHED) for s in ("Offline", "Server")},
    },
    ("H100_SXM_80GB", 1): {
        "bert": {
            # bert/Offline H100_SXM_80GBx1: bs 1280, 2 copy / 1 inference, 9400; _HighAccuracy fp16+fp8 bs 1024 8200
            "Offline": {"k_99": bert(1280, 9400, "int8", None, 2, 1), "k_99_9": bert(1024, 8200, "fp16", True, 2, 1)},
            # bert/Server H100_SXM_80GBx1: bs 128, 2 / 2, 7000; _HighAccuracy bs 512 fp16+fp8 6100
            "Server": {"k_99": bert(128, 7000, "int8", None, 2, 2), "k_99_9": bert(512, 6100, "fp16", True, 2, 2)},
            "SingleStream": {
                "k_99": bert(1, 1700000, "int8", None, 1, 1),
                "k_99_9": bert(1, 1700000, "fp16", None, 1, 1),
            },
        },
        "3d-unet": {"Offline": both(unet(8, 6.8)), "SingleStream": both(unet(8, 572434000))},
        # gptj/Offline H100_SXM_80GBx1 bs 192 fp8 36; gptj/Server bs 256 fp8 34.92; gptj/SingleStream H100_SXM_80GBx1
        # bs 1 fp8 1876267940 ns (_HighAccuracy: precision fp16 set again, the same latency)
        "gptj": {
            "Offline": both(gptj(192, 36)),
            "Server": both(gptj(256, 34.92)),
            "SingleStream": both(gptj(1, 1876267940)),
        },
        # llama2-70b: NVIDIA's smallest H100 class is H100_SXM_80GB_TP2x1 (two GPUs, TP 2)
        "llama2-70b": {"Offline": both(NEEDS_2), "Server": both(NEEDS_2)},
    },
    ("H100_SXM_80GB", 8): {
        "bert": {
            "Offline": {"k_99": bert(1280, 75200, "int8", None, 2, 1), "k_99_9": bert(1024, 65600, "fp16", True, 2, 1)},
            # H100_SXM_80GBx8: 4 copy streams, 7000*8; _HighAccuracy 1 inference stream, 6200*8
            "Server": {"k_99": bert(128, 56000, "int8", None, 4, 2), "k_99_9": bert(512, 49600, "fp16", True, 4, 1)},
            "SingleStream": {
                "k_99": bert(1, 1700000, "int8", None, 1, 1),
                "k_99_9": bert(1, 1700000, "fp16", None, 1, 1),
            },
        },
        "3d-unet": {"Offline": both(unet(8, 54.4)), "SingleStream": both(unet(8, 572434000))},
        # gptj/SingleStream: the x1 class (one query at a time, as bert's and 3d-unet's SingleStream)
        "gptj": {
            "Offline": both(gptj(192, 288)),
            "Server": both(gptj(256, 279.36)),
            "SingleStream": both(gptj(1, 1876267940)),
        },
        # llama2-70b H100_SXM_80GB_TP2x4 (system H100_SXM_80GBx8): Offline bs 896 80; Server bs 1024 (from TP2x1) 75
        "llama2-70b": {"Offline": both(llama(896, 80, 2)), "Server": both(llama(1024, 75, 2))},
    },
    ("H200_SXM_141GB", 1): {
        "bert": {
            # bert/Offline H200_SXM_141GBx1: bs 1280, 2 copy / 1 inference, 9400; _HighAccuracy bs 1024 fp16+fp8 8200
            "Offline": {"k_99": bert(1280, 9400, "int8", None, 2, 1), "k_99_9": bert(1024, 8200, "fp16", True, 2, 1)},
            "Server": {"k_99": bert(128, 7200, "int8", None, 2, 2), "k_99_9": bert(512, 6400, "fp16", True, 2, 2)},
            "SingleStream": both(UNPUBLISHED),
        },
        "3d-unet": {"Offline": both(unet(8, 6.8)), "SingleStream": both(UNPUBLISHED)},
        "gptj": {"Offline": both(gptj(396, 36)), "Server": both(gptj(396, 34.92)), "SingleStream": both(UNPUBLISHED)},
        # llama2-70b H200_SXM_141GBx1: TP1, fp8; Offline bs 806 13.4, Server bs 896 12.7
        "llama2-70b": {"Offline": both(llama(806, 13.4, 1)), "Server": both(llama(896, 12.7, 1))},
    },
    ("H200_SXM_141GB", 8): {
        "bert": {
            "Offline": {"k_99": bert(1280, 75200, "int8", None, 2, 1), "k_99_9": bert(1024, 65600, "fp16", True, 2, 1)},
            "Server": {"k_99": bert(128, 57600, "int8", None, 4, 2), "k_99_9": bert(512, 51200, "fp16", True, 4, 1)},
            "SingleStream": both(UNPUBLISHED),
        },
        "3d-unet": {"Offline": both(unet(8, 54.4)), "SingleStream": both(UNPUBLISHED)},
        "gptj": {"Offline": both(gptj(396, 288)), "Server": both(gptj(396, 279.36)), "SingleStream": both(UNPUBLISHED)},
        "llama2-70b": {"Offline": both(llama(806, 104, 1)), "Server": both(llama(896, 102.5, 1))},
    },
}

TARGET_FIELD = {
    "Offline": "offline_expected_qps",
    "Server": "server_target_qps",
    "SingleStream": "single_stream_expected_latency_ns",
}

PROBE = textwrap.dedent(
    """
    import json, sys
    from code.common.systems.system_list import KnownSystem, MATCHED_SYSTEM
    from code.common.constants import *
    from configs.configuration import ConfigRegistry
    out = {"matched": getattr(MATCHED_SYSTEM, "name", None), "classes": {}}
    for bench, scen, cv in json.loads(sys.argv[1]):
        ConfigRegistry.load_configs(bench, scen)
        cfg = ConfigRegistry.get(Benchmark(bench), Scenario(scen), MATCHED_SYSTEM,
                                 config_ver_to_workload_setting(bench, cv))
        out["classes"][f"{bench}/{scen}/{cv}"] = None if cfg is None else {
            name: getattr(cfg, name, None) for name in (
                "gpu_batch_size", "offline_expected_qps", "server_target_qps", "single_stream_expected_latency_ns",
                "precision", "use_fp8", "gpu_copy_streams", "gpu_inference_streams", "tensor_parallelism",
                "pipeline_parallelism", "start_from_device", "end_on_device")}
    print(json.dumps(out))
    """
)


def unknown_machine(sku: str, count: int) -> HostSystem:
    """A machine NVIDIA's list does not know: a Hygon x86 CPU matches neither its named CPUs nor generic AMD/Intel."""
    return HostSystem(
        gpu_name=GPU_NAMES[sku],
        gpu_memory_mib=81559,
        gpu_count=count,
        cpu_model="Hygon C86 7285 32-core Processor",
        cpu_cores_per_socket=32,
        cpu_sockets=2,
        cpu_threads_per_core=2,
        memory_bytes=1_000_000_000_000,
    )


def generate_all(nvidia: Path, system: HostSystem) -> dict[tuple[str, str, str], str]:
    """Generate what the executor generates for every model and scenario; the reason for each one left out."""
    table = load_table()
    sku = table.sku_for_gpu(system.gpu_name)
    sid = custom_system.system_id(system, sku)
    files, reasons = [], {}
    for model in MODELS:
        for scenario in model_info(model).scenarios:
            classes = []
            for cv in ("default", "high_accuracy"):
                high = cv == "high_accuracy"
                problem = table.entry_problem(system.gpu_name, model, scenario, high_accuracy=high)
                if problem is None:
                    resolved = table.resolve(system.gpu_name, system.gpu_count, model, scenario, high_accuracy=high)
                    problem = gpu_count_problem(resolved)
                    if problem is None:
                        classes.append((workload_setting(model, cv), resolved))
                        continue
                reasons[(model, scenario, "k_99_9" if high else "k_99")] = problem
            if classes:
                files.append(
                    custom_system.custom_config(model, scenario, sid, custom_system.class_name(sid), classes, True)
                )
    custom_system.install(LocalHost(), str(nvidia), custom_system.custom_list_block(system, sku), files)
    return reasons


def probe(nvidia: Path, scratch: Path, system: HostSystem) -> dict[str, Any]:
    (scratch / "standin_detected_system.json").write_text(json.dumps(system.to_json()))
    queries = [
        (model, scenario, cv)
        for model in MODELS
        for scenario in model_info(model).scenarios
        for cv in ("default", "high_accuracy")
    ]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(queries)],
        cwd=nvidia,
        capture_output=True,
        text=True,
        env={"MLPERF_SCRATCH_PATH": str(scratch), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr  # every generated file passes the registry's validation
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def test_the_table_covers_every_gpu_in_gpuconfigs_at_1_and_8() -> None:
    assert {sku for sku, _ in EXPECTED} == set(load_table().skus)
    for key, models in EXPECTED.items():
        assert set(models) == set(MODELS), key
        for model, scenarios in models.items():
            assert set(scenarios) == set(model_info(model).scenarios), (key, model)


@pytest.mark.parametrize(("sku", "count"), sorted(EXPECTED))
def test_generated_configs_carry_nvidias_values(tmp_path: Path, sku: str, count: int) -> None:
    system = unknown_machine(sku, count)
    nvidia = make_harness_tree(tmp_path / "repo")
    reasons = generate_all(nvidia, system)
    out = probe(nvidia, tmp_path, system)
    assert out["matched"] == custom_system.system_id(system, load_table().sku_for_gpu(system.gpu_name))
    for model, scenarios in EXPECTED[(sku, count)].items():
        for scenario, targets in scenarios.items():
            for accuracy, expected in targets.items():
                cv = "high_accuracy" if accuracy == "k_99_9" else "default"
                where = f"{sku}x{count} {model} {scenario} {accuracy}"
                got = out["classes"][f"{model}/{scenario}/{cv}"]
                if isinstance(expected, str):
                    assert got is None, where
                    reason = reasons[(model, scenario, accuracy)]
                    wanted = "needs a multiple of 2 GPUs" if expected == NEEDS_2 else "configs have no"
                    assert wanted in reason, (where, reason)
                    continue
                assert got is not None, (where, reasons.get((model, scenario, accuracy)))
                bs, target, precision, fp8, copy, infer, tp, pp = expected
                actual = (
                    got["gpu_batch_size"],
                    got[TARGET_FIELD[scenario]],
                    got["precision"],
                    got["use_fp8"],
                    got["gpu_copy_streams"],
                    got["gpu_inference_streams"],
                    got["tensor_parallelism"],
                    got["pipeline_parallelism"],
                )
                assert actual[0] == {model: bs}, where
                assert actual[1] == pytest.approx(target), where
                assert actual[2:] == (precision, fp8, copy, infer, tp, pp), where
                # A custom system never gets the fields NVIDIA allows only for its own systems.
                assert got["start_from_device"] is None and got["end_on_device"] is None, where
