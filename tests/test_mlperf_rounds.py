"""The harness-round choice, the typed ops and the planner's re-plan rule (pure: no host, no Docker)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from tests.fixtures.facts.builders import mlperf_facts
from workload.errors import EXIT_USAGE, ProfileError
from workload.mlperf.harness import HarnessVersion, make_argv
from workload.mlperf.ops import (
    BuildHarness,
    BuildImage,
    CollectResults,
    ContainerRef,
    EnsureContainer,
    EnsureScratch,
    IdentifySystem,
    MakeTarget,
    SetupStage,
    UseImage,
    to_changes,
)
from workload.mlperf.planner import plan_ops
from workload.mlperf.results import Expected
from workload.mlperf.rounds import DEFAULT, ROUNDS, Checkout, choose_round, round_named
from workload.mlperf.rounds.v4_1 import V4_1Round
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, setup_key
from workload.mlperf.space_check import CheckFreeSpace


def facts(**kw: Any) -> MLPerfFacts:
    return mlperf_facts(**{"scratch_path": "/s", **kw})


def params(**kw: Any) -> MLPerfParameters:
    return MLPerfParameters.model_validate({"Model": "bert", **kw})


# -- choosing the round ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", [HarnessVersion(4, 0), HarnessVersion(4, 1)])
def test_v40_and_v41_checkouts_are_the_v41_round(version: HarnessVersion) -> None:
    chosen = choose_round(Checkout(version))
    assert isinstance(chosen.round, V4_1Round) and chosen.note is None


def test_an_older_round_no_adapter_knows_runs_as_the_default_and_says_so() -> None:
    chosen = choose_round(Checkout(HarnessVersion(3, 1)))
    assert isinstance(chosen.round, DEFAULT)
    assert chosen.note is not None and "v3.1 has no adapter" in chosen.note and "HarnessRound" in chosen.note
    # No checkout yet: the default, silently (the planner already notes the assumed version).
    assert choose_round(Checkout(None)).note is None


@pytest.mark.parametrize("version", [HarnessVersion(6, 2), HarnessVersion(7, 0), HarnessVersion(9, 9)])
def test_a_round_newer_than_every_adapter_is_refused_naming_the_known_rounds(version: HarnessVersion) -> None:
    # Issue 27 item 6: a v7.0 checkout (with v6.1's src/nv_mlpinf layout, say) was planned as v4.1 with a note.
    newer = Checkout(version, frozenset({"src/nv_mlpinf/main.py"}))
    with pytest.raises(ProfileError) as refused:
        choose_round(newer)
    assert refused.value.location == "closed/NVIDIA/VERSION"
    assert f"NVIDIA's harness {version}, newer than every round this runner knows ({KNOWN_TEXT})" in str(
        refused.value.describe()
    )
    assert refused.value.exit_code == EXIT_USAGE
    assert refused.value.hint is not None and "HarnessRound" in refused.value.hint
    # Forced by the parameter, it runs as the round named, without a note.
    forced = choose_round(newer, "v6.1")
    assert forced.round.name == "v6.1" and forced.note is None


def test_plan_refuses_a_newer_checkout_before_any_op() -> None:
    with pytest.raises(ProfileError, match=r"newer than every round"):
        plan_ops(params(), facts(version=HarnessVersion(7, 0)))
    planned = plan_ops(params(HarnessRound="v4.1"), facts(version=HarnessVersion(7, 0)))
    assert any(isinstance(op, MakeTarget) for op in planned.ops)


#: Every version an adapter claims, oldest first: the list an unknown round's message names.
KNOWN_TEXT = ", ".join(str(v) for v in sorted({v for adapter in ROUNDS for v in adapter.versions}))
KNOWN = re.escape(KNOWN_TEXT)
assert KNOWN_TEXT.startswith("v4.0, v4.1, v5.0")


def test_the_parameter_overrides_detection() -> None:
    chosen = choose_round(Checkout(HarnessVersion(9, 9)), "4.0")
    assert isinstance(chosen.round, V4_1Round) and chosen.note is None
    assert round_named("v4.1") is V4_1Round
    with pytest.raises(ValueError, match=rf"unknown harness round 'v2\.0' \(known: {KNOWN}\)"):
        round_named("v2.0")


def test_a_bad_round_parameter_is_refused_at_load_naming_the_known_ones() -> None:
    with pytest.raises(ValidationError, match=rf"known: {KNOWN}"):
        params(HarnessRound="v3.1")
    assert params(HarnessRound=" ").HarnessRound is None


def test_an_unknown_round_is_planned_with_its_own_version_and_a_note() -> None:
    planned = plan_ops(params(Quick=True, TestModes="PerformanceOnly"), facts(version=HarnessVersion(3, 1)))
    assert any("v3.1 has no adapter; running it as v4.1" in n for n in planned.notes)
    run = next(op for op in planned.ops if isinstance(op, MakeTarget) and op.target == "run_harness")
    assert "--fast" in dict(run.variables)["RUN_ARGS"]  # v3.1's short-run flag, from its VERSION


# -- ops -----------------------------------------------------------------------------------------
def test_a_fresh_host_plans_every_op_in_the_order_apply_runs_them() -> None:
    planned = plan_ops(params(Scenarios="Offline", TestModes="PerformanceOnly"), facts(), run_id="R")
    kinds = [type(op) for op in planned.ops]
    assert kinds == [
        EnsureScratch,
        BuildImage,
        EnsureContainer,
        IdentifySystem,
        CheckFreeSpace,  # the scratch disk's room for the three stages, before the first download
        SetupStage,
        SetupStage,
        SetupStage,
        BuildHarness,
        MakeTarget,
        MakeTarget,
        CollectResults,
    ]
    run = planned.ops[-2]
    assert isinstance(run, MakeTarget)
    # The argv apply executes is the one plan prints, after `docker exec ... NAME`.
    variables = dict(run.variables)
    assert list(run.argv) == make_argv("run_harness", variables)
    assert run.commands()[0].argv[-len(run.argv) :] == run.argv
    assert run.log_dir == "build/logs/workload-R-bert-perf"
    collect = planned.ops[-1]
    assert isinstance(collect, CollectResults)
    assert collect.log_dir == "/r/closed/NVIDIA/build/logs/workload-R-bert-perf"
    assert collect.expected == (Expected("bert", "bert-99", "Offline", "PerformanceOnly"),)
    assert not collect.shown and collect.summary() not in [c.summary for c in to_changes(planned.ops)]


def test_a_given_image_is_used_not_built() -> None:
    planned = plan_ops(params(ContainerImage="nvcr.io/x:1"), facts())
    assert UseImage("nvcr.io/x:1") in planned.ops
    assert not any(isinstance(op, BuildImage) for op in planned.ops)


def test_done_stages_stay_in_the_plan_marked_and_are_not_printed() -> None:
    done = {setup_key("/s", "bert", "download_model"): "2026-01-01T00:00:00"}
    planned = plan_ops(params(), facts(done=done))
    stages = [op for op in planned.ops if isinstance(op, SetupStage)]
    assert [s.done for s in stages] == [None, "2026-01-01T00:00:00", None]
    (setup,) = [c for c in to_changes(planned.ops) if c.summary.startswith("set up")]
    # The two pending stages around the done one are still one line, as plan always showed them.
    assert setup.summary == "set up bert: download_data, preprocess_data (BENCHMARKS=bert only)"
    assert len(setup.commands) == 2


def test_blocked_results_are_planned_out_after_the_system_check() -> None:
    p = params(ConfigVersion="default,high_accuracy", TestModes="PerformanceOnly")
    blocked = frozenset({("Server", "bert-99"), ("Server", "bert-99.9")})
    again = plan_ops(p, facts(), run_id="R", blocked=blocked)
    tail = again.after_system_check()
    assert not any(isinstance(op, (EnsureScratch, IdentifySystem, EnsureContainer)) for op in tail)
    engines = next(op for op in tail if isinstance(op, MakeTarget) and op.target == "generate_engines")
    assert "--scenarios=Offline,SingleStream " in dict(engines.variables)["RUN_ARGS"]
    expected = {e for op in tail if isinstance(op, CollectResults) for e in op.expected}
    assert all(e.scenario != "Server" for e in expected) and len(expected) == 4
    # Half-blocked: a scenario with one benchmark left still runs, expecting only that one.
    half = plan_ops(p, facts(), run_id="R", blocked=frozenset({("Server", "bert-99.9")}))
    expected = {e for op in half.ops if isinstance(op, CollectResults) for e in op.expected}
    assert Expected("bert", "bert-99", "Server", "PerformanceOnly") in expected
    assert Expected("bert", "bert-99.9", "Server", "PerformanceOnly") not in expected


def test_docker_name_names_the_container_like_the_harness_docker_name() -> None:
    planned = plan_ops(params(DockerName="mlperf-inference-ci-7"), facts())
    container = next(op for op in planned.ops if isinstance(op, EnsureContainer)).container
    assert container == ContainerRef("mlperf-inference-ci-7", "1000:1000")
    assert "mlperf-inference-ci-7" in planned.ops[3].commands()[0].argv
    with pytest.raises(ValidationError, match="is not a container name"):
        params(DockerName="bad name;rm")
    assert params(DockerName="").DockerName is None


# -- declared exports ----------------------------------------------------------------------------
def test_the_clone_declares_the_export_the_action_reads() -> None:
    from workload.installers.git_clone import GitRepoClone
    from workload.steps import package_export

    step = GitRepoClone(
        GitRepoClone.Parameters.model_validate({"RepoUri": "https://example.invalid/r.git", "PackageName": "my-pkg"}),
        location="Dependencies[0]",
        kind="dependency",
    )
    assert step.exports() == ("MY_PKG_PATH", "MY_PKG_COMMIT")
    # The MLPerf action's default PackageName reads exactly the name GitRepoClone declares for it.
    assert package_export(params().PackageName) == "MLPERF_PATH"
