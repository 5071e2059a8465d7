"""The v5.1 adapter against the v5.1 stand-in harness in a real container of the test bed.

Real parts: the test bed's private dockerd, the fresh-VM Debian image (python3, make, procps), a detached container
with the stand-in's closed/NVIDIA mounted at /work, real ``docker exec`` of every op's argv (the commands ``plan``
prints), the stand-in's trtllm-serve answering on a free port of 127.0.0.1 inside the container, results written by the
stand-in and parsed by workload's metrics layer. No GPU: the machine the stand-in detects is a file in the scratch
folder (tests/fixtures/harness/rounds/v5.1/UPSTREAM.md).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mlperf_rounds_driver import Applied, apply_v51, root_exec
from tests.testbed.ports import free_port
from workload.errors import BenchmarkFailed, Interrupted
from workload.hosts.local import LocalHost
from workload.metrics.collection import collect
from workload.mlperf.container import ContainerSpec, HarnessContainer
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import to_changes
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds.v5_1 import DETECTION_ARGV
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem

pytestmark = pytest.mark.slow

TREE = Path(__file__).parent / "fixtures" / "harness" / "rounds" / "v5.1" / "tree"
# A cloud B200 VM NVIDIA's v5.1 list does not know (AMD CPU: its B200 systems want an Intel one).
B200X4 = HostSystem("NVIDIA B200", 183359, 4, "AMD EPYC 9V84 96-Core Processor", 96, 2, 1, 1_900_000_000_000)
ROOT = UserFacts("root", 0, 0, "root", "/root")


@pytest.fixture
def bed(tmp_path: Path, docker_engine: Any, harness_image: str) -> Iterator[dict[str, Any]]:
    repo = tmp_path / "repo"
    shutil.copytree(TREE, repo)
    nvidia = repo / "closed" / "NVIDIA"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    detected = {"gpu_name": B200X4.gpu_name, "gpu_count": 4, "cpu_model": B200X4.cpu_model, "memory_bytes": 10**12}
    (scratch / "standin_detected_system.json").write_text(json.dumps(detected))
    name = f"wl-r51-{uuid.uuid4().hex[:8]}"
    spec = ContainerSpec(
        name=name,
        image=harness_image,
        nvidia_dir=str(nvidia),
        scratch_path=str(scratch),
        user="0:0",
        use_gpus=False,
        unlimited_memlock=False,
    )
    lines: list[str] = []
    container = HarnessContainer(
        docker_engine.client, spec, lines.append, outer=LocalHost(), docker_url=docker_engine.base_url
    )
    facts = MLPerfFacts(
        nvidia_dir=str(nvidia),
        nvidia_dir_exists=True,
        version=HarnessVersion(5, 1),
        commit="standin",
        scratch_path=str(scratch),
        user=ROOT,
        machine="x86_64",
    )
    yield {"nvidia": nvidia, "scratch": scratch, "container": container, "facts": facts, "engine": docker_engine}
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(name).remove(force=True)


PORT = free_port()


def params(**extra: Any) -> MLPerfParameters:
    base: dict[str, Any] = {
        "LLMServerPort": PORT,
        "Model": "llama2-70b",
        # The stand-in's scratch is a temp folder: llama2-70b's ~337 GiB are not on a CI machine.
        "SkipFreeSpaceCheck": True,
        "Scenarios": "Offline,Server",
        "TestModes": "PerformanceOnly",
        "Quick": True,
        "RequireCustomSystemSupport": True,
        "ContainerImage": "standin",
    }
    base.update(extra)
    return MLPerfParameters.model_validate(base)


def processes(container: HarnessContainer) -> list[str]:
    """Every process in the container but PID 1 and the ps itself (as root, after a stop too)."""
    _code, out = root_exec(container)(["ps", "-eo", "pid=,args="])
    rows = [line.strip() for line in out.splitlines() if line.strip()]
    return [r for r in rows if not r.startswith("1 ") and "ps -eo" not in r]


def test_custom_b200_runs_llama2_with_its_own_configs_behind_a_server(bed: dict[str, Any]) -> None:
    applied = apply_v51(params(), bed["facts"], bed["container"], B200X4, run_id="r1", applied=Applied())
    nvidia: Path = bed["nvidia"]
    # The system check answered UNREGISTERED_...; our system is SYSTEM_NAME with its own config files.
    assert applied.system_name == "WL_B200_SXM_180GBx4"
    assert applied.written == [
        "configs/WL_B200_SXM_180GBx4/Offline/llama2-70b.py",
        "configs/WL_B200_SXM_180GBx4/Server/llama2-70b.py",
    ]
    offline = (nvidia / applied.written[0]).read_text()
    assert "loadgen_fields.offline_expected_qps: 188.0," in offline  # NVIDIA's x8 376 QPS for 4 GPUs
    # NVIDIA's own files are untouched.
    assert (nvidia / "configs" / "B200-SXM-180GBx8" / "Offline" / "llama2-70b.py").read_text() == (
        TREE / "closed" / "NVIDIA" / "configs" / "B200-SXM-180GBx8" / "Offline" / "llama2-70b.py"
    ).read_text()
    # The commands run are the ones plan prints for the same inputs (after the system check decided the name).
    planned = plan_ops(params(), bed["facts"], run_id="r1", system_name=applied.system_name)
    shown = [c.argv_values() for change in to_changes(planned.after_system_check()) for c in change.commands]
    run_after_check = [list(a) for a in applied.argvs[1:]]
    for argv in shown:
        assert argv[7:] in run_after_check, argv  # docker exec -u U -w W NAME <argv>
    servers = [a for a in applied.argvs if "llm-server" in a]
    assert len(servers) == 2  # one server per scenario
    harness_runs = [a for a in applied.argvs if a[:2] == ("make", "run_harness")]
    assert all("SYSTEM_NAME=WL_B200_SXM_180GBx4" in a for a in harness_runs)
    assert all(
        any(p.startswith("RUN_ARGS=") and f"--trtllm_server_urls=127.0.0.1:{PORT}" in p for p in a)
        for a in harness_runs
    )
    # Results land under <id>_TRT/<benchmark>/<Scenario> and parse.
    dirs = sorted(f.directory.split("/build/logs/")[1] for f in applied.found)
    assert dirs == [
        "workload-r1-llama2-70b-perf-offline/WL_B200_SXM_180GBx4_TRT/llama2-70b-99/Offline",
        "workload-r1-llama2-70b-perf-server/WL_B200_SXM_180GBx4_TRT/llama2-70b-99/Server",
    ]
    collection = collect(nvidia / "build" / "logs")
    by_scenario = {r.scenario: r for r in collection.results}
    assert set(by_scenario) == {"Offline", "Server"}
    assert by_scenario["Offline"].headline is not None
    assert by_scenario["Offline"].headline.value == pytest.approx(188 * 0.98, rel=1e-3)
    # Every server is gone, the container still runs.
    assert processes(bed["container"]) == []
    assert bed["container"].status() == "running"


def _known_b200(bed: dict[str, Any]) -> None:
    """The machine is NVIDIA's own B200-SXM-180GBx4 (Intel CPU), a system v5.1 has no config folder for."""
    detected = {
        "gpu_name": "NVIDIA B200",
        "gpu_count": 4,
        "cpu_model": "Intel(R) Xeon(R) Platinum 8570",
        "memory_bytes": 2 * 10**12,
    }
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(detected))


def test_a_known_system_without_configs_is_refused_before_anything_runs(bed: dict[str, Any]) -> None:
    _known_b200(bed)
    applied = Applied()
    with pytest.raises(BenchmarkFailed) as info:
        apply_v51(
            params(RequireCustomSystemSupport=False),
            bed["facts"],
            bed["container"],
            B200X4,
            run_id="r2",
            applied=applied,
        )
    assert "would run configs/minimal" in str(info.value)
    assert "configs/B200-SXM-180GBx4/Offline/llama2-70b.py" in str(info.value)
    # Only build/ (NVIDIA's code imports nothing without it) and the system check ran: no download, no engine.
    assert [tuple(a) for a in applied.argvs] == [("make", "link_dirs", "EXTERNAL_USER=1"), DETECTION_ARGV]


def test_a_run_the_harness_turns_minimal_is_refused_before_its_server_starts(bed: dict[str, Any]) -> None:
    _known_b200(bed)
    # Someone's config for the system has no entry for the 99 % setting: the harness falls back to minimal for it.
    nvidia: Path = bed["nvidia"]
    path = nvidia / "configs" / "B200-SXM-180GBx4" / "Offline" / "llama2-70b.py"
    path.parent.mkdir(parents=True)
    text = (nvidia / "configs" / "B200-SXM-180GBx8" / "Offline" / "llama2-70b.py").read_text()
    path.write_text(text.split("    C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.99)")[0] + "}\n")
    applied = Applied()
    with pytest.raises(BenchmarkFailed) as info:
        apply_v51(
            params(Scenarios="Offline", RequireCustomSystemSupport=False),
            bed["facts"],
            bed["container"],
            B200X4,
            run_id="r2",
            applied=applied,
        )
    # The engines step already shows the fallback: refused there, before any server or run.
    assert "make generate_engines ran the harness's minimal settings" in str(info.value)
    assert "Attempting to load minimal config" in str(info.value)
    assert not any("llm-server" in a for a in applied.argvs)
    assert processes(bed["container"]) == []
    assert path.read_text().startswith("# Stand-in")  # not ours: left as it was


def test_a_failing_harness_run_stops_its_server(bed: dict[str, Any]) -> None:
    # The stand-in's run hook with a bad value: run_harness fails after the server answered.
    (bed["scratch"] / "standin_run_harness_sleep").write_text("not-a-number\n")
    applied = Applied()
    with pytest.raises(BenchmarkFailed) as info:
        apply_v51(params(Scenarios="Offline"), bed["facts"], bed["container"], B200X4, run_id="r4", applied=applied)
    assert "make run_harness failed" in str(info.value)
    assert any("llm-server" in a for a in applied.argvs)  # the server was started
    assert any("LLM server for llama2-70b Offline answers" in line for line in applied.log)
    assert any(line == "LLM server for llama2-70b Offline stopped" for line in applied.log)
    assert not (bed["nvidia"] / "build" / "logs" / "workload-r4-llama2-70b-perf-offline.server.pgid").exists()
    assert processes(bed["container"]) == []
    assert bed["container"].status() == "running"  # not ours: left as it was


def test_ctrl_c_during_a_served_run_stops_harness_and_server(bed: dict[str, Any]) -> None:
    (bed["scratch"] / "standin_run_harness_sleep").write_text("120\n")
    container: HarnessContainer = bed["container"]
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            apply_v51(params(Scenarios="Offline"), bed["facts"], container, B200X4, run_id="r3", applied=Applied())
        except BaseException as exc:  # the test inspects it
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    started = bed["scratch"] / "standin_run_harness_started"
    deadline = time.monotonic() + 120
    while not started.exists():
        assert time.monotonic() < deadline, "the harness never started"
        assert worker.is_alive(), outcome
        time.sleep(0.2)
    running = processes(container)
    assert any("standin_server" in p for p in running) and any("sleep 120" in p for p in running), running
    # What the engine does on Ctrl-C: stop the container's commands (Host.on_interrupt -> HarnessContainer.stop).
    container.stop(grace_s=10)
    worker.join(60)
    assert not worker.is_alive()
    assert isinstance(outcome.get("error"), Interrupted), outcome
    assert processes(container) == []
    assert not LocalHost().exists(
        str(bed["nvidia"] / "build" / "logs" / "workload-r3-llama2-70b-perf-offline.server.pgid")
    )


def test_custom_b200_runs_whisper_offline_with_its_own_scripts_and_no_server(bed: dict[str, Any]) -> None:
    """whisper (a v5.1 benchmark the stand-in learnt from NVIDIA's Benchmark enum): set up with its own download
    scripts, its config file written from NVIDIA's B200 values, run without an LLM server, results parsed."""
    model = {"Model": "whisper", "Scenarios": "Offline"}
    applied = apply_v51(params(**model), bed["facts"], bed["container"], B200X4, run_id="w1", applied=Applied())
    assert applied.written == ["configs/WL_B200_SXM_180GBx4/Offline/whisper.py"]
    text = (bed["nvidia"] / applied.written[0]).read_text()
    assert "loadgen_fields.offline_expected_qps: 325.0," in text  # NVIDIA's B200x8 650 QPS for 4 GPUs
    assert ("bash", "code/whisper/tensorrt/download_models.sh") in applied.argvs
    assert ("bash", "code/whisper/tensorrt/download_dataset.sh") in applied.argvs
    assert not [a for a in applied.argvs if "run_llm_server" in a]
    calls = (bed["scratch"] / "standin_calls.log").read_text().splitlines()
    assert calls[:3] == ["download_data whisper", "download_model whisper", "preprocess_data whisper"]
    dirs = sorted(f.directory.split("/build/logs/")[1] for f in applied.found)
    assert dirs == ["workload-w1-whisper-perf/WL_B200_SXM_180GBx4_TRT/whisper/Offline"]
    (result,) = collect(bed["nvidia"] / "build" / "logs").results
    assert result.headline is not None
    assert result.headline.value == pytest.approx(325 * 0.98, rel=1e-3)
    assert processes(bed["container"]) == []
