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
from workload.mlperf.catalog import WorkloadSetting, workload_setting
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.registrations import Registration, registrations
from workload.mlperf.rounds.v4_1 import V4_1Round
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
# Four A100s: NVIDIA's list has A100_SXM4_40GB systems with 1 and 8 GPUs only, so this one is unknown.
A100X4 = HostSystem(**{**A100X8.to_json(), "gpu_count": 4})  # type: ignore[arg-type]

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
            "precision": getattr(cfg, "precision", None), "system": cfg.system.name,
            "use_triton": getattr(cfg, "use_triton", None)}
    print(json.dumps(out))
    """
)


def harness_python(nvidia: Path, scratch: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python3 <args>`` in the stand-in harness folder, detecting the system written to ``scratch``."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=nvidia,
        capture_output=True,
        text=True,
        env={"MLPERF_SCRATCH_PATH": str(scratch), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def classes_for(system: HostSystem, model: str, scenario: str, cvs: list[str]) -> list[tuple[WorkloadSetting, object]]:
    """One class per distinct setting of the config versions, with the table's values for its accuracy."""
    table = load_table()
    classes: list[tuple[WorkloadSetting, object]] = []
    for cv in cvs:
        setting = workload_setting(model, cv)
        high = setting.accuracy == "k_99_9"
        if table.entry_problem(system.gpu_name, model, scenario, high_accuracy=high) is not None:
            continue  # no published values: not registered (the executor reports it)
        if all(s != setting for s, _ in classes):
            classes.append(
                (setting, table.resolve(system.gpu_name, system.gpu_count, model, scenario, high_accuracy=high))
            )
    return classes


def generate(nvidia: Path, system: HostSystem, model: str, scenarios: list[str], version: str, cvs: list[str]) -> str:
    sku = load_table().sku_for_gpu(system.gpu_name)
    sid = custom_system.system_id(system, sku)
    files = [
        custom_system.custom_config(
            model,
            s,
            sid,
            custom_system.class_name(sid),
            classes_for(system, model, s, cvs),
            V4_1Round().batch_size_per_benchmark(HarnessVersion.parse(version)),
        )
        for s in scenarios
    ]
    custom_system.install(LocalHost(), str(nvidia), custom_system.custom_list_block(system, sku), files)
    return sid


def probe(nvidia: Path, scratch: Path, system: HostSystem, queries: list[tuple[str, str, str]]) -> dict:
    (scratch / "standin_detected_system.json").write_text(json.dumps(system.to_json()))
    proc = harness_python(nvidia, scratch, "-c", PROBE, json.dumps(queries))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_v41_custom_system_registers_nvidias_values_scaled_from_its_nearest_class(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    sid = generate(nvidia, A100X4, "bert", ["Offline", "Server", "SingleStream"], "v4.1", ["default", "high_accuracy"])
    assert sid == "WL_A100_SXM4_40GBx4"
    out = probe(
        nvidia,
        tmp_path,
        A100X4,
        [("bert", s, cv) for s in ("Offline", "Server", "SingleStream") for cv in ("default", "high_accuracy")],
    )
    assert out["matched"] == sid
    offline = out["classes"]["bert/Offline/default"]
    assert offline["name"] == "WL_A100_SXM4_40GBX4"
    assert offline["gpu_batch_size"] == {"bert": 1024}
    assert offline["offline_expected_qps"] == 3400 * 4  # NVIDIA's A100_SXM4_40GBx1 (3400), x4: no class of its own
    assert out["classes"]["bert/SingleStream/default"]["single_stream_expected_latency_ns"] == 1700000  # not scaled
    # The 99.9% class has NVIDIA's 99.9% values (fp16, 1750 per x1), not the 99% int8 ones.
    high = out["classes"]["bert/Offline/high_accuracy"]
    assert high["name"] == "WL_A100_SXM4_40GBX4_HighAccuracy" and high["offline_expected_qps"] == 1750 * 4
    assert high["precision"] == "fp16" and offline["precision"] == "int8"
    assert out["classes"]["bert/SingleStream/high_accuracy"]["precision"] == "fp16"
    # NVIDIA's v4.1 has no A100_SXM4_40GB bert Server class: nothing is guessed.
    assert out["classes"]["bert/Server/default"] is None and out["classes"]["bert/Server/high_accuracy"] is None
    text = (nvidia / "configs/bert/Offline/custom.py").read_text()
    assert "# From closed/NVIDIA/configs/bert/Offline/__init__.py A100_SXM4_40GBx1 (scaled from x1 to x4" in text


def test_3d_unet_on_a_custom_a100_does_not_set_fields_nvidia_allows_only_for_its_own_systems(tmp_path: Path) -> None:
    # NVIDIA's A100 3d-unet classes set start_from_device/end_on_device; its fields.py allows them only on a
    # list of NVIDIA's systems, so the registry refuses them in a custom system's class at import.
    nvidia = make_harness_tree(tmp_path / "repo")
    generate(nvidia, A100X4, "3d-unet", ["Offline", "SingleStream"], "v4.1", ["default", "high_accuracy"])
    for scenario in ("Offline", "SingleStream"):
        text = (nvidia / f"configs/3d-unet/{scenario}/custom.py").read_text()
        assert "start_from_device =" not in text and "end_on_device =" not in text
        assert "# Not set: start_from_device" in text
    out = probe(
        nvidia,
        tmp_path,
        A100X4,
        [("3d-unet", s, cv) for s in ("Offline", "SingleStream") for cv in ("default", "high_accuracy")],
    )
    assert out["classes"]["3d-unet/Offline/default"]["offline_expected_qps"] == pytest.approx(2.9 * 4)
    assert out["classes"]["3d-unet/SingleStream/high_accuracy"]["single_stream_expected_latency_ns"] == 657000000


def test_the_stand_in_registry_refuses_a_restricted_field_for_a_custom_system(tmp_path: Path) -> None:
    # What today's generator wrote for a custom A100: the stand-in registry rejects it like NVIDIA's.
    nvidia = make_harness_tree(tmp_path / "repo")
    generate(nvidia, A100X4, "3d-unet", ["Offline"], "v4.1", ["default"])
    path = nvidia / "configs/3d-unet/Offline/custom.py"
    path.write_text(path.read_text() + "    start_from_device = True\n")
    (tmp_path / "standin_detected_system.json").write_text(json.dumps(A100X4.to_json()))
    proc = harness_python(nvidia, tmp_path, "-c", PROBE, json.dumps([["3d-unet", "Offline", "default"]]))
    assert proc.returncode != 0
    assert "ConfigFieldInvalidError" in proc.stderr and "'start_from_device'" in proc.stderr


def test_v40_batch_size_is_an_int_and_triton_sets_use_triton(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo", version="v4.0")
    generate(nvidia, A100X4, "3d-unet", ["Offline"], "v4.0", ["default", "triton"])
    out = probe(nvidia, tmp_path, A100X4, [("3d-unet", "Offline", "default"), ("3d-unet", "Offline", "triton")])
    assert out["classes"]["3d-unet/Offline/default"]["gpu_batch_size"] == 1
    assert out["classes"]["3d-unet/Offline/triton"]["use_triton"] is True
    assert out["classes"]["3d-unet/Offline/default"]["offline_expected_qps"] == pytest.approx(11.6)


def test_regenerating_replaces_our_block_and_keeps_nvidia_entries(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    custom_list = nvidia / custom_system.CUSTOM_LIST
    custom_list.write_text(custom_list.read_text() + "\ncustom_systems['Theirs'] = None  # NVIDIA-side entry\n")
    generate(nvidia, A100X4, "bert", ["Offline"], "v4.1", ["default"])
    two = HostSystem(**{**A100X8.to_json(), "gpu_count": 2})  # type: ignore[arg-type]
    generate(nvidia, two, "bert", ["Offline"], "v4.1", ["default"])
    text = custom_list.read_text()
    assert text.count(custom_system.BLOCK_BEGIN) == 1
    assert "WL_A100_SXM4_40GBx2" in text and "WL_A100_SXM4_40GBx4" not in text
    assert "custom_systems['Theirs'] = None" in text


def test_refuses_to_overwrite_a_custom_py_we_did_not_write(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    theirs = nvidia / "configs/bert/Offline/custom.py"
    theirs.write_text("# NVIDIA's own custom configs\n")
    before = (nvidia / custom_system.CUSTOM_LIST).read_text()
    with pytest.raises(custom_system.CustomSystemError, match="was not written by workload"):
        generate(nvidia, A100X4, "bert", ["Offline"], "v4.1", ["default"])
    assert theirs.read_text() == "# NVIDIA's own custom configs\n"
    assert (nvidia / custom_system.CUSTOM_LIST).read_text() == before  # nothing written


def test_unknown_gpu_lists_the_table_and_how_to_add_one() -> None:
    from workload.errors import ProfileError

    with pytest.raises(ProfileError) as err:
        load_table().sku_for_gpu("NVIDIA L40S")
    text = str(err.value)
    assert "A100_SXM4_40GB" in text and "H100_SXM_80GB" in text and "gpu_names" in text and "'NVIDIA L40S'" in text


def test_a_known_system_gets_only_the_configs_nvidia_lacks(tmp_path: Path) -> None:
    # Azure ND96asr_v4: the harness knows it as A100_SXM4_40GBx8 (its generic x86 CPU entry); the stand-in
    # registers bert Offline 99% only: the 99.9% class and SingleStream are added for KnownSystem.A100_SXM4_40GBx8,
    # Server stays missing (NVIDIA published no A100_SXM4_40GB bert Server config).
    nvidia = make_harness_tree(tmp_path / "repo")
    custom_list_before = (nvidia / custom_system.CUSTOM_LIST).read_text()
    member = "A100_SXM4_40GBx8"
    files = []
    for scenario in ("Offline", "Server", "SingleStream"):
        folder = nvidia / "configs" / "bert" / scenario
        known = registrations([(f"{scenario}/__init__.py", (folder / "__init__.py").read_text())])
        wanted = [
            cv for cv in ("default", "high_accuracy") if Registration(member, workload_setting("bert", cv)) not in known
        ]
        files.append(
            custom_system.custom_config(
                "bert",
                scenario,
                member,
                f"WL_{member}",
                classes_for(A100X8, "bert", scenario, wanted),
                V4_1Round().batch_size_per_benchmark(HarnessVersion(4, 1)),
            )
        )
    custom_system.install(LocalHost(), str(nvidia), None, files)
    assert (nvidia / custom_system.CUSTOM_LIST).read_text() == custom_list_before  # no custom system for a known one
    out = probe(
        nvidia,
        tmp_path,
        A100X8,
        [("bert", s, cv) for s in ("Offline", "Server", "SingleStream") for cv in ("default", "high_accuracy")],
    )
    assert out["matched"] == member
    assert out["classes"]["bert/Offline/default"]["name"] == member  # NVIDIA's own, left alone
    assert out["classes"]["bert/Offline/high_accuracy"]["name"] == f"WL_{member}_HighAccuracy"
    high = out["classes"]["bert/Offline/high_accuracy"]
    assert (
        high["offline_expected_qps"] == 15000 and high["precision"] == "fp16"
    )  # NVIDIA's A100_SXM4_40GBx8_HighAccuracy
    single = out["classes"]["bert/SingleStream/default"]
    assert single["name"] == f"WL_{member}" and single["system"] == member
    assert out["classes"]["bert/Server/default"] is None and out["classes"]["bert/Server/high_accuracy"] is None


def test_registrations_follow_inheritance_and_skip_unregistered_classes() -> None:
    init = """
class OfflineGPUBaseConfig(GPUBaseConfig):
    scenario = Scenario.Offline

@ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP)
class A100_SXM4_40GBx1(OfflineGPUBaseConfig):
    system = KnownSystem.A100_SXM4_40GBx1

@ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP)
class A100_SXM4_40GBx8(A100_SXM4_40GBx1):
    system: KnownSystem = KnownSystem.A100_SXM4_40GBx8

@ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99_9, PowerSetting.MaxP)
class A100_SXM4_40GBx8_HighAccuracy(A100_SXM4_40GBx8):
    precision = "fp16"
"""
    custom = """
from . import *

@ConfigRegistry.register(HarnessType.Triton, AccuracyTarget.k_99, PowerSetting.MaxQ)
class A100_SXM4_40GBx8_Triton_MaxQ(A100_SXM4_40GBx8):
    use_triton = True
"""
    found = registrations([("__init__.py", init), ("custom.py", custom)])
    assert found == {
        Registration("A100_SXM4_40GBx1", WorkloadSetting("Custom", "k_99", "MaxP")),
        Registration("A100_SXM4_40GBx8", WorkloadSetting("Custom", "k_99", "MaxP")),
        Registration("A100_SXM4_40GBx8", WorkloadSetting("Custom", "k_99_9", "MaxP")),
        Registration("A100_SXM4_40GBx8", WorkloadSetting("Triton", "k_99", "MaxQ")),
    }
    with pytest.raises(ValueError, match=r"custom\.py: not valid Python"):
        registrations([("custom.py", "class (:\n")])


def test_install_removes_only_our_stale_custom_py(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    ours = nvidia / "configs/bert/Server/custom.py"
    ours.write_text(custom_system.HEADER + "\nfrom . import *\n")
    theirs = nvidia / "configs/bert/Offline/custom.py"
    theirs.write_text("# NVIDIA's own custom configs\n")
    custom_system.install(
        LocalHost(), str(nvidia), None, [], remove=["configs/bert/Server/custom.py", "configs/bert/Offline/custom.py"]
    )
    assert not ours.exists() and theirs.read_text() == "# NVIDIA's own custom configs\n"


SYSTEM_ID_SCRIPT_CASES = [
    # (detected system, what NVIDIA's v4.1 get_system_id.py prints)
    ({**A100X8.to_json(), "gpu_name": "NVIDIA H100 80GB HBM3", "cpu_model": "AMD EPYC 9V84 96-Core Processor"}, "None"),
    (A100X8.to_json(), "KnownSystem.A100_SXM4_40GBx8"),  # any AMD/Intel x86 CPU: NVIDIA's generic entry
    (
        {
            **A100X8.to_json(),
            "gpu_name": "NVIDIA H100 80GB HBM3",
            "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
            "cpu_cores_per_socket": 56,
        },
        "KnownSystem.H100_SXM_80GBx8",
    ),
    (A100X4.to_json(), "None"),  # NVIDIA lists A100_SXM4_40GB systems with 1 and 8 GPUs only
]


@pytest.mark.parametrize(("system", "printed"), SYSTEM_ID_SCRIPT_CASES)
def test_the_stand_in_system_script_prints_what_nvidias_prints(tmp_path: Path, system: dict, printed: str) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    (tmp_path / "standin_detected_system.json").write_text(json.dumps(system))
    proc = harness_python(nvidia, tmp_path, "-m", "scripts.get_system_id")
    assert (proc.returncode, proc.stdout) == (0, printed + "\n"), proc.stderr


def test_a_registered_custom_system_is_printed_as_its_known_system_member(tmp_path: Path) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    sid = generate(nvidia, A100X4, "bert", ["Offline"], "v4.1", ["default"])
    (tmp_path / "standin_detected_system.json").write_text(json.dumps(A100X4.to_json()))
    proc = harness_python(nvidia, tmp_path, "-m", "scripts.get_system_id")
    assert (proc.returncode, proc.stdout) == (0, f"KnownSystem.{sid}\n"), proc.stderr


def test_nvidias_own_a100_system_keeps_the_device_fields_its_registry_allows(tmp_path: Path) -> None:
    # Azure ND96asr_v4 is KnownSystem.A100_SXM4_40GBx8, which NVIDIA's fields.py lists for start_from_device
    # and end_on_device: a 3d-unet SingleStream class added for it keeps NVIDIA's values, and imports.
    nvidia = make_harness_tree(tmp_path / "repo")
    member = "A100_SXM4_40GBx8"
    generated = custom_system.custom_config(
        "3d-unet",
        "SingleStream",
        member,
        f"WL_{member}",
        classes_for(A100X8, "3d-unet", "SingleStream", ["default"]),
        V4_1Round().batch_size_per_benchmark(HarnessVersion(4, 1)),
    )
    assert "start_from_device = True" in generated.text and "end_on_device = True" in generated.text
    custom_system.install(LocalHost(), str(nvidia), None, [generated])
    out = probe(nvidia, tmp_path, A100X8, [("3d-unet", "SingleStream", "default")])
    single = out["classes"]["3d-unet/SingleStream/default"]
    assert out["matched"] == member and single["system"] == member
    assert single["single_stream_expected_latency_ns"] == 657000000


REGISTRY_REFUSALS = [
    # (class body after the decorator line, the error NVIDIA's ConfigRegistry.validate raises)
    (
        "class Two(OfflineGPUBaseConfig, dict):\n    system = KnownSystem.A100_SXM4_40GBx1\n",
        "ConfigMultipleExtendsError",
    ),
    (
        "class Twice(OfflineGPUBaseConfig):\n    system = KnownSystem.A100_SXM4_40GBx1\n"
        "    gpu_batch_size = {'bert': 1}\n    gpu_batch_size = {'bert': 2}\n",
        "ConfigFieldReassignmentError",
    ),
    (
        "class Typo(OfflineGPUBaseConfig):\n    system = KnownSystem.A100_SXM4_40GBx1\n"
        "    gpu_batchsize = {'bert': 1}\n",
        "ConfigFieldInvalidError",
    ),
    (  # a Server-only field in an Offline config
        "class Scope(OfflineGPUBaseConfig):\n    system = KnownSystem.A100_SXM4_40GBx1\n    server_target_qps = 1\n",
        "ConfigFieldInvalidError",
    ),
]


@pytest.mark.parametrize(("body", "error"), REGISTRY_REFUSALS)
def test_the_stand_in_registry_refuses_what_nvidias_refuses(tmp_path: Path, body: str, error: str) -> None:
    nvidia = make_harness_tree(tmp_path / "repo")
    (nvidia / "configs/bert/Offline/custom.py").write_text(
        "from . import *\n\n@ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP)\n"
        + body
    )
    (tmp_path / "standin_detected_system.json").write_text(json.dumps(A100X8.to_json()))
    proc = harness_python(nvidia, tmp_path, "-c", PROBE, json.dumps([["bert", "Offline", "default"]]))
    assert proc.returncode != 0 and error in proc.stderr, proc.stderr
