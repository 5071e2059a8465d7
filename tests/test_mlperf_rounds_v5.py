"""The v5.0 and v5.1 round adapters, pure: detection, the ops ``plan`` prints, custom system files, the Hopper rule.

Upstream behaviour per round: tests/fixtures/harness/rounds/v5.0/UPSTREAM.md and v5.1/UPSTREAM.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workload.errors import ProfileError
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.custom_system import CustomSystemError, is_ours
from workload.mlperf.exports_config import untuned_marks
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import CollectResults, IdentifySystem, MakeTarget, to_changes
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds import Checkout, choose_round
from workload.mlperf.rounds.v5_0 import V5_0Round
from workload.mlperf.rounds.v5_1 import (
    V5_1Round,
    custom_files,
    custom_system_id,
    is_unregistered,
    minimal_fallback,
    system_answer,
    values_for,
)
from workload.mlperf.server_ops import StartServer, StopServer
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem

V51_TREE = Path(__file__).parent / "fixtures" / "harness" / "rounds" / "v5.1" / "tree" / "closed" / "NVIDIA"
ALICE = UserFacts("alice", 1000, 1000, "alice", "/home/alice")
CUSTOM = WorkloadSetting("Custom", "k_99", "MaxP")
B200X4 = HostSystem("NVIDIA B200", 183359, 4, "AMD EPYC 9V84 96-Core Processor", 96, 2, 1, 1_900_000_000_000)
H100X8 = HostSystem("NVIDIA H100 80GB HBM3", 81559, 8, "AMD EPYC 9V84 96-Core Processor", 96, 2, 1, 1_900_000_000_000)


def facts(version: tuple[int, int]) -> MLPerfFacts:
    return MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(*version),
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=ALICE,
        machine="x86_64",
    )


def params(**extra: Any) -> MLPerfParameters:
    base: dict[str, Any] = {"Model": "llama2-70b", "Scenarios": "Offline,Server", "Quick": True}
    base.update(extra)
    return MLPerfParameters.model_validate(base)


def commands(plan_ops_: Any) -> list[str]:
    return [c.display() for change in to_changes(plan_ops_) for c in change.commands]


def test_the_checkout_chooses_the_round() -> None:
    assert choose_round(Checkout(HarnessVersion(5, 0))).round.name == "v5.0"
    assert choose_round(Checkout(HarnessVersion(5, 1))).round.name == "v5.1"
    assert choose_round(Checkout(HarnessVersion(4, 1)), "5.1").round.name == "v5.1"


def test_v51_plan_serves_each_llm_scenario_and_passes_the_round_flags() -> None:
    plan = plan_ops(params(RequireCustomSystemSupport=True), facts((5, 1)))
    assert plan.round.name == "v5.1"
    kinds = [type(op).__name__ for op in plan.ops]
    # Per test mode and scenario: start the server, run, collect, stop.
    run_part = kinds[kinds.index("MakeTarget") + 1 :]
    assert run_part[:4] == ["StartServer", "MakeTarget", "CollectResults", "StopServer"]
    assert run_part.count("StartServer") == run_part.count("StopServer") == 4  # 2 scenarios x 2 test modes
    runs = [op for op in plan.ops if isinstance(op, MakeTarget) and op.target == "run_harness"]
    first = dict(runs[0].variables)
    assert first["RUN_ARGS"] == (
        "--benchmarks=llama2-70b --scenarios=Offline --accuracy_target=0.99 --core_type=trtllm_endpoint "
        "--test_mode=PerformanceOnly --test_run --trtllm_server_urls=127.0.0.1:30000"
    )
    assert first["SYSTEM_NAME"].startswith("<system id")  # decided by the system check at apply
    assert first["LOG_DIR"] == "build/logs/workload-<run id>-llama2-70b-perf-offline"
    start = next(op for op in plan.ops if isinstance(op, StartServer))
    assert start.spec.argv[:2] == ("make", "run_llm_server")
    assert "--server_in_foreground" in start.spec.argv[2]
    shown = commands(plan.ops)
    # plan prints exactly the start, probe and stop commands apply runs (docker exec in the container).
    assert any("llm-server " in line and "make run_llm_server" in line for line in shown)
    assert any("llm-server-probe" in line and line.endswith(" /health 127.0.0.1:30000") for line in shown)
    assert any("llm-server-stop" in line for line in shown)
    collect = [op for op in plan.ops if isinstance(op, CollectResults)]
    assert collect[0].expected[0].benchmark == "llama2-70b-99"


def test_v51_high_accuracy_is_its_own_run_with_accuracy_target_0999() -> None:
    plan = plan_ops(params(Scenarios="Offline", ConfigVersion="default,high_accuracy"), facts((5, 1)))
    runs = [op for op in plan.ops if isinstance(op, MakeTarget) and op.target == "run_harness"]
    targets = [dict(op.variables)["RUN_ARGS"].split("--accuracy_target=")[1].split()[0] for op in runs]
    assert targets == ["0.99", "0.999", "0.99", "0.999"]
    assert {op.expected[0].benchmark for op in runs} == {"llama2-70b-99", "llama2-70b-99.9"}
    # No custom support: no SYSTEM_NAME (the harness's own detection names the system).
    assert all("SYSTEM_NAME" not in dict(op.variables) for op in runs)


def test_v50_plan_is_v41_shaped() -> None:
    plan = plan_ops(params(), facts((5, 0)))
    assert plan.round.name == "v5.0"
    assert not any(isinstance(op, (StartServer, StopServer)) for op in plan.ops)
    runs = [op for op in plan.ops if isinstance(op, MakeTarget) and op.target == "run_harness"]
    assert "--config_ver=default" in dict(runs[0].variables)["RUN_ARGS"]
    assert "--test_run" in dict(runs[0].variables)["RUN_ARGS"]
    assert isinstance(next(op for op in plan.ops if isinstance(op, IdentifySystem)), IdentifySystem)


def test_v51_system_answers() -> None:
    assert is_unregistered("UNREGISTERED_x86_64_NVIDIA_B200x8")
    assert not is_unregistered("B200-SXM-180GBx8")
    out = (
        "[I] Config file configs/UNREGISTERED_x/Offline/llama2-70b.py not found. Loading minimal configs as default.\n"
        "[I] Result folder: x\n"
    )
    assert minimal_fallback(out) == [out.splitlines()[0]]
    assert minimal_fallback("[I] Loading configs from configs/B200-SXM-180GBx8/Offline/llama2-70b.py") == []
    logged = "[2026 system_list.py:58 ERROR] Runtime system not found in built-ins. Please ...\n"
    assert system_answer("UNREGISTERED_x86_64_NVIDIA_B200x8\n" + logged) == "UNREGISTERED_x86_64_NVIDIA_B200x8"
    assert system_answer(logged) is None


def test_v51_custom_files_carry_nvidias_b200_values_and_load_in_the_standin(tmp_path: Path) -> None:
    sku = load_table(harness_round="v5.1").sku_for_gpu(B200X4.gpu_name)
    files = custom_files(B200X4, sku, "llama2-70b", ("Offline", "Server"), (CUSTOM,), allow_untuned=False)
    sid = custom_system_id(B200X4, sku)
    assert sid == "WL_B200_SXM_180GBx4"
    (offline, provenance), _ = files
    assert offline.path == f"configs/{sid}/Offline/llama2-70b.py"
    assert is_ours(offline.text) and not untuned_marks(offline.text)
    assert provenance[0].tuned
    # The stand-in harness (the round's real file format and loader) reads the file back.
    root = tmp_path / "NVIDIA"
    subprocess.run(["cp", "-r", str(V51_TREE), str(root)], check=True)
    target = root / offline.path
    target.parent.mkdir(parents=True)
    target.write_text(offline.text)
    code = (
        "import sys, json; from pathlib import Path; import code.main as m, code.common.constants as C; "
        f"print(json.dumps(m.get_config(Path('configs'), {sid!r}, 'llama2-70b', 'Offline', C.WorkloadSetting())))"
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(
        json.dumps({"gpu_name": "NVIDIA B200", "gpu_count": 4, "cpu_model": B200X4.cpu_model, "memory_bytes": 10**12})
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        env={"MLPERF_SCRATCH_PATH": str(scratch), "SYSTEM_NAME": sid, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "minimal" not in done.stderr.lower()
    # NVIDIA's x8 values, throughput scaled to 4 GPUs.
    assert loaded["offline_expected_qps"] == 188
    assert loaded["gpu_batch_size"] == {"llama2-70b": 2048}
    assert loaded["precision"] == "fp4"


def test_hopper_on_v51_is_refused_naming_the_last_round_that_tunes_it() -> None:
    with pytest.raises(ProfileError) as info:
        values_for(H100X8.gpu_name, 8, "llama2-70b", "Offline", CUSTOM, allow_untuned=False)
    assert "v5.0 is the last round that tunes it" in str(info.value)
    assert info.value.hint is not None and "RequireCustomSystemSupport=true" in info.value.hint


def test_hopper_on_v51_with_custom_support_runs_v50_values_marked_untuned() -> None:
    sku = load_table(harness_round="v5.0").sku_for_gpu(H100X8.gpu_name)
    ((offline, provenance),) = custom_files(H100X8, sku, "llama2-70b", ("Offline",), (CUSTOM,), allow_untuned=True)
    assert not provenance[0].tuned
    marks = untuned_marks(offline.text)
    assert marks and "v5.0" in marks[0] and "H100_SXM_80GB_PP2x4" in marks[0]
    # v5.0 kept the parallelism in trtllm_build_flags; v5.1 has fields of its own for it.
    assert "llm_fields.pipeline_parallelism: 2," in offline.text
    assert "'pipeline_parallelism'" not in offline.text


def test_a_gpu_no_round_has_is_refused() -> None:
    with pytest.raises(ProfileError) as info:
        values_for("NVIDIA L40S", 1, "llama2-70b", "Offline", CUSTOM, allow_untuned=True)
    assert "NVIDIA L40S" in str(info.value)


def test_v51_configs_hold_only_the_custom_harness() -> None:
    with pytest.raises(CustomSystemError):
        sku = load_table(harness_round="v5.1").sku_for_gpu(B200X4.gpu_name)
        custom_files(
            B200X4, sku, "llama2-70b", ("Offline",), (WorkloadSetting("Triton", "k_99", "MaxP"),), allow_untuned=False
        )


def test_v50_custom_list_json_keeps_other_entries() -> None:
    adapter = V5_0Round()
    sku = load_table(harness_round="v5.0").sku_for_gpu(H100X8.gpu_name)
    block = adapter.custom_list_block(H100X8, sku)
    existing = json.dumps({"coffeepot": {"__obj_class__": "x", "data": {}}})
    merged = json.loads(adapter.merge_custom_list(existing, block))
    assert set(merged) == {"coffeepot", "WL_H100_SXM_80GBx8"}
    entry = merged["WL_H100_SXM_80GBx8"]["data"]
    assert entry["_component_classname"] == "System"
    gpus = entry["fields"]["accelerators"]["data"][0]["value"]
    assert len(gpus) == 8 and gpus[0]["data"]["fields"]["name"] == "NVIDIA H100 80GB HBM3"
    assert entry["fields"]["cpu"]["data"]["fields"]["vendor"] == "AuthenticAMD"
    # Run again: ours is replaced, not duplicated.
    again = json.loads(adapter.merge_custom_list(json.dumps(merged), block))
    assert set(again) == {"coffeepot", "WL_H100_SXM_80GBx8"}
    with pytest.raises(CustomSystemError):
        adapter.merge_custom_list("{not json", block)


def test_v51_registers_nothing_and_names_files_by_system() -> None:
    adapter = V5_1Round()
    sku = load_table(harness_round="v5.1").sku_for_gpu(B200X4.gpu_name)
    assert adapter.custom_list_block(B200X4, sku) == ""
    resolved = load_table(harness_round="v5.1").resolve(B200X4.gpu_name, 4, "llama2-70b", "Server")
    generated = adapter.custom_config(
        "llama2-70b", "Server", "WL_B200_SXM_180GBx4", "", [(CUSTOM, resolved)], HarnessVersion(5, 1)
    )
    assert generated.path == "configs/WL_B200_SXM_180GBx4/Server/llama2-70b.py"
    assert "loadgen_fields.server_target_qps: 182.0," in generated.text


def _load_in_standin(tmp_path: Path, files: dict[str, str], system_id: str, scenario: str) -> dict[str, Any]:
    """What the v5.1 stand-in's config loader (the round's file format and EXPORTS lookup) reads for a system."""
    root = tmp_path / f"NVIDIA-{system_id}-{scenario}"
    subprocess.run(["cp", "-r", str(V51_TREE), str(root)], check=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    (scratch / "standin_detected_system.json").write_text(
        json.dumps({"gpu_name": "NVIDIA B200", "gpu_count": 8, "cpu_model": "AMD EPYC", "memory_bytes": 10**12})
    )
    code = (
        "import json; from pathlib import Path; import code.main as m, code.common.constants as C; "
        f"print(json.dumps(m.get_config(Path('configs'), {system_id!r}, 'llama2-70b', {scenario!r}, "
        "C.WorkloadSetting())))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        env={"MLPERF_SCRATCH_PATH": str(scratch), "SYSTEM_NAME": system_id, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "minimal" not in done.stderr.lower(), done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_an_unknown_b200x8_gets_what_nvidias_b200x8_file_sets(tmp_path: Path, scenario: str) -> None:
    """The known system of v5.1 (B200-SXM-180GBx8): the files generated for an unknown machine with the same GPUs
    hold, through the round's own loader, every value NVIDIA's file for that system sets."""
    machine = HostSystem("NVIDIA B200", 183359, 8, "AMD EPYC 9V84 96-Core Processor", 96, 2, 1, 1_900_000_000_000)
    sku = load_table(harness_round="v5.1").sku_for_gpu(machine.gpu_name)
    ((generated, _),) = custom_files(machine, sku, "llama2-70b", (scenario,), (CUSTOM,), allow_untuned=False)
    ours = _load_in_standin(tmp_path, {generated.path: generated.text}, "WL_B200_SXM_180GBx8", scenario)
    nvidias = _load_in_standin(tmp_path, {}, "B200-SXM-180GBx8", scenario)
    assert nvidias  # the stand-in's copy of NVIDIA's values for this system
    for field, value in nvidias.items():
        if isinstance(value, dict) and isinstance(ours.get(field), dict):
            assert value.items() <= ours[field].items(), field  # the stand-in keeps a subset of NVIDIA's flags
        else:
            assert ours.get(field) == value, field


@pytest.mark.parametrize(
    ("version", "registry"),
    [((5, 0), "custom_list.json"), ((5, 1), "SYSTEM_NAME=WL_<SKU>x<count>"), ((4, 1), "custom_list.py")],
)
def test_plan_names_how_the_round_registers_a_custom_system(version: tuple[int, int], registry: str) -> None:
    plan = plan_ops(params(RequireCustomSystemSupport=True), facts(version))
    check = next(op for op in plan.ops if isinstance(op, IdentifySystem))
    assert registry in check.summary()


def test_v51_knows_llama3_1_by_the_catalogs_name_and_by_nvidias() -> None:
    """The catalog says ``llama3.1-8b``; NVIDIA's v5.1 constants, file names and configs say ``llama3_1-8b``
    (code/common/constants.py, Benchmark value with its alias). Either spelling is served by an LLM
    server, finds NVIDIA's published values, and names the config file as NVIDIA does."""
    from workload.mlperf.exports_config import config_path
    from workload.mlperf.gpuconfigs import load_table
    from workload.mlperf.rounds.v5_1 import V5_1Round

    for name in ("llama3.1-8b", "llama3_1-8b", "llama3.1-405b"):
        assert V5_1Round.serves(name), name
    assert not V5_1Round.serves("resnet50")
    assert config_path("WL_X", "llama3.1-405b", "Offline") == "configs/WL_X/Offline/llama3_1-405b.py"
    assert config_path("WL_X", "llama2-70b", "Server") == "configs/WL_X/Server/llama2-70b.py"
    table = load_table(harness_round="v5.1")
    for name in ("llama3.1-8b", "llama3_1-8b"):
        assert table.entry_problem("NVIDIA B200", name, "Offline") is None, name
        assert table.resolve("NVIDIA B200", 8, name, "Offline").fields
