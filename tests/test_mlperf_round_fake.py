"""A round is one folder: a copy of a shipped round's folder, with a new version and marker in its data file, is found,
chosen for a checkout of that version and planned by the normal planner, with nothing changed outside the folder."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.fixtures.facts.builders import host_system, recorded_inventory
from workload.errors import ProfileError
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import IdentifySystem
from workload.mlperf.planner import plan_ops
from workload.mlperf.round_spec import BUILTIN, SPEC_FILE
from workload.mlperf.rounds import ROUNDS, discover, markers, round_named
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts

FAKE_MARKER = "docker/release-v7/Dockerfile"


def fake_round(tmp_path: Path, source: str = "v4_1") -> Path:
    """A folder of rounds holding ``v7_0``: the shipped round ``source`` copied, its data saying v7.0."""
    place = tmp_path / "more-rounds"
    folder = place / "v7_0"
    shutil.copytree(BUILTIN / source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    data = json.loads((folder / SPEC_FILE).read_text())
    data.update(round="v7.0", versions=["v7.0"], markers=[FAKE_MARKER], default=False)
    (folder / SPEC_FILE).write_text(json.dumps(data))
    return place


def facts(version: HarnessVersion, *, gpus: bool = False) -> MLPerfFacts:
    """A cloned checkout of ``version``; with ``gpus``, on a recorded 1x H200 (else the GPUs are not known)."""
    return MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=version,
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        machine="x86_64",
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        system=host_system(recorded_inventory("h200-x1-real")) if gpus else None,
    )


def test_a_copied_round_folder_is_found_newest_first(tmp_path: Path) -> None:
    rounds = discover(fake_round(tmp_path))
    assert [r.name for r in rounds] == ["v7.0", *(r.name for r in ROUNDS)]
    assert rounds[0].markers == (FAKE_MARKER,) and FAKE_MARKER in markers(rounds)
    assert round_named("7.0", rounds) is rounds[0]
    assert all(r.name != "v7.0" for r in ROUNDS), "the shipped rounds must not see the fake one"


def test_the_fake_round_is_planned_by_the_normal_planner(tmp_path: Path) -> None:
    rounds = discover(fake_round(tmp_path))
    params = MLPerfParameters.model_validate({"Model": "bert", "Scenarios": "Offline", "Quick": True})
    planned = plan_ops(params, facts(HarnessVersion(7, 0)), run_id="R", rounds=rounds)
    assert planned.round.name == "v7.0" and planned.round.versions == (HarnessVersion(7, 0),)
    # The copy is v4.1's behaviour under a new name: the same ops as v4.1's plan of a v4.1 checkout.
    shipped = plan_ops(params, facts(HarnessVersion(4, 1)), run_id="R")
    assert shipped.round.name == "v4.1"
    assert [type(op).__name__ for op in planned.ops] == [type(op).__name__ for op in shipped.ops]
    # ... the same in every field but the round's name where an op shows it (the free-space check's label)
    assert planned.ops != shipped.ops
    assert [repr(op).replace("'v7.0'", "'v4.1'") for op in planned.ops] == [repr(op) for op in shipped.ops]
    assert not any("no adapter" in note for note in planned.notes)


def test_a_copied_folder_with_modules_of_its_own_uses_its_own_modules(tmp_path: Path) -> None:
    # v6.1's folder has its own config-file and system-file modules, imported relatively: the copy runs the copy's.
    rounds = discover(fake_round(tmp_path, "v6_1"))
    fake = rounds[0]
    assert fake.name == "v7.0" and fake.__module__.startswith("_workload_round_")
    assert sys.modules[f"{fake.__module__}.systems"].__file__ == str(tmp_path / "more-rounds" / "v7_0" / "systems.py")
    params = MLPerfParameters.model_validate({"Model": "llama2-70b", "Scenarios": "Offline", "Quick": True})
    planned = plan_ops(params, facts(HarnessVersion(7, 0)), run_id="R", rounds=rounds)
    shipped = plan_ops(params, facts(HarnessVersion(6, 1)), run_id="R")
    assert planned.round.name == "v7.0" and shipped.round.name == "v6.1"
    assert [repr(op).replace("v7.0", "v6.1") for op in planned.ops] == [repr(op) for op in shipped.ops]


def test_the_fake_round_plans_on_a_known_gpu_without_a_table_of_its_own(tmp_path: Path) -> None:
    # The gpuconfigs tables are the shipped rounds' (gpuconfigs/<round>/, named by their round.json): a round kept
    # outside the package has none, so plan shows no values for the GPU and the run's system check decides.
    rounds = discover(fake_round(tmp_path))
    params = MLPerfParameters.model_validate({"Model": "bert", "Scenarios": "Offline"})
    planned = plan_ops(params, facts(HarnessVersion(7, 0), gpus=True), run_id="R", rounds=rounds)
    shipped = plan_ops(params, facts(HarnessVersion(4, 1), gpus=True), run_id="R")
    assert planned.round.name == "v7.0"
    checks = [(op.values, op.argv) for op in (*planned.ops, *shipped.ops) if isinstance(op, IdentifySystem)]
    assert checks[0] == ("", ("python3", "-m", "scripts.get_system_id")) and checks[1][0] != ""


def test_without_the_folder_a_v7_checkout_is_refused_naming_the_known_rounds(tmp_path: Path) -> None:
    params = MLPerfParameters.model_validate({"Model": "bert"})
    with pytest.raises(ProfileError, match=r"newer than every round this runner knows \(v4\.0, v4\.1, .*v6\.1\)"):
        plan_ops(params, facts(HarnessVersion(7, 0)))


def test_a_damaged_data_file_names_its_key(tmp_path: Path) -> None:
    place = fake_round(tmp_path)
    spec_file = place / "v7_0" / SPEC_FILE
    spec_file.write_text(json.dumps({**json.loads(spec_file.read_text()), "versions": ["seven"]}))
    with pytest.raises(ProfileError, match=r"v7_0/round\.json: versions"):
        discover(place)


def test_two_folders_claiming_one_version_are_refused(tmp_path: Path) -> None:
    place = fake_round(tmp_path)
    spec_file = place / "v7_0" / SPEC_FILE
    spec_file.write_text(json.dumps({**json.loads(spec_file.read_text()), "versions": ["v6.1"]}))
    with pytest.raises(ProfileError, match=r"v6\.1 is also run by the round"):
        discover(place)


def test_a_round_folder_without_its_adapter_is_refused(tmp_path: Path) -> None:
    place = fake_round(tmp_path)
    (place / "v7_0" / "__init__.py").unlink()
    with pytest.raises(ProfileError, match=r"v7_0/__init__\.py"):
        discover(place)
    (place / "v7_0" / "__init__.py").write_text("ADAPTER = 'not a round'\n")
    with pytest.raises(ProfileError, match="names no ADAPTER"):
        discover(place)
