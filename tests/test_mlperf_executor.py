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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_harness import make_bare_repo
from workload.engine import Engine, RunOptions
from workload.hosts.base import Host, HostSpec
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

pytestmark = pytest.mark.slow

# A cloud H100 VM: NVIDIA's system list wants a Xeon 8480C for H100 SXM, so the harness does not know it.
H100X8 = {
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_memory_mib": 81559,
    "gpu_count": 8,
    "cpu_model": "AMD EPYC 9V84 96-Core Processor",
    "cpu_cores_per_socket": 80,
    "cpu_sockets": 2,
    "cpu_threads_per_core": 1,
    "memory_bytes": 1_900_000_000_000,
}
# Azure ND96asr_v4: matches NVIDIA's A100_SXM4_40GBx8 through the generic x86 CPU pattern.
A100X8 = {
    **H100X8,
    "gpu_name": "NVIDIA A100-SXM4-40GB",
    "gpu_memory_mib": 40960,
    "cpu_model": "AMD EPYC 7V12 64-Core Processor",
    "cpu_cores_per_socket": 48,
}
CONTAINER = "mlperf-inference-root-x86_64"


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


def test_two_models_custom_system_rerun_after_reboot(bed: dict[str, Any]) -> None:
    actions = [
        action(bed, "bert", "Offline,Server", **{"bert.Offline.min_duration": 30000}),
        action(bed, "3d-unet", "Offline,SingleStream"),
    ]
    first = run(bed, actions)
    assert first.status == "ok", first.error
    # 2 models x 2 scenarios x 2 test modes, each its own folder under this run's LOG_DIR.
    assert len(first.results) == 8
    by_key = {}
    for folder in first.results:
        meta = json.loads((folder / "metadata.json").read_text())
        by_key[(meta["benchmark_short"], meta["scenario"], meta["test_mode"])] = meta
        assert "/build/logs/workload-" in str(folder)
    assert set(by_key) == {
        (m, s, t)
        for m, ss in (("bert", ("Offline", "Server")), ("3d-unet", ("Offline", "SingleStream")))
        for s in ss
        for t in ("PerformanceOnly", "AccuracyOnly")
    }
    offline = by_key[("bert", "Offline", "PerformanceOnly")]
    assert offline["system_name"] == "WL_H100_SXM_80GBx8_TRT"  # the generated custom system was detected
    assert offline["result_samples_per_second"] == pytest.approx(9400 * 8 * 0.98)  # per-GPU gpuconfigs value x 8
    assert offline["effective_min_duration_ms"] == 30000  # user.conf override reached LoadGen
    assert by_key[("bert", "Server", "PerformanceOnly")]["effective_min_duration_ms"] == 60000  # --test_run
    assert by_key[("bert", "Offline", "AccuracyOnly")]["accuracy_pass"] is True
    # Setup per model, once; one build per commit.
    log = calls(bed)
    assert log.count("download_data bert") == 1 and log.count("download_data 3d-unet") == 1
    assert log.count("build") == 1 and sum(line.startswith("run ") for line in log) == 4
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
    assert sum(line.startswith("run ") for line in log) == 6
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


def test_known_system_without_a_config_is_named_and_other_results_are_kept(bed: dict[str, Any]) -> None:
    # NVIDIA v4.1 has no A100_SXM4_40GBx8 Server config (the gap VirtualClient patched by overwriting files).
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(A100X8))
    outcome = run(
        bed, [action(bed, "bert", "Offline,Server", TestModes="PerformanceOnly", SystemDescription=json.dumps(A100X8))]
    )
    assert outcome.status == "failed"
    assert (
        "no result for bert Server PerformanceOnly: the harness has no registered config for "
        "bert.Server.DGX-A100_A100-SXM4-40GBx8" in str(outcome.error)
    )
    assert [p.parts[-3:] for p in outcome.results] == [("DGX-A100_A100-SXM4-40GBx8_TRT", "bert-99", "Offline")]
