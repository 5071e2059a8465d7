"""Conformance of the v4.1 custom-system files with NVIDIA's REAL v4.1 config registry.

For every NVIDIA system of the v4.1 tree (``configs/<benchmark>/<Scenario>/__init__.py``: bert, 3d-unet, gptj,
llama2-70b) whose GPU our v4.1 table knows, an unknown machine with the same GPUs gets what ``workload run`` writes
(``code/common/systems/custom_list.py`` block and ``configs/<benchmark>/<Scenario>/custom.py``), and NVIDIA's own
code loads them (``tests/upstream_nvidia_driver_v41.py``: ``ConfigRegistry.load_configs``, each class validated on
registration, the custom system added by ``system_list.py``). For every (scenario, benchmark, accuracy target)
NVIDIA registers for its system at MaxP, our class must be registered and carry NVIDIA's values, key by key, over
the keys NVIDIA's code allows for a custom system (``-s`` prints the table: our value, NVIDIA's, NVIDIA's class).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests import upstream_nvidia as up
from workload.mlperf import custom_system
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.rounds.v4_1 import V4_1Round
from workload.mlperf.system import HostSystem

#: The GPU memory nvidia-smi reports per SKU of the v4.1 table (what a machine with that GPU shows).
MEMORY_MIB = {"A100_SXM4_40GB": 40960, "A100_SXM_80GB": 81920, "H100_SXM_80GB": 81559, "H200_SXM_141GB": 143771}
ACCURACY = {"0.99": "k_99", "0.999": "k_99_9"}
#: Rows known to fail today, by ``<member>-<Scenario>-<benchmark>-<target>``, each with the reason. Strict: a listed
#: row that passes fails the test until removed here. Empty: every row NVIDIA registers is ours with NVIDIA's values.
KNOWN: dict[str, str] = {}


def _tree() -> Path:
    return up.upstream_root() / "nvidia-harness" / "v4.1" / "closed" / "NVIDIA"


def nvidia_members() -> list[tuple[str, str, int]]:
    """(NVIDIA's KnownSystem member, our SKU, GPU count) for every member a v4.1 config file names whose GPU the v4.1
    table knows (read from the files' ``system = KnownSystem.<member>`` lines)."""
    configs = _tree() / "configs"
    if not configs.is_dir():
        return []
    skus = {sku.known_gpu: name for name, sku in load_table(harness_round="v4.1").skus.items()}
    members = set()
    for path in configs.glob("*/*/__init__.py"):
        members |= set(re.findall(r"system = KnownSystem\.(\w+)", path.read_text(encoding="utf-8")))
    out = []
    for member in sorted(members):
        match = re.fullmatch(r"(.+)x(\d+)", member)
        if match and match.group(1) in skus:
            out.append((member, skus[match.group(1)], int(match.group(2))))
    return out


def loads() -> list[tuple[str, str]]:
    return sorted((p.parts[-3], p.parts[-2]) for p in (_tree() / "configs").glob("*/*/__init__.py"))


def resolve(staged: Path) -> list[dict[str, Any]]:
    """NVIDIA's registry on the staged tree: every registered class (see the driver)."""
    proc = up.run_in_round(staged, ["python3", str(up.DRIVER_V41)], stdin=json.dumps({"loads": loads()}))
    assert proc.returncode == 0, f"NVIDIA's v4.1 registry refused the files:\n{proc.stderr[-5000:]}"
    configs: list[dict[str, Any]] = json.loads(proc.stdout.splitlines()[-1])["configs"]
    return configs


def _machine(sku: str, count: int) -> HostSystem:
    """A machine with the GPUs of NVIDIA's system that NVIDIA's detection does not take for it, so ``workload run``
    registers it as a custom system (the path under test): ``SystemConfiguration.matches`` compares CPU, memory and
    GPUs, and 16 GiB of host memory is below every NVIDIA system's minimum (``add_systems`` ``mem_requirement``: 30
    GiB for the A100 systems, whose CPU may be any x86_64; a machine NVIDIA matches runs NVIDIA's own classes)."""
    name = load_table(harness_round="v4.1").skus[sku].gpu_names[0]
    return HostSystem(name, MEMORY_MIB[sku], count, "AMD EPYC 9654 96-Core Processor", 96, 2, 2, 16 * 2**30)


def generated(machine: HostSystem, wanted: dict[tuple[str, str], list[str]]) -> tuple[str, str, list[Any]]:
    """What ``workload run`` writes for ``machine`` (an unknown system): (our member, its custom_list.py block, its
    custom.py files); ``wanted``: (benchmark, Scenario) -> the accuracy targets to generate."""
    table = load_table(harness_round="v4.1")
    sku = table.sku_for_gpu(machine.gpu_name)
    member = custom_system.system_id(machine, sku)
    files = []
    for (benchmark, scenario), targets in sorted(wanted.items()):
        classes = []
        for target in targets:
            high = target == "0.999"
            if table.entry_problem(machine.gpu_name, benchmark, scenario, high_accuracy=high) is not None:
                continue  # reported by the comparison as "not registered"
            resolved = table.resolve(machine.gpu_name, machine.gpu_count, benchmark, scenario, high_accuracy=high)
            classes.append((WorkloadSetting("Custom", ACCURACY[target], "MaxP"), resolved))
        if classes:
            files.append(
                V4_1Round().custom_config(
                    benchmark, scenario, member, custom_system.class_name(member), classes, HarnessVersion(4, 1)
                )
            )
    return member, V4_1Round().custom_list_block(machine, sku), files


def install_all(staged: Path, machines: list[tuple[HostSystem, dict[tuple[str, str], list[str]]]]) -> dict[str, str]:
    """Every machine's files in one tree (NVIDIA's validation of every class costs a minute a run, so all custom
    systems are registered at once): custom_list.py is ours for the first plus the others' blocks appended, and each
    custom.py the texts of every machine's file for it, one after the other. Returns our member per NVIDIA member."""
    text, members, files = None, {}, {}
    for machine, wanted in machines:
        member, block, made = generated(machine, wanted)
        text = custom_system.merge_custom_list(None, block) if text is None else text + "\n" + block
        members[member] = member
        for f in made:
            files[f.path] = files.get(f.path, "") + f.text + "\n"
    up.write_files(staged, [(custom_system.CUSTOM_LIST, text or ""), *files.items()])
    return members


def compared(ours: dict[str, Any], nvidia: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(our values, NVIDIA's values, keys left out): the keys NVIDIA's code allows for our (custom) system; a key it
    allows only for NVIDIA's own systems (``start_from_device``: ``SystemClassifications.start_from_device_enabled``)
    cannot be set in our file (NVIDIA's registry would refuse it) and is left out of the comparison, named."""
    allowed = set(ours["allowed"]) | {"benchmark", "scenario"}
    left_out = sorted(k for k in nvidia["values"] if k not in allowed)
    mine = {k: v for k, v in ours["values"].items() if k in allowed}
    theirs = {k: v for k, v in nvidia["values"].items() if k in allowed}
    return mine, theirs, left_out


def _table(ours: dict[str, Any], theirs: dict[str, Any], source: str, left_out: list[str]) -> str:
    lines = [f"{'key':32} {'ours':>28} {'NVIDIA':>28}  NVIDIA's class: {source}"]
    for key in sorted(set(ours) | set(theirs)):
        a = json.dumps(ours[key]) if key in ours else "<unset>"
        b = json.dumps(theirs[key]) if key in theirs else "<unset>"
        same = key in ours and key in theirs and ours[key] == theirs[key]
        lines.append(f"{key:32} {a:>28} {b:>28}{'' if same else '  <-- differs'}")
    if left_out:
        lines.append(f"(NVIDIA's code allows only for its own systems, not compared: {', '.join(left_out)})")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[tuple[str, str, str], dict[str, Any]]]:
    """Per system member, NVIDIA's and ours: (scenario, benchmark, target) -> registered MaxP class."""
    staged = up.stage_round("v4.1", tmp_path_factory.mktemp("v41"))
    # Every (benchmark, scenario) NVIDIA's tree has a folder for, at both accuracy targets: a class of ours NVIDIA
    # has no counterpart for is registered (and validated) too, and left out of the comparison. One load of
    # NVIDIA's registry (9 CPU-s with the stand-ins' class_source_memo, 30 without) instead of a first one to learn
    # which classes NVIDIA has.
    wanted = {(benchmark, scenario): list(ACCURACY) for benchmark, scenario in loads()}
    install_all(staged, [(_machine(sku, count), wanted) for _member, sku, count in nvidia_members()])
    everything = resolve(staged)
    members = {c["system"] for c in everything}
    return {m: _maxp(everything, m) for m in members}


def _maxp(configs: list[dict[str, Any]], member: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (c["scenario"], c["benchmark"], c["setting"][1]): c
        for c in configs
        if c["system"] == member and c["setting"][0] == "custom" and c["setting"][2] == "MaxP"
    }


@pytest.mark.parametrize(("member", "sku", "count"), nvidia_members())
def test_nvidias_v41_registry_takes_our_files_with_nvidias_values(
    member: str, sku: str, count: int, registries: dict[str, dict[tuple[str, str, str], dict[str, Any]]]
) -> None:
    theirs = registries.get(member, {})
    assert theirs, f"NVIDIA's registry holds no MaxP config for {member}"
    table = load_table(harness_round="v4.1")
    ours_member = custom_system.system_id(_machine(sku, count), table.skus[sku])
    ours = registries.get(ours_member, {})
    problems: list[str] = []
    for key, nvidia in sorted(theirs.items()):
        row = f"{member}-{key[0]}-{key[1]}-{key[2]}"
        mine = ours.get(key)
        if mine is None:
            problem = f"{row}: NVIDIA registers {nvidia['name']}; our files register nothing for it"
        else:
            values, reference, left_out = compared(mine, nvidia)
            table = _table(values, reference, nvidia["name"], left_out)
            print(f"\n{row}\n{table}")
            problem = f"{row}:\n{table}" if values != reference else ""
        if row in KNOWN:
            if not problem:
                problems.append(f"{row} passes now: remove it from KNOWN ({KNOWN[row]})")
            else:
                print(f"known, {KNOWN[row]}: {problem}")
        elif problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)


def test_v41_coverage_gaps() -> None:
    """NVIDIA's v4.1 systems left out above, each with its reason (printed with ``-s``): the GPUs our v4.1 table does
    not hold, which ``workload run`` refuses for a custom system (naming the table's GPUs) instead of generating."""
    configs = _tree() / "configs"
    if not configs.is_dir():
        up.require_round("v4.1")
    named = set()
    for path in configs.glob("*/*/__init__.py"):
        named |= set(re.findall(r"system = KnownSystem\.(\w+)", path.read_text(encoding="utf-8")))
    compared = {member for member, _, _ in nvidia_members()}
    known_gpus = [sku.known_gpu for sku in load_table(harness_round="v4.1").skus.values()]

    def reason(member: str) -> str:
        if any(member.startswith(gpu) for gpu in known_gpus):
            return "a variant of a table GPU's system (ARM host, MIG slice, CTS) our custom systems do not generate"
        return "its GPU is not in gpuconfigs' v4.1 table"

    print("\n".join(f"v4.1 KnownSystem.{m}: {reason(m)}" for m in sorted(named - compared)))
    assert compared and compared <= named
