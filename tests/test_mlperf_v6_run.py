"""``workload run`` (the engine and the MLPerfExecutor step) against the v6.0 and v6.1 stand-in harnesses.

Real parts: the test bed's private dockerd, a detached container of the harness image (the fresh-VM Debian image,
tagged beforehand under NVIDIA's image name: "pulling" it finds it on the daemon, as no registry is reachable),
real ``docker exec`` of every op's argv, the stand-in's trtllm-serve answering on the run's port inside the
container, LoadGen-format results written by the stand-in harness and parsed by workload's metrics layer. No GPU:
the machine is the ``SystemDescription`` (and the stand-in's ``standin_detected_system.json``). Per behaviour the
upstream file the stand-ins reproduce: tests/fixtures/harness/rounds/v6.*/UPSTREAM.md.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_round import make_round_bare_repo
from tests.testbed.dockerexec import exec_output
from tests.testbed.image import ensure_derived_image
from tests.testbed.ports import free_port
from workload.engine import Engine, RunOptions
from workload.hosts.base import Host, HostSpec
from workload.hosts.local import LocalHost
from workload.mlperf.planner import plan_ops
from workload.mlperf.settings import MLPerfParameters
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

pytestmark = pytest.mark.slow

# A cloud B200 VM (AMD CPU: NVIDIA's B200 systems name an Intel one) and a cloud H200 VM.
B200X4 = {
    "gpu_name": "NVIDIA B200",
    "gpu_memory_mib": 183359,
    "gpu_count": 4,
    "cpu_model": "AMD EPYC 9575F 64-Core Processor",
    "cpu_cores_per_socket": 64,
    "cpu_sockets": 2,
    "cpu_threads_per_core": 1,
    "memory_bytes": 2_200_000_000_000,
}
H200X8 = {**B200X4, "gpu_name": "NVIDIA H200", "gpu_memory_mib": 143771, "gpu_count": 8}
B200X2 = {**B200X4, "gpu_count": 2}


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports: LLMServerPort upward, one per server of a config."""
    return free_port(count)


@pytest.fixture(scope="session")
def harness_image(docker_engine: Any, freshvm_image: str) -> str:
    """The fresh-VM image as NVIDIA's harness images are run (launch_docker: a shell kept open, no boot).

    Session scope: the tests that use it spread over parallel workers (tests/testbed/parallel.py)."""
    # standin-bin on PATH: the stand-in's MLCommons endpoints client (the real one comes in MLCommons' own image).
    dockerfile = (
        f"FROM {freshvm_image}\nENTRYPOINT []\nWORKDIR /work\nENV PATH=/work/standin-bin:/usr/local/sbin:"
        '/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nCMD ["/bin/bash"]\n'
    )
    return ensure_derived_image(docker_engine, "workload-test/r61-harness-v2:latest", dockerfile)


@pytest.fixture
def bed(
    request: pytest.FixtureRequest, tmp_path: Path, docker_engine: Any, harness_image: str
) -> Iterator[dict[str, Any]]:
    version = request.param
    bare, _commit = make_round_bare_repo(tmp_path / "harness.git", version)
    packages = tmp_path / "packages"
    packages.mkdir()
    subprocess.run(["git", "clone", "-q", str(bare), str(packages / "mlperf")], check=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(json.dumps(B200X4))
    (scratch / "standin_server_load_s").write_text("0.5")
    tag = f"nvcr.io/nvidia/mlperf/mlperf-inference:standin-{version}-{uuid.uuid4().hex[:8]}"
    docker_engine.client.images.get(harness_image).tag(tag)
    name = f"wl-r61-{uuid.uuid4().hex[:8]}"
    yield {
        "version": version,
        "tmp": tmp_path,
        "repo": packages / "mlperf",
        "nvidia": packages / "mlperf" / "closed" / "NVIDIA",
        "scratch": scratch,
        "engine": docker_engine,
        "image": tag,
        "name": name,
        "port": free_ports(4),  # a custom B200x4 runs one server per GPU: LLMServerPort to LLMServerPort+3
    }
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(name).remove(force=True)
    with contextlib.suppress(Exception):
        docker_engine.client.images.remove(tag)


def action(
    bed: dict[str, Any], model: str, scenarios: str, system: dict[str, Any] = B200X4, **extra: Any
) -> dict[str, Any]:
    return {
        "Type": "MLPerfExecutor",
        "Parameters": {
            "Scenario": f"inferencemodels-{model}",
            "Model": model,
            # The stand-in's scratch is a temp folder: an LLM's hundreds of GiB are not on a CI machine.
            "SkipFreeSpaceCheck": True,
            "Scenarios": scenarios,
            "TestModes": "PerformanceOnly",
            "Quick": True,
            "UseGpus": False,
            "UnlimitedMemlock": False,
            "DockerBaseUrl": bed["engine"].base_url,
            "DockerName": bed["name"],
            "ContainerImage": bed["image"],
            "RepoPath": str(bed["repo"]),
            "ScratchPath": str(bed["scratch"]),
            "SystemDescription": json.dumps(system),
            "RequireCustomSystemSupport": True,
            "LLMServerPort": bed["port"],
            **extra,
        },
    }


def run(bed: dict[str, Any], actions: list[dict[str, Any]]) -> Any:
    path = bed["tmp"] / "profile.json"
    path.write_text(json.dumps({"Description": "MLPerf v6 test", "Actions": actions}))
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


def config_metadata(path: Path) -> dict[str, Any]:
    """The config-source keys (workload/metrics/config_source.py) every metric of the result at ``path`` carries."""
    from workload.metrics import collect

    parsed = collect(path)
    assert parsed.results and not parsed.issues, parsed.issues
    keys = ("config_source", "config_tuned", "config_untuned_reason", "config_from", "config_system")
    metas = [{k: v for k, v in m.metadata.items() if k in keys} for m in parsed.metrics]
    assert metas and all(m == metas[0] for m in metas)
    return metas[0]


def calls(bed: dict[str, Any]) -> list[str]:
    return (bed["scratch"] / "standin_calls.log").read_text().splitlines()


def leftovers(bed: dict[str, Any]) -> list[str]:
    container = bed["engine"].client.containers.get(bed["name"])
    assert container.status == "running"  # kept for the next run: its process list is what is left
    _code, out = exec_output(container, ["ps", "-eo", "args="], user="0:0")  # whole, or it raises (moby#27289)
    return [line for line in out.splitlines() if "trtllm-serve" in line or "nv_mlpinf" in line or "code.main" in line]


@pytest.mark.parametrize("bed", ["v6.0"], indirect=True)
def test_v60_custom_b200_runs_llama405b_behind_trtllm_serve_with_nvidias_values(bed: dict[str, Any]) -> None:
    outcome = run(bed, [action(bed, "llama3.1-405b", "Offline,Server")])
    assert outcome.status == "ok", outcome.error
    # The custom system's files, in v6.0's format, with NVIDIA's B200x4 values (SYSTEM_NAME names it).
    offline = (bed["nvidia"] / "configs/WL_B200-SXM-180GBx4/Offline/llama3_1-405b.py").read_text()
    assert "# tuned: NVIDIA's published values for this GPU" in offline
    assert "loadgen_fields.offline_expected_qps: 1.09," in offline and "llm_fields.tensor_parallelism: 2," in offline
    runs = [line.removeprefix("run_harness ") for line in calls(bed) if line.startswith("run_harness ")]
    assert runs == [
        "--benchmarks=llama3.1-405b --scenarios=Offline --accuracy_target=0.99 --core_type=trtllm_endpoint "
        f"--test_mode=PerformanceOnly --test_run --trtllm_server_urls=127.0.0.1:{bed['port']}",
        "--benchmarks=llama3.1-405b --scenarios=Server --accuracy_target=0.99 --core_type=trtllm_endpoint "
        f"--test_mode=PerformanceOnly --test_run --trtllm_server_urls=127.0.0.1:{bed['port']}",
    ]
    assert len([line for line in calls(bed) if line.startswith("run_llm_server ")]) == 2
    # Results found in this run's LOG_DIRs, under the custom system's name, parsed by the metrics layer.
    assert len(outcome.results) == 2
    assert all("/WL_B200-SXM-180GBx4_TRT/llama3.1-405b/" in str(f) for f in outcome.results)
    from workload.metrics import collect

    parsed = collect(outcome.results[0])
    assert parsed.results and not parsed.issues
    assert not leftovers(bed)  # every server stopped, nothing left running in the container
    # NVIDIA's B200 values: the metrics say generated, tuned, and name NVIDIA's file.
    for result in outcome.results:
        meta = config_metadata(result)
        assert meta["config_source"] == "generated" and meta["config_tuned"] is True
        assert meta["config_system"] == "WL_B200-SXM-180GBx4" and "config_untuned_reason" not in meta
        assert "configs/B200-SXM-180GBx4/" in meta["config_from"]


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_custom_b200_runs_llama2_with_generated_nv_mlpinf_configs(bed: dict[str, Any]) -> None:
    outcome = run(bed, [action(bed, "llama2-70b", "Offline")])
    assert outcome.status == "ok", outcome.error
    folder = bed["nvidia"] / "configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/Offline"
    harness = (folder / "harness.py").read_text()
    # NVIDIA publishes no B200 llama2-70b v6.1 file in our index: the nearest GPUs' parts, marked untuned.
    assert "# UNTUNED: NVIDIA publishes no complete v6.1 llama2-70b Offline config for NVIDIA B200" in harness
    assert "loadgen_fields.offline_expected_qps: 220.0," in harness  # GB300x8's 440 QPS scaled to 4 GPUs
    server = (folder / "server.py").read_text()
    assert f"'0.0.0.0:{bed['port']}'" in server and "llm_fields.trtllm_yml_override" in server
    log = calls(bed)
    assert log.index("download_model llama2-70b") < next(i for i, x in enumerate(log) if x.startswith("run_llm_server"))
    runs = [line for line in log if line.startswith("run_harness ")]
    assert runs == [
        "run_harness --benchmarks=llama2-70b --scenarios=Offline --accuracy_target=0.99 --test_mode=PerformanceOnly "
        "--test_run"
    ]
    (result,) = outcome.results
    assert "/WL_B200-SXM-180GBx4_TRT/llama2-70b-99/Offline" in str(result)
    assert (result / "mlperf_log_summary.txt").exists()
    assert not leftovers(bed)
    # The metrics of the result say untuned too, why, and where the borrowed parts come from.
    meta = config_metadata(result)
    assert meta["config_source"] == "generated" and meta["config_tuned"] is False
    assert meta["config_untuned_reason"].startswith(
        "NVIDIA publishes no complete v6.1 llama2-70b Offline config for NVIDIA B200"
    )
    assert meta["config_from"] and meta["config_system"] == "WL_B200-SXM-180GBx4"


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_a_target_no_config_has_values_for_is_not_run_and_named_the_other_runs(bed: dict[str, Any]) -> None:
    """0.99 and 0.999 asked for: the generated files hold 0.99 values only (gpuconfigs/v6.1 has no others), so the
    0.999 run is left out after the system check (NVIDIA's harness would stop with "Config not found" once its
    server started) and named in the step's failure; the 0.99 run goes ahead and its result is kept."""
    outcome = run(bed, [action(bed, "llama2-70b", "Offline", ConfigVersion="default,high_accuracy")])
    assert outcome.status == "failed"
    folder = "configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/Offline"
    assert str(outcome.error).endswith(
        f"no result for llama2-70b-99.9 Offline (PerformanceOnly; accuracy target 0.999): {folder}/server.py has no "
        "values for accuracy target 0.999 (no EXPORTS entry for AccuracyTarget(0.999)): workload generated it from "
        "gpuconfigs/v6.1, which has no 0.999 values of llama2-70b Offline (1 result folder(s) kept)"
    ), outcome.error
    log = calls(bed)
    assert [line for line in log if line.startswith(("run_llm_server", "run_harness"))] == [
        "run_llm_server --benchmarks=llama2-70b --scenarios=Offline --accuracy_target=0.99 --server_in_foreground",
        "run_harness --benchmarks=llama2-70b --scenarios=Offline --accuracy_target=0.99 --test_mode=PerformanceOnly "
        "--test_run",
    ], log
    (result,) = outcome.results
    assert str(result).endswith("/WL_B200-SXM-180GBx4_TRT/llama2-70b-99/Offline")
    assert (result / "mlperf_log_summary.txt").exists()
    assert "llama2-70b Offline (accuracy target 0.999): " in step_log(bed) and ": not run" in step_log(bed)
    assert not leftovers(bed)


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_through_mlcommons_endpoints_client_writes_and_parses_the_endpoints_format(bed: dict[str, Any]) -> None:
    outcome = run(bed, [action(bed, "llama2-70b", "Offline", Client="endpoints")])
    assert outcome.status == "ok", outcome.error
    assert not [line for line in calls(bed) if line.startswith("run_harness")]  # the client, not NVIDIA's harness
    (result,) = outcome.results
    assert str(result).endswith("/WL_B200-SXM-180GBx4_TRT/llama2-70b-99/Offline")
    assert (result / "performance/result_summary.json").exists() and (result / "config.yaml").exists()
    config = json.loads(next((bed["nvidia"] / "build/logs").glob("*/endpoint.yaml")).read_text())
    assert config["type"] == "offline"
    # The generated server.py starts one server per GPU (NVIDIA's B300 topology: 1 GPU per data-parallel rank) from
    # LLMServerPort upward; the client gets every one of them, with 3 workers (and queries) each.
    ports = [bed["port"] + i for i in range(4)]
    assert config["endpoint_config"]["endpoints"] == [f"http://127.0.0.1:{p}" for p in ports]
    assert config["settings"]["client"] == {"num_workers": 12}
    assert served_requests(bed, "*-offline") == {f"0.0.0.0:{p}": 3 for p in ports}
    folder = "configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/Offline"
    log = step_log(bed)
    assert (
        f"llama2-70b Offline: trtllm-serve on 127.0.0.1:{ports[0]}-{ports[-1]} (4 servers): {folder}/server.py" in log
    )
    assert f"LLM server for llama2-70b Offline answers on 127.0.0.1:{ports[0]}-{ports[-1]} (4 servers) after" in log
    assert "not from LLMServerPort" not in log  # our own files: LLMServerPort upward, nothing to say
    from workload.metrics import collect

    parsed = collect(result)
    assert parsed.results and not parsed.issues, parsed.issues
    assert not leftovers(bed)
    assert config_metadata(result)["config_tuned"] is False  # the endpoints format's metrics carry it as well


def step_log(bed: dict[str, Any]) -> str:
    return "".join(p.read_text() for p in (bed["tmp"] / "runs").rglob("*MLPerfExecutor*.log"))


def served_requests(bed: dict[str, Any], run: str) -> dict[str, int]:
    """Per server the stand-in trtllm-serve started (its log: the launch command, then its requests), how many
    queries it answered: ``{"0.0.0.0:<port>": n}``."""
    out = {}
    for log in sorted((bed["nvidia"] / "build/logs").glob(f"{run}/server/trtllm_serve_*.log")):
        text = log.read_text()
        port = text.split("--port ", 1)[1].split()[0]
        out[f"0.0.0.0:{port}"] = text.count('"POST /v1/chat/completions HTTP/1.1" 200')
    return out


def own_server_configs(bed: dict[str, Any], ports: list[int]) -> None:
    """The user's own llama2-70b Server configs for the custom system (NVIDIA publishes no B200 llama2-70b Server
    file in v6.1, so none is generated): NVIDIA's B300 Offline files, one server per port (two data-parallel ranks)
    named in server.py and harness.py (``trtllm_server_urls``; without it NVIDIA's default is 30000 upward)."""
    own = bed["nvidia"] / "configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/Server"
    own.mkdir(parents=True)
    reference = bed["nvidia"] / "configs/llama2_70b/B300-SXM-270GBx8/TRTLLM/Offline"
    urls = [f"0.0.0.0:{p}" for p in ports]
    for name in ("server.py", "harness.py"):
        text = (reference / name).read_text()
        line = f"    llm_fields.trtllm_server_urls: {urls!r},\n    model_fields.precision"
        (own / name).write_text(text.replace("    model_fields.precision", line, 1))


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_endpoints_client_runs_server_as_poisson_at_the_target_qps(bed: dict[str, Any]) -> None:
    """Server through MLCommons' endpoints client: the user's own Server configs for the custom system (NVIDIA
    publishes no B200 llama2-70b Server file in v6.1, so none is generated), the rate from ServerTargetQps."""
    own_server_configs(bed, [bed["port"], bed["port"] + 1])
    extra = {"Client": "endpoints", "ServerTargetQps": 12.5}
    outcome = run(bed, [action(bed, "llama2-70b", "Server", **extra)])
    assert outcome.status == "ok", outcome.error
    log = calls(bed)
    assert any(line.startswith("run_llm_server") and "--scenarios=Server" in line for line in log), log
    assert not [line for line in log if line.startswith("run_harness")]
    (result,) = outcome.results
    assert str(result).endswith("/WL_B200-SXM-180GBx4_TRT/llama2-70b-99/Server")
    config = json.loads(next((bed["nvidia"] / "build/logs").glob("*-server/endpoint.yaml")).read_text())
    assert config["type"] == "online" and config["settings"]["load_pattern"] == {"type": "poisson", "target_qps": 12.5}
    assert config["endpoint_config"]["endpoints"] == [f"http://127.0.0.1:{bed['port'] + i}" for i in (0, 1)]
    # both servers of the user's config waited for and sent to, 5 of the client's 10 workers each
    assert served_requests(bed, "*-server") == {f"0.0.0.0:{bed['port'] + i}": 5 for i in (0, 1)}
    summary = json.loads((result / "performance/result_summary.json").read_text())
    assert summary["n_samples_issued"] == 750  # 12.5 queries/s x Quick's 60 s
    from workload.metrics import collect

    parsed = collect(result)
    assert parsed.results and not parsed.issues, parsed.issues
    (parsed_result,) = parsed.results
    assert (parsed_result.scenario, parsed_result.benchmark_full) == ("Server", "llama2-70b-99")
    values = {m.name: m.value for m in parsed_result.metrics}
    assert values["effective_target_qps"] == 12.5 and values["samples_per_second"] == summary["qps"]
    # Quick's 60 s run is below MLPerf's 600 s minimum: judged as the submission checker would
    assert parsed_result.validity == "INVALID" and any("600000 ms" in r for r in parsed_result.invalid_reasons)
    assert not leftovers(bed)
    step_log = "".join(p.read_text() for p in (bed["tmp"] / "runs").rglob("*MLPerfExecutor*.log"))
    assert f"answers on 127.0.0.1:{bed['port']}, 127.0.0.1:{bed['port'] + 1} after" in step_log, step_log
    # No file was generated for Server (no published rate), yet it ran with the user's files: the log says that,
    # not "not run" (the old note), and the metrics say whose config it was.
    assert "not run" not in step_log, step_log
    assert (
        "llama2-70b Server: no server_target_qps for llama2-70b Server in any v6.1 table entry; runs with the config "
        "files already there (the user's own, without workload's mark): configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/"
        "Server/server.py, configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/Server/harness.py"
    ) in step_log, step_log
    assert config_metadata(result) == {"config_source": "user", "config_system": "WL_B200-SXM-180GBx4"}
    # plan of the same parameters shows every command the run executed (the client's included)
    executed = [line.removeprefix("$ docker exec ") for line in step_log.splitlines() if line.startswith("$ docker")]
    assert any("inference-endpoint benchmark from-config -c /work/build/logs/" in line for line in executed)
    run_id = next(p.name for p in (bed["nvidia"] / "build/logs").iterdir() if p.name.startswith("workload-"))
    run_id = run_id.removeprefix("workload-").split("-llama2")[0]
    params = MLPerfParameters.model_validate(action(bed, "llama2-70b", "Server", **extra)["Parameters"])
    first = plan_ops(params, _facts(bed), run_id=run_id)
    after = plan_ops(params, _facts(bed), run_id=run_id, system_name="WL_B200-SXM-180GBx4").after_system_check()
    shown = {shlex.join(c.argv) for op in (*first.ops, *after) for c in op.commands()}
    for line in executed:
        argv = line.split(" ", 1)[1].removesuffix(" (detached)")
        if "llm-server-probe" not in argv:
            assert any(argv in s for s in shown), argv


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_the_users_config_on_other_ports_wins_over_llmserverport_and_the_log_says_so(bed: dict[str, Any]) -> None:
    """The user's server.py names two servers on other ports than LLMServerPort: those are the ones the harness
    starts and sends to, so the run waits on both of them (no refusal) and the log says LLMServerPort was not used."""
    other = free_ports(2)
    while {other, other + 1} & set(range(bed["port"], bed["port"] + 4)):
        other = free_ports(2)
    own_server_configs(bed, [other, other + 1])
    outcome = run(bed, [action(bed, "llama2-70b", "Server")])
    assert outcome.status == "ok", outcome.error
    log = step_log(bed)
    folder = "configs/llama2_70b/WL_B200-SXM-180GBx4/TRTLLM/Server"
    assert (
        f"llama2-70b Server: trtllm-serve on 127.0.0.1:{other}, 127.0.0.1:{other + 1} as {folder}/server.py "
        f"(trtllm_server_urls: 0.0.0.0:{other}, 0.0.0.0:{other + 1}) says, not from LLMServerPort={bed['port']} "
        "(LLMServerPort sets the ports of the config files workload generates)"
    ) in log, log
    assert f"answers on 127.0.0.1:{other}, 127.0.0.1:{other + 1} after" in log, log
    assert [line for line in calls(bed) if line.startswith("run_harness")]  # NVIDIA's harness ran against them
    assert set(served_requests(bed, "*-server")) == {f"0.0.0.0:{other}", f"0.0.0.0:{other + 1}"}  # both started
    (result,) = outcome.results
    assert str(result).endswith("/WL_B200-SXM-180GBx4_TRT/llama2-70b-99/Server")
    assert not leftovers(bed)  # both servers stopped


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_a_failing_harness_run_still_stops_its_server(bed: dict[str, Any]) -> None:
    (bed["scratch"] / "standin_harness_fail").write_text("")
    outcome = run(bed, [action(bed, "llama2-70b", "Offline")])
    assert outcome.status == "failed"
    assert "make run_harness (Offline PerformanceOnly) failed with exit" in str(outcome.error)
    assert "run_llm_server" in "".join(calls(bed)) and not outcome.results
    assert not leftovers(bed)  # the server (make, nv-mlpinf, every trtllm-serve) is gone


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_v61_hopper_without_custom_support_is_refused_naming_v50_before_any_download(bed: dict[str, Any]) -> None:
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(H200X8))
    outcome = run(bed, [action(bed, "llama2-70b", "Offline", system=H200X8, RequireCustomSystemSupport=False)])
    assert outcome.status == "failed"
    error = str(outcome.error)
    # refused when the step is planned (plan shows the same), before the image, the container or any download
    assert "NVIDIA's v6.1 harness has no tuned configs for NVIDIA H200" in error
    assert "v5.0 is the last round that tunes it" in error
    assert "RequireCustomSystemSupport=true" in error
    assert not (bed["scratch"] / "standin_calls.log").exists()  # nothing downloaded or run


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_an_image_no_registry_has_fails_naming_it(bed: dict[str, Any]) -> None:
    outcome = run(bed, [action(bed, "llama2-70b", "Offline", ContainerImage="nvcr.io/nvidia/mlperf/no-such:v6.1")])
    assert outcome.status == "failed"
    error = str(outcome.error)
    assert "Docker operation `docker pull nvcr.io/nvidia/mlperf/no-such" in error, error
    assert "the registry must be reachable from the Docker daemon" in error, error


@pytest.mark.parametrize("bed", ["v6.0", "v6.1"], indirect=True)
def test_plan_shows_exactly_the_commands_run_executes(bed: dict[str, Any]) -> None:
    model = "llama2-70b"
    outcome = run(bed, [action(bed, model, "Offline")])
    assert outcome.status == "ok", outcome.error
    step_log = "".join(p.read_text() for p in (bed["tmp"] / "runs").rglob("*.log"))
    executed = [
        line.removeprefix("$ docker exec ") for line in step_log.splitlines() if line.startswith("$ docker exec ")
    ]
    # The plan of the same parameters, with the run id and system the run used, prints the same argvs.
    run_id = next(p.name for p in (bed["nvidia"] / "build/logs").iterdir() if p.name.startswith("workload-"))
    run_id = run_id.removeprefix("workload-").split("-llama2")[0]
    params = MLPerfParameters.model_validate(action(bed, model, "Offline")["Parameters"])
    facts = _facts(bed)
    first = plan_ops(params, facts, run_id=run_id)  # up to the system check
    after = plan_ops(params, facts, run_id=run_id, system_name="WL_B200-SXM-180GBx4").after_system_check()
    shown = {shlex.join(c.argv) for op in (*first.ops, *after) for c in op.commands()}
    for line in executed:
        argv = line.split(" ", 1)[1] if line.startswith(bed["name"]) else line
        argv = argv.removesuffix(" (detached)")  # the server's own command, run inside the start wrapper
        if "llm-server-probe" in argv:
            continue
        assert any(argv in s for s in shown), argv


def _facts(bed: dict[str, Any]) -> Any:
    from workload.mlperf.harness import HarnessVersion
    from workload.mlperf.settings import MLPerfFacts, UserFacts

    major, minor = (int(x) for x in bed["version"].removeprefix("v").split("."))
    return MLPerfFacts(
        nvidia_dir=str(bed["nvidia"]),
        nvidia_dir_exists=True,
        version=HarnessVersion(major, minor),
        commit=None,
        scratch_path=str(bed["scratch"]),
        user=UserFacts("root", 0, 0, "root", "/root"),
        machine="x86_64",
    )


@pytest.mark.parametrize("bed", ["v6.1"], indirect=True)
def test_ctrl_c_during_a_served_v61_run_stops_harness_and_server(bed: dict[str, Any]) -> None:
    """``workload run`` as its own process, interrupted (SIGINT) while the harness runs against trtllm-serve."""
    import os
    import signal
    import sys
    import time

    (bed["scratch"] / "standin_run_harness_sleep").write_text("297.5")
    # A 2-GPU machine: its generated config starts two servers (one per GPU), LLMServerPort and the next port.
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(B200X2))
    profile = bed["tmp"] / "profile.json"
    profile.write_text(
        json.dumps(
            {"Description": "MLPerf v6.1 interrupt", "Actions": [action(bed, "llama2-70b", "Offline", system=B200X2)]}
        )
    )
    runs = bed["tmp"] / "runs"
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(profile), "--output-dir", str(runs)]
    env = {**os.environ, "WORKLOAD_STATE_PATH": str(bed["tmp"] / "state.json")}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    started = bed["scratch"] / "standin_run_harness_started"
    try:
        deadline = time.monotonic() + 240
        while not started.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the harness run never started"
            time.sleep(0.3)
        running = leftovers(bed)
        servers = sorted(p.split("--port ")[1].split()[0] for p in running if "trtllm-serve" in p and "--port" in p)
        assert servers == [str(bed["port"]), str(bed["port"] + 1)], running  # both ranks up before the harness ran
        assert any("run_harness" in p for p in running), running
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out
    container = bed["engine"].client.containers.get(bed["name"])
    _code, listing = (  # whole, or it raises: a lost exec output (moby#27289) would read as "nothing left"
        exec_output(container, ["ps", "-eo", "args="], user="0:0") if container.status == "running" else (0, "")
    )
    left = [p for p in listing.splitlines() if "sleep 297.5" in p or "trtllm-serve" in p or "nv_mlpinf" in p]
    assert not left, left
    assert not list((bed["nvidia"] / "build/logs").glob("*.server.pgid"))  # the server's process group is gone
