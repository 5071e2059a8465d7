"""``plan`` says whether the round's configs tune this machine's GPU: pure planner tests from host facts.

The machines are built from fact values (``tests/fixtures/facts/builders.py``): a real recorded ``nvidia-smi
--query-gpu`` row of a 1x H200 cloud machine (``gpu_csv/h200-x1-real.csv``, recorded on a lent machine), the
recorded 1x H100, and built B200/H100
inventories, each with a recorded CPU and memory, as ``read_host_system`` builds them on a host. Every plan claim is
checked against the function the run itself uses for it (the round's custom-system generator, ``values_for``, the
table's ``resolve``), so a plan that says "tuned" while the run writes "untuned" fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.facts.builders import host_system, inventory, recorded_inventory
from tests.steptypes import step_context
from workload.actions.mlperf_executor import MLPerfExecutor
from workload.errors import ProfileError
from workload.hosts.local import LocalHost
from workload.mlperf.catalog import workload_setting
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import IdentifySystem
from workload.mlperf.planner import MLPerfPlan, plan_ops
from workload.mlperf.rounds.v5_1 import values_for
from workload.mlperf.rounds.v6_0 import V6_0Round
from workload.mlperf.rounds.v6_1 import V6_1Round
from workload.mlperf.rounds.v6_1.systems import v61_files
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import NotTuned
from workload.stepdrive import drive_step

ROOT = Path(__file__).resolve().parents[1]
#: The recorded 1x H200 (NVIDIA H200, 143771 MiB, driver 580.159.04).
H200X1 = host_system(recorded_inventory("h200-x1-real"))
H100X1 = host_system(recorded_inventory("h100-80gb-hbm3-x1"))
H100X8 = host_system(inventory(loaded="580.159.04", gpus=8, name="NVIDIA H100 80GB HBM3", memory_mib=81559))
B200X8 = host_system(inventory(loaded="580.159.04", gpus=8, name="NVIDIA B200", memory_mib=183359))
#: A host whose driver lists no GPU (``from_facts`` of an empty inventory).
NO_GPU = host_system(inventory(loaded="580.159.04", gpus=0))
UNTUNED_NOTE = "marked untuned, in the files and in the metrics metadata (config_tuned=false)"
GENERIC_CHECK = "ask the harness which system this is and which configs it has for it"


def facts(system: HostSystem | None, version: tuple[int, int] | None = None) -> MLPerfFacts:
    return MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(*version) if version else None,
        commit=None,
        scratch_path="/s",
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        machine="x86_64",
        system=system,
    )


def params(model: str, harness_round: str | None, custom: bool, **extra: Any) -> MLPerfParameters:
    values = {"Model": model, "RequireCustomSystemSupport": custom, **extra}
    if harness_round:
        values["HarnessRound"] = harness_round
    return MLPerfParameters.model_validate(values)


def check_of(plan: MLPerfPlan) -> IdentifySystem:
    (op,) = [op for op in plan.ops if isinstance(op, IdentifySystem)]
    return op


def untuned_notes(plan: MLPerfPlan) -> list[str]:
    return [n for n in plan.notes if "untuned" in n]


def test_the_recorded_h200_row_is_one_h200_as_the_action_sees_it() -> None:
    assert (H200X1.gpu_name, H200X1.gpu_memory_mib, H200X1.gpu_count) == ("NVIDIA H200", 143771, 1)


# -- 1x H200 on v6.1 ---------------------------------------------------------------------------------------------


def test_h200_on_v61_with_custom_support_notes_the_untuned_values_the_run_writes() -> None:
    plan = plan_ops(params("llama2-70b", "v6.1", True), facts(H200X1))
    (note,) = untuned_notes(plan)
    assert note.startswith("NVIDIA's v6.1 configs do not tune NVIDIA H200 (v5.0 is the last round that tunes it): ")
    assert "the configs will be generated from v6.1's values for " in note and note.endswith(UNTUNED_NOTE)
    summary = check_of(plan).summary()
    # what the run's generator writes for this machine: every file untuned, from the SKUs the plan names
    files = V6_1Round().system_files(H200X1, "llama2-70b", ("Offline", "Server"), ("k_99",), allow_untuned=True)
    assert files.provenance and not files.tuned
    for scenario, _, provenance in files.provenance:
        assert not provenance.tuned and provenance.skus
        assert all(sku in note for sku in provenance.skus)
        assert f"v6.1's {' + '.join(provenance.skus)} values for {scenario}, scaled to 1 GPU, untuned" in summary
    for text in files.files:
        if text.path.endswith(".py"):
            assert "UNTUNED" in text.text
    # a scenario the generator writes nothing for is said to have no values (the run blocks it)
    written = {s for s, _, _ in files.provenance}
    for scenario in {"Offline", "Server"} - written:
        assert f"no values for {scenario}" in summary


def test_h200_on_v61_without_custom_support_would_fail_with_the_refusal_of_the_run() -> None:
    with pytest.raises(ProfileError) as caught:
        plan_ops(params("llama2-70b", "v6.1", False), facts(H200X1))
    error = caught.value
    assert error.location == "HarnessRound v6.1"
    assert error.problem.startswith("NVIDIA's v6.1 harness has no tuned configs for NVIDIA H200 (its configs tune ")
    assert error.problem.endswith("; v5.0 is the last round that tunes it")
    assert error.hint is not None
    assert error.hint.startswith("run a v5.0 checkout (parameter HarnessRound=v5.0), or set ")
    assert "RequireCustomSystemSupport=true" in error.hint and error.hint.endswith("marked untuned")
    # the run's generator, asked for tuned values only, refuses with the same words
    from workload.mlperf.gpuconfigs_parts import load_parts_table

    with pytest.raises(NotTuned) as refused:
        v61_files(H200X1, load_parts_table(), "llama2-70b", ["Offline"], allow_untuned=False)
    assert str(refused.value) == f"{error.problem}: {error.hint}"


def test_run_refuses_with_plans_refusal_before_touching_docker(tmp_path: Path) -> None:
    """plan = what runs: a run on a real host (the engine's plan, then apply of that plan) refuses with plan's
    message before any container or download."""
    nvidia = tmp_path / "repo" / "closed" / "NVIDIA"
    nvidia.mkdir(parents=True)
    values = {
        "Model": "llama2-70b",
        "HarnessRound": "v6.1",
        "RepoPath": str(nvidia),
        "ScratchPath": str(tmp_path / "scratch"),
        "SystemDescription": json.dumps(H200X1.to_json()),
        "DockerBaseUrl": "tcp://127.0.0.1:9",  # nothing listens: a docker call would fail otherwise
    }
    step = MLPerfExecutor(MLPerfParameters.model_validate(values), location="Actions[0]", kind="action")
    ctx = step_context(LocalHost(), tmp_path)
    with pytest.raises(ProfileError) as planned:
        step.plan(ctx)
    with pytest.raises(ProfileError) as ran:
        drive_step(step, ctx, reboot=lambda c: c)
    assert str(ran.value) == str(planned.value)
    assert "no tuned configs for NVIDIA H200" in str(planned.value)
    assert not (tmp_path / "scratch").exists()


# -- B200 x8 on v6.0 (tuned) -------------------------------------------------------------------------------------


def test_b200x8_on_v60_says_nvidias_b200_values_scaled_and_no_untuned_note() -> None:
    plan = plan_ops(params("llama2-70b", "v6.0", True, Scenarios="Interactive"), facts(B200X8))
    assert not untuned_notes(plan)
    summary = check_of(plan).summary()
    assert summary.endswith("values: NVIDIA's v6.0 B200_SXM_180GB values for Interactive, as published for 8 GPUs")
    files = V6_0Round().system_files(B200X8, "llama2-70b", ("Interactive",), ("k_99",), allow_untuned=True)
    ((_, _, provenance),) = files.provenance
    # NVIDIA's B200-SXM-180GBx8/Interactive/llama2-70b.py itself, not x1's scaled
    assert provenance.tuned and provenance.skus == ("B200_SXM_180GB",) and not provenance.scaled


def test_b200x8_on_v60_without_custom_support_names_the_configs_nvidia_publishes() -> None:
    plan = plan_ops(params("llama2-70b", "v6.0", False, Scenarios="Interactive"), facts(B200X8))
    assert check_of(plan).summary() == (
        f"{GENERIC_CHECK}; values: the harness's own configs for this system; gpuconfigs/v6.0 holds NVIDIA's "
        "B200_SXM_180GB llama2-70b values for Interactive (x1, x8)"
    )
    assert not untuned_notes(plan)


def test_b200_scenarios_the_v60_table_lacks_are_said_untuned_as_the_run_marks_them() -> None:
    # NVIDIA's v6.0 tree has B200 gpt-oss-120b Offline and Server files, no Interactive one
    plan = plan_ops(params("gpt-oss-120b", "v6.0", True, Scenarios="Offline,Interactive"), facts(B200X8))
    (note,) = untuned_notes(plan)
    assert note.startswith("NVIDIA's v6.0 configs tune NVIDIA B200, but gpuconfigs/v6.0 has no complete")
    files = V6_0Round().system_files(B200X8, "gpt-oss-120b", ("Offline", "Interactive"), ("k_99",), allow_untuned=True)
    assert {s for s, _, p in files.provenance if not p.tuned} == {"Interactive"}
    donors = {sku for s, _, p in files.provenance for sku in p.skus if s == "Interactive"}
    assert donors and "B200_SXM_180GB" not in donors and all(d in note for d in donors)


# -- H100 on v5.0 (tuned) ----------------------------------------------------------------------------------------


def test_h100x8_on_v50_says_nvidias_h100_values_as_published() -> None:
    plan = plan_ops(params("llama2-70b", "v5.0", True), facts(H100X8))
    summary = check_of(plan).summary()
    assert summary.endswith("values: NVIDIA's v5.0 H100_SXM_80GB values for Offline, Server, as published for 8 GPUs")
    assert not untuned_notes(plan)


def test_the_recorded_h100x1_on_v50_follows_the_tables_resolve() -> None:
    plan = plan_ops(params("resnet50", "v5.0", True, Scenarios="Offline,Server"), facts(H100X1))
    summary = check_of(plan).summary()
    assert summary.endswith("values: NVIDIA's v5.0 H100_SXM_80GB values for Offline, Server, as published for 1 GPU")
    # llama2-70b's smallest H100 class is TP2: the run generates none for one GPU, and plan says so
    plan = plan_ops(params("llama2-70b", "v5.0", True), facts(H100X1))
    assert check_of(plan).summary().endswith("values: no values for Offline, Server")


# -- v5.1: Hopper runs v5.0's values, untuned --------------------------------------------------------------------


def test_h200_on_v51_with_custom_support_names_v50s_h200_values_as_values_for_does() -> None:
    plan = plan_ops(params("llama2-70b", "v5.1", True), facts(H200X1))
    (note,) = untuned_notes(plan)
    assert note.startswith(
        "NVIDIA's v5.1 configs do not tune NVIDIA H200 (v5.0 is the last round that tunes it): the configs will be "
        "generated from v5.0's values for NVIDIA H200 (H200_SXM_141GB)"
    )
    resolved, provenance = values_for(
        "NVIDIA H200", 1, "llama2-70b", "Offline", workload_setting("llama2-70b", "default"), allow_untuned=True
    )
    assert provenance.untuned and provenance.source.startswith("v5.0 ") and resolved.sku == "H200_SXM_141GB"
    with pytest.raises(ProfileError) as caught:
        plan_ops(params("llama2-70b", "v5.1", False), facts(H200X1))
    with pytest.raises(ProfileError) as run_time:
        values_for(
            "NVIDIA H200", 1, "llama2-70b", "Offline", workload_setting("llama2-70b", "default"), allow_untuned=False
        )
    assert str(caught.value) == str(run_time.value)


# -- nothing known: nothing new ----------------------------------------------------------------------------------


@pytest.mark.parametrize("system", [None, NO_GPU], ids=["gpus-unread", "no-gpu"])
@pytest.mark.parametrize("custom", [False, True])
def test_a_host_without_gpus_gets_the_plan_it_had(system: HostSystem | None, custom: bool) -> None:
    plan = plan_ops(params("llama2-70b", "v6.1", custom), facts(system))
    summary = check_of(plan).summary()
    assert summary.endswith("values from gpuconfigs/") if custom else summary == GENERIC_CHECK
    assert not untuned_notes(plan)


def test_an_assumed_round_says_nothing_of_the_gpu() -> None:
    # No HarnessRound and no checkout yet: the round is a guess, so is anything about its configs.
    plan = plan_ops(params("llama2-70b", None, False), facts(H200X1))
    assert check_of(plan).summary() == GENERIC_CHECK and not untuned_notes(plan)


# -- the command line --------------------------------------------------------------------------------------------


def test_workload_plan_shows_the_note_and_the_refusal(tmp_path: Path) -> None:
    def action(custom: bool) -> dict[str, Any]:
        return {
            "Type": "MLPerfExecutor",
            "Parameters": {
                "Scenario": f"llama2-custom-{custom}",
                "Model": "llama2-70b",
                "HarnessRound": "v6.1",
                "RequireCustomSystemSupport": custom,
                "RepoPath": str(tmp_path / "nowhere"),
                "ScratchPath": str(tmp_path),
                "SystemDescription": json.dumps(H200X1.to_json()),
                "DockerBaseUrl": "tcp://127.0.0.1:9",
            },
        }

    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"Description": "1x H200 on v6.1", "Actions": [action(False), action(True)]}))
    out = subprocess.run(
        [sys.executable, "-m", "workload", "plan", "--profile", str(profile), "--details"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text
    # one step cannot be planned (the untuned GPU without RequireCustomSystemSupport); the summary may add
    # the steps that need a GPU when this machine has none (the description names an H200, the host is real)
    assert text.count("would fail if run now:") == 1, text
    assert "HarnessRound v6.1: NVIDIA's v6.1 harness has no tuned configs for NVIDIA H200" in text, text
    assert "note: NVIDIA's v6.1 configs do not tune NVIDIA H200 (v5.0 is the last round that tunes it)" in text, text
    assert "(config_tuned=false)" in text, text


# -- one rule for "the round publishes no config for this GPU/benchmark/scenario" (issue 27 item 7) ---------------


def test_a_gpu_the_round_tunes_without_the_config_follows_the_same_rule_as_one_it_does_not_tune() -> None:
    from workload.mlperf.gpuconfigs import load_table
    from workload.mlperf.tuning import decide, untuned_config

    # v4.1 tunes the A100-SXM4-40GB but publishes no bert Server class for it; v5.1 tunes no Hopper at all
    a100 = decide("v4.1", "NVIDIA A100-SXM4-40GB", 40960, config=("bert", "Server", "k_99"))
    hopper = decide("v5.1", "NVIDIA H100 80GB HBM3", 81559)
    assert a100 is not None and hopper is not None
    for tuning in (a100, hopper):
        assert not tuning.tuned and tuning.refuses  # untuned values exist: only with RequireCustomSystemSupport
        assert "RequireCustomSystemSupport=true" in (tuning.refusal().hint or "")
    assert a100.sku == "A100_SXM_80GB" and a100.values_round == "v4.1"  # the nearest Ampere with the config
    assert hopper.sku == "H100_SXM_80GB" and hopper.values_round == "v5.0"  # the last round that tunes it
    assert "no bert Server (k_99) config for NVIDIA A100-SXM4-40GB" in a100.refusal().message
    # the config the rule gives: the 80 GB A100's bert Server class for 8 GPUs, marked untuned
    table = load_table(harness_round="v4.1")
    config = untuned_config("v4.1", table, ("NVIDIA A100-SXM4-40GB", 40960, 8), "bert", "Server", "k_99")
    assert config is not None and config.sku == "A100_SXM_80GB" and config.untuned
    assert config.fields == table.resolve("NVIDIA A100-SXM4-80GB", 8, "bert", "Server").fields
    # a config the GPU has is its own, tuned; one no GPU of its architecture has gives nothing (never guessed)
    own = decide("v4.1", "NVIDIA A100-SXM4-40GB", 40960, config=("bert", "Offline", "k_99"))
    assert own is not None and own.tuned
    none = decide("v4.1", "NVIDIA A100-SXM4-40GB", 40960, config=("gptj", "Offline", "k_99"))
    assert none is not None and not none.tuned and not none.refuses and none.sku is None
    assert untuned_config("v4.1", table, ("NVIDIA A100-SXM4-40GB", 40960, 8), "gptj", "Offline", "k_99") is None


def test_v51_gb200_interactive_nvidia_does_not_publish_runs_b200s_values_untuned_only_when_allowed() -> None:
    setting = workload_setting("llama2-70b", "default")
    with pytest.raises(ProfileError, match=r"no llama2-70b Interactive \(k_99\) config for NVIDIA GB200"):
        values_for("NVIDIA GB200", 4, "llama2-70b", "Interactive", setting, allow_untuned=False, gpu_memory_mib=189471)
    config, provenance = values_for(
        "NVIDIA GB200", 4, "llama2-70b", "Interactive", setting, allow_untuned=True, gpu_memory_mib=189471
    )
    assert config.sku == "B200_SXM_180GB" and not provenance.tuned
    assert "values of B200_SXM_180GB (Blackwell" in (provenance.untuned or "")


def test_plan_says_what_the_run_does_for_a100_bert_server_and_hopper_405b() -> None:
    a100 = host_system(inventory(loaded="580.159.04", gpus=8, name="NVIDIA A100-SXM4-40GB", memory_mib=40960))
    plan = plan_ops(params("bert", "v4.1", True, Scenarios="Offline,Server"), facts(a100))
    (note,) = untuned_notes(plan)
    assert "gpuconfigs/v4.1 has no complete A100_SXM4_40GB config of bert Server" in note and "A100_SXM_80GB" in note
    # v5.1 on an H100: v5.0 is the last round that tunes it, but has no H100 llama3.1-405b class: the H200's, untuned
    setting = workload_setting("llama3.1-405b", "default")
    config, provenance = values_for(
        "NVIDIA H100 80GB HBM3", 8, "llama3.1-405b", "Offline", setting, allow_untuned=True, gpu_memory_mib=81559
    )
    assert config.sku == "H200_SXM_141GB" and config.fields["precision"] == "fp8"
    assert "values of H200_SXM_141GB (Hopper" in (provenance.untuned or "")
