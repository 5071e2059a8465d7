"""``workload run`` of each LLM round's shipped profile on NVIDIA's REAL tree, in the test bed's real container
(issue 27 "must show": PERF-GPU-MLPERF-LLM on v5.1, PERF-GPU-MLPERF-LLM-V6.0 on v6.0, an unknown 8x B200).

The profile is the shipped one (its actions and parameters as they are) minus its dependencies (disks, CUDA, Docker:
a GPU VM's setup, tested by their own tests), plus what points it at the test bed (the private dockerd, the image,
the staged tree, a scratch folder, the machine's description, ``UseGpus`` false), with the AccuracyOnly runs of one
model per LLM round (:data:`ACCURACY_KEPT`). ``python -m workload run`` runs it:
the engine, MLPerfExecutor's plan and interpreter, real ``docker exec`` of every planned op in a real container.

NVIDIA's, run for real in the container: the round's Makefiles (``link_dirs``, ``clone_loadgen``, ``download_*`` and
``preprocess_data`` as recipes, ``generate_engines``, ``run_llm_server``, ``run_harness`` with its ``tee`` and
``display_results``), ``code/main.py`` (system detection answering ``UNREGISTERED_...`` for the unknown machine,
``MainRunner`` loading OUR generated ``configs/WL_.../<Scenario>/<bench>.py``, ``HarnessConfig``, nvmitten's
``Pipeline``) and ``code/llmlib/launch_server.py`` ``RunTrtllmServeOp`` (the ``trtllm-serve`` command line and its
extra YAML from our values). Stood in (tests/upstream_standins, each with the upstream file and line it replaces):
the GPUs (CUDA stand-in reporting 8x B200), TensorRT/torch modules, the network (``bin/git``; ``download_*.sh``),
the engine build and checkpoint quantization, the ``trtllm-serve`` binary (answers ``/health``), the benchmark run
(LoadGen's files in NVIDIA's results layout, ``standin_gpu_work.py``), and the compile of ``make build`` (v5.1).

The container: the test bed's Debian image with the Python packages NVIDIA's code imports copied from this test's
own environment (:data:`PACKAGES`, the same versions the other conformance tests run NVIDIA's code with); nvmitten,
the stand-ins and MLCommons' checker file are copied from ``../shared/upstream`` and tests/ into the scratch folder
(mounted at the same path) at test time. Nothing is downloaded.

PERF-GPU-MLPERF on v4.1 (:func:`test_workload_run_of_the_v41_profile_on_nvidias_real_files_exits_0`, 8x H100 on the
test bed's own CPU and memory): the v4.1 files we hold (``../shared/upstream/nvidia-harness/v4.1``) are NVIDIA's
detection, config registry, ``fields.py`` and configs, all run for real (``scripts/get_system_id.py`` with its
``lscpu``/``/proc/meminfo`` reads, our ``custom_list.py`` registration, ``ConfigRegistry`` loading and validating our
``custom.py``, ``get_effective_values``); the Makefile, ``code/main.py`` (its flow, with NVIDIA's registry and fields
calls, but the actions stood in), ``code/common/cuda_python.py``, ``nvidia-smi`` and the result printer are stood in
(tests/upstream_standins/v4.1/UPSTREAM.md): no public copy of the v4.1 Makefiles or actions is available.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import upstream
from tests import upstream_nvidia as up
from tests.testbed.image import RECIPE_LABEL, ensure_derived_image
from tests.testbed.ports import free_port as _free_port
from tests.testbed.state import digest, file_lock
from workload.facts.system import parse_lscpu, parse_meminfo
from workload.metrics.collection import collect
from workload.mlperf import custom_system

pytestmark = [pytest.mark.slow, pytest.mark.heavy(seconds=150)]  # 80-150 s each: handed out first
ROOT = Path(__file__).resolve().parent.parent
PROFILES = {"v4.1": "PERF-GPU-MLPERF", "v5.1": "PERF-GPU-MLPERF-LLM", "v6.0": "PERF-GPU-MLPERF-LLM-V6.0"}
#: The LLM rounds' test (the v4.1 one is :func:`test_workload_run_of_the_v41_profile_on_nvidias_real_files_exits_0`).
LLM_ROUNDS = ("v5.1", "v6.0")
#: The shipped profile's actions a round's run keeps (by Model; default all): v4.1's bert action shows every part of a
#: v4.1 run (registration, detection, NVIDIA's registry, three scenarios, both test modes); its 3d-unet action runs the
#: same path with another config file, at twice the time.
ACTIONS_KEPT: dict[str, tuple[str, ...]] = {"v4.1": ("bert",)}
#: The actions whose AccuracyOnly runs a round's run keeps (by Model); the round's other actions run their scenarios
#: PerformanceOnly (the action's TestModes). An accuracy run takes the path of the performance run of its scenario
#: (NVIDIA's main.py loading our config, RunTrtllmServeOp's server for it, the harness, NVIDIA's results layout) with
#: ``--test_mode=AccuracyOnly``; one model's accuracy runs show it, at 40 % fewer benchmark runs (v5.1: 14 of 22,
#: v6.0: 12 of 18) in the suite's longest tests.
ACCURACY_KEPT: dict[str, tuple[str, ...]] = {"v5.1": ("llama2-70b",), "v6.0": ("llama2-70b",)}
#: An 8x B200 cloud VM (AMD CPU: NVIDIA's B200 systems name an Intel one, so its detection knows none of them).
MACHINE = {
    "gpu_name": "NVIDIA B200",
    "gpu_memory_mib": 183359,
    "gpu_count": 8,
    "cpu_model": "AMD EPYC 9575F 64-Core Processor",
    "cpu_cores_per_socket": 64,
    "cpu_sockets": 2,
    "cpu_threads_per_core": 1,
    "memory_bytes": 2_200_000_000_000,
}
GPUS = up.cuda_gpus("NVIDIA B200", 192_265_846_784, (10, 0), 8)
#: The v4.1 run's GPUs: 8x H100 SXM 80GB as the CUDA and nvidia-smi stand-ins report them (nvidia-smi's PCI device id
#: and power limit are those of NVIDIA's v4.1 ``known_hardware.py`` ``KnownGPU.H100_SXM_80GB``).
H100_MIB = 81559
GPUS_V41 = [
    {**gpu, "pci_device_id": "0x233010DE", "power_max_limit_w": 700.0}
    for gpu in up.cuda_gpus("NVIDIA H100 80GB HBM3", H100_MIB * 2**20, (9, 0), 8)
]
#: Third-party packages NVIDIA's code imports at module level on these paths (nvmitten: GitPython, numpy; code/llmlib:
#: PyYAML, psutil, tqdm, packaging, ``mlperf_loadgen``), with what they need (gitdb, smmap, numpy.libs, _yaml).
#: v4.1's ``code/common/fields.py`` imports typeguard (which imports typing_extensions).
PACKAGES = (
    "git",
    "gitdb",
    "smmap",
    "yaml",
    "_yaml",
    "psutil",
    "tqdm",
    "packaging",
    "numpy",
    "numpy.libs",
    "typeguard",
    "typing_extensions.py",
)
LOADGEN = "mlperf_loadgen"
#: NVIDIA's detection, as the interpreter's system check asks it (workload/mlperf/rounds: IdentifySystem's argv).
DETECT = "from code.common.systems.system_list import DETECTED_SYSTEM; print(DETECTED_SYSTEM.extras['id'])"
#: A whole profile: some 60 ``docker exec``s of NVIDIA's code (each imports it, 1-3 s) and the LLM servers.
RUN_TIMEOUT_S = 1500


def _site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


@pytest.fixture(scope="session")
def nvidia_python_image(docker_engine: Any, harness_image: str) -> str:
    """The test bed's harness image with :data:`PACKAGES` and LoadGen's module copied from this environment into
    Debian's ``/usr/local/lib/python3.X/dist-packages`` (the container's python3 is Debian's, the same minor
    version as this one: checked). Built once per recipe (package versions), under a lock."""
    site = _site_packages()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    probe = "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')"
    found = docker_engine.client.containers.run(harness_image, ["python3", "-c", probe], remove=True)
    if found.decode().strip() != version:
        upstream.unavailable(  # skipped here, a failure under CI (which runs Debian's python3 too)
            f"the test bed's python3 is {found.decode().strip()}, this environment's {version}: the packages NVIDIA's "
            "code imports are copied from this environment and would not load there"
        )
    loadgen = sorted(site.glob(f"{LOADGEN}*.so")) + sorted(site.glob(f"{LOADGEN}*/"))
    parts = [p for name in PACKAGES if (p := site / name).exists()] + loadgen
    missing = [n for n in PACKAGES if not (site / n).exists() and n not in ("_yaml", "numpy.libs")]
    assert not missing and loadgen, f"this environment lacks {missing or LOADGEN} (pip install -e '.[cpu,test]')"
    versions = sorted(p.name for p in site.glob("*.dist-info"))
    dockerfile = f"FROM {harness_image}\nCOPY site/ /usr/local/lib/python{version}/dist-packages/\n"
    recipe = digest(dockerfile, docker_engine.client.images.get(harness_image).id, *PACKAGES, *versions)
    tag = "workload-test/nvidia-real-harness:" + recipe[:12]
    with file_lock("derived-image-nvidia-real-harness"):
        with contextlib.suppress(Exception):
            if (docker_engine.client.images.get(tag).labels or {}).get(RECIPE_LABEL) == recipe:
                return tag
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            text = f"{dockerfile}LABEL {RECIPE_LABEL}={recipe}\n".encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
            for part in parts:
                tar.add(part, arcname=f"site/{part.name}", filter=lambda t: None if "__pycache__" in t.name else t)
        context.seek(0)
        docker_engine.client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True)
    return tag


def _stage_python(scratch: Path, round_name: str) -> Path:
    """nvmitten, the stand-ins (with LoadGen's file writer they use) and the round's checker file, copied where the
    container sees them (the scratch folder is mounted at its own path)."""
    py = scratch / "standin-python"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(up.nvmitten_src() / "nvmitten", py / "nvmitten-src" / "nvmitten", ignore=skip)
    shutil.copytree(up.STANDINS, py / "tests" / "upstream_standins", ignore=skip)
    loadgen_writer = ROOT / "tests" / "fixtures" / "harness" / "rounds" / "standin_loadgen.py"
    (py / "tests" / "fixtures" / "harness" / "rounds").mkdir(parents=True)
    shutil.copyfile(loadgen_writer, py / "tests" / "fixtures" / "harness" / "rounds" / "standin_loadgen.py")
    if round_name not in up.CHECKER:  # v4.1's code imports no checker on these paths
        return py
    # the checker's folder (the v5.1 file imports its sibling log_parser.py), without its samples and tests
    tools = up.checker_file(round_name).parent
    while tools.name != "submission":
        tools = tools.parent
    shutil.copytree(tools, py / "checker", ignore=shutil.ignore_patterns("__pycache__", "*samples", "tests", "power"))
    return py


def _env_image(engine: Any, base: str, py: Path, round_name: str) -> str:
    """A per-test image: :func:`nvidia_python_image` plus the environment NVIDIA's code runs in here (as
    ``upstream_nvidia.run_in_round`` gives it on this machine) and the stand-in binaries first on ``PATH``."""
    # v4.1's detection asks nvidia-smi (its stand-in in v4.1/bin), v5.1+'s nvmitten asks CUDA only
    bins = f"{py}/tests/upstream_standins/v4.1/bin:" if round_name == "v4.1" else ""
    env = {
        "PYTHONPATH": f"{py}/nvmitten-src:{py}/tests/upstream_standins",
        "PATH": f"{bins}{py}/tests/upstream_standins/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "STANDIN_GPU_WORK": "1",
        "STANDIN_CUDA_GPUS": json.dumps(GPUS_V41 if round_name == "v4.1" else GPUS, separators=(",", ":")),
        "GIT_PYTHON_REFRESH": "quiet",
        # some 60 processes import NVIDIA's code and its libraries: compiled once per test into the scratch folder,
        # nothing written into the staged tree
        "PYTHONPYCACHEPREFIX": f"{py}/pycache",
    }
    if round_name in up.CHECKER:
        clone, _, inside = up.CHECKER[round_name][0].partition("/tools/")
        assert clone in ("build/inference", "3rdparty/mlc-inference"), clone
        env |= {
            "WORKLOAD_CHECKER_FILE": str(py / "checker" / up.CHECKER[round_name][1]),
            "WORKLOAD_CHECKER_ROUND": round_name,
            "STANDIN_CHECKER_STUB": f"{py}/tests/upstream_standins/pinned_checker.py",
            "STANDIN_CHECKER_REL": f"tools/{inside}",
        }
    lines = "".join(f"ENV {k}={json.dumps(v)}\n" for k, v in env.items())
    return ensure_derived_image(
        engine, f"workload-test/nvidia-real-run:{uuid.uuid4().hex[:12]}", f"FROM {base}\n{lines}"
    )


@pytest.fixture
def bed(
    request: pytest.FixtureRequest, tmp_path: Path, docker_engine: Any, nvidia_python_image: str
) -> Iterator[dict[str, Any]]:
    round_name = request.param
    staged = up.stage_round(round_name, tmp_path, prepared=False)  # bare, as NVIDIA publishes it
    if round_name == "v4.1":
        up.stage_v41_harness(staged)
    else:
        up.stage_gpu_work(staged)
    repo = staged.parent.parent
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", f"NVIDIA {round_name}"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=repo, check=True, capture_output=True
        )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    py = _stage_python(scratch, round_name)
    image = _env_image(docker_engine, nvidia_python_image, py, round_name)
    name = f"wl-nvreal-{uuid.uuid4().hex[:8]}"
    machine = _v41_machine(docker_engine, image) if round_name == "v4.1" else MACHINE
    yield {"round": round_name, "tmp": tmp_path, "repo": repo, "nvidia": staged, "scratch": scratch,
           "engine": docker_engine, "image": image, "name": name, "machine": machine}  # fmt: skip
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(name).remove(force=True)
    with contextlib.suppress(Exception):
        docker_engine.client.images.remove(image)


def _v41_machine(engine: Any, image: str) -> dict[str, Any]:
    """8x H100 SXM 80GB on the test bed's own CPU and memory, as ``lscpu`` and ``/proc/meminfo`` show them in the run's
    image: NVIDIA's v4.1 detection reads those for real (``code/common/systems/cpu.py``, ``memory.py``), and its H100
    systems name an Intel Xeon 8480C and at least 30 GiB, so it knows none of them for this machine."""
    out = engine.client.containers.run(
        image, ["sh", "-c", "LC_ALL=C lscpu && echo '<meminfo>' && cat /proc/meminfo"], remove=True
    ).decode()
    lscpu, _, meminfo = out.partition("<meminfo>")
    cpu, memory = parse_lscpu(lscpu), parse_meminfo(meminfo)
    return {
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_memory_mib": H100_MIB,
        "gpu_count": 8,
        "cpu_model": cpu.model,
        "cpu_cores_per_socket": cpu.cores_per_socket,
        "cpu_sockets": cpu.sockets,
        "cpu_threads_per_core": cpu.threads_per_core,
        "memory_bytes": memory.total_bytes,
    }


def shipped_profile(bed: dict[str, Any]) -> Path:
    """The round's shipped profile, its actions pointed at the test bed (see the module docstring)."""
    shipped = json.loads((ROOT / "profiles" / f"{PROFILES[bed['round']]}.json").read_text())
    bed_parameters = {
        "DockerBaseUrl": bed["engine"].base_url,
        "DockerName": bed["name"],
        "ContainerImage": bed["image"],
        "RepoPath": str(bed["repo"]),
        "ScratchPath": str(bed["scratch"]),
        "SystemDescription": json.dumps(bed["machine"]),
        "UseGpus": False,
        "UnlimitedMemlock": False,
        # a temporary folder on a CI machine, not the profile's 2 TB disk
        "SkipFreeSpaceCheck": True,
        "LLMServerPort": _free_port(),
    }
    kept = ACTIONS_KEPT.get(bed["round"])
    profile = {
        "Description": shipped["Description"],
        "Metadata": shipped.get("Metadata", {}),
        "Parameters": shipped["Parameters"],
        "Actions": [
            {**a, "Parameters": {**a["Parameters"], **bed_parameters, **_test_modes(bed["round"], a)}}
            for a in shipped["Actions"]
            if kept is None or a["Parameters"]["Model"] in kept
        ],
    }
    path = bed["tmp"] / f"{PROFILES[bed['round']]}.json"
    path.write_text(json.dumps(profile, indent=1))
    return path


def _test_modes(round_name: str, action: dict[str, Any]) -> dict[str, str]:
    """The action's TestModes where :data:`ACCURACY_KEPT` drops its accuracy runs; nothing to change otherwise."""
    kept = ACCURACY_KEPT.get(round_name)
    if kept is None or action["Parameters"]["Model"] in kept:
        return {}
    return {"TestModes": "PerformanceOnly"}


def workload_run(bed: dict[str, Any], profile: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "workload",
        "run",
        "--profile",
        str(profile),
        "--output-dir",
        str(bed["tmp"] / "runs"),
    ]
    env = {
        **os.environ,
        "WORKLOAD_STATE_PATH": str(bed["tmp"] / "state.json"),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False)


def run_ok(bed: dict[str, Any], profile: Path) -> tuple[dict[str, Any], str]:
    """``workload run`` of ``profile`` on the bed, asserted to exit 0 with its one outcome ok: its run.json and the
    text of every log of its run folder."""
    done = workload_run(bed, profile)
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    (folder,) = (bed["tmp"] / "runs").iterdir()
    record = json.loads((folder / "run.json").read_text())
    assert [o["status"] for o in record["outcomes"]] == ["ok"], record["outcomes"]
    return record, "\n".join(p.read_text(errors="replace") for p in folder.rglob("*.log"))


def calls(bed: dict[str, Any]) -> list[dict[str, Any]]:
    path: Path = bed["scratch"] / "standin_gpu_work.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("bed", LLM_ROUNDS, indirect=True)
def test_workload_run_of_the_rounds_profile_on_nvidias_real_tree_exits_0(bed: dict[str, Any]) -> None:
    profile = shipped_profile(bed)
    record, logs = run_ok(bed, profile)
    nvidia: Path = bed["nvidia"]

    # Our custom system: NVIDIA's detection does not know the machine, so the files are ours, in the round's format.
    (system,) = [p.name for p in (nvidia / "configs").iterdir() if p.name.startswith("WL_")]
    # the run's container is still there: NVIDIA's detection, asked as the system check asks it, answers unregistered
    container = bed["engine"].client.containers.get(bed["name"])
    # stdout alone (demux): NVIDIA's logging on stderr interleaves with it in any order
    code, (out, err) = container.exec_run(["python3", "-c", DETECT], workdir="/work", demux=True)
    answer = (out or b"").decode().strip()
    assert code == 0 and answer.endswith("UNREGISTERED_x86_64_NVIDIA_B200x8"), f"{answer}\n{(err or b'').decode()}"
    # Every make of NVIDIA's code/main.py loaded OUR file for its benchmark and scenario: never minimal, never empty.
    loaded = {line.split("configs/", 1)[1] for line in logs.splitlines() if "Loading configs from" in line}
    assert loaded and all(path.startswith(f"{system}/") for path in loaded), sorted(loaded)
    for fallback in ("Loading minimal configs", "Config not found for current system", "Using empty config"):
        assert fallback not in logs

    shipped = json.loads(profile.read_text())
    wanted = _wanted_runs(shipped)
    # The stand-in harness ran once per model, scenario and test mode, against the server NVIDIA's RunTrtllmServeOp
    # launched, with the LoadGen target NVIDIA's code resolved from our file.
    runs = [c for c in calls(bed) if c["op"] == "TrtllmServeBenchmarkHarnessOp"]
    assert len(runs) == len(wanted), (len(runs), sorted(wanted))
    for run in runs:
        assert set(run["servers"].values()) == {200}, run
        ((_key, target),) = run["target"].items()
        assert target and float(target) > 0, run
        assert f"/{system}_TRT/" in run["log_dir"], run
    served = sorted(nvidia.glob("build/logs/*/trtllm_serve_0.log"))
    assert served and all("trtllm-serve " in p.read_text() and "--tp_size" in p.read_text() for p in served)

    # The results workload kept are the LoadGen files in NVIDIA's layout, and they parse.
    _assert_results_in_nvidias_layout(record, len(wanted), system, bed["round"])
    print(
        f"{bed['round']} {PROFILES[bed['round']]}: exit 0, {len(shipped['Actions'])} actions, {len(runs)} benchmark "
        f"runs, {len(loaded)} of our config files loaded by NVIDIA's code, {len(served)} trtllm-serve launches"
    )


def _assert_results_in_nvidias_layout(record: dict[str, Any], count: int, system: str, round_name: str) -> None:
    """The run kept ``count`` result folders, each under NVIDIA's ``<system>_TRT/<benchmark>/<scenario>`` layout,
    parsed without issues and judged by the rules of the round that ran (its LoadGen's version), not the newest."""
    results = [Path(p) for p in record["outcomes"][0]["results"]]
    assert len(results) == count, results
    for path in results:
        assert path.parts[-3] == f"{system}_TRT", path
        parsed = collect(path, host="local")
        assert parsed.results and parsed.metrics and not parsed.issues, (path, parsed.issues)
        assert {m.metadata.get("mlperf_round") for m in parsed.metrics} == {round_name}, path


def _wanted_runs(shipped: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(model, scenario, test mode) of every run the profile asks for (an action's value, or the profile's it names)."""

    def value(action: dict[str, Any], name: str) -> str:
        text = str(action["Parameters"][name])
        return (
            str(shipped["Parameters"][text.removeprefix("$.Parameters.")]) if text.startswith("$.Parameters.") else text
        )

    return {
        (a["Parameters"]["Model"], scenario, mode)
        for a in shipped["Actions"]
        for scenario in value(a, "Scenarios").split(",")
        for mode in value(a, "TestModes").split(",")
    }


@pytest.mark.parametrize("bed", ["v4.1"], indirect=True)
def test_workload_run_of_the_v41_profile_on_nvidias_real_files_exits_0(bed: dict[str, Any]) -> None:
    """PERF-GPU-MLPERF (its bert action, :data:`ACTIONS_KEPT`) on NVIDIA's real v4.1 files: detection
    (``scripts/get_system_id.py``, ``code/common/systems/*``), the config registry (``configs/configuration.py``) and
    ``code/common/fields.py`` run for real; the parts of the v4.1 tree we do not hold are stood in
    (``up.stage_v41_harness``: the Makefile, ``code/main.py`` calling NVIDIA's registry and fields, the CUDA context
    helper) and so are nvidia-smi and CUDA (8x H100)."""
    profile = shipped_profile(bed)
    record, logs = run_ok(bed, profile)
    nvidia: Path = bed["nvidia"]

    # Our custom system, registered in NVIDIA's custom_list.py; NVIDIA's detection, run in the run's container as the
    # system check runs it, answers it; without the custom systems (NVIDIA's MLPINF_CUSTOM_DEFINITION_PATH pointed at
    # a folder whose custom_systems/ has no custom_list.py) the same detection knows no system for this machine.
    (member,) = re.findall(r"custom_systems\['(\w+)'\]", (nvidia / "code/common/systems/custom_list.py").read_text())
    container = bed["engine"].client.containers.get(bed["name"])
    code, (out, err) = container.exec_run(["python3", "-m", "scripts.get_system_id"], workdir="/work", demux=True)
    answer = (out or b"").decode().strip()
    assert code == 0 and answer == f"KnownSystem.{member}", f"{answer}\n{(err or b'').decode()[-3000:]}"
    empty = f"{bed['scratch']}/no-custom-systems"
    code, (out, err) = container.exec_run(
        ["sh", "-c", f"mkdir -p {empty}/custom_systems && python3 -m scripts.get_system_id"],
        workdir="/work",
        environment={"MLPINF_CUSTOM_DEFINITION_PATH": empty},
        demux=True,
    )
    answer = (out or b"").decode().strip()
    assert code == 0 and answer == "None", f"{answer}\n{(err or b'').decode()[-3000:]}"

    # Every config the harness ran is OUR class in OUR custom.py, as NVIDIA's registry loaded and validated it.
    shipped = json.loads(profile.read_text())
    wanted = _wanted_runs(shipped)
    work = calls(bed)
    engines = [c for c in work if c["op"] == "GenerateEngines"]
    runs = [c for c in work if c["op"] == "RunHarness"]
    assert engines and runs, work
    for call in engines + runs:
        scenario = call["scenario"]
        assert call["config"] == custom_system.class_name(member), call
        assert call["config_file"].endswith(f"/configs/bert/{scenario}/custom.py"), call
    assert "Loading config" in logs and "No registered config" not in logs
    # The stand-in harness ran once per model, scenario and test mode, with the LoadGen target NVIDIA's code resolved.
    assert sorted((c["benchmark"].split("-")[0], c["scenario"], c["test_mode"]) for c in runs) == sorted(wanted)
    for run in runs:
        ((_key, target),) = run["target"].items()
        assert target and float(target) > 0, run
        assert f"/{member}_TRT/" in run["log_dir"], run

    # The results workload kept are the LoadGen files in NVIDIA's layout, parsed and judged by v4.1's rules.
    _assert_results_in_nvidias_layout(record, len(wanted), member, "v4.1")
    print(
        f"v4.1 {PROFILES['v4.1']}: exit 0, {len(shipped['Actions'])} action(s), {len(runs)} benchmark runs and "
        f"{len(engines)} engine configs of our {member} loaded by NVIDIA's registry"
    )
