"""NVIDIA's v5.1 published values reach an unknown machine with the same GPUs, for every config file of NVIDIA's
single-node v5.1 systems that our index holds.

The expectation table below is written by hand from NVIDIA's files, not from ``gpuconfigs/``: each row names the
file (``closed/NVIDIA/configs/<SYSTEM>/<Scenario>/<benchmark>.py``) and the values its ``EXPORTS`` entry sets for
``WorkloadSetting(Custom, <target>, MaxP)``. Every file was read from the public fork
``ykamiset/inference_results_v5.1`` commit ``e9ccad4d681ac32678230a488cd690ef6c8b21fa`` (mlcommons/
inference_results_v5.1 has no closed/NVIDIA configs in our index). Systems: ``B200-SXM-180GBx8`` (8x B200) and
``GB200-NVL72_GB200-186GB_aarch64x4`` (one 4-GPU GB200 node). NVIDIA writes some precisions as ``Precision`` members
(``C.Precision.FP8``, nvmitten's ``Precision.FP16``): those are written ``Precision.<NAME>`` below.

The rule under test is the general one: for a machine NVIDIA has no config folder for, with the GPUs and GPU count of
NVIDIA's system, the file the v5.1 adapter generates (``custom_files``, what ``workload run`` installs) sets the
values NVIDIA's file sets, and names that file as its source. The table also covers every entry of the v5.1
gpuconfigs table (no entry untested, no row without an entry).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from workload.errors import ProfileError
from workload.mlperf.catalog import WorkloadSetting, canonical_benchmark
from workload.mlperf.gpuconfigs import gpu_count_problem, load_table
from workload.mlperf.rounds.v5_1 import custom_files
from workload.mlperf.system import HostSystem

B200X8 = HostSystem("NVIDIA B200", 183359, 8, "AMD EPYC 9V84 96-Core Processor", 96, 2, 1, 1_900_000_000_000)
GB200X4 = HostSystem("NVIDIA GB200", 189471, 4, "Neoverse-V2", 72, 2, 1, 960_000_000_000, "aarch64")
B8 = "closed/NVIDIA/configs/B200-SXM-180GBx8"
G4 = "closed/NVIDIA/configs/GB200-NVL72_GB200-186GB_aarch64x4"


@dataclass(frozen=True)
class Row:
    """One EXPORTS entry of NVIDIA's file: the machine it is for, and (a subset of) what it sets."""

    machine: HostSystem
    source: str
    high: bool
    want: dict[str, Any]
    #: The file's ``os.environ[...] = ...`` lines.
    env: dict[str, str] = field(default_factory=dict)

    @property
    def scenario(self) -> str:
        return self.source.split("/")[-2]

    @property
    def benchmark(self) -> str:
        return self.source.split("/")[-1].removesuffix(".py")

    def id(self) -> str:
        return f"{self.source.split('/')[3]}-{self.scenario}-{self.benchmark}-{'99.9' if self.high else '99'}"


def _llama2(bs: int, qps: dict[str, float], min_duration: int, tokens: int) -> dict[str, Any]:
    return {
        "gpu_batch_size": {"llama2-70b": bs},
        **qps,
        "precision": "fp4",
        "input_dtype": "int32",
        "min_duration": min_duration,
        "tensor_parallelism": 1,
        "pipeline_parallelism": 1,
        "trtllm_build_flags": {"max_num_tokens": tokens, "max_input_len": 1024, "max_seq_len": 2048},
        "trtllm_runtime_flags": {"max_num_tokens": tokens, "kvcache_free_gpu_mem_frac": 0.95},
    }


def _llama3_8b(qps: dict[str, float], graphs: bool) -> dict[str, Any]:
    return {
        "gpu_batch_size": {"llama3_1-8b": 6000},
        **qps,
        "precision": "fp4",
        "min_duration": 600000,
        "use_graphs": graphs,
        "tensor_path": "build/preprocessed_data/llama3.1-8b/",
        "trtllm_build_flags": {"max_num_tokens": 12000, "max_input_len": 2540, "max_seq_len": 2668},
        "trtllm_runtime_flags": {"kvcache_free_gpu_mem_frac": 0.9, "workers_per_core": 12},
        "vboost_slider": 1,
    }


def _llama3_405b(bs: int, qps: dict[str, float], tp: int, pp: int, build: int, runtime: int) -> dict[str, Any]:
    return {
        "gpu_batch_size": {"llama3.1-405b": bs},
        **qps,
        "precision": "fp4",
        "min_duration": 600000,
        "tensor_parallelism": tp,
        "pipeline_parallelism": pp,
        "trtllm_build_flags": {"max_num_tokens": build, "max_seq_len": 22000, "gemm_allreduce_plugin": "float16"},
        "trtllm_runtime_flags": {"max_num_tokens": runtime, "enable_chunked_context": True},
        "use_graphs": False,
    }


def _whisper(qps: float) -> dict[str, Any]:
    return {
        "gpu_batch_size": {"encoder": 320, "decoder": 320},
        "offline_expected_qps": qps,
        "precision": "Precision.FP16",
        "input_dtype": "Precision.FP32",
        "llm_gen_config_path": "code/whisper/tensorrt/generation_config.json",
        "whisper_encoder_build_flags": {"max_batch_size": 320, "max_seq_len": 3000, "bert_attention_plugin": "float16"},
        "whisper_decoder_build_flags": {"max_input_len": 14, "max_seq_len": 174, "max_encoder_input_len": 3000},
        "trtllm_runtime_flags": {"use_inflight_batching": False, "max_num_tokens": 3000},
        "use_token_latencies": False,
        "vboost_slider": 1,
    }


def _sdxl(bs: int, qps: dict[str, float]) -> dict[str, Any]:
    return {
        "gpu_batch_size": {"clip1": bs, "clip2": bs, "unet": bs, "vae": 8},
        **qps,
        "precision": {
            "clip1": "Precision.FP32",
            "clip2": "Precision.FP32",
            "unet": "Precision.FP8",
            "vae": "Precision.FP32",
        },
        "gpu_copy_streams": 1,
        "gpu_inference_streams": 1,
        "input_dtype": "int32",
        "input_format": "linear",
        "tensor_path": "build/preprocessed_data/coco2014-tokenized-sdxl/5k_dataset_final/",
        "use_graphs": False,
    }


def _deepseek(qps: dict[str, float], tokens: int, wait: int, timeout: int) -> dict[str, Any]:
    return {
        "gpu_batch_size": {"deepseek-r1": 512},
        **qps,
        "precision": "fp4",
        "min_duration": 600000,
        "min_query_count": 26328,
        "warmup_iterations": 0,
        "tensor_parallelism": 8,
        "pipeline_parallelism": 1,
        "moe_expert_parallelism": 8,
        "use_graphs": True,
        # NVIDIA writes 3140 + 20000.
        "trtllm_build_flags": {"max_num_tokens": tokens, "max_seq_len": 23140, "enable_attention_dp": True},
        "trtllm_runtime_flags": {
            "max_num_tokens": tokens,
            "max_concurrency": 5120,
            "cuda_graph_batch_sizes": [128, 256, 384, 512],
            "moe_backend": "WIDEEP",
            "adp_balancing_batching_wait_iters": wait,
            "adp_balancing_timeout_iters": timeout,
        },
    }


DEEPSEEK_ENV = {"TRTLLM_MOE_ENABLE_ALLTOALL_WITHOUT_ALLGATHER": "1"}
OFF, SRV = "offline_expected_qps", "server_target_qps"

EXPECTED: list[Row] = [
    # B200-SXM-180GBx8
    Row(B200X8, f"{B8}/Offline/llama2-70b.py", False, _llama2(2048, {OFF: 376}, 2400000, 3584)),
    Row(B200X8, f"{B8}/Offline/llama2-70b.py", True, _llama2(2048, {OFF: 376}, 2400000, 3584)),
    Row(B200X8, f"{B8}/Server/llama2-70b.py", False, _llama2(2048, {SRV: 364.0}, 2400000, 3584)),
    Row(B200X8, f"{B8}/Server/llama2-70b.py", True, _llama2(2048, {SRV: 364.0}, 2400000, 3584)),
    Row(
        B200X8,
        f"{B8}/Interactive/llama2-70b.py",
        False,
        {**_llama2(768, {SRV: 220}, 1200000, 768), "trtllm_build_flags": {"max_num_tokens": 768, "gemm_plugin": "fp4"}},
    ),
    Row(B200X8, f"{B8}/Interactive/llama2-70b.py", True, _llama2(768, {SRV: 220}, 1200000, 768)),
    Row(B200X8, f"{B8}/Offline/llama3_1-8b.py", False, _llama3_8b({OFF: 1100}, True)),
    Row(
        B200X8,
        f"{B8}/Server/llama3_1-8b.py",
        False,
        {**_llama3_8b({SRV: 1000}, True), "trtllm_runtime_flags": {"max_concurrency": -1, "disable_gc": True}},
    ),
    Row(
        B200X8,
        f"{B8}/Interactive/llama3_1-8b.py",
        False,
        {**_llama3_8b({SRV: 800}, True), "trtllm_runtime_flags": {"max_concurrency": -1, "disable_gc": True}},
    ),
    Row(
        B200X8,
        f"{B8}/Offline/mixtral-8x7b.py",
        False,
        {
            "gpu_batch_size": {"mixtral-8x7b": 6144},
            OFF: 880,
            "tensor_path": "build/preprocessed_data/moe/",
            "trtllm_build_flags": {"max_num_tokens": 20480, "use_fp8_context_fmha": "disable"},
            "trtllm_checkpoint_flags": {"effective_bits": 7.25, "num_score_steps": 8, "num_calib_steps": 64},
            "trtllm_runtime_flags": {"max_num_tokens": 14336},
        },
    ),
    Row(B200X8, f"{B8}/Offline/mixtral-8x7b.py", True, {"gpu_batch_size": {"mixtral-8x7b": 6144}, OFF: 880}),
    Row(
        B200X8,
        f"{B8}/Server/mixtral-8x7b.py",
        False,
        {
            SRV: 872,
            "trtllm_build_flags": {"max_num_tokens": 16384, "gemm_plugin": "fp4", "use_fp8_context_fmha": "enable"},
            "trtllm_runtime_flags": {"max_num_tokens": 10240, "kvcache_free_gpu_mem_frac": 0.9},
        },
    ),
    Row(B200X8, f"{B8}/Offline/llama3_1-405b.py", False, _llama3_405b(128, {OFF: 2.18}, 2, 2, 5120, 1536)),
    Row(B200X8, f"{B8}/Server/llama3_1-405b.py", False, _llama3_405b(256, {SRV: 1.9}, 4, 1, 2048, 2048)),
    Row(B200X8, f"{B8}/Interactive/llama3_1-405b.py", False, _llama3_405b(256, {SRV: 1.15}, 4, 1, 2048, 1536)),
    Row(B200X8, f"{B8}/Offline/deepseek-r1.py", False, _deepseek({OFF: 10}, 4608, 10, 500), DEEPSEEK_ENV),
    Row(B200X8, f"{B8}/Server/deepseek-r1.py", False, _deepseek({SRV: 5}, 3456, 3, 9), DEEPSEEK_ENV),
    Row(
        B200X8,
        f"{B8}/Offline/rgat.py",
        False,
        {
            "gpu_batch_size": {"rgat": 11000},
            "input_dtype": "int64",
            "input_format": "linear",
            OFF: 650000,
            "precision": "fp16",
        },
    ),
    Row(B200X8, f"{B8}/Offline/stable-diffusion-xl.py", False, _sdxl(64, {OFF: 33.0})),
    Row(B200X8, f"{B8}/Server/stable-diffusion-xl.py", False, {**_sdxl(16, {SRV: 28.8}), "batcher_time_limit": 5}),
    Row(B200X8, f"{B8}/Offline/whisper.py", False, _whisper(650)),
    # GB200-NVL72_GB200-186GB_aarch64x4
    Row(
        GB200X4, f"{G4}/Offline/llama2-70b.py", False, {**_llama2(2048, {OFF: 376}, 2400000, 3584), "vboost_slider": 1}
    ),
    Row(GB200X4, f"{G4}/Offline/llama2-70b.py", True, _llama2(2048, {OFF: 188}, 2400000, 3584)),
    Row(GB200X4, f"{G4}/Server/llama2-70b.py", False, _llama2(2048, {SRV: 182.0}, 600000, 3584)),
    Row(GB200X4, f"{G4}/Server/llama2-70b.py", True, _llama2(2048, {SRV: 182.0}, 600000, 3584)),
    Row(GB200X4, f"{G4}/Offline/llama3_1-8b.py", False, _llama3_8b({OFF: 550}, True)),
    Row(
        GB200X4,
        f"{G4}/Server/llama3_1-8b.py",
        False,
        {**_llama3_8b({SRV: 500}, False), "trtllm_runtime_flags": {"max_concurrency": -1, "disable_gc": True}},
    ),
    Row(GB200X4, f"{G4}/Interactive/llama3_1-8b.py", False, _llama3_8b({SRV: 400}, True)),
    # NVIDIA: 'llama3.1-405b': 2048, "# BUG: building an engine with 128 has accuracy issue".
    Row(GB200X4, f"{G4}/Offline/llama3_1-405b.py", False, _llama3_405b(2048, {OFF: 1.17}, 2, 2, 1536, 1536)),
    Row(GB200X4, f"{G4}/Server/llama3_1-405b.py", False, _llama3_405b(256, {SRV: 0.75}, 4, 1, 2048, 2048)),
    Row(
        GB200X4,
        f"{G4}/Offline/mixtral-8x7b.py",
        False,
        {
            "gpu_batch_size": {"mixtral-8x7b": 3072},
            OFF: 120,
            "tensor_parallelism": 1,
            "trtllm_build_flags": {"max_num_tokens": 16384, "max_seq_len": 3072},
            "trtllm_checkpoint_flags": {"effective_bits": 8.5, "num_score_steps": 4},
            "trtllm_runtime_flags": {"max_num_tokens": 16384},
        },
    ),
    Row(GB200X4, f"{G4}/Offline/whisper.py", False, _whisper(500)),
]


def _value(node: ast.expr) -> Any:
    """A config value as the harness would get it: literals, and ``C.Precision.X`` as ``Precision.X``."""
    if isinstance(node, ast.Attribute):
        return ast.unparse(node).removeprefix("C.")
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    return ast.literal_eval(node)


def read_exports(text: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """A generated v5.1 config file read back: ``{accuracy target: {field name: value}}`` and its env lines."""
    tree = ast.parse(text)
    exports: dict[str, dict[str, Any]] = {}
    env: dict[str, str] = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign):
            continue
        target = stmt.targets[0]
        if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "os.environ":
            env[ast.literal_eval(target.slice)] = ast.literal_eval(stmt.value)
        elif isinstance(target, ast.Name) and target.id == "EXPORTS":
            assert isinstance(stmt.value, ast.Dict)
            for key, body in zip(stmt.value.keys, stmt.value.values, strict=True):
                assert isinstance(key, ast.Call) and isinstance(body, ast.Dict)
                accuracy = ast.unparse(key.args[1])  # C.AccuracyTarget(0.99)
                fields = {}
                for name, value in zip(body.keys, body.values, strict=True):
                    assert isinstance(name, ast.Attribute), ast.unparse(body)
                    fields[name.attr] = _value(value)
                exports[accuracy] = fields
    return exports, env


def _generated(row: Row) -> str:
    """The file the v5.1 adapter writes for an unknown machine like ``row.machine`` (the catalog's benchmark name)."""
    table = load_table(harness_round="v5.1")
    sku = table.sku_for_gpu(row.machine.gpu_name)
    setting = WorkloadSetting("Custom", "k_99_9" if row.high else "k_99", "MaxP")
    model = canonical_benchmark(row.benchmark)
    ((generated, provenance),) = custom_files(row.machine, sku, model, (row.scenario,), (setting,), allow_untuned=False)
    assert provenance[0].tuned
    assert generated.path == f"configs/WL_{sku.sku}x{row.machine.gpu_count}/{row.scenario}/{row.benchmark}.py"
    return generated.text


@pytest.mark.parametrize("row", EXPECTED, ids=Row.id)
def test_an_unknown_machine_gets_nvidias_values(row: Row) -> None:
    text = _generated(row)
    # The header names NVIDIA's file and EXPORTS key the values come from, not scaled.
    target = "0.999" if row.high else "0.99"
    assert f"{row.source} WorkloadSetting(Custom,{target},MaxP)" in text
    assert "scaled from" not in text
    exports, env = read_exports(text)
    assert list(exports) == [f"C.AccuracyTarget({target})"]
    ours = exports[f"C.AccuracyTarget({target})"]
    for name, value in row.want.items():
        assert name in ours, (name, row.source)
        if name.endswith("_flags"):  # a subset of NVIDIA's flags is listed per row
            assert value.items() <= ours[name].items(), (name, row.source)
        else:
            assert ours[name] == value, (name, row.source)
    assert env == row.env


def test_the_table_and_the_expectations_cover_each_other() -> None:
    """Every entry of the v5.1 table has a row here and every row an entry: nothing published goes untested."""
    rows = {
        (r.machine.gpu_name, r.machine.gpu_count, r.benchmark, r.scenario, "k_99_9" if r.high else "k_99")
        for r in EXPECTED
    }
    assert len(rows) == len(EXPECTED)
    table = load_table(harness_round="v5.1")
    entries = set()
    for sku in table.skus.values():
        for model, scenarios in sku.configs.items():
            for scenario, targets in scenarios.items():
                for accuracy, counts in targets.items():
                    for count in counts:
                        entries.add((sku.gpu_names[0], count, model, scenario, accuracy))
    assert entries == rows


def test_what_nvidia_did_not_publish_is_reported_not_made_up() -> None:
    table = load_table(harness_round="v5.1")
    for gpu, model, scenario in (
        ("NVIDIA GB200", "llama2-70b", "Interactive"),
        ("NVIDIA GB200", "deepseek-r1", "Offline"),
        ("NVIDIA B200", "rgat", "Server"),
    ):
        problem = table.entry_problem(gpu, model, scenario)
        assert problem is not None and "v5.1" in problem, (gpu, model, scenario)
    assert "not in our index" in (table.entry_problem("NVIDIA GB200", "llama2-70b", "Interactive") or "")
    # The GB200 node's values scale to a 2-GPU GB200 machine; its 405b Server engine (TP 4) still needs 4 GPUs.
    two = table.resolve("NVIDIA GB200", 2, "llama2-70b", "Offline")
    assert two.scaled_from == 4 and two.fields["offline_expected_qps"] == 188
    problem = gpu_count_problem(table.resolve("NVIDIA GB200", 2, "llama3_1-405b", "Server"))
    assert problem is not None and "tensor_parallelism 4" in problem


STANDIN = Path(__file__).parent / "fixtures" / "harness" / "rounds" / "v5.1" / "tree" / "closed" / "NVIDIA"


def test_the_generated_files_load_in_the_round_s_config_loader(tmp_path: Path) -> None:
    """Every generated file imports in the v5.1 stand-in (NVIDIA's file format, field modules and EXPORTS lookup:
    tests/fixtures/harness/rounds/v5.1/UPSTREAM.md) and gives the values read above, with no minimal fallback."""
    root = tmp_path / "NVIDIA"
    shutil.copytree(STANDIN, root)
    table = load_table(harness_round="v5.1")
    wanted: list[tuple[str, str, str, str, dict[str, Any]]] = []
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in EXPECTED:
        groups.setdefault((row.machine.gpu_name, row.source), []).append(row)
    for rows in groups.values():
        machine, scenario, benchmark = rows[0].machine, rows[0].scenario, rows[0].benchmark
        sku = table.sku_for_gpu(machine.gpu_name)
        settings = [WorkloadSetting("Custom", "k_99_9" if r.high else "k_99", "MaxP") for r in rows]
        ((generated, _),) = custom_files(machine, sku, benchmark, (scenario,), settings, allow_untuned=False)
        (root / generated.path).parent.mkdir(parents=True, exist_ok=True)
        (root / generated.path).write_text(generated.text)
        exports, _ = read_exports(generated.text)
        system_id = generated.path.split("/")[1]
        for target, fields in exports.items():
            wanted.append((system_id, benchmark, scenario, target.split("(")[1].rstrip(")"), fields))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(
        json.dumps({"gpu_name": "NVIDIA B200", "gpu_count": 8, "cpu_model": "AMD EPYC", "memory_bytes": 10**12})
    )
    code = (
        "import json, sys; from pathlib import Path; import code.main as m, code.common.constants as C\n"
        "out = []\n"
        "for sid, bench, scen, target in json.loads(sys.argv[1]):\n"
        "    s = C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(float(target)), C.PowerSetting.MaxP)\n"
        "    out.append(m.get_config(Path('configs'), sid, bench, scen, s))\n"
        "print(json.dumps(out, default=lambda o: f'Precision.{o.name}'))\n"
    )
    keys = json.dumps([w[:4] for w in wanted])
    done = subprocess.run(
        [sys.executable, "-c", code, keys],
        cwd=root,
        capture_output=True,
        text=True,
        env={"MLPERF_SCRATCH_PATH": str(scratch), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "minimal" not in done.stderr.lower(), done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(loaded) == len(wanted) == len(EXPECTED)
    for (system_id, benchmark, scenario, target, fields), got in zip(wanted, loaded, strict=True):
        assert got == fields, (system_id, benchmark, scenario, target)


def test_an_enum_mark_on_a_field_the_entry_does_not_set_is_refused(tmp_path: Path) -> None:
    data = json.loads(Path("gpuconfigs/v5.1/B200_SXM_180GB.json").read_text())
    del data["configs"]["stable-diffusion-xl"]["Offline"]["k_99"]["8"]["fields"]["precision"]
    (tmp_path / "B200_SXM_180GB.json").write_text(json.dumps(data))
    with pytest.raises(ProfileError) as info:
        load_table(tmp_path, harness_round="v5.1")
    assert "configs.stable-diffusion-xl.Offline.k_99.8: enums: precision is not set in fields" in str(info.value)
