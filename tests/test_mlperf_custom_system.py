"""Generated custom-system code: it compiles and registers the expected classes in the harness's registry.

The registry is the stand-in of NVIDIA's v4.1 layout (tests/fixtures/harness): ConfigRegistry.register
with (HarnessType, AccuracyTarget, PowerSetting), KnownSystem built from custom_systems, per-scenario
``<Scenario>GPUBaseConfig`` classes. The generated files are imported in a separate Python process
(the harness's ``code`` package shadows the standard library's and the registry is global).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.harness.make_harness import make_harness_tree
from workload.hosts.local import LocalHost
from workload.mlperf import custom_system
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.system import HostSystem

A100X8 = HostSystem(
    gpu_name="NVIDIA A100-SXM4-40GB",
    gpu_memory_mib=40960,
    gpu_count=8,
    cpu_model="AMD EPYC 7V12 64-Core Processor",
    cpu_cores_per_socket=48,
    cpu_sockets=2,
    cpu_threads_per_core=1,
    memory_bytes=1_900_000_000_000,
)

PROBE = textwrap.dedent(
    """
    import json, sys
    from code.common.systems.system_list import KnownSystem, matched_system
    from code.common.constants import *
    from configs.configuration import ConfigRegistry
    out = {"matched": getattr(matched_system(), "name", None), "classes": {}}
    for bench, scen, cv in json.loads(sys.argv[1]):
        ConfigRegistry.load_configs(bench, scen)
        setting = config_ver_to_workload_setting(bench, cv)
        cfg = ConfigRegistry.get(Benchmark(bench), Scenario(scen), matched_system(), setting)
        out["classes"][f"{bench}/{scen}/{cv}"] = None if cfg is None else {
            "name": cfg.__name__, "gpu_batch_size": cfg.gpu_batch_size,
            "offline_expected_qps": getattr(cfg, "offline_expected_qps", None),
            "server_target_qps": getattr(cfg, "server_target_qps", None),
            "single_stream_expected_latency_ns": getattr(cfg, "single_stream_expected_latency_ns", None),
            "use_triton": getattr(cfg, "use_triton", None)}
    print(json.dumps(out))
    """
)


def generate(nvidia: Path, system: HostSystem, model: str, scenarios: list[str], version: str, cvs: list[str]) -> str:
    table = load_table()
    sku = table.sku_for_gpu(system.gpu_name)
    sid = custom_system.system_id(system, sku)
    files = [
        custom_system.custom_config(
            table.resolve(system.gpu_name, system.gpu_count, model, s), sid, HarnessVersion.parse(version), cvs
        )
        for s in scenarios
    ]
    custom_system.install(LocalHost(), str(nvidia), custom_system.custom_list_block(system, sku), files)
    return sid


def probe(nvidia: Path, scratch: Path, system: HostSystem, queries: list[tuple[str, str, str]]) -> dict:
    (scratch / "standin_detected_system.json").write_text(json.dumps(system.to_json()))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(queries)],
        cwd=nvidia,
        capture_output=True,
        text=True,
        env={"MLPERF_SCRATCH_PATH": str(scratch), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_v41_custom_system_registers_scaled_configs_for_every_scenario(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    sid = generate(nvidia, A100X8, "bert", ["Offline", "Server", "SingleStream"], "v4.1", ["default", "high_accuracy"])
    assert sid == "WL_A100_SXM4_40GBx8"
    out = probe(
        nvidia,
        tmp_path,
        A100X8,
        [("bert", s, cv) for s in ("Offline", "Server", "SingleStream") for cv in ("default", "high_accuracy")],
    )
    assert out["matched"] == sid
    offline = out["classes"]["bert/Offline/default"]
    assert offline["name"] == "WL_A100_SXM4_40GBX8"
    assert offline["gpu_batch_size"] == {"bert": 1024}
    assert offline["offline_expected_qps"] == 30000  # 3750 per GPU x 8, NVIDIA's A100_SXM4_40GBx8 value
    assert out["classes"]["bert/Server/default"]["server_target_qps"] == 24750  # VirtualClient's value
    assert out["classes"]["bert/SingleStream/default"]["single_stream_expected_latency_ns"] == 1700000  # not scaled
    high = out["classes"]["bert/Offline/high_accuracy"]
    assert high["name"] == "WL_A100_SXM4_40GBX8_HighAccuracy" and high["offline_expected_qps"] == 30000


def test_v40_batch_size_is_an_int_and_triton_sets_use_triton(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo", version="v4.0")
    generate(nvidia, A100X8, "3d-unet", ["Offline"], "v4.0", ["default", "triton"])
    out = probe(nvidia, tmp_path, A100X8, [("3d-unet", "Offline", "default"), ("3d-unet", "Offline", "triton")])
    assert out["classes"]["3d-unet/Offline/default"]["gpu_batch_size"] == 1
    assert out["classes"]["3d-unet/Offline/triton"]["use_triton"] is True
    assert out["classes"]["3d-unet/Offline/default"]["offline_expected_qps"] == 23


def test_regenerating_replaces_our_block_and_keeps_nvidia_entries(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    custom_list = nvidia / custom_system.CUSTOM_LIST
    custom_list.write_text(custom_list.read_text() + "\ncustom_systems['Theirs'] = None  # NVIDIA-side entry\n")
    generate(nvidia, A100X8, "bert", ["Offline"], "v4.1", ["default"])
    four = HostSystem(**{**A100X8.to_json(), "gpu_count": 4})  # type: ignore[arg-type]
    generate(nvidia, four, "bert", ["Offline"], "v4.1", ["default"])
    text = custom_list.read_text()
    assert text.count(custom_system.BLOCK_BEGIN) == 1
    assert "WL_A100_SXM4_40GBx4" in text and "WL_A100_SXM4_40GBx8" not in text
    assert "custom_systems['Theirs'] = None" in text


def test_refuses_to_overwrite_a_custom_py_we_did_not_write(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    theirs = nvidia / "configs/bert/Offline/custom.py"
    theirs.write_text("# NVIDIA's own custom configs\n")
    before = (nvidia / custom_system.CUSTOM_LIST).read_text()
    with pytest.raises(custom_system.CustomSystemError, match="was not written by workload"):
        generate(nvidia, A100X8, "bert", ["Offline"], "v4.1", ["default"])
    assert theirs.read_text() == "# NVIDIA's own custom configs\n"
    assert (nvidia / custom_system.CUSTOM_LIST).read_text() == before  # nothing written


def test_unknown_gpu_lists_the_table_and_how_to_add_one() -> None:
    from workload.errors import ProfileError

    with pytest.raises(ProfileError) as err:
        load_table().sku_for_gpu("NVIDIA L40S")
    text = str(err.value)
    assert "A100_SXM4_40GB" in text and "H100_SXM_80GB" in text and "gpu_names" in text and "'NVIDIA L40S'" in text
