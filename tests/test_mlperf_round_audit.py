"""Issue 18's audit, as tests: every benchmark each round's harness has (and the catalog runs) is planned with its
setup stages, the free-space check, its scenarios and the round's own short run; a benchmark or scenario the round
does not have is refused (or, for a default scenario, left out) before anything is set up."""

from __future__ import annotations

from typing import Any

import pytest

from workload.errors import ProfileError
from workload.mlperf.catalog import MODELS, SCENARIOS
from workload.mlperf.gpuconfigs import ROUND_SCENARIOS
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import MakeTarget, SetupStage
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds import ROUNDS
from workload.mlperf.rounds.v6_1 import SINGLE_NODE
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.space_check import CheckFreeSpace

ALICE = UserFacts("alice", 1000, 1000, "alice", "/home/alice")
SETUP = ["download_data", "download_model", "preprocess_data"]


def facts(version: HarnessVersion | None) -> MLPerfFacts:
    return MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=version,
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=ALICE,
        machine="x86_64",
    )


def params(**values: Any) -> MLPerfParameters:
    return MLPerfParameters.model_validate({"TestModes": "PerformanceOnly", **values})


def pairs() -> list[tuple[str, str]]:
    """(round, benchmark) for every benchmark each adapter declares (v6.1: its single-node ones)."""
    return [(r.name, b) for r in ROUNDS for b in (r.benchmarks or SINGLE_NODE)]


def test_every_rounds_benchmarks_are_catalog_names_and_v4_has_none_of_the_later_llms() -> None:
    for adapter in ROUNDS:
        assert set(adapter.benchmarks) <= set(MODELS), adapter.name
    v41 = next(r for r in ROUNDS if r.name == "v4.1").benchmarks
    assert not {"llama3.1-8b", "llama3.1-405b", "gpt-oss-120b", "deepseek-r1"} & set(v41)
    assert "3d-unet" not in next(r for r in ROUNDS if r.name == "v5.1").benchmarks  # v5.1's constants.py has none


@pytest.mark.parametrize(("round_name", "model"), pairs())
def test_each_benchmark_of_each_round_has_setup_check_scenarios_and_quick(round_name: str, model: str) -> None:
    adapter = next(r for r in ROUNDS if r.name == round_name)
    planned = plan_ops(params(Model=model, Quick=True, HarnessRound=round_name), facts(max(adapter.versions)))
    stages = [op.stage for op in planned.ops if isinstance(op, SetupStage)]
    assert stages[-3:] == SETUP  # v6.1 installs its package first (ensure_installed)
    assert any(isinstance(op, CheckFreeSpace) for op in planned.ops)
    runs = [op for op in planned.ops if isinstance(op, MakeTarget) and op.target == "run_harness"]
    ran = {s for op in runs for s in op.scenarios}
    have = ROUND_SCENARIOS.get(round_name)
    expected = {s for s in MODELS[model].scenarios if have is None or s in have}
    assert ran == expected
    # The round's own short run: --test_run from v4.1 on (v5.0 README, v5.1 code/fields/harness.py, v6.0 MAKE
    # Targets "RUN_ARGS Flags", v6.1 nv_mlpinf README "Shorten minimum runtime from 10 min to 1 min").
    assert runs and all("--test_run" in dict(op.variables)["RUN_ARGS"].split() for op in runs)


def test_a_benchmark_the_known_round_lacks_is_refused_before_any_setup() -> None:
    with pytest.raises(ProfileError, match=r"deepseek-r1 is not a benchmark of NVIDIA's v4\.1 harness \(it has: bert"):
        plan_ops(params(Model="deepseek-r1"), facts(HarnessVersion(4, 1)))
    with pytest.raises(ProfileError, match=r"bert is not a benchmark of NVIDIA's v6\.0 harness"):
        plan_ops(params(Model="bert", HarnessRound="v6.0"), facts(None))
    with pytest.raises(ProfileError, match=r"3d-unet is not a benchmark of NVIDIA's v5\.1 harness"):
        plan_ops(params(Model="3d-unet"), facts(HarnessVersion(5, 1)))


def test_before_the_clone_the_round_is_not_known_so_nothing_is_refused() -> None:
    planned = plan_ops(params(Model="deepseek-r1"), facts(None))
    assert planned.round.name == "v4.1" and any(isinstance(op, SetupStage) for op in planned.ops)


def test_a_default_scenario_the_round_lacks_is_left_out_with_a_note_and_a_requested_one_refused() -> None:
    assert "Interactive" not in ROUND_SCENARIOS["v5.0"] and set(ROUND_SCENARIOS["v5.0"]) == set(SCENARIOS)
    planned = plan_ops(params(Model="llama3.1-405b"), facts(HarnessVersion(5, 0)))
    assert planned.inputs.settings.scenarios == ("Offline", "Server")
    assert "llama3.1-405b: Interactive left out (v5.0 has no such scenario)" in planned.notes
    with pytest.raises(ProfileError, match=r"v4\.1 harness has no Interactive scenario \(it has: Offline, Server"):
        plan_ops(params(Model="llama2-70b", Scenarios="Offline,Interactive"), facts(HarnessVersion(4, 1)))
    # v5.1 has an Interactive folder: kept.
    kept = plan_ops(params(Model="llama2-70b", Scenarios="Offline,Interactive"), facts(HarnessVersion(5, 1)))
    assert kept.inputs.settings.scenarios == ("Offline", "Interactive")


@pytest.mark.parametrize("round_name", ["v4.1", "v5.0", "v5.1", "v6.0"])
def test_the_endpoints_client_is_refused_where_the_round_has_none_not_ignored(round_name: str) -> None:
    with pytest.raises(
        ProfileError, match=rf"Client=endpoints is not run by NVIDIA's {round_name} harness \(only v6\.1\)"
    ):
        plan_ops(params(Model="llama2-70b", Client="endpoints", HarnessRound=round_name), facts(None))
    assert plan_ops(params(Model="llama2-70b", HarnessRound=round_name), facts(None)).round.name == round_name


def test_the_endpoints_client_plans_on_v6_1() -> None:
    planned = plan_ops(
        params(Model="llama2-70b", Client="endpoints", HarnessRound="v6.1", Scenarios="Offline"), facts(None)
    )
    assert planned.round.name == "v6.1"
