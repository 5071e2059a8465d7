"""Which of NVIDIA's v6.0 config files ``gpuconfigs/v6.0`` carries, and why the others are not: a rule over the index.

``INDEX_V60`` is every file under ``closed/NVIDIA/configs`` of the public fork ``gbeezybez/inference_results_v6.0``
@ ``ab33b2144a9f`` as our index of public code lists it (83 files; ``mlcommons/inference_results_v6.0`` @ ``2d437c2d``
holds only ``configs/minimal/...`` there, the harness's fallback for unknown systems). The rule: a file of a
single-node system (a node holds 8 B200/B300 or 4 GB200/GB300: NVIDIA's scaleout reproduction commands run
``--gpus-per-node 8`` on b200/b300 partitions, ``--gpus-per-node 4`` on gb200/gb300, and say of GB200x8 "each DP rank
uses 8 GPUs spanning 2 nodes") is a table entry, or is named in its SKU's ``not_used`` with why; a multi-node one is
named there as multi-node. Every entry has a row of NVIDIA's values in tests/test_mlperf_v6_configs.py.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_mlperf_v6_configs import EXPECTED_V60, host, run, standin, write
from tests.test_mlperf_v60_nvidia_values import SHARED_V60_SYSTEMS
from workload.errors import ProfileError
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.rounds.v6_0.systems import v60_files

INDEX_V60 = (
    "B200-SXM-180GBx1/Interactive/llama2-70b.py",
    "B200-SXM-180GBx4/Offline/llama3_1-405b.py",
    "B200-SXM-180GBx4/Server/gpt-oss-120b.py",
    "B200-SXM-180GBx4/Server/llama3_1-405b.py",
    "B300-SXM-270GBx2/Offline/llama3_1-405b.py",
    "B300-SXM-270GBx8/Server/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Interactive/disagg_prefill/gpt-oss-120b.yml",
    "GB200-NVL72_GB200-186GB_aarch64x1/Interactive/disagg_prefill/gpt-oss-120b_accuracy.yml",
    "GB200-NVL72_GB200-186GB_aarch64x1/Interactive/disagg_prefill/gptoss_env.yaml",
    "GB200-NVL72_GB200-186GB_aarch64x1/Interactive/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Interactive/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Offline/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Offline/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Offline/llama3_1-8b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Server/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Server/llama3_1-8b.py",
    "GB200-NVL72_GB200-186GB_aarch64x16/Interactive/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x16/Interactive/disagg_decode/deepseek-r1.yml",
    "GB200-NVL72_GB200-186GB_aarch64x20/Interactive/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Interactive/disagg_decode/gpt-oss-120b.yml",
    "GB200-NVL72_GB200-186GB_aarch64x4/Interactive/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Interactive/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Offline/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Offline/wan22-a14b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Server/disagg_prefill/llama3_1-405b.yaml",
    "GB200-NVL72_GB200-186GB_aarch64x4/Server/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Server/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Server/qwen3-vl-235b-a22b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/SingleStream/wan22-a14b.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Interactive/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Interactive/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Interactive/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Offline/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Offline/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Server/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Server/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Server/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x72/Server/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x8/Interactive/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x8/Interactive/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x8/Offline/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x8/Server/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x8/Server/disagg_decode/llama3_1-405b-env.yaml",
    "GB200-NVL72_GB200-186GB_aarch64x8/Server/disagg_decode/llama3_1-405b.yaml",
    "GB200-NVL72_GB200-186GB_aarch64x8/Server/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x1/Interactive/disagg_prefill/gpt-oss-120b.yml",
    "GB300-NVL72_GB300-288GB_aarch64x1/Interactive/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x1/Offline/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x1/Server/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x1/Server/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x16/Interactive/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x16/Interactive/disagg_decode/deepseek-r1.yml",
    "GB300-NVL72_GB300-288GB_aarch64x2/Interactive/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x2/Interactive/disagg_prefill/llama3_1-405b.yaml",
    "GB300-NVL72_GB300-288GB_aarch64x2/Interactive/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x2/Server/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x288/Offline/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x288/Server/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Interactive/disagg_decode/gpt-oss-120b.yml",
    "GB300-NVL72_GB300-288GB_aarch64x4/Interactive/disagg_decode/gpt-oss-120b_accuracy.yml",
    "GB300-NVL72_GB300-288GB_aarch64x4/Offline/qwen3-vl-235b-a22b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Offline/wan22-a14b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Server/disagg_decode/llama3_1-405b-env.yaml",
    "GB300-NVL72_GB300-288GB_aarch64x4/Server/disagg_decode/llama3_1-405b.yaml",
    "GB300-NVL72_GB300-288GB_aarch64x4/Server/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Server/qwen3-vl-235b-a22b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/SingleStream/wan22-a14b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Interactive/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Interactive/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Interactive/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Interactive/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Offline/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Offline/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Offline/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Server/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Server/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Server/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x72/Server/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x8/Interactive/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x8/Offline/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x8/Offline/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x8/Server/deepseek-r1.py",
    "GB300-NVL72_GB300-288GB_aarch64x8/Server/llama2-70b.py",
)

#: The LLM config files of single-node systems in NVIDIA's v6.0 tree that the index above lacks: every one of them in
#: the snapshot gbeezybez/inference_results_v6.0 @ 232fbf90 (the copy ``shared/upstream/nvidia-harness/v6.0`` holds the
#: B200x1, B200x8, B300x8 and GB200x4 folders of), each a table entry written from what NVIDIA's code resolves
#: (tests/gpuconfigs_v60_from_nvidia.py).
TREE_V60 = (
    "B200-SXM-180GBx1/Offline/gpt-oss-120b.py",
    "B200-SXM-180GBx1/Offline/llama2-70b.py",
    "B200-SXM-180GBx1/Offline/llama3_1-8b.py",
    "B200-SXM-180GBx1/Server/llama2-70b.py",
    "B200-SXM-180GBx1/Server/llama3_1-8b.py",
    "B200-SXM-180GBx8/Interactive/deepseek-r1.py",
    "B200-SXM-180GBx8/Interactive/llama2-70b.py",
    "B200-SXM-180GBx8/Interactive/llama3_1-405b.py",
    "B200-SXM-180GBx8/Interactive/llama3_1-8b.py",
    "B200-SXM-180GBx8/Offline/deepseek-r1.py",
    "B200-SXM-180GBx8/Offline/gpt-oss-120b.py",
    "B200-SXM-180GBx8/Offline/llama2-70b.py",
    "B200-SXM-180GBx8/Offline/llama3_1-405b.py",
    "B200-SXM-180GBx8/Offline/llama3_1-8b.py",
    "B200-SXM-180GBx8/Server/deepseek-r1.py",
    "B200-SXM-180GBx8/Server/gpt-oss-120b.py",
    "B200-SXM-180GBx8/Server/llama2-70b.py",
    "B200-SXM-180GBx8/Server/llama3_1-405b.py",
    "B200-SXM-180GBx8/Server/llama3_1-8b.py",
    "B300-SXM-270GBx1/Offline/gpt-oss-120b.py",
    "B300-SXM-270GBx1/Offline/llama2-70b.py",
    "B300-SXM-270GBx1/Server/gpt-oss-120b.py",
    "B300-SXM-270GBx1/Server/llama2-70b.py",
    "B300-SXM-270GBx2/Server/llama3_1-405b.py",
    "B300-SXM-270GBx8/Offline/deepseek-r1.py",
    "B300-SXM-270GBx8/Offline/gpt-oss-120b.py",
    "B300-SXM-270GBx8/Offline/llama2-70b.py",
    "B300-SXM-270GBx8/Offline/llama3_1-405b.py",
    "B300-SXM-270GBx8/Server/gpt-oss-120b.py",
    "B300-SXM-270GBx8/Server/llama2-70b.py",
    "B300-SXM-270GBx8/Server/llama3_1-405b.py",
    "GB200-NVL72_GB200-186GB_aarch64x1/Server/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Interactive/deepseek-r1.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Interactive/llama3_1-8b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Offline/gpt-oss-120b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Offline/llama2-70b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Offline/llama3_1-8b.py",
    "GB200-NVL72_GB200-186GB_aarch64x4/Server/llama3_1-8b.py",
    "GB300-NVL72_GB300-288GB_aarch64x1/Interactive/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x1/Offline/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x2/Offline/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Interactive/gpt-oss-120b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Interactive/llama3_1-405b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Offline/llama2-70b.py",
    "GB300-NVL72_GB300-288GB_aarch64x4/Server/llama2-70b.py",
)

#: GPUs per node of each of NVIDIA's system-id prefixes (the scaleout reproduction commands, see the module docstring).
GPUS_PER_NODE = {
    "B200-SXM-180GB": 8,
    "B300-SXM-270GB": 8,
    "GB200-NVL72_GB200-186GB_aarch64": 4,
    "GB300-NVL72_GB300-288GB_aarch64": 4,
}
GB200, GB300 = "NVIDIA GB200", "NVIDIA GB300"


def system_of(path: str) -> tuple[str, int]:
    """``closed/NVIDIA/configs/GB200-..._aarch64x4/...`` -> (``GB200-..._aarch64``, 4)."""
    found = re.match(r"^(?:closed/NVIDIA/configs/)?([^/]+)x(\d+)/", path)
    assert found, path
    return found[1], int(found[2])


def tables() -> dict[str, Any]:
    """NVIDIA's system prefix -> the SKU table whose entries live in that system's folders."""
    out = {}
    for sku in load_table(harness_round="v6.0").skus.values():
        files = [e.file for s in sku.configs.values() for t in s.values() for c in t.values() for e in c.values()]
        (prefix,) = {system_of(f)[0] for f in [*files, *sku.not_used]}
        out[prefix] = sku
    return out


def test_every_v60_file_of_the_index_is_an_entry_or_said_why_not() -> None:
    skus = tables()
    assert set(skus) == set(GPUS_PER_NODE)
    listed = {f"closed/NVIDIA/configs/{p}" for p in (*INDEX_V60, *TREE_V60)}
    carried: set[str] = set()
    for prefix, sku in skus.items():
        files = {e.file for s in sku.configs.values() for t in s.values() for c in t.values() for e in c.values()}
        assert not files & set(sku.not_used), prefix
        carried |= files | set(sku.not_used)
    # nothing left out, nothing made up
    assert listed - carried == set()
    assert carried - listed == set()


def test_entries_are_single_node_and_every_multi_node_file_is_named_so() -> None:
    for prefix, sku in tables().items():
        per_node = GPUS_PER_NODE[prefix]
        for scenarios in sku.configs.values():
            for targets in scenarios.values():
                for counts in targets.values():
                    assert all(count <= per_node for count in counts), (sku.sku, sorted(counts))
        for path, why in sku.not_used.items():
            multi = system_of(path)[1] > per_node
            assert why.startswith("multi-node") == multi, (path, why)


def test_every_v60_entry_has_a_row_of_nvidias_values() -> None:
    table = load_table(harness_round="v6.0")
    entries = {
        (sku.sku, count, model, scenario, accuracy)
        for sku in table.skus.values()
        for model, scenarios in sku.configs.items()
        for scenario, targets in scenarios.items()
        for accuracy, counts in targets.items()
        for count in counts
    }
    rows = {(table.sku_for_gpu(g).sku, n, m, s, a) for g, n, m, s, a, _, _ in EXPECTED_V60}
    # entries of the systems shared/upstream holds are compared key by key with what NVIDIA's code resolves
    compared = {
        e
        for e in entries
        for sku in [table.skus[e[0]]]
        if sku.configs[e[2]][e[3]][e[4]][e[1]].file.split("/")[3] in SHARED_V60_SYSTEMS
    }
    assert entries - compared == rows - compared
    assert rows <= entries


@pytest.mark.parametrize("sku", ["B200_SXM_180GB", "B300_SXM_270GB", "GB200_186GB", "GB300_288GB"])
def test_every_llm_scenario_without_an_entry_says_why(sku: str) -> None:
    table = load_table(harness_round="v6.0")
    gpu = table.skus[sku].gpu_names[0]
    for model in ("llama2-70b", "llama3.1-8b", "llama3.1-405b", "gpt-oss-120b", "deepseek-r1"):
        for scenario in ("Offline", "Server", "Interactive"):
            problem = table.entry_problem(gpu, model, scenario)
            assert problem is None or "not published" not in problem, problem


# ---- the model: what a file may say -------------------------------------------------------------------------


def _gb200(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path("gpuconfigs/v6.0/GB200_186GB.json").read_text())
    return data


def _load(tmp_path: Path, data: dict[str, Any]) -> None:
    (tmp_path / "GB200_186GB.json").write_text(json.dumps(data))
    load_table(tmp_path, harness_round="v6.0")


def test_an_atomic_count_the_table_lacks_is_refused(tmp_path: Path) -> None:
    data = _gb200(tmp_path)
    data["configs"]["llama2-70b"]["Server"]["k_99"]["4"]["atomic"] = 2
    with pytest.raises(ProfileError, match=r"configs\.llama2-70b\.Server\.k_99\.4\.atomic"):
        _load(tmp_path, data)


def test_a_harness_only_config_without_atomic_needs_its_batch_size(tmp_path: Path) -> None:
    data = _gb200(tmp_path)
    del data["configs"]["llama2-70b"]["Server"]["k_99"]["4"]["atomic"]
    with pytest.raises(ProfileError, match=r"4\.fields: needs gpu_batch_size"):
        _load(tmp_path, data)


def test_a_not_used_file_needs_a_reason(tmp_path: Path) -> None:
    data = _gb200(tmp_path)
    data["not_used"]["closed/NVIDIA/configs/GB200-NVL72_GB200-186GB_aarch64x4/Offline/wan22-a14b.py"] = " "
    with pytest.raises(ProfileError, match=r"not_used\."):
        _load(tmp_path, data)


# ---- what an unknown machine with these GPUs gets -----------------------------------------------------------


def test_v60_gb300_is_its_own_sku_named_as_nvidia_names_its_systems() -> None:
    system = host(GB300, 294912, 2, cpu="Neoverse-V2")
    files = v60_files(
        system, load_table(harness_round="v6.0"), "llama3.1-405b", ["Server"], ["k_99"], allow_untuned=False
    )
    assert files.tuned and files.system_id == "WL_GB300-NVL72_GB300-288GB_aarch64x2"
    (config,) = files.files
    assert config.path == "configs/WL_GB300-NVL72_GB300-288GB_aarch64x2/Server/llama3_1-405b.py"
    assert "loadgen_fields.server_target_qps: 0.8," in config.text
    assert "os.environ['OMPI_MCA_coll_ucc_enable'] = '0'" in config.text


def test_v60_a_harness_only_config_is_generated_over_its_servers_values() -> None:
    system = host(GB200, 189471, 4, cpu="Neoverse-V2")
    files = v60_files(system, load_table(harness_round="v6.0"), "llama2-70b", ["Server"], ["k_99"], allow_untuned=False)
    (config,) = files.files
    assert (
        "GB200-NVL72_GB200-186GB_aarch64x4/Server/llama2-70b.py WorkloadSetting(Custom,0.99,MaxP) = harness_config"
        in config.text
    )
    assert "servers: closed/NVIDIA/configs/GB200-NVL72_GB200-186GB_aarch64x1/Server/llama2-70b.py" in config.text
    assert "loadgen_fields.server_target_qps: 188.0," in config.text
    assert "model_fields.gpu_batch_size: {'llama2-70b': 2048}," in config.text
    # the servers' file sets these before NVIDIA's servers read it (GB200...x1/Server/llama2-70b.py)
    assert "os.environ['UCX_RNDV_SCHEME'] = 'get_zcopy'" in config.text


def test_v60_a_disaggregated_side_is_noted_with_its_target(tmp_path: Path) -> None:
    system = host(GB300, 294912, 4, cpu="Neoverse-V2")
    files = v60_files(
        system, load_table(harness_round="v6.0"), "llama3.1-405b", ["Server"], ["k_99"], allow_untuned=False
    )
    assert files.tuned
    assert any("exports gen_config" in note and "--server_target_qps" in note for note in files.notes)


def test_v60_generated_gb300_gptoss_runs_in_the_standin_with_nvidias_values(tmp_path: Path) -> None:
    system = host(GB300, 294912, 1, cpu="Neoverse-V2")
    nvidia, scratch = standin(tmp_path, "v6.0", system)
    files = v60_files(
        system, load_table(harness_round="v6.0"), "gpt-oss-120b", ["Server"], ["k_99"], allow_untuned=False
    )
    write(nvidia, files.files)
    argv = [
        sys.executable,
        "-m",
        "code.main",
        "--action=run_harness",
        "--benchmarks=gpt-oss-120b",
        "--scenarios=Server",
    ]
    done = run(nvidia, scratch, argv, SYSTEM_NAME=files.system_id)
    assert done.returncode == 0, done.stderr
    user_conf = nvidia / f"build/loadgen-configs/{files.system_id}_TRT/gpt-oss-120b/Server/user.conf"
    assert "target_qps = 11.5" in user_conf.read_text()
