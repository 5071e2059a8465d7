"""``workload run`` (the engine and MLPerfExecutor's interpreter) against the v5.0 and v5.1 stand-ins in a real
container of the test bed: the round is recognised from the checkout, the custom system is written in the round's
format, the v5.1 LLM server is started and stopped around each run, results are kept and parsed.

Real parts: private dockerd, the fresh-VM image kept open as the harness container (``ContainerImage``), real
``docker exec`` of every planned op, the stand-ins (tests/fixtures/harness/rounds/*/UPSTREAM.md). No GPU
(``UseGpus`` false, the machine given as ``SystemDescription`` and to the stand-in's detection file).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.fixtures.harness.make_harness import git
from tests.fixtures.harness.rounds.make_round import make_round_tree
from tests.testbed.dockerexec import exec_output, is_exec_wrapper
from tests.testbed.ports import free_port as _free_port
from workload.engine import Engine, RunOptions
from workload.hosts.base import Host, HostSpec
from workload.hosts.local import LocalHost
from workload.metrics.collection import collect
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent

B200X4 = {
    "gpu_name": "NVIDIA B200",
    "gpu_memory_mib": 183359,
    "gpu_count": 4,
    "cpu_model": "AMD EPYC 9V84 96-Core Processor",
    "cpu_cores_per_socket": 96,
    "cpu_sockets": 2,
    "cpu_threads_per_core": 1,
    "memory_bytes": 1_900_000_000_000,
}
H100X8 = {**B200X4, "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_memory_mib": 81559, "gpu_count": 8}


def _bed(tmp_path: Path, docker_engine: Any, image: str, harness_round: str, machine: dict[str, Any]) -> dict[str, Any]:
    repo = tmp_path / "repo"
    nvidia = make_round_tree(repo, harness_round)
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", f"stand-in harness {harness_round}", cwd=repo)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(json.dumps(machine))
    return {
        "tmp": tmp_path,
        "repo": repo,
        "nvidia": nvidia,
        "scratch": scratch,
        "engine": docker_engine,
        "image": image,
        "container": f"wl-rounds-{uuid.uuid4().hex[:8]}",
        "machine": machine,
        "port": _free_port(),
    }


@pytest.fixture
def bed51(tmp_path: Path, docker_engine: Any, harness_image: str) -> Iterator[dict[str, Any]]:
    bed = _bed(tmp_path, docker_engine, harness_image, "v5.1", B200X4)
    yield bed
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(bed["container"]).remove(force=True)


@pytest.fixture
def bed50(tmp_path: Path, docker_engine: Any, harness_image: str) -> Iterator[dict[str, Any]]:
    bed = _bed(tmp_path, docker_engine, harness_image, "v5.0", H100X8)
    yield bed
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(bed["container"]).remove(force=True)


def action(bed: dict[str, Any], scenarios: str, **extra: Any) -> dict[str, Any]:
    return {
        "Type": "MLPerfExecutor",
        "Parameters": {
            "Scenario": "inferencemodels-llama2-70b",
            "Model": "llama2-70b",
            # The stand-in's scratch is a temp folder: llama2-70b's ~337 GiB are not on a CI machine.
            "SkipFreeSpaceCheck": True,
            "Scenarios": scenarios,
            "TestModes": "PerformanceOnly",
            "Quick": True,
            "UseGpus": False,
            "UnlimitedMemlock": False,
            "DockerBaseUrl": bed["engine"].base_url,
            "ContainerImage": bed["image"],
            "RepoPath": str(bed["repo"]),
            "ScratchPath": str(bed["scratch"]),
            "SystemDescription": json.dumps(bed["machine"]),
            "RequireCustomSystemSupport": True,
            "DockerName": bed["container"],
            "LLMServerPort": bed["port"],
            **extra,
        },
    }


def run(bed: dict[str, Any], actions: list[dict[str, Any]]) -> Any:
    path = bed["tmp"] / "profile.json"
    path.write_text(json.dumps({"Description": "MLPerf rounds test", "Actions": actions}))
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


#: the config-source keys of the metadata (workload/metrics/config_source.py); NVIDIA's own ``config_name`` is not one
CONFIG_KEYS = ("config_source", "config_tuned", "config_untuned_reason", "config_from", "config_system")


def config_metadata(outcome: Any) -> list[dict[str, Any]]:
    """The config-source keys of every metric of the run's kept results, as ``workload run`` parses them."""
    parsed = [collect(path, host="local") for path in outcome.results]
    assert all(not c.issues for c in parsed), [c.issues for c in parsed]
    metas = [m.metadata for c in parsed for m in c.metrics]
    assert metas
    return [{k: v for k, v in m.items() if k in CONFIG_KEYS} for m in metas]


def calls(bed: dict[str, Any]) -> list[str]:
    log: Path = bed["scratch"] / "standin_calls.log"
    return log.read_text().splitlines()


def processes(bed: dict[str, Any]) -> list[str]:
    """The container's processes but PID 1, the ps and its exec's shell; read back whole (``exec_output``: a plain
    exec's output is sometimes lost, moby#27289, and an empty list then read as "nothing runs")."""
    container = bed["engine"].client.containers.get(bed["container"])
    if container.status != "running":  # stopped: nothing runs in it
        return []
    _code, out = exec_output(container, ["ps", "-eo", "pid=,args="], user="0:0")
    rows = [r.strip() for r in out.splitlines() if r.strip()]
    return [r for r in rows if not r.startswith("1 ") and "ps -eo" not in r and not is_exec_wrapper(r)]


def test_v51_run_custom_b200_behind_a_server(bed51: dict[str, Any]) -> None:
    outcome = run(bed51, [action(bed51, "Offline,Server")])
    assert outcome.status == "ok", outcome.error
    nvidia: Path = bed51["nvidia"]
    ours = nvidia / "configs" / "WL_B200_SXM_180GBx4"
    assert sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*.py")) == [
        "Offline/llama2-70b.py",
        "Server/llama2-70b.py",
    ]
    assert "loadgen_fields.server_target_qps: 182.0," in (ours / "Server" / "llama2-70b.py").read_text()
    servers = [c for c in calls(bed51) if c.startswith("run_llm_server ")]
    runs = [c for c in calls(bed51) if c.startswith("run_harness ")]
    assert len(servers) == 2 and len(runs) == 2
    assert all("--server_in_foreground" in c and "--core_type=trtllm_endpoint" in c for c in servers)
    url = f"--trtllm_server_urls=127.0.0.1:{bed51['port']}"
    assert all(url in c and "--accuracy_target=0.99" in c for c in runs)
    # Results kept: <LOG_DIR>/WL_B200_SXM_180GBx4_TRT/llama2-70b-99/<Scenario>, and they parse.
    assert sorted(p.parts[-3:] for p in outcome.results) == [
        ("WL_B200_SXM_180GBx4_TRT", "llama2-70b-99", "Offline"),
        ("WL_B200_SXM_180GBx4_TRT", "llama2-70b-99", "Server"),
    ]
    parsed = collect(nvidia / "build" / "logs")
    assert {r.scenario for r in parsed.results} == {"Offline", "Server"}
    assert processes(bed51) == []  # the servers were stopped
    # The metrics say the values are ours, tuned: NVIDIA's v5.1 B200 values, naming the file they come from.
    for meta in config_metadata(outcome):
        assert meta["config_source"] == "generated" and meta["config_tuned"] is True
        assert meta["config_system"] == "WL_B200_SXM_180GBx4" and "config_untuned_reason" not in meta
        assert "configs/B200-SXM-180GBx8/" in meta["config_from"]


def test_v51_hopper_is_refused_naming_v50_without_custom_support(
    tmp_path: Path, docker_engine: Any, harness_image: str
) -> None:
    bed = _bed(tmp_path, docker_engine, harness_image, "v5.1", H100X8)
    try:
        outcome = run(bed, [action(bed, "Offline", RequireCustomSystemSupport=False)])
    finally:
        with contextlib.suppress(Exception):
            docker_engine.client.containers.get(bed["container"]).remove(force=True)
    assert outcome.status != "ok"
    text = str(outcome.error)
    assert "no tuned configs for NVIDIA H100 80GB HBM3" in text and "v5.0 is the last round that tunes it" in text
    assert (
        not any(c.startswith(("run_harness", "download_")) for c in calls(bed))
        if (bed["scratch"] / "standin_calls.log").exists()
        else True
    )


def test_v51_hopper_with_custom_support_runs_untuned(tmp_path: Path, docker_engine: Any, harness_image: str) -> None:
    bed = _bed(tmp_path, docker_engine, harness_image, "v5.1", H100X8)
    try:
        outcome = run(bed, [action(bed, "Offline")])
    finally:
        with contextlib.suppress(Exception):
            docker_engine.client.containers.get(bed["container"]).remove(force=True)
    assert outcome.status == "ok", outcome.error
    text = (bed["nvidia"] / "configs" / "WL_H100_SXM_80GBx8" / "Offline" / "llama2-70b.py").read_text()
    assert "# untuned: NVIDIA's v5.1 configs do not tune NVIDIA H100 80GB HBM3" in text
    log = "\n".join(p.read_text() for p in (bed["tmp"] / "runs").rglob("*.log"))
    assert "untuned:" in log
    # ... and so do the metrics of its result: untuned, why, and v5.0's file the values come from.
    metas = config_metadata(outcome)
    assert {m["config_tuned"] for m in metas} == {False}
    reason = metas[0]["config_untuned_reason"]
    assert reason.startswith("NVIDIA's v5.1 configs do not tune NVIDIA H100 80GB HBM3, these are its v5.0 values")
    assert metas[0]["config_from"].startswith("v5.0 closed/NVIDIA/configs/llama2-70b/Offline/")
    assert metas[0]["config_source"] == "generated" and metas[0]["config_system"] == "WL_H100_SXM_80GBx8"


def test_v50_run_custom_h100_in_custom_list_json(bed50: dict[str, Any]) -> None:
    outcome = run(bed50, [action(bed50, "Offline")])
    assert outcome.status == "ok", outcome.error
    nvidia: Path = bed50["nvidia"]
    entries = json.loads((nvidia / "code/common/systems/custom_list.json").read_text())
    assert list(entries) == ["WL_H100_SXM_80GBx8"]
    assert not (nvidia / "code/common/systems/custom_list.py").exists()
    custom = (nvidia / "configs/llama2-70b/Offline/custom.py").read_text()
    assert "system = KnownSystem.WL_H100_SXM_80GBx8" in custom and "offline_expected_qps = 300" in custom
    (result,) = outcome.results
    assert result.parts[-3:] == ("WL_H100_SXM_80GBx8_TRT", "llama2-70b-99", "Offline")
    runs = [c for c in calls(bed50) if c.startswith("run_harness ")]
    assert runs and "--config_ver=default" in runs[0] and "--test_run" in runs[0]
    # v5.0 tunes Hopper: the generated class holds NVIDIA's H100 values, and the metrics say so.
    for meta in config_metadata(outcome):
        assert meta["config_source"] == "generated" and meta["config_tuned"] is True
        assert meta["config_system"] == "WL_H100_SXM_80GBx8"
        assert meta["config_from"].startswith("closed/NVIDIA/configs/llama2-70b/Offline/__init__.py H100_SXM_80GB")


def test_plan_shows_the_v51_server_commands(bed51: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from workload.cli import invoke

    path = bed51["tmp"] / "profile.json"
    path.write_text(json.dumps({"Description": "MLPerf rounds test", "Actions": [action(bed51, "Offline")]}))
    assert invoke(["plan", "--profile", str(path), "--details"]) == 0
    out = capsys.readouterr().out
    assert "make run_llm_server" in out and "llm-server-probe" in out and "llm-server-stop" in out
    assert "--accuracy_target=0.99" in out and "SYSTEM_NAME=" in out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_during_a_served_v51_run_stops_harness_and_server(bed51: dict[str, Any], signum: int) -> None:
    """``workload run`` in a long v5.1 run_harness against its LLM server: Ctrl-C (or SIGTERM) stops both."""
    (bed51["scratch"] / "standin_run_harness_sleep").write_text("397.5\n")
    started = bed51["scratch"] / "standin_run_harness_started"
    profile = bed51["tmp"] / "profile.json"
    profile.write_text(json.dumps({"Description": "MLPerf rounds test", "Actions": [action(bed51, "Offline")]}))
    runs = bed51["tmp"] / "runs"
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(profile), "--output-dir", str(runs)]
    env = {**os.environ, "WORKLOAD_STATE_PATH": str(bed51["tmp"] / "state.json"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while not (started.exists() and any("sleep 397.5" in p for p in _ps(bed51))):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the harness run never started"
            time.sleep(0.3)
        running = _ps(bed51)
        assert any("standin_server" in p for p in running), running  # the server answers the harness
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out
    assert _ps(bed51) == []  # neither the harness nor the server is left in the container
    (folder,) = runs.iterdir()
    (outcome,) = json.loads((folder / "run.json").read_text())["outcomes"]
    assert outcome["status"] == "interrupted"
    assert not list((bed51["nvidia"] / "build" / "logs").glob("*.server.pgid"))


def _ps(bed: dict[str, Any]) -> list[str]:
    try:
        return processes(bed)
    except docker.errors.NotFound:  # the container is not there (yet, or any more)
        return []


INTEL_B200X4 = {**B200X4, "cpu_model": "Intel(R) Xeon(R) Platinum 8570", "memory_bytes": 2 * 10**12}


def _known_b200(tmp_path: Path, docker_engine: Any, image: str) -> dict[str, Any]:
    """NVIDIA's own B200-SXM-180GBx4 (Intel CPU): v5.1 knows the system but has no config folder for it."""
    return _bed(tmp_path, docker_engine, image, "v5.1", INTEL_B200X4)


def _remove(bed: dict[str, Any]) -> None:
    with contextlib.suppress(Exception):
        bed["engine"].client.containers.get(bed["container"]).remove(force=True)


def test_v51_known_system_without_configs_is_refused_before_setup(
    tmp_path: Path, docker_engine: Any, harness_image: str
) -> None:
    bed = _known_b200(tmp_path, docker_engine, harness_image)
    try:
        outcome = run(bed, [action(bed, "Offline", RequireCustomSystemSupport=False)])
    finally:
        _remove(bed)
    assert outcome.status == "failed"
    text = str(outcome.error)
    assert "configs/B200-SXM-180GBx4/Offline/llama2-70b.py" in text and "would run configs/minimal" in text
    assert "nothing set up or run" in text
    assert not (bed["scratch"] / "standin_calls.log").exists()


def test_v51_a_run_the_harness_turns_minimal_is_refused_before_its_server_starts(
    tmp_path: Path, docker_engine: Any, harness_image: str
) -> None:
    bed = _known_b200(tmp_path, docker_engine, harness_image)
    # Someone's config for the system has no entry for the 99 % setting: the harness falls back to minimal for it.
    nvidia: Path = bed["nvidia"]
    path = nvidia / "configs" / "B200-SXM-180GBx4" / "Offline" / "llama2-70b.py"
    path.parent.mkdir(parents=True)
    text = (nvidia / "configs" / "B200-SXM-180GBx8" / "Offline" / "llama2-70b.py").read_text()
    path.write_text(text.split("    C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.99)")[0] + "}\n")
    try:
        outcome = run(bed, [action(bed, "Offline", RequireCustomSystemSupport=False)])
        left = processes(bed)
    finally:
        _remove(bed)
    assert outcome.status == "failed"
    message = str(outcome.error)
    assert "make generate_engines" in message and "minimal settings" in message
    assert "Attempting to load minimal config" in message
    assert not any(c.startswith(("run_llm_server", "run_harness")) for c in calls(bed))
    assert left == []
    assert path.read_text().startswith("# Stand-in")  # not ours: left as it was


def test_v51_a_failing_harness_run_stops_its_server(bed51: dict[str, Any]) -> None:
    (bed51["scratch"] / "standin_run_harness_sleep").write_text("not-a-number\n")
    outcome = run(bed51, [action(bed51, "Offline")])
    assert outcome.status == "failed"
    assert "make run_harness (Offline PerformanceOnly) failed" in str(outcome.error)
    assert [c.split()[0] for c in calls(bed51)][-2:] == ["run_llm_server", "run_harness"]
    assert processes(bed51) == []
    assert not list((bed51["nvidia"] / "build" / "logs").glob("*.server.pgid"))


def test_v50_a_known_b200_uses_nvidias_own_class(tmp_path: Path, docker_engine: Any, harness_image: str) -> None:
    bed = _bed(tmp_path, docker_engine, harness_image, "v5.0", {**INTEL_B200X4, "gpu_count": 8})
    try:
        outcome = run(bed, [action(bed, "Offline")])
    finally:
        _remove(bed)
    assert outcome.status == "ok", outcome.error
    nvidia: Path = bed["nvidia"]
    assert not (nvidia / "code/common/systems/custom_list.json").exists()
    assert not (nvidia / "configs/llama2-70b/Offline/custom.py").exists()
    (result,) = outcome.results
    # v5.0 replaces '-' by '_' in the detected id: results under B200_SXM_180GBx8_TRT.
    assert result.parts[-3:] == ("B200_SXM_180GBx8_TRT", "llama2-70b-99", "Offline")
    assert "368.48" in (result / "mlperf_log_summary.txt").read_text()  # NVIDIA's 47 x 8 QPS, x 0.98
    # NVIDIA's own class for the system its harness detected: the metrics say nvidia, tuned.
    assert {tuple(sorted(m.items())) for m in config_metadata(outcome)} == {
        (("config_source", "nvidia"), ("config_system", "B200_SXM_180GBx8"), ("config_tuned", True))
    }


def test_plan_shows_the_v50_registry_and_flags(bed50: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from workload.cli import invoke

    path = bed50["tmp"] / "profile.json"
    path.write_text(json.dumps({"Description": "MLPerf rounds test", "Actions": [action(bed50, "Offline")]}))
    assert invoke(["plan", "--profile", str(path), "--details"]) == 0
    out = capsys.readouterr().out
    assert "code/common/systems/custom_list.json" in out and "configs/llama2-70b/Offline/custom.py" in out
    assert "--config_ver=default" in out and "--test_run" in out and "run_llm_server" not in out
