"""Conformance of the v5.1 and v6.0 custom-system config files with NVIDIA's REAL harness code.

For every single-node system NVIDIA publishes configs for in a round (the folders of ``configs/`` in the upstream tree,
``tests/upstream_nvidia.py``), an unknown machine with the same GPUs gets the files our round adapter generates
(v5.1 ``custom_files``, v6.0 ``V6_0Round.system_files``: what ``workload run`` installs), and NVIDIA's own code
(``code/main.py`` ``MainRunner``, nvmitten's configurator, ``code/fields``, ``code/llmlib/config.py``; see
``tests/upstream_nvidia_driver.py``) loads them with the RUN_ARGS our adapter passes. The same code resolves NVIDIA's
own file for its own system. Each row (system, scenario, benchmark, accuracy target) must show: our file found and
loaded (no minimal/empty fallback), every key a Field, NVIDIA's ``HarnessConfig`` built from it (the
``generate_engines`` config step), and every value equal to NVIDIA's, key by key (a key set on one side only is a
mismatch too). The value table is printed (``pytest -s``) and attached to a failure.

NVIDIA's "harness-only" v6.0 files (B300x8 and GB200x4 llama2-70b, B300x8 llama3.1-405b) hold the harness's
values only: NVIDIA runs their servers from the atomic system's ``ATOMIC_EXPORTS`` (v6.0 ``code/main.py`` lines
467-488: ``--mpi_mode=leader --action=run_llm_server``), and the harness from the file's ``EXPORTS`` (lines
490-498). What NVIDIA's code resolves for such a run is therefore both: the atomic system's values with the
harness file's on top, which is what the one file we generate carries (``workload`` runs one server and one harness
from it). Those rows compare our file with that merge (:func:`nvidia_run_values`): the harness file resolved here by
NVIDIA's code, the atomic system's values as NVIDIA's code resolved them from its file (the v6.0 table's ``atomic``
entry, ``gpuconfigs/v6.0``; that file is not in ``shared/upstream``). Nothing is expected to fail.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import upstream_nvidia as up
from workload.errors import WorkloadError
from workload.mlperf.catalog import WorkloadSetting, canonical_benchmark
from workload.mlperf.gpuconfigs import deep_merge, load_table
from workload.mlperf.gpuconfigs_schema import PublishedConfig
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import MakeTarget
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds.v5_1 import V5_1Round, custom_files
from workload.mlperf.rounds.v6_0 import V6_0Round
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import NotTuned

#: Machines with the GPUs of NVIDIA's single-node systems (multi-node ``x72`` systems are out of this runner's scope).
MACHINES: dict[str, HostSystem] = {
    "B200-SXM-180GBx1": HostSystem(
        "NVIDIA B200", 183359, 1, "Intel(R) Xeon(R) Platinum 8570", 56, 2, 2, 2_000_000_000_000
    ),
    "B200-SXM-180GBx8": HostSystem(
        "NVIDIA B200", 183359, 8, "Intel(R) Xeon(R) Platinum 8570", 56, 2, 2, 2_000_000_000_000
    ),
    "B300-SXM-270GBx8": HostSystem(
        "NVIDIA B300 SXM6 AC", 275040, 8, "Intel(R) Xeon(R) 6776P", 64, 2, 2, 2_000_000_000_000
    ),
    "GB200-NVL72_GB200-186GB_aarch64x4": HostSystem(
        "NVIDIA GB200", 189471, 4, "Neoverse-V2", 72, 2, 1, 960_000_000_000, "aarch64"
    ),
}
ROUNDS = ("v5.1", "v6.0")


@dataclass(frozen=True)
class Row:
    round: str
    system: str
    scenario: str
    benchmark: str  # NVIDIA's file stem (llama3_1-8b)
    target: str

    def id(self) -> str:
        return f"{self.round}-{self.system}-{self.scenario}-{self.benchmark}-{self.target}"


def published_rows() -> Iterator[Row]:
    """Every (system, scenario, benchmark file, target) NVIDIA publishes in the upstream trees present here."""
    for round_name in ROUNDS:
        configs = up.upstream_root() / "nvidia-harness" / round_name / "closed" / "NVIDIA" / "configs"
        if not configs.is_dir():
            continue
        for path in sorted(configs.glob("*/*/*.py")):
            system, scenario, stem = path.parts[-3], path.parts[-2], path.stem
            if system not in MACHINES or stem == "__init__":
                continue
            if not _runs_benchmark(round_name, stem):
                continue  # a benchmark of NVIDIA's this runner does not run: nothing of ours to compare
            text = path.read_text(encoding="utf-8")
            if missing_modules(configs.parent, text):
                continue  # the file imports NVIDIA modules the stored tree lacks (listed by test_coverage_gaps)
            # The targets the file has an EXPORTS entry for (NVIDIA's code resolving them is asserted per row).
            for target in ("0.99", "0.999") if "AccuracyTarget(0.999)" in text else ("0.99",):
                yield Row(round_name, system, scenario, stem, target)


def missing_modules(tree: Path, text: str) -> list[str]:
    """The ``code.*`` modules a config file imports (``import_module("code.whisper.tensorrt.fields")``) that the
    stored upstream tree does not hold: NVIDIA's code cannot load such a file here, for NVIDIA's system or ours."""
    names = re.findall(r"""import_module\(["'](code\.[\w.\-]+)["']\)""", text)
    return [n for n in names if not (tree / (n.replace(".", "/") + ".py")).is_file()]


def _runs_benchmark(round_name: str, benchmark: str) -> bool:
    adapter = V5_1Round if round_name == "v5.1" else V6_0Round
    return canonical_benchmark(benchmark) in adapter.benchmarks


def _flags(round_name: str, benchmark: str, scenario: str, target: str) -> list[str]:
    """The RUN_ARGS our adapter plans for ``make generate_engines`` of one (benchmark, scenario, target) on an unknown
    8x B200 (the flags do not depend on the GPU), with the ``--action`` the Makefile appends."""
    config_version = "high_accuracy" if target == "0.999" else "default"
    params = MLPerfParameters.model_validate(
        {
            "Model": canonical_benchmark(benchmark),
            "HarnessRound": round_name,
            "RequireCustomSystemSupport": True,
            "Scenarios": scenario,
            "ConfigVersion": config_version,
            "TestModes": "PerformanceOnly",
        }
    )
    facts = MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion.parse(round_name),
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        machine="x86_64",
        system=MACHINES["B200-SXM-180GBx8"],
    )
    planned = plan_ops(params, facts, run_id="R", system_name="WL_B200-SXM-180GBx8").ops
    (engines,) = [op for op in planned if isinstance(op, MakeTarget) and op.target == "generate_engines"]
    return [*shlex.split(dict(engines.variables)["RUN_ARGS"]), "--action=generate_engines"]


def _ours(round_name: str, system: str, benchmark: str, scenario: str, targets: list[str]) -> tuple[str, list[Any]]:
    """(system id, generated files) for an unknown machine like NVIDIA's ``system``."""
    machine = MACHINES[system]
    model = canonical_benchmark(benchmark)
    accuracies = ["k_99_9" if t == "0.999" else "k_99" for t in targets]
    if round_name == "v5.1":
        table = load_table(harness_round="v5.1")
        sku = table.sku_for_gpu(machine.gpu_name)
        settings = [WorkloadSetting("Custom", accuracy, "MaxP") for accuracy in accuracies]
        generated = custom_files(machine, sku, model, (scenario,), settings, allow_untuned=False)
        files = [g for g, _ in generated]
        return files[0].path.split("/")[1], files
    made = V6_0Round().system_files(machine, model, (scenario,), accuracies, allow_untuned=False)
    if not made.files:
        raise AssertionError(f"our v6.0 adapter wrote no file: {made.skipped}")
    return made.system_id, list(made.files)


@dataclass
class Outcome:
    row: Row
    nvidia: dict[str, Any] | None
    ours: dict[str, Any] | None
    problem: str | None = None


def _resolve_round(round_name: str, tmp: Path, rows: list[Row]) -> dict[Row, Outcome]:
    """Every row of one round: NVIDIA's code on NVIDIA's file, then on ours (one staged tree, two runs per system)."""
    staged = up.stage_round(round_name, tmp)
    outcomes: dict[Row, Outcome] = {}
    for system in dict.fromkeys(r.system for r in rows):
        wanted = [r for r in rows if r.system == system]
        flags = [_flags(round_name, r.benchmark, r.scenario, r.target) for r in wanted]
        theirs = up.resolve_configs(staged, system, flags)["results"]
        # One file per (scenario, benchmark) holds all its targets, as ``workload run`` writes it.
        targets: dict[tuple[str, str], list[str]] = {}
        for r in wanted:
            targets.setdefault((r.scenario, r.benchmark), []).append(r.target)
        ours_id: str | None = None
        refused: dict[tuple[str, str], str] = {}
        for (scenario, benchmark), wanted_targets in targets.items():
            try:
                ours_id, made = _ours(round_name, system, benchmark, scenario, wanted_targets)
            except (WorkloadError, NotTuned, AssertionError) as exc:
                refused[(scenario, benchmark)] = f"our adapter generated no file: {exc}"
                continue
            up.write_files(staged, [(f.path, f.text) for f in made])
        mine = up.resolve_configs(staged, ours_id, flags)["results"] if ours_id else [None] * len(wanted)
        for r, nv, me in zip(wanted, theirs, mine, strict=True):
            outcomes[r] = Outcome(r, nv, me, refused.get((r.scenario, r.benchmark)))
    return outcomes


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[Row, Outcome]:
    rows = list(published_rows())
    result: dict[Row, Outcome] = {}
    for round_name in ROUNDS:
        mine = [r for r in rows if r.round == round_name]
        if mine:
            result.update(_resolve_round(round_name, tmp_path_factory.mktemp(round_name), mine))
    return result


def atomic_entry(row: Row) -> PublishedConfig | None:
    """The atomic system's entry (its servers' values) when NVIDIA's file of ``row`` is harness-only, else None."""
    if row.round != "v6.0":
        return None
    machine = MACHINES[row.system]
    accuracy = "k_99_9" if row.target == "0.999" else "k_99"
    per_count = load_table(harness_round="v6.0").sku_for_gpu(machine.gpu_name).configs
    per_count = per_count.get(row.benchmark, {}).get(row.scenario, {}).get(accuracy, {})
    entry = per_count.get(machine.gpu_count)
    return None if entry is None or entry.atomic is None else per_count[entry.atomic]


def nvidia_run_values(row: Row, resolved: dict[str, Any]) -> dict[str, Any]:
    """What NVIDIA's code resolves for a run of ``row``: its file's values, under which, for a harness-only file, lie
    the values its servers run with (the atomic system's, see the module docstring)."""
    server = atomic_entry(row)
    return resolved if server is None else deep_merge(server.fields.set_fields(), resolved)


def _table(outcome: Outcome) -> str:
    """Our value, NVIDIA's value and NVIDIA's file, one line per key either side sets."""
    nv = nvidia_run_values(outcome.row, (outcome.nvidia or {}).get("values", {}))
    me = (outcome.ours or {}).get("values", {})
    source = (outcome.nvidia or {}).get("file")
    if atomic_entry(outcome.row) is not None:
        source = f"{source} over its servers' {atomic_entry(outcome.row).file}"  # type: ignore[union-attr]
    lines = [f"{'key':34} {'ours':>30} {'NVIDIA':>30}  NVIDIA's file: {source}"]
    for key in sorted(set(nv) | set(me)):
        mark = "" if nv.get(key, "<unset>") == me.get(key, "<unset>") else "  <-- differs"
        ours = json.dumps(me[key]) if key in me else "<unset>"
        theirs = json.dumps(nv[key]) if key in nv else "<unset>"
        lines.append(f"{key:34} {ours:>30} {theirs:>30}{mark}")
    return "\n".join(lines)


@pytest.mark.parametrize("row", [pytest.param(row, id=row.id()) for row in published_rows()])
def test_nvidia_code_resolves_our_file_to_nvidias_values(row: Row, outcomes: dict[Row, Outcome]) -> None:
    outcome = outcomes[row]
    assert outcome.nvidia is not None
    # NVIDIA's own file for its own system: the reference must itself resolve (else the row is not published).
    assert outcome.nvidia.get("problem") is None, outcome.nvidia["problem"]
    assert outcome.nvidia["fallback"] is None, f"NVIDIA's code fell back for its own system: {outcome.nvidia}"
    assert outcome.problem is None, outcome.problem
    assert outcome.ours is not None
    assert outcome.ours.get("problem") is None, f"NVIDIA's code rejected our file: {outcome.ours['problem']}"
    print(f"\n{row.id()}\n{_table(outcome)}")
    assert outcome.ours["file"], f"NVIDIA's code found no file for our system: {outcome.ours}"
    assert outcome.ours["fallback"] is None, f"NVIDIA's code ran {outcome.ours['fallback']} settings for our system"
    if row.round == "v6.0":
        # The merge is used exactly where NVIDIA's real file is harness-only (no batch size of its own: its servers'
        # values are the atomic system's), and the servers are a smaller system of the same GPUs.
        harness_only = "gpu_batch_size" not in outcome.nvidia["values"]
        server = atomic_entry(row)
        assert (server is not None) == harness_only, (row.id(), server and server.file)
        assert server is None or f"x{MACHINES[row.system].gpu_count}/" not in server.file, server.file
    assert outcome.ours["values"] == nvidia_run_values(row, outcome.nvidia["values"]), _table(outcome)


def test_coverage_gaps() -> None:
    """The published files left out above, each for a reason this test names: none of a benchmark this runner runs is
    left out silently (printed with ``-s``; asserts only that every left-out file has a stated reason)."""
    gaps = []
    for round_name in ROUNDS:
        tree = up.upstream_root() / "nvidia-harness" / round_name / "closed" / "NVIDIA"
        for path in sorted((tree / "configs").glob("*/*/*.py")):
            system, stem = path.parts[-3], path.stem
            rel = path.relative_to(tree)
            if system not in MACHINES:
                gaps.append(f"{round_name} {rel}: a multi-node system (this runner runs one node)")
            elif not _runs_benchmark(round_name, stem):
                gaps.append(f"{round_name} {rel}: not a benchmark workload runs on {round_name}")
            elif missing := missing_modules(tree, path.read_text(encoding="utf-8")):
                gaps.append(f"{round_name} {rel}: imports {', '.join(missing)}, not in the stored upstream tree")
    print("\n".join(gaps))
    assert all(": " in gap for gap in gaps)


# -- Hopper: untuned files (RequireCustomSystemSupport) through NVIDIA's generate_engines config step ---------------
H200X8 = HostSystem("NVIDIA H200", 143771, 8, "Intel(R) Xeon(R) Platinum 8480+", 56, 2, 2, 2_000_000_000_000)
HOPPER_ROWS = [
    (round_name, benchmark, scenario)
    for round_name in ROUNDS
    for benchmark in ("llama2-70b",)
    for scenario in ("Offline", "Server")
]
#: Benchmarks no Hopper config exists for in any round we hold (NVIDIA's v5.0 is the last round that tunes Hopper,
#: and llama3.1-8b came after it): no fp8 source to borrow from, so nothing is generated and the reason is named.
HOPPER_UNSOURCED = [
    (round_name, "llama3_1-8b", scenario) for round_name in ROUNDS for scenario in ("Offline", "Server")
]


def _hopper_files(round_name: str, benchmark: str, scenario: str) -> tuple[str, list[Any]]:
    model = canonical_benchmark(benchmark)
    if round_name == "v5.1":
        sku = load_table(harness_round="v5.0").sku_for_gpu(H200X8.gpu_name)
        setting = WorkloadSetting("Custom", "k_99", "MaxP")
        generated = custom_files(H200X8, sku, model, (scenario,), (setting,), allow_untuned=True)
        assert all(not p.tuned for _, provenance in generated for p in provenance)
        files = [g for g, _ in generated]
        return files[0].path.split("/")[1], files
    made = V6_0Round().system_files(H200X8, model, (scenario,), ["k_99"], allow_untuned=True)
    assert not made.tuned and made.files, made.skipped
    return made.system_id, list(made.files)


@pytest.mark.parametrize(
    ("round_name", "benchmark", "scenario"), [pytest.param(*r, id="-".join(r)) for r in HOPPER_ROWS]
)
def test_hopper_untuned_files_pass_nvidias_config_step_in_fp8(
    round_name: str, benchmark: str, scenario: str, tmp_path: Path
) -> None:
    staged = up.stage_round(round_name, tmp_path)
    system_id, files = _hopper_files(round_name, benchmark, scenario)
    up.write_files(staged, [(f.path, f.text) for f in files])
    (result,) = up.resolve_configs(staged, system_id, [_flags(round_name, benchmark, scenario, "0.99")])["results"]
    assert result.get("problem") is None, f"NVIDIA's code rejected our file: {result['problem']}"
    assert result["file"] and result["fallback"] is None, result
    assert result["values"]["precision"] == "fp8", result["values"]


@pytest.mark.parametrize(
    ("round_name", "benchmark", "scenario"), [pytest.param(*r, id="-".join(r)) for r in HOPPER_UNSOURCED]
)
def test_hopper_without_any_hopper_config_is_refused_with_its_reason(
    round_name: str, benchmark: str, scenario: str
) -> None:
    from workload.errors import ProfileError

    model = canonical_benchmark(benchmark)
    if round_name == "v5.1":
        sku = load_table(harness_round="v5.0").sku_for_gpu(H200X8.gpu_name)
        setting = WorkloadSetting("Custom", "k_99", "MaxP")
        with pytest.raises(ProfileError, match=r"no H200_SXM_141GB llama3\.1-8b .* class"):
            custom_files(H200X8, sku, model, (scenario,), (setting,), allow_untuned=True)
        return
    made = V6_0Round().system_files(H200X8, model, (scenario,), ["k_99"], allow_untuned=True)
    assert not made.files
    assert made.skipped == ((scenario, f"no Hopper config of llama3.1-8b {scenario} (k_99) in v6.0 or v5.0"),)
