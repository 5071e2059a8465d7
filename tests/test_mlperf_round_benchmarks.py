"""Each round's benchmark set: the stand-in harnesses accept exactly NVIDIA's benchmarks and aliases of the round (and
refuse others with the real message), and the project's per-round lists agree with them.

The stand-ins' lists are NVIDIA's, read from the round's own files (``Benchmark`` enums, the v6.0 MAKE Targets
documentation); tests/fixtures/harness/rounds/<round>/UPSTREAM.md names the file per round. Real parts: the stand-in
harness run as a subprocess, the project's planner and adapters.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.fixtures.harness import make_round as make_v6
from tests.fixtures.harness.rounds import make_round as make_v5
from workload.errors import ProfileError
from workload.mlperf.catalog import MODELS, NVIDIA_SPELLING, canonical_benchmark
from workload.mlperf.gpuconfigs import ROUND_MODELS
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import SetupStage
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds import round_named
from workload.mlperf.rounds.base import round_benchmarks
from workload.mlperf.rounds.v6_1 import NOT_RUN, SINGLE_NODE
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts

ROUNDS = Path(__file__).parent / "fixtures" / "harness" / "rounds"
CONSTANTS = {
    "v5.0": ROUNDS / "v5.0" / "overlay" / "closed" / "NVIDIA" / "code" / "common" / "constants.py",
    "v5.1": ROUNDS / "v5.1" / "tree" / "closed" / "NVIDIA" / "code" / "common" / "constants.py",
    "v6.0": ROUNDS / "v6.0" / "tree" / "closed" / "NVIDIA" / "code" / "common" / "constants.py",
    "v6.1": ROUNDS / "v6.1" / "tree" / "closed" / "NVIDIA" / "src" / "nv_mlpinf" / "common" / "constants.py",
}


def standin_constants(harness_round: str) -> ModuleType:
    """The round's stand-in ``constants`` module (plain Python: no harness imports)."""
    spec = importlib.util.spec_from_file_location(
        f"standin_constants_{harness_round.replace('.', '_')}", CONSTANTS[harness_round]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def standin_benchmarks(harness_round: str) -> list[str]:
    """NVIDIA's benchmarks of the round as the stand-in holds them (v6.0: MK60's "Available Benchmarks")."""
    c: Any = standin_constants(harness_round)
    if harness_round == "v5.0":
        return [member.value for member in c.Benchmark]
    if harness_round == "v6.0":
        return list(c.AVAILABLE)
    if harness_round == "v6.1":
        return list(c.BENCHMARK_ALIASES)
    return list(c.BENCHMARKS)


@pytest.mark.parametrize("harness_round", ["v5.0", "v5.1", "v6.0"])
def test_round_models_are_the_rounds_benchmarks(harness_round: str) -> None:
    ours = ROUND_MODELS[harness_round]
    assert len(ours) == len(set(ours)), f"a benchmark listed twice: {ours}"
    assert sorted(ours) == sorted(standin_benchmarks(harness_round))
    # The adapter runs those of them the catalog has (the rest are NOT_IN_CATALOG below).
    assert round_named(harness_round).benchmarks == round_benchmarks(round_named(harness_round).spec)
    assert {NVIDIA_SPELLING.get(b, b) for b in round_named(harness_round).benchmarks} <= set(ours)


def test_v61_adapter_knows_every_v61_benchmark_and_says_why_it_does_not_run_some() -> None:
    upstream = standin_benchmarks("v6.1")
    assert sorted(NVIDIA_SPELLING.get(b, b) for b in (*SINGLE_NODE, *NOT_RUN)) == sorted(upstream)
    assert all(reason.strip() for reason in NOT_RUN.values())


def test_every_alias_resolves_to_its_benchmark_and_whispers_string_alias_is_none() -> None:
    for harness_round in ("v5.1", "v6.0", "v6.1"):
        c: Any = standin_constants(harness_round)
        aliases = c.BENCHMARK_ALIASES if hasattr(c, "BENCHMARK_ALIASES") else c.BENCHMARKS
        for value, names in aliases.items():
            if isinstance(names, str):  # upstream's ("whisper-large-v3") is a string, not a tuple
                continue
            for name in (value, value.upper(), *names):
                assert c.benchmark(name) == value, (harness_round, name)
        # nvmitten compares against the string's characters: the string itself is no alias.
        with pytest.raises(ValueError, match=r"^Invalid Benchmark: whisper-large-v3$"):
            c.benchmark("whisper-large-v3")
    v50: Any = standin_constants("v5.0")
    assert v50.benchmark_valstr("llama3.1") == "llama3_1-405b"
    assert v50.benchmark_valstr("R-GAT") == "rgat"


def run(nvidia: Path, scratch: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": "/usr/bin:/bin", "MLPERF_SCRATCH_PATH": str(scratch), **env}
    return subprocess.run(argv, cwd=nvidia, env=environment, capture_output=True, text=True, timeout=60)


def detected(scratch: Path, **system: Any) -> None:
    scratch.mkdir(exist_ok=True)
    (scratch / "standin_detected_system.json").write_text(json.dumps(system))


H100X8 = {
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_count": 8,
    "cpu_model": "Intel(R) Xeon(R) Platinum 8480C",
    "cpu_cores_per_socket": 56,
    "memory_bytes": 2 * 10**12,
}


def test_v50_standin_refuses_a_later_rounds_benchmark_like_nvidias_main(tmp_path: Path) -> None:
    nvidia = make_v5.make_round_tree(tmp_path / "repo", "v5.0")
    detected(tmp_path / "scratch", **H100X8)
    args = [sys.executable, "-m", "code.main", "--action=run_harness", "--scenarios=Offline"]
    refused = run(nvidia, tmp_path / "scratch", [*args, "--benchmarks=llama2-70b,whisper"])
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == "RuntimeError: 'whisper' is not a valid benchmark name."
    # A v5.0 benchmark by its alias: accepted; without a registered config for the system the workload is skipped.
    accepted = run(nvidia, tmp_path / "scratch", [*args, "--benchmarks=r-gat"])
    assert accepted.returncode == 0, accepted.stderr
    assert "No registered config for rgat.Offline" in accepted.stderr


@pytest.mark.parametrize(
    ("harness_round", "refused", "accepted"),
    [("v5.1", "gpt-oss-120b", "whisper"), ("v6.0", "mixtral-8x7b", "gpt_oss_120b")],
)
def test_v5x_v6x_standins_refuse_what_the_rounds_enum_lacks(
    tmp_path: Path, harness_round: str, refused: str, accepted: str
) -> None:
    if harness_round == "v5.1":
        nvidia = make_v5.make_round_tree(tmp_path / "repo", "v5.1")
    else:
        nvidia = make_v6.make_round_tree(tmp_path / "repo", "v6.0")
    detected(tmp_path / "scratch", **H100X8)
    argv = [sys.executable, "-m", "code.main", "--action=generate_engines", "--scenarios=Offline"]
    done = run(nvidia, tmp_path / "scratch", [*argv, f"--benchmarks=llama2-70b,{refused}"], SYSTEM_NAME="X")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"ValueError: Invalid Benchmark: {refused}"
    done = run(nvidia, tmp_path / "scratch", [*argv, f"--benchmarks={accepted}"], SYSTEM_NAME="X")
    assert "Invalid Benchmark" not in done.stderr


def test_v61_standin_refuses_the_slurm_only_benchmarks(tmp_path: Path) -> None:
    nvidia = make_v6.make_round_tree(tmp_path / "repo", "v6.1")
    detected(tmp_path / "scratch", **H100X8)
    argv = [
        sys.executable,
        "-m",
        "nv_mlpinf.main",
        "run_harness",
        "--benchmarks=qwen3-vl-235b-a22b",
        "--scenarios=Offline",
    ]
    done = run(nvidia, tmp_path / "scratch", argv, PYTHONPATH=str(nvidia / "src"), SYSTEM_NAME="X")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "ValueError: Invalid Benchmark: qwen3-vl-235b-a22b"


def test_v51_setup_targets_run_nvidias_per_benchmark_scripts(tmp_path: Path) -> None:
    nvidia = make_v5.make_round_tree(tmp_path / "repo", "v5.1")
    scratch = tmp_path / "scratch"
    detected(scratch, **H100X8)
    # Makefile.data: bash code/<b>/tensorrt/download_model.sh; whisper has none (its script is download_models.sh).
    done = run(nvidia, scratch, ["make", "download_model", "BENCHMARKS=llama3_1-8b whisper"])
    assert done.returncode == 2
    assert "bash: code/whisper/tensorrt/download_model.sh: No such file or directory" in done.stderr
    assert (scratch / "models" / "llama3_1-8b").is_dir()
    done = run(nvidia, scratch, ["bash", "code/whisper/tensorrt/download_models.sh"])
    assert done.returncode == 0, done.stderr
    assert (scratch / "models" / "whisper").is_dir()
    # The catalog's spelling is no code/ folder of NVIDIA's.
    done = run(nvidia, scratch, ["make", "preprocess_data", "BENCHMARKS=llama3.1-8b"])
    assert done.returncode == 2 and "No module named 'code.llama3.1-8b'" in done.stderr


def test_v50_setup_targets_know_the_rounds_benchmark_folders(tmp_path: Path) -> None:
    nvidia = make_v5.make_round_tree(tmp_path / "repo", "v5.0")
    scratch = tmp_path / "scratch"
    detected(scratch, **H100X8)
    done = run(nvidia, scratch, ["make", "download_data", "BENCHMARKS=llama2-70b-interactive rgat"])
    assert done.returncode == 0, done.stderr
    assert (scratch / "standin_calls.log").read_text().splitlines() == [
        "download_data llama2-70b-interactive",
        "download_data rgat",
    ]
    done = run(nvidia, scratch, ["make", "download_model", "BENCHMARKS=whisper"])  # a v5.1 benchmark
    assert done.returncode == 2
    assert "bash: code/whisper/tensorrt/download_model.sh: No such file or directory" in done.stderr


@pytest.mark.parametrize(
    ("harness_round", "tree", "system", "expected"),
    [
        (
            "v5.0",
            "v5",
            {
                "gpu_name": "NVIDIA GB200",
                "gpu_count": 4,
                "cpu_model": "Neoverse-V2",
                "architecture": "aarch64",
                "memory_bytes": 900 * 2**30,
            },
            "KnownSystem.GB200_NVL_186GB_ARMx4",
        ),
        (
            "v5.0",
            "v5",
            {"gpu_name": "NVIDIA L40S", "gpu_count": 8, "cpu_model": "AMD EPYC 9654", "memory_bytes": 2**40},
            "KnownSystem.L40Sx8",
        ),
        (
            "v5.1",
            "v5",
            {
                "gpu_name": "NVIDIA GB200",
                "gpu_count": 4,
                "cpu_model": "Neoverse-V2",
                "architecture": "aarch64",
                "memory_bytes": 900 * 2**30,
            },
            "GB200-NVL72_GB200-186GB_aarch64x4",
        ),
        (
            "v5.1",
            "v5",
            {"gpu_name": "NVIDIA H100 PCIe", "gpu_count": 2, "cpu_model": "AMD EPYC 9654", "memory_bytes": 2**40},
            "H100-PCIe-80GBx2",
        ),
        (
            "v6.0",
            "v6",
            {
                "gpu_name": "NVIDIA GB300",
                "gpu_count": 4,
                "cpu_model": "Neoverse-V2",
                "architecture": "aarch64",
                "cpu_cores_per_socket": 72,
                "memory_bytes": 2**40,
            },
            "GB300-NVL72_GB300-288GB_aarch64x4",
        ),
    ],
)
def test_the_rounds_known_systems_are_detected(
    tmp_path: Path, harness_round: str, tree: str, system: dict[str, Any], expected: str
) -> None:
    maker = make_v5 if tree == "v5" else make_v6
    nvidia = maker.make_round_tree(tmp_path / "repo", harness_round)
    detected(tmp_path / "scratch", **system)
    # The system check as the round's adapter plans it (NVIDIA's own detection module), with this interpreter.
    check = round_named(harness_round).system_id_argv
    done = run(nvidia, tmp_path / "scratch", [sys.executable, *check[1:]])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == expected


def facts(version: tuple[int, int]) -> MLPerfFacts:
    return MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(*version),
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        machine="x86_64",
    )


def params(**extra: Any) -> MLPerfParameters:
    return MLPerfParameters.model_validate({"Scenarios": "Offline", "Quick": True, **extra})


@pytest.mark.parametrize(
    ("version", "model", "named"),
    [((5, 0), "whisper", "v5.0"), ((5, 0), "llama3.1-8b", "v5.0"), ((6, 0), "mixtral-8x7b", "v6.0")],
)
def test_plan_refuses_a_model_the_round_does_not_have(version: tuple[int, int], model: str, named: str) -> None:
    with pytest.raises(ProfileError) as info:
        plan_ops(params(Model=model), facts(version))
    assert info.value.location == f"HarnessRound {named}"
    assert f"{model} is not a benchmark of NVIDIA's {named} harness" in info.value.problem


def test_v61_plan_says_why_whisper_is_not_run() -> None:
    with pytest.raises(ProfileError) as info:
        plan_ops(params(Model="whisper"), facts((6, 1)))
    assert "whisper is a v6.1 benchmark this runner does not run" in info.value.problem


def test_v51_plan_sets_up_whisper_and_llama31_8b_the_way_nvidias_tree_does() -> None:
    stages = {
        model: {
            op.stage: op.argv for op in plan_ops(params(Model=model), facts((5, 1))).ops if isinstance(op, SetupStage)
        }
        for model in ("whisper", "llama3.1-8b")
    }
    assert stages["whisper"]["download_model"] == ("bash", "code/whisper/tensorrt/download_models.sh")
    assert stages["whisper"]["download_data"] == ("bash", "code/whisper/tensorrt/download_dataset.sh")
    assert stages["whisper"]["preprocess_data"][:3] == ("make", "preprocess_data", "BENCHMARKS=whisper")
    folder = NVIDIA_SPELLING["llama3.1-8b"]
    assert all(f"BENCHMARKS={folder}" in argv for argv in stages["llama3.1-8b"].values())


#: Round benchmarks the catalog has no entry for (so ``Model`` cannot name them): llama2-70b-interactive (v5.0; its
#: scenarios are not in our index), and v6.0's dlrm-v3, wan22-a14b and qwen3-vl-235b-a22b (no single-node values).
NOT_IN_CATALOG = {"llama2-70b-interactive", "dlrm-v3", "wan22-a14b", "qwen3-vl-235b-a22b"}


@pytest.mark.parametrize(("harness_round", "version"), [("v5.0", (5, 0)), ("v5.1", (5, 1)), ("v6.0", (6, 0))])
def test_every_round_benchmark_the_catalog_knows_plans_on_that_round(
    harness_round: str, version: tuple[int, int]
) -> None:
    missing = set()
    for benchmark in ROUND_MODELS[harness_round]:
        model = canonical_benchmark(benchmark)
        if model not in MODELS:
            missing.add(benchmark)
            continue
        plan = plan_ops(params(Model=model), facts(version))
        assert plan.round.name == harness_round
        assert [op for op in plan.ops if isinstance(op, SetupStage)], model
    assert missing <= NOT_IN_CATALOG
