"""Each round's data file (``workload/mlperf/rounds/<round>/round.json``) against NVIDIA's REAL tree of that round.

What the data says and NVIDIA's files decide: the VERSION the tree carries is one the round runs, the scenarios are
NVIDIA's ``Scenario`` enum of the round (``code/common/constants.py``), and the results root is where the Makefiles
put ``LOG_DIR`` by default (``Makefile.const``). Only read, never run; the rounds whose files ``../shared/upstream``
holds (v5.0's public copy has none of these files, v6.1's tree is not there).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import upstream
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.round_spec import RoundSpec, builtin_specs

#: Rounds whose real tree (VERSION, code/common/constants.py) ../shared/upstream holds.
WITH_TREE = ("v4.1", "v5.1", "v6.0")
#: Rounds whose tree has the Makefiles (v4.1's copy holds code and configs only).
WITH_MAKEFILES = ("v5.1", "v6.0")


def spec_of(name: str) -> RoundSpec:
    return next(spec for spec in builtin_specs() if spec.name == name)


def nvidia_tree(name: str) -> Path:
    tree = upstream.root() / "nvidia-harness" / name / "closed" / "NVIDIA"
    if not (tree / "VERSION").is_file():
        upstream.unavailable(f"NVIDIA's {name} tree not found under {upstream.root()} (set {upstream.UPSTREAM_ENV})")
    return tree


def scenario_enum(constants: Path) -> set[str]:
    """The members of ``class Scenario`` in NVIDIA's ``code/common/constants.py``."""
    tree = ast.parse(constants.read_text(encoding="utf-8"))
    found = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "Scenario")
    return {n.target.id for n in found.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def make_variable(makefile: Path, name: str) -> str:
    """The value a Makefile gives ``name`` (``NAME := value`` / ``export NAME ?= value``)."""
    pattern = re.compile(rf"^(?:export\s+)?{name}\s*[:?]?=\s*(.+)$", re.M)
    found = pattern.search(makefile.read_text(encoding="utf-8"))
    assert found, f"{makefile.name} sets no {name}"
    return found.group(1).strip()


@pytest.mark.parametrize("name", WITH_TREE)
def test_the_round_runs_the_version_nvidias_tree_carries(name: str) -> None:
    version = HarnessVersion.parse((nvidia_tree(name) / "VERSION").read_text(encoding="utf-8"))
    assert version in spec_of(name).versions


@pytest.mark.parametrize("name", WITH_TREE)
def test_the_rounds_scenarios_are_nvidias_scenario_enum(name: str) -> None:
    nvidia = scenario_enum(nvidia_tree(name) / "code" / "common" / "constants.py")
    assert set(spec_of(name).data.scenarios) == nvidia


@pytest.mark.parametrize("name", WITH_MAKEFILES)
def test_the_results_root_is_where_nvidias_log_dir_lands(name: str) -> None:
    const = nvidia_tree(name) / "Makefile.const"
    build_dir = make_variable(const, "BUILD_DIR")
    log_dir = make_variable(const, "LOG_DIR")
    assert build_dir == "$(PROJECT_ROOT)/build"  # closed/NVIDIA is PROJECT_ROOT
    assert log_dir.startswith("$(BUILD_DIR)/logs/")
    assert spec_of(name).data.results_root == "build/logs"


def test_the_scenario_rule_is_read_from_the_enum() -> None:
    # the reader finds exactly the enum's members (not the class's methods or docstring)
    assert scenario_enum(nvidia_tree("v5.1") / "code" / "common" / "constants.py") == {
        "Offline",
        "Server",
        "Interactive",
        "SingleStream",
        "MultiStream",
    }
