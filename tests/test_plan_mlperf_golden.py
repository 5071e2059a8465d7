"""Golden plans of the MLPerf action: ``plan_mlperf(params, facts)`` as ``workload plan`` prints it.

The files under ``tests/fixtures/plans/mlperf/`` were generated before the executor was reshaped
into typed operations (issue 14); the reshaped planner must print them byte for byte. A deliberate
change regenerates them (``WORKLOAD_UPDATE_GOLDEN=1 pytest tests/test_plan_mlperf_golden.py``) and
says why in its commit.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.fixtures.facts.builders import host_system, recorded_inventory
from workload.actions.mlperf_executor import (
    MLPerfExecutor,
    MLPerfFacts,
    MLPerfParameters,
    UserFacts,
    build_key,
    plan_mlperf,
    setup_key,
)
from workload.cli.console import render_plan
from workload.mlperf.harness import HarnessVersion

GOLDEN = Path(__file__).parent / "fixtures" / "plans" / "mlperf"
STAGES = ("download_data", "download_model", "preprocess_data")
ALICE = UserFacts("alice", 1000, 1000, "alice", "/home/alice")


def _fresh() -> dict[str, Any]:
    """A host where GitRepoClone and MountDisks have not run yet."""
    return dict(
        nvidia_dir=None,
        nvidia_dir_exists=False,
        version=None,
        commit=None,
        scratch_path=None,
        user=ALICE,
        machine="x86_64",
        notes=["repository path unknown: GitRepoClone (PackageName mlperf) has not run yet and RepoPath is not set"],
    )


def _cloned(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(4, 1),
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=ALICE,
        machine="x86_64",
    )
    base.update(kw)
    return base


def _partly() -> dict[str, Any]:
    return _cloned(done={setup_key("/mnt/scratch", "bert", "download_data"): "t"}, container_status="exited")


def _built(model: str = "bert") -> dict[str, Any]:
    done = {setup_key("/mnt/scratch", model, s): "t" for s in STAGES}
    done[build_key("/r/closed/NVIDIA", "abcdef1234567890")] = "t"
    return _cloned(done=done, build_exists=True, container_status="running")


#: name -> (parameters, facts)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "fresh": ({"Model": "bert"}, _fresh()),
    "fresh-quick-custom": ({"Model": "bert", "Quick": True, "RequireCustomSystemSupport": True}, _fresh()),
    "fresh-no-user": ({"Model": "resnet50"}, {**_fresh(), "user": None, "machine": "aarch64"}),
    "partly": ({"Model": "bert", "Scenarios": "Offline,Server"}, _partly()),
    "partly-custom-image": (
        {"Model": "bert", "RequireCustomSystemSupport": True, "ContainerImage": "nvcr.io/x/mlperf:4.1"},
        _partly(),
    ),
    "built": ({"Model": "bert", "Quick": True}, _built()),
    "built-build-folder-gone": ({"Model": "bert"}, {**_built(), "build_exists": False}),
    "built-new-commit": ({"Model": "bert"}, {**_built(), "commit": "ffff000011112222"}),
    "built-other-model": ({"Model": "3d-unet", "TestModes": "AccuracyOnly"}, _built()),
    "custom-high-accuracy": (
        {
            "Model": "dlrm-v2",
            "RequireCustomSystemSupport": True,
            "ConfigVersion": "default,high_accuracy",
            "Quick": True,
        },
        _built("dlrm-v2"),
    ),
    "overrides-split": (
        {
            "Model": "bert",
            "TestModes": "PerformanceOnly",
            "bert.Offline.min_duration": 30000,
            "bert.Server.target_qps": 1234,
            "3d-unet.*.min_duration": 1,
        },
        _built(),
    ),
    "overrides-list": (
        {
            "Model": "resnet50",
            "Scenarios": "Offline,Server,MultiStream",
            "LoadGenOverrides": (
                "resnet50.Offline.min_duration=60000;resnet50.*.min_query_count=100;gptj.Server.target_qps=1"
            ),
        },
        _partly(),
    ),
    "llm": ({"Model": "llama2-70b", "Quick": True, "RequireCustomSystemSupport": True}, _cloned()),
    "unknown-version": (
        {"Model": "gptj", "Quick": True},
        _cloned(version=None, notes=["/r/closed/NVIDIA/VERSION: not a version: 'banana'"]),
    ),
    "v4.0-quick": (
        {"Model": "retinanet", "Quick": True, "Scenarios": "SingleStream"},
        _cloned(version=HarnessVersion(4, 0)),
    ),
    # The host's GPUs read (the recorded 1x H200, a recorded 1x H100): the system check says whose values run.
    "v6.1-h200-custom": (
        {"Model": "llama2-70b", "HarnessRound": "v6.1", "RequireCustomSystemSupport": True, "Quick": True},
        _cloned(system=host_system(recorded_inventory("h200-x1-real"))),
    ),
    "v5.0-h100-resnet50": (
        {"Model": "resnet50", "HarnessRound": "v5.0", "Scenarios": "Offline", "TestModes": "PerformanceOnly"},
        _cloned(system=host_system(recorded_inventory("h100-80gb-hbm3-x1"))),
    ),
    "docker-problem": (
        {"Model": "bert", "DockerBaseUrl": "unix:///nowhere.sock"},
        _cloned(docker_problem="docker: cannot reach the Docker daemon at unix:///nowhere.sock"),
    ),
}


def render(params: MLPerfParameters, facts: MLPerfFacts) -> str:
    """The plan as ``workload plan -v`` prints a step's plan (every command in full), no colour."""
    out = io.StringIO()
    console = Console(file=out, width=400, no_color=True, color_system=None, highlight=False)
    render_plan(console, plan_mlperf(params, facts, run_id="R"), full=True)
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(CASES))
def test_plan_matches_its_golden_file(name: str) -> None:
    raw_params, raw_facts = CASES[name]
    params = MLPerfParameters.model_validate(raw_params)
    MLPerfExecutor.check_parameters(params)
    text = render(params, MLPerfFacts(**raw_facts))
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("WORKLOAD_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: generate it with WORKLOAD_UPDATE_GOLDEN=1"
    assert text == path.read_text()


def test_golden_files_are_all_cases() -> None:
    # A stale file (a case renamed) would otherwise sit there asserting nothing.
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(CASES)
