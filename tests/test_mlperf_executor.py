"""MLPerfExecutor end to end against a real Docker Engine and the stand-in harness repository.

Real parts: the test bed's private dockerd, the harness image built with the repository's own
docker/ recipe (FROM the fresh-VM Debian image: python3 + make), a real detached container, real
``docker exec`` of the Makefile targets, results written by the stand-in harness into the run's
LOG_DIR. No GPU: ``UseGpus`` false and the system description is injected (SystemDescription).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_harness import H100X8, make_bare_repo
from workload.engine import Engine, RunOptions
from workload.hosts.base import Host, HostSpec
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

pytestmark = pytest.mark.slow

# Azure ND96asr_v4: matches NVIDIA's A100_SXM4_40GBx8 through the generic x86 CPU pattern.
A100X8 = {
    **H100X8,
    "gpu_name": "NVIDIA A100-SXM4-40GB",
    "gpu_memory_mib": 40960,
    "cpu_model": "AMD EPYC 7V12 64-Core Processor",
    "cpu_cores_per_socket": 48,
}
#: This test's own container (the harness's DOCKER_NAME): checkouts running these tests at once on the
#: shared test bed must not share (and remove) one container.
CONTAINER = f"mlperf-inference-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def bed(tmp_path: Path, docker_engine: Any, freshvm_image: str) -> Iterator[dict[str, Any]]:
    bare, commit = make_bare_repo(tmp_path / "harness.git")
    packages = tmp_path / "packages"
    packages.mkdir()
    # Stands in for GitRepoClone (PackageName mlperf) until the engine test can chain it.
    subprocess.run(["git", "clone", "-q", str(bare), str(packages / "mlperf")], check=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(json.dumps(H100X8))
    yield {
        "tmp": tmp_path,
        "repo": packages / "mlperf",
        "scratch": scratch,
        "commit": commit,
        "engine": docker_engine,
        "image": freshvm_image,
    }
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(CONTAINER).remove(force=True)


def action(bed: dict[str, Any], model: str, scenarios: str, **extra: Any) -> dict[str, Any]:
    return {
        "Type": "MLPerfExecutor",
        "Parameters": {
            "Scenario": f"inferencemodels-{model}",
            "Model": model,
            # The stand-in's scratch is a temp folder on this machine: bert's ~6.5 GiB are checked for real, the
            # larger models' tens to hundreds of GiB are not on a CI machine.
            "SkipFreeSpaceCheck": model != "bert",
            "Scenarios": scenarios,
            "Quick": True,
            "UseGpus": False,
            "UnlimitedMemlock": False,
            "DockerBaseUrl": bed["engine"].base_url,
            "BaseImage": bed["image"],
            "RepoPath": str(bed["repo"]),
            "ScratchPath": str(bed["scratch"]),
            "SystemDescription": json.dumps(H100X8),
            "RequireCustomSystemSupport": True,
            "DockerName": CONTAINER,
            **extra,
        },
    }


def run(bed: dict[str, Any], actions: list[dict[str, Any]]) -> Any:
    path = bed["tmp"] / "profile.json"
    path.write_text(json.dumps({"Description": "MLPerf test", "Actions": actions}))
    profile = resolve_profile(load_profile(str(path)))

    def factory(spec: HostSpec) -> Host:
        return LocalHost(spec.name)

    engine = Engine(
        profile,
        RunFolder.create(bed["tmp"] / "runs", profile.name),
        factory,
        RunOptions(state_path=str(bed["tmp"] / "state.json")),
    )
    (outcome,) = engine.run([HostSpec(scheme="local")])
    return outcome


def calls(bed: dict[str, Any]) -> list[str]:
    return (bed["scratch"] / "standin_calls.log").read_text().splitlines()


def targets(bed: dict[str, Any], target: str) -> list[str]:
    """The RUN_ARGS of each call of a make target, in order."""
    return [line.removeprefix(target + " ") for line in calls(bed) if line.startswith(target + " ")]


def detail(folder: Path) -> dict[str, Any]:
    """The stand-in LoadGen detail log as {key: value} (what LoadGen really used)."""
    lines = (folder / "mlperf_log_detail.txt").read_text().splitlines()
    return {d["key"]: d["value"] for d in (json.loads(line.removeprefix(":::MLLOG ")) for line in lines)}


H200X8 = {**H100X8, "gpu_name": "NVIDIA H200", "gpu_memory_mib": 143771}


def test_two_models_custom_system_rerun_after_reboot(bed: dict[str, Any]) -> None:
    actions = [
        action(bed, "bert", "Offline,Server", **{"bert.Offline.min_duration": 30000, "bert.Server.target_qps": 5000}),
        action(bed, "3d-unet", "Offline,SingleStream"),
    ]
    first = run(bed, actions)
    assert first.status == "ok", first.error
    # 2 models x 2 scenarios x 2 test modes, each its own folder under this run's LOG_DIR.
    assert len(first.results) == 8
    by_key = {}
    for folder in first.results:
        meta = json.loads((folder / "metadata.json").read_text())
        by_key[(meta["benchmark_short"], meta["scenario"], meta["test_mode"])] = (meta, detail(folder))
        assert "/build/logs/workload-" in str(folder)
    assert set(by_key) == {
        (m, s, t)
        for m, ss in (("bert", ("Offline", "Server")), ("3d-unet", ("Offline", "SingleStream")))
        for s in ss
        for t in ("PerformanceOnly", "AccuracyOnly")
    }
    offline, offline_loadgen = by_key[("bert", "Offline", "PerformanceOnly")]
    assert offline["system_name"] == "WL_H100_SXM_80GBx8_TRT"  # the generated custom system was detected
    # The config's target QPS reached LoadGen: the harness's own user.conf was not replaced by ours
    # (a --user_conf_path would leave LoadGen at mlperf.conf's target_qps 1.0).
    assert offline_loadgen["effective_target_qps"] == 9400 * 8
    assert offline["result_samples_per_second"] == pytest.approx(9400 * 8 * 0.98)
    assert offline["effective_min_duration_ms"] == 30000  # bert.Offline.min_duration
    server, server_loadgen = by_key[("bert", "Server", "PerformanceOnly")]
    assert server_loadgen["effective_target_qps"] == 5000  # bert.Server.target_qps
    assert server["effective_min_duration_ms"] == 60000  # --test_run: the Offline override did not reach Server
    assert by_key[("bert", "Offline", "AccuracyOnly")][0]["accuracy_pass"] is True
    # Engines once per model; run_harness per test mode, bert split in two by its overrides.
    assert targets(bed, "generate_engines") == [
        "--benchmarks=bert --scenarios=Offline,Server --config_ver=default",
        "--benchmarks=3d-unet --scenarios=Offline,SingleStream --config_ver=default",
    ]
    harness_runs = targets(bed, "run_harness")
    assert len(harness_runs) == 6 and not targets(bed, "run")
    assert (
        "--benchmarks=bert --scenarios=Offline --config_ver=default --test_mode=PerformanceOnly --test_run "
        "--min_duration=30000" in harness_runs
    )
    assert (
        "--benchmarks=bert --scenarios=Server --config_ver=default --test_mode=AccuracyOnly --test_run "
        "--server_target_qps=5000" in harness_runs
    )
    assert not any("user_conf" in line for line in calls(bed))
    # Setup per model, once; one build per commit.
    log = calls(bed)
    assert log.count("download_data bert") == 1 and log.count("download_data 3d-unet") == 1
    assert log.count("build") == 1
    assert not any(line == "download_data resnet50" for line in log)
    # The metrics layer parses what we collected.
    from workload.metrics import collect

    parsed = collect(first.results[0])
    assert parsed.results and not parsed.issues

    # "Reboot": the container is gone. The next run recreates it and skips finished setup.
    bed["engine"].client.containers.get(CONTAINER).remove(force=True)
    second = run(bed, actions[:1])
    assert second.status == "ok", second.error
    assert len(second.results) == 4 and not set(second.results) & set(first.results)
    log = calls(bed)
    assert log.count("download_data bert") == 1 and log.count("build") == 1
    assert len(targets(bed, "generate_engines")) == 3 and len(targets(bed, "run_harness")) == 10
    step_logs = "".join(p.read_text() for p in (bed["tmp"] / "runs").rglob("*.log"))
    assert f"container {CONTAINER} is not there; starting it" in step_logs
    assert bed["engine"].client.containers.get(CONTAINER).status == "running"


def test_unknown_system_without_custom_support_names_gpu_cpu_and_parameter(bed: dict[str, Any]) -> None:
    outcome = run(bed, [action(bed, "bert", "Offline", RequireCustomSystemSupport=False)])
    assert outcome.status == "failed"
    message = str(outcome.error)
    assert "does not recognise this system" in message
    assert "8x NVIDIA H100 80GB HBM3" in message and "AMD EPYC 9V84 96-Core Processor" in message
    assert "RequireCustomSystemSupport=true" in message
    assert not (bed["scratch"] / "standin_calls.log").exists()  # nothing downloaded for a run that cannot run


def test_a_failed_make_target_names_the_target_and_its_last_lines(bed: dict[str, Any]) -> None:
    makefile = bed["repo"] / "closed/NVIDIA/Makefile"
    makefile.write_text(
        makefile.read_text().replace(
            "preprocess_data: link_dirs\n",
            "preprocess_data: link_dirs\n\t@echo 'KiTS19 needs a manual download' >&2; exit 3\n",
        )
    )
    outcome = run(bed, [action(bed, "3d-unet", "Offline")])
    assert outcome.status == "failed"
    message = str(outcome.error)
    assert "make preprocess_data BENCHMARKS=3d-unet failed in the container (exit 2)" in message
    assert "KiTS19 needs a manual download" in message
    state = json.loads((bed["tmp"] / "state.json").read_text())["mlperf"]
    assert any(k.endswith(":3d-unet:download_data") for k in state)  # finished stages are remembered
    assert not any(k.endswith(":3d-unet:preprocess_data") for k in state)


def test_a_known_system_gets_the_configs_nvidia_lacks_and_only_with_custom_support(bed: dict[str, Any]) -> None:
    # Azure ND96asr_v4 is NVIDIA's A100_SXM4_40GBx8, which has a bert Offline config but none for
    # Server or SingleStream (the gap VirtualClient patched by overwriting NVIDIA's files).
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(A100X8))
    nvidia = bed["repo"] / "closed/NVIDIA"
    custom_list = (nvidia / "code/common/systems/custom_list.py").read_text()
    parameters = {"TestModes": "PerformanceOnly", "SystemDescription": json.dumps(A100X8)}

    # Without RequireCustomSystemSupport: Offline runs; the other two are named, with the parameter.
    refused = run(
        bed, [action(bed, "bert", "Offline,Server,SingleStream", RequireCustomSystemSupport=False, **parameters)]
    )
    assert refused.status == "failed"
    message = str(refused.error)
    for scenario in ("Server", "SingleStream"):
        assert (
            f"no result for bert-99 {scenario} (PerformanceOnly): NVIDIA's harness has no bert {scenario} config "
            "for A100_SXM4_40GBx8 (Custom, k_99, MaxP); set the parameter RequireCustomSystemSupport=true" in message
        )
    assert [p.parts[-3:] for p in refused.results] == [("DGX-A100_A100-SXM4-40GBx8_TRT", "bert-99", "Offline")]
    assert targets(bed, "generate_engines") == ["--benchmarks=bert --scenarios=Offline --config_ver=default"]

    # With it: what NVIDIA published is added for its own KnownSystem (SingleStream from its x1 class); Server,
    # which NVIDIA's v4.1 publishes for no A100_SXM4_40GB, follows the one rule (issue 27 item 7, as Hopper on v5.1+):
    # the nearest GPU of the same architecture that has it, A100_SXM_80GB, marked untuned.
    added = run(bed, [action(bed, "bert", "Offline,Server,SingleStream", **parameters)])
    assert added.status == "ok", added.error
    assert sorted(p.parts[-3:] for p in added.results) == [
        ("DGX-A100_A100-SXM4-40GBx8_TRT", "bert-99", s) for s in ("Offline", "Server", "SingleStream")
    ]
    single = (nvidia / "configs/bert/SingleStream/custom.py").read_text()
    assert "system = KnownSystem.A100_SXM4_40GBx8" in single
    assert "# From closed/NVIDIA/configs/bert/SingleStream/__init__.py A100_SXM4_40GBx1 (scaled from x1 to x8" in single
    server = (nvidia / "configs/bert/Server/custom.py").read_text()
    assert "system = KnownSystem.A100_SXM4_40GBx8" in server
    assert "# From closed/NVIDIA/configs/bert/Server/__init__.py A100_SXM_80GBx8" in server
    assert "# untuned: NVIDIA's v4.1 configs have no bert Server (k_99) config for NVIDIA A100-SXM4-40GB" in server
    assert not (nvidia / "configs/bert/Offline/custom.py").exists()  # NVIDIA has that one
    assert (nvidia / "code/common/systems/custom_list.py").read_text() == custom_list  # no custom system
    # Beside each result, where its config came from (the metrics read it into every metric's metadata).
    from workload.metrics.config_source import SIDECAR

    sources = {p.parts[-1]: json.loads((p / SIDECAR).read_text()) for p in added.results}
    assert sources["Offline"] == {
        "format": 1,
        "benchmark": "bert-99",
        "scenario": "Offline",
        "config_source": "nvidia",
        "config_tuned": True,
        "config_system": "A100_SXM4_40GBx8",
    }
    server_source = sources["Server"]
    assert server_source["config_source"] == "generated" and server_source["config_tuned"] is False
    assert "A100_SXM_80GB (Ampere" in server_source["config_untuned_reason"]
    single_source = sources["SingleStream"]
    assert single_source["config_source"] == "generated" and single_source["config_tuned"] is True
    assert single_source["config_from"].startswith(
        "closed/NVIDIA/configs/bert/SingleStream/__init__.py A100_SXM4_40GBx1 (scaled from x1 to x8"
    )
    assert single_source["config_system"] == "A100_SXM4_40GBx8"


USER_SERVER_CONFIG = """from . import *


@ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP)
class A100_SXM4_40GBx8(ServerGPUBaseConfig):
    system = KnownSystem.A100_SXM4_40GBx8
    gpu_batch_size = {"bert": 256}
    server_target_qps = 12000
"""


def test_a_config_the_user_registered_is_run_and_its_results_say_so(bed: dict[str, Any]) -> None:
    # The user's own custom.py (no workload header) for NVIDIA's A100_SXM4_40GBx8, which has no bert Server config.
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(A100X8))
    user_file = bed["repo"] / "closed/NVIDIA/configs/bert/Server/custom.py"
    user_file.write_text(USER_SERVER_CONFIG)
    outcome = run(
        bed,
        [
            action(
                bed,
                "bert",
                "Offline,Server",
                TestModes="PerformanceOnly",
                RequireCustomSystemSupport=False,
                SystemDescription=json.dumps(A100X8),
            )
        ],
    )
    assert outcome.status == "ok", outcome.error
    assert user_file.read_text() == USER_SERVER_CONFIG  # never rewritten
    server = next(folder for folder in outcome.results if folder.parts[-1] == "Server")
    assert detail(server)["effective_target_qps"] == 12000  # the user's value reached LoadGen
    from workload.metrics import collect

    sources = {}
    for folder in outcome.results:
        metadata = collect(folder).metrics[0].metadata
        sources[folder.parts[-1]] = (metadata["config_source"], metadata.get("config_tuned"), metadata["config_system"])
    assert sources == {
        "Offline": ("nvidia", True, "A100_SXM4_40GBx8"),
        "Server": ("user", None, "A100_SXM4_40GBx8"),  # workload cannot tell whether the user's values are tuned
    }


def test_a_scenario_nvidia_publishes_only_for_another_gpu_of_the_architecture_runs_untuned(
    bed: dict[str, Any],
) -> None:
    # NVIDIA published no H200 bert SingleStream config, but one for the H100 (the same architecture): the one rule
    # (issue 27 item 7) runs it with the H100's values, marked untuned; Offline is the H200's own.
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(H200X8))
    outcome = run(
        bed,
        [
            action(
                bed, "bert", "Offline,SingleStream", TestModes="PerformanceOnly", SystemDescription=json.dumps(H200X8)
            )
        ],
    )
    assert outcome.status == "ok", outcome.error
    assert sorted(p.parts[-3:] for p in outcome.results) == [
        ("WL_H200_SXM_141GBx8_TRT", "bert-99", s) for s in ("Offline", "SingleStream")
    ]
    single = (bed["repo"] / "closed/NVIDIA/configs/bert/SingleStream/custom.py").read_text()
    assert "# From closed/NVIDIA/configs/bert/SingleStream/__init__.py H100_SXM_80GBx1" in single
    assert "# untuned: NVIDIA's v4.1 configs have no bert SingleStream (k_99) config for NVIDIA H200" in single
    offline = (bed["repo"] / "closed/NVIDIA/configs/bert/Offline/custom.py").read_text()
    assert "# untuned" not in offline and "H200_SXM_141GBx8" in offline


def test_high_accuracy_runs_its_own_fp16_config_and_a_missing_99_9_result_is_caught(bed: dict[str, Any]) -> None:
    outcome = run(
        bed, [action(bed, "bert", "Offline", ConfigVersion="default,high_accuracy", TestModes="AccuracyOnly")]
    )
    assert outcome.status == "ok", outcome.error
    by_benchmark = {p.parts[-2]: json.loads((p / "metadata.json").read_text()) for p in outcome.results}
    assert sorted(by_benchmark) == ["bert-99", "bert-99.9"]
    # The 99.9% target needs fp16 (NVIDIA's HighAccuracy config); int8 values would fail it.
    assert by_benchmark["bert-99.9"]["accuracy_pass"] is True

    # A known system without a 99.9% config and no system check to tell: the bert-99 result must not
    # stand in for the missing bert-99.9 one.
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(A100X8))
    (bed["repo"] / "closed/NVIDIA/scripts/get_system_id.py").unlink()
    missing = run(
        bed,
        [
            action(
                bed,
                "bert",
                "Offline",
                ConfigVersion="default,high_accuracy",
                TestModes="PerformanceOnly",
                RequireCustomSystemSupport=False,
                SystemDescription=json.dumps(A100X8),
            )
        ],
    )
    assert missing.status == "failed"
    assert "no result for bert-99.9 Offline PerformanceOnly: the harness has no registered config for " in str(
        missing.error
    )
    assert [p.parts[-2] for p in missing.results] == ["bert-99"]


def test_a_crash_of_the_system_check_is_shown_not_called_an_unknown_system(bed: dict[str, Any]) -> None:
    script = bed["repo"] / "closed/NVIDIA/scripts/get_system_id.py"
    script.write_text("import nvidia_smi_bindings  # missing in the container\n")
    outcome = run(bed, [action(bed, "bert", "Offline")])
    assert outcome.status == "failed"
    message = str(outcome.error)
    assert "does not recognise" not in message and "RequireCustomSystemSupport" not in message
    assert "the harness's system detection failed: `python3 -m scripts.get_system_id` exited 1" in message
    assert "ModuleNotFoundError: No module named 'nvidia_smi_bindings'" in message
    assert not (bed["scratch"] / "standin_calls.log").exists()  # nothing downloaded


def test_a_known_system_needs_gpuconfigs_values_only_for_what_nvidia_lacks(bed: dict[str, Any]) -> None:
    # The harness knows the machine (A100_SXM4_40GBx8), the table has no values for its GPU (as for an
    # L40S today): what NVIDIA registered runs; only what it lacks fails, naming both gaps.
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(A100X8))
    description = json.dumps({**A100X8, "gpu_name": "NVIDIA L40S"})
    complete = run(bed, [action(bed, "bert", "Offline", TestModes="PerformanceOnly", SystemDescription=description)])
    assert complete.status == "ok", complete.error
    lacking = run(
        bed, [action(bed, "bert", "Offline,Server", TestModes="PerformanceOnly", SystemDescription=description)]
    )
    assert lacking.status == "failed"
    message = str(lacking.error)
    assert (
        "no result for bert-99 Server (PerformanceOnly): NVIDIA's harness has no bert Server config for "
        "A100_SXM4_40GBx8 (Custom, k_99, MaxP), and gpuconfigs/ has no values to add one: no entry for the GPU "
        "'NVIDIA L40S'" in message
    )
    assert [p.parts[-3:] for p in lacking.results] == [("DGX-A100_A100-SXM4-40GBx8_TRT", "bert-99", "Offline")]


H100X1 = {**H100X8, "gpu_count": 1}


def test_an_engine_wider_than_the_machine_is_reported_before_any_setup(bed: dict[str, Any]) -> None:
    # NVIDIA's smallest H100 llama2-70b class is TP2 on two GPUs: one H100 must not get a TP 2 config.
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(H100X1))
    outcome = run(bed, [action(bed, "llama2-70b", "Offline", SystemDescription=json.dumps(H100X1))])
    assert outcome.status == "failed"
    message = str(outcome.error)
    assert "H100_SXM_80GB_TP2x1" in message and "needs a multiple of 2 GPUs" in message and "has 1" in message
    assert not (bed["repo"] / "closed/NVIDIA/configs/llama2-70b/Offline/custom.py").exists()
    assert not (bed["scratch"] / "standin_calls.log").exists()  # nothing downloaded for what cannot run


def test_the_harness_script_output_is_read_as_nvidia_prints_it(bed: dict[str, Any]) -> None:
    # NVIDIA's script prints `None` / `KnownSystem.<name>`; other text (e.g. a bare system id) is not a system.
    script = bed["repo"] / "closed/NVIDIA/scripts/get_system_id.py"
    script.write_text('print("DGX-H100_H100-SXM-80GBx8")\n')
    outcome = run(bed, [action(bed, "bert", "Offline")])
    assert outcome.status == "failed"
    assert "without printing None or KnownSystem.<name>" in str(outcome.error)
    assert "DGX-H100_H100-SXM-80GBx8" in str(outcome.error)
    # The harness's logging around the answer does not hide it.
    script.write_text(
        "import sys\nprint('[I] detecting the system', file=sys.stderr)\nprint(None)\n"
        "print('[I] done', file=sys.stderr)\n"
    )
    unknown = run(bed, [action(bed, "bert", "Offline", RequireCustomSystemSupport=False)])
    assert unknown.status == "failed" and "does not recognise this system" in str(unknown.error)
