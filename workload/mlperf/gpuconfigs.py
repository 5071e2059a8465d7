"""The gpuconfigs table: NVIDIA's published config values per GPU SKU, model, scenario, accuracy target and GPU count.

One table per harness round (:data:`ROUNDS`): v4.1's files lie in ``gpuconfigs/`` itself, every later round's in
``gpuconfigs/<round>/`` (``gpuconfigs/v5.1/B200_SXM_180GB.json``); ``load_table(harness_round="v5.1")`` reads one round.
Each file names its round (``"round": "v5.1"``; absent = v4.1) and holds the values of that round's files only:
a GPU NVIDIA no longer tunes in a round has no file in it (the adapter decides what to do, never this module).

One JSON file per SKU in the round's folder (:func:`workload.resources.gpuconfig_dir`)::

    {"sku": "H100_SXM_80GB", "known_gpu": "H100_SXM_80GB", "gpu_names": ["NVIDIA H100 80GB HBM3"],
     "source": "...",
     "configs": {"bert": {"Server": {"k_99": {
         "1": {"file": "closed/NVIDIA/configs/bert/Server/__init__.py", "class": "H100_SXM_80GBx1",
               "fields": {"gpu_batch_size": 128, "server_target_qps": 7000, ...}},
         "8": {"file": "...", "class": "H100_SXM_80GBx8", "fields": {...}}}}}},
     "unpublished": {"gptj": {"SingleStream": "why NVIDIA has no such config"}}}

Every entry is one of NVIDIA's registered config classes of that round: ``fields`` are the values the
class sets itself or inherits from the classes between it and the scenario's ``<Scenario>GPUBaseConfig``
(which the generated class derives from, so it inherits the base values the same way). Throughput
(``offline_expected_qps``, ``server_target_qps``) is the class's own, for its GPU count.

From v6.0 an entry may be a harness-only config naming the ``atomic`` count whose config NVIDIA runs as its
servers (the atomic entry's fields lie under its own, :func:`entry_fields`), and ``not_used`` names NVIDIA's files of
the SKU the table does not carry (multi-node, one side of a disaggregated run, a benchmark not run here) with why.

A GPU count NVIDIA has no class for is derived from the nearest published count of the same accuracy
target (the largest below it, else the smallest above it): throughput scaled by the count ratio, every
other field as it is, and the result marked ``scaled_from``. A (model, scenario, accuracy) with no
published class at all has no values: the executor reports it and runs the rest. Every file is
validated at load: an unknown model, scenario, accuracy target or field is an error naming the file
and the key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workload.errors import ProfileError
from workload.mlperf.catalog import SCENARIOS, canonical_benchmark

#: Precision names of NVIDIA's configs (the strings they write, and nvmitten ``Precision`` members' names lower-cased).
Precision = Literal["int8", "fp16", "fp32", "fp8", "fp4"]
#: A gpuconfigs file model (:func:`read_table_file`).
TableModel = TypeVar("TableModel", bound=BaseModel)
#: Fields that scale with the number of GPUs (throughput); everything else is per system as is.
THROUGHPUT_FIELDS = ("offline_expected_qps", "server_target_qps")
#: The field each scenario cannot do without (the harness sizes the LoadGen run from it).
REQUIRED_BY_SCENARIO = {
    "Offline": "offline_expected_qps",
    "Server": "server_target_qps",
    "SingleStream": "single_stream_expected_latency_ns",
    "MultiStream": "multi_stream_expected_latency_ns",
}
#: NVIDIA's ``AccuracyTarget`` members: 99 % and 99.9 % of the reference accuracy.
ACCURACY_TARGETS = ("k_99", "k_99_9")

#: Rounds with a table, and the folder of its files below ``gpuconfigs/`` ("" = the folder itself).
ROUNDS: dict[str, str] = {"v4.1": "", "v5.0": "v5.0", "v5.1": "v5.1", "v6.0": "v6.0"}
#: The round a file without ``"round"`` belongs to (the files written before rounds had folders).
DEFAULT_ROUND = "v4.1"
#: ``--benchmarks`` names each round's harness has (v5.0: README "Valid benchmarks"; v5.1: ``code/common/constants.py``
#: ``Benchmark`` values, the names of its config files).
ROUND_MODELS: dict[str, tuple[str, ...]] = {
    # v4.1: its ``configs/<benchmark>/`` folders (reference notes §2; v4.0 lacks mixtral).
    "v4.1": (
        "bert",
        "3d-unet",
        "resnet50",
        "retinanet",
        "dlrm-v2",
        "gptj",
        "llama2-70b",
        "mixtral-8x7b",
        "stable-diffusion-xl",
    ),
    # v5.0: NVIDIA's ``Benchmark`` values of the round (code/common/constants.py, anandhu-eng/inference_results_v5.0
    # @ 825f72bb): no llama3.1-8b yet, llama2-70b-interactive a benchmark of its own.
    "v5.0": (
        "bert",
        "dlrm-v2",
        "gptj",
        "llama2-70b",
        "llama2-70b-interactive",
        "llama3_1-405b",
        "mixtral-8x7b",
        "resnet50",
        "retinanet",
        "stable-diffusion-xl",
        "3d-unet",
        "rgat",
    ),
    # v5.1: NVIDIA's ``Benchmark`` values (code/common/constants.py, ykamiset/inference_results_v5.1 @ e9ccad4d).
    "v5.1": (
        "resnet50",
        "retinanet",
        "bert",
        "dlrm-v2",
        "gptj",
        "llama2-70b",
        "llama3_1-8b",
        "llama3_1-405b",
        "mixtral-8x7b",
        "deepseek-r1",
        "stable-diffusion-xl",
        "whisper",
        "rgat",
    ),
    # v6.0: the MAKE Targets documentation's "Available Benchmarks", spelled as its config files
    # (configs/<SYSTEM>/<Scenario>/llama3_1-405b.py).
    "v6.0": (
        "llama2-70b",
        "llama3_1-8b",
        "llama3_1-405b",
        "gpt-oss-120b",
        "deepseek-r1",
        "whisper",
        "dlrm-v3",
        "wan22-a14b",
        "qwen3-vl-235b-a22b",
    ),
}
#: Scenarios of each round (v5.1 ``Scenario`` adds ``Interactive``, a folder of its own in ``configs/<SYSTEM>/``).
ROUND_SCENARIOS: dict[str, tuple[str, ...]] = {
    "v4.1": SCENARIOS,
    "v5.0": SCENARIOS,
    "v5.1": (*SCENARIOS, "Interactive"),
    "v6.0": (*SCENARIOS, "Interactive"),
}
#: Where NVIDIA's config file of a round lies: one file per benchmark and scenario up to v5.0, one per system,
#: scenario and benchmark from v5.1 (``configs/<SYSTEM>/<Scenario>/<benchmark>.py``).
ROUND_FILE_PATTERNS: dict[str, str] = {
    "v4.1": r"^closed/NVIDIA/configs/(?P<model>[^/]+)/(?P<scenario>[A-Za-z]+)/__init__\.py$",
    "v5.0": r"^closed/NVIDIA/configs/(?P<model>[^/]+)/(?P<scenario>[A-Za-z]+)/__init__\.py$",
    "v5.1": r"^closed/NVIDIA/configs/[^/]+/(?P<scenario>[A-Za-z]+)/(?!__init__\.py$)(?P<model>[^/]+)\.py$",
    "v6.0": r"^closed/NVIDIA/configs/[^/]+/(?P<scenario>[A-Za-z]+)/(?!__init__\.py$)(?P<model>[^/]+)\.py$",
}


class ConfigFields(BaseModel):
    """Config fields (the harness's names); every one optional, None = not set by the class."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_batch_size: int | dict[str, int] | None = Field(
        default=None, description="per engine; a plain int is keyed by the model"
    )
    offline_expected_qps: float | None = Field(default=None, gt=0)
    server_target_qps: float | None = Field(default=None, gt=0)
    single_stream_expected_latency_ns: int | None = Field(default=None, gt=0)
    multi_stream_expected_latency_ns: int | None = Field(default=None, gt=0)
    # v5.1 SDXL sets it per engine ({'clip1': C.Precision.FP32, 'unet': C.Precision.FP8, ...}).
    precision: Precision | dict[str, Precision] | None = None
    use_graphs: bool | None = None
    gpu_copy_streams: int | None = Field(default=None, ge=1)
    gpu_inference_streams: int | None = Field(default=None, ge=1)
    workspace_size: int | None = Field(default=None, gt=0)
    use_small_tile_gemm_plugin: bool | None = None
    active_sms: int | None = Field(default=None, ge=1, le=100)
    graphs_max_seqlen: int | None = Field(default=None, ge=1)
    server_num_issue_query_threads: int | None = Field(default=None, ge=0)
    soft_drop: float | None = Field(default=None, gt=0, le=1)
    start_from_device: bool | None = None
    end_on_device: bool | None = None
    use_cuda_thread_per_device: bool | None = None
    slice_overlap_patch_kernel_cg_impl: bool | None = None
    use_fp8: bool | None = None
    vboost_slider: int | None = Field(default=None, ge=0)
    tensor_parallelism: int | None = Field(default=None, ge=1)
    pipeline_parallelism: int | None = Field(default=None, ge=1)
    kvcache_free_gpu_mem_frac: float | None = Field(default=None, gt=0, le=1)
    enable_sort: bool | None = None
    # From v5.0 the LLM engines take TRT-LLM's own flags as dicts (tensor/pipeline parallelism among them in v5.0).
    # v6.0 nests lists and dicts in them (torch_compile_config, cuda_graph_batch_sizes).
    trtllm_build_flags: dict[str, Any] | None = None
    trtllm_runtime_flags: dict[str, Any] | None = None
    trtllm_checkpoint_flags: dict[str, Any] | None = None
    min_duration: int | None = Field(default=None, gt=0)
    input_dtype: str | None = None
    llm_gen_config_path: str | None = None
    tensor_path: str | None = None
    use_token_latencies: bool | None = None
    # v6.0's LLM config dicts (code.fields.loadgen / harness, code.llmlib.fields).
    min_query_count: int | None = Field(default=None, ge=1)
    moe_expert_parallelism: int | None = Field(default=None, ge=1)
    traffic_distribution_policy: str | None = None
    enable_metrics: bool | None = None
    harness_use_hf_tokenizer: bool | None = None
    warmup_iterations: int | None = Field(default=None, ge=0)
    readiness_timeout: int | None = Field(default=None, gt=0)
    # v5.1's non-LLM benchmarks: code.fields.models.input_format (rgat, SDXL), SDXL's batcher_time_limit
    # (code/stable-diffusion-xl/tensorrt/fields.py) and whisper's two engines' TRT-LLM build flags
    # (code/whisper/tensorrt/fields.py), as NVIDIA's B200-SXM-180GBx8 files set them.
    input_format: str | None = None
    batcher_time_limit: int | None = Field(default=None, ge=0)
    whisper_encoder_build_flags: dict[str, Any] | None = None
    whisper_decoder_build_flags: dict[str, Any] | None = None
    # v5.0 stable-diffusion-xl Server: how long the SDXL batcher waits to fill a batch (stable-diffusion-xl/Server).
    sdxl_batcher_time_limit: int | None = Field(default=None, ge=0)
    # v5.0 LWIS (resnet50, retinanet) Server: the batcher's deque limit and its timeout in microseconds.
    use_deque_limit: bool | None = None
    deque_timeout_usec: int | None = Field(default=None, ge=0)
    run_infer_on_copy_streams: bool | None = None
    # v5.0 dlrm-v2: the share of the embedding tables kept on the GPU, and the interaction op's precision.
    embedding_weights_on_gpu_part: float | None = Field(default=None, gt=0, le=1)
    interaction_op_precision: Literal["int8", "fp16", "fp32"] | None = None

    @model_validator(mode="after")
    def _positive_batch(self) -> ConfigFields:
        if self.gpu_batch_size is None:
            return self
        sizes = self.gpu_batch_size.values() if isinstance(self.gpu_batch_size, dict) else [self.gpu_batch_size]
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError("gpu_batch_size must be at least 1")
        return self

    def set_fields(self) -> dict[str, Any]:
        """The fields set here, in declaration order."""
        return self.model_dump(exclude_none=True)


class PublishedConfig(BaseModel):
    """One of NVIDIA's registered config classes: where it is and what it sets (flattened below the base)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    #: The config file (its form per round: :data:`ROUND_FILE_PATTERNS`, checked by the table).
    file: str = Field(pattern=r"^closed/NVIDIA/configs/[^/]+/[A-Za-z]+/[^/]+\.py$")
    #: The registered class (v4.1, v5.0) or, from v5.1, the ``EXPORTS`` key (``WorkloadSetting(...)``).
    class_name: str = Field(alias="class", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$|^WorkloadSetting\(.+\)$")
    #: The extra name a v5.0 class is registered under (``ConfigRegistry.register(..., "PP2")``), if any.
    variant: str | None = None
    #: Set when NVIDIA's file was read from a copy another submitter of the round carries.
    read_from: str | None = None
    fields: ConfigFields
    #: v6.0: the ``os.environ[...]`` lines of NVIDIA's file (set before the harness reads the config).
    env: dict[str, str] | None = None
    #: v6.0: the file's ``ACCURACY_OVERRIDES`` for this setting (deep-merged for AccuracyOnly runs).
    accuracy_overrides: dict[str, Any] | None = None
    #: v5.1: fields whose values NVIDIA writes as ``Precision`` members (``C.Precision.FP32``) rather than strings;
    #: their values here are the members' names lower-cased (a generated file writes them back as members).
    enums: list[Literal["precision", "input_dtype"]] | None = None
    #: v6.0: the name of the dict ``EXPORTS`` maps the setting to (``ifb_config``, ``base``, ``harness_config``; a
    #: ``ctx_``/``gen_`` name is the context/generation server of NVIDIA's disaggregated multi-node run).
    exported: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: v6.0: the GPU count of the config NVIDIA runs as the servers under this one, a harness-only config
    #: (``scaleout/run_scaleout.sh --atomic-system <SYSTEM>x<atomic>``, the harness system being atomic x DP ranks):
    #: its fields lie under this entry's (:func:`entry_fields`).
    atomic: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _enums_are_set(self) -> PublishedConfig:
        for name in self.enums or ():
            if getattr(self.fields, name) is None:
                raise ValueError(f"enums: {name} is not set in fields")
        return self


class SkuTable(BaseModel):
    """One file of the table: a GPU SKU and NVIDIA's configs for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sku: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    #: The harness round whose files the values come from (:data:`ROUNDS`).
    round: str = DEFAULT_ROUND
    #: The harness's ``KnownGPU`` member used in custom_list.py (``KnownGPU.<known_gpu>.value``).
    known_gpu: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    #: ``nvidia-smi`` names of this SKU (matched case-insensitively).
    gpu_names: list[str] = Field(min_length=1)
    source: str
    #: model -> scenario -> accuracy target -> GPU count -> NVIDIA's class for it.
    configs: dict[str, dict[str, dict[str, dict[int, PublishedConfig]]]]
    #: model -> scenario -> why NVIDIA's round has no config for it (reported, never guessed).
    unpublished: dict[str, dict[str, str]] = Field(default_factory=dict)
    #: NVIDIA's config files of this SKU that the table does not carry (multi-node, a part of a disaggregated run, a
    #: benchmark the project does not run) -> why.
    not_used: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_keys(self) -> SkuTable:
        if self.round not in ROUNDS:
            raise ValueError(f"round: unknown round {self.round!r} (known: {', '.join(ROUNDS)})")
        models = ROUND_MODELS[self.round]
        scenarios_known = ROUND_SCENARIOS[self.round]
        file_pattern = re.compile(ROUND_FILE_PATTERNS[self.round])
        for section in (self.configs, self.unpublished):
            for model, scenarios in section.items():
                if model not in models:
                    raise ValueError(f"configs.{model}: unknown model of {self.round} (known: {', '.join(models)})")
                for scenario in scenarios:
                    if scenario not in scenarios_known:
                        raise ValueError(
                            f"configs.{model}.{scenario}: unknown scenario of {self.round} "
                            f"(known: {', '.join(scenarios_known)})"
                        )
        for model, scenarios in self.configs.items():
            for scenario, targets in scenarios.items():
                for accuracy, counts in targets.items():
                    where = f"configs.{model}.{scenario}.{accuracy}"
                    if accuracy not in ACCURACY_TARGETS:
                        raise ValueError(f"{where}: unknown accuracy target (known: {', '.join(ACCURACY_TARGETS)})")
                    if not counts:
                        raise ValueError(f"{where}: no GPU count")
                    for count, entry in counts.items():
                        if count < 1:
                            raise ValueError(f"{where}.{count}: a GPU count is 1 or more")
                        found = file_pattern.match(entry.file)
                        if not found:
                            raise ValueError(f"{where}.{count}.file: not where {self.round} keeps its configs")
                        if (found["model"], found["scenario"]) != (model, scenario):
                            raise ValueError(f"{where}.{count}.file: is the config of another model or scenario")
                        # Interactive is LoadGen's Server scenario with tighter latencies (v5.1 Scenario.to_lg_obj).
                        needed = REQUIRED_BY_SCENARIO["Server" if scenario == "Interactive" else scenario]
                        if getattr(entry.fields, needed) is None:
                            raise ValueError(f"{where}.{count}.fields: {scenario} needs {needed}")
                        if entry.atomic is not None:
                            server = counts.get(entry.atomic)
                            if entry.atomic >= count or server is None or server.atomic is not None:
                                raise ValueError(
                                    f"{where}.{count}.atomic: names no smaller count of its own with its own values"
                                )
                        elif entry.fields.gpu_batch_size is None:
                            raise ValueError(f"{where}.{count}.fields: needs gpu_batch_size")
        for path, why in self.not_used.items():
            if not path.startswith("closed/NVIDIA/configs/") or not why.strip():
                raise ValueError(f"not_used.{path}: a closed/NVIDIA/configs/ file and why it is not used")
        return self


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, dicts merged key by key (as NVIDIA's harness merges its override sections)."""
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        merged[key] = _deep_merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def entry_fields(counts: dict[int, PublishedConfig], count: int) -> dict[str, Any]:
    """The fields of the entry for ``count``: its own, on top of its ``atomic`` entry's when it names one.

    A harness-only config (v6.0 GB200x4 Server llama2-70b) sets no engine values: NVIDIA runs it over servers of a
    smaller system's config (scaleout's atomic system), whose values lie under it here.
    """
    entry = counts[count]
    fields = entry.fields.set_fields()
    if entry.atomic is None:
        return fields
    return _deep_merge(counts[entry.atomic].fields.set_fields(), fields)


def entry_source(counts: dict[int, PublishedConfig], count: int) -> str:
    """``<file> <class>`` of the entry for ``count``, with its atomic entry's file when it names one."""
    entry = counts[count]
    text = f"{entry.file} {entry.class_name}"
    if entry.exported:
        text += f" = {entry.exported}"
    if entry.atomic is not None:
        server = counts[entry.atomic]
        text += f", servers: {server.file} {server.class_name} (NVIDIA's atomic system, x{entry.atomic} each)"
    return text


@dataclass(frozen=True)
class ResolvedConfig:
    """The config fields for one system, and which of NVIDIA's classes they come from."""

    sku: str
    model: str
    scenario: str
    accuracy: str
    gpu_count: int
    fields: dict[str, Any]
    source_file: str
    source_class: str
    #: The GPU count of NVIDIA's class when this count has none of its own (throughput scaled).
    scaled_from: int | None = None
    #: The ``os.environ`` lines of NVIDIA's file (v5.1 deepseek-r1, v6.0), set before the harness reads the config.
    env: tuple[tuple[str, str], ...] = ()
    #: Fields NVIDIA writes as ``Precision`` members (:attr:`PublishedConfig.enums`).
    enums: tuple[str, ...] = ()

    def source(self) -> str:
        """``closed/NVIDIA/configs/bert/Offline/__init__.py H100_SXM_80GBx8`` (+ ``scaled from x8``)."""
        text = f"{self.source_file} {self.source_class}"
        if self.scaled_from is not None:
            text += f" (scaled from x{self.scaled_from} to x{self.gpu_count}: throughput x{self.gpu_count}/"
            text += f"{self.scaled_from})"
        return text


def _parallelism(fields: dict[str, Any], name: str) -> int:
    """A parallelism field, plain (v4.1, v5.1) or inside ``trtllm_build_flags`` (v5.0); 1 when unset."""
    value = fields.get(name)
    if value is None:
        flags = fields.get("trtllm_build_flags") or {}
        value = flags.get(name)
    return int(value or 1)


def parallel_gpus(fields: dict[str, Any]) -> int:
    """GPUs one instance of the engine spans: tensor x pipeline parallelism (1 without either)."""
    return _parallelism(fields, "tensor_parallelism") * _parallelism(fields, "pipeline_parallelism")


def gpu_count_problem(config: ResolvedConfig) -> str | None:
    """Why ``config`` cannot run on its GPU count (an engine wider than the machine, or GPUs left over), or None."""
    width = parallel_gpus(config.fields)
    if width <= 1:
        return None
    tp = _parallelism(config.fields, "tensor_parallelism")
    pp = _parallelism(config.fields, "pipeline_parallelism")
    if config.gpu_count < width or config.gpu_count % width:
        return (
            f"{config.source()} needs a multiple of {width} GPUs (tensor_parallelism {tp} x pipeline_parallelism "
            f"{pp}); this machine has {config.gpu_count}"
        )
    return None


@dataclass(frozen=True)
class GpuConfigTable:
    """All SKUs, by SKU name."""

    skus: dict[str, SkuTable]
    folder: Path
    #: The harness round of every file here (:data:`ROUNDS`).
    round: str = DEFAULT_ROUND

    def label(self, sku: str) -> str:
        """How messages name a SKU's file: ``gpuconfigs/H100_SXM_80GB.json``, ``gpuconfigs/v5.1/B200...json``."""
        sub = ROUNDS.get(self.round, "")
        return f"gpuconfigs/{sub + '/' if sub else ''}{sku}.json"

    def has_gpu(self, gpu_name: str) -> bool:
        """Whether any SKU of this round's table is the GPU named ``gpu_name`` (nvidia-smi's name)."""
        wanted = gpu_name.strip().lower()
        return any(name.lower() == wanted for t in self.skus.values() for name in t.gpu_names)

    def sku_for_gpu(self, gpu_name: str) -> SkuTable:
        """The SKU whose ``gpu_names`` holds ``gpu_name``; ProfileError listing SKUs and how to add one."""
        wanted = gpu_name.strip().lower()
        for table in self.skus.values():
            if any(name.lower() == wanted for name in table.gpu_names):
                return table
        raise ProfileError(
            "gpuconfigs" if self.round == DEFAULT_ROUND else f"gpuconfigs/{ROUNDS[self.round]}",
            f"no entry for the GPU {gpu_name!r} (SKUs in the table: {', '.join(sorted(self.skus)) or 'none'})",
            hint=(
                f"add a file {self.folder}/<SKU>.json with sku, known_gpu (the harness's KnownGPU name), "
                f"gpu_names ([{gpu_name!r}]), source and NVIDIA's configs per model, scenario, accuracy target "
                "and GPU count, each naming its file and class (see an existing file)"
            ),
        )

    def entry_problem(self, gpu_name: str, model: str, scenario: str, *, high_accuracy: bool = False) -> str | None:
        """Why the table has no values for this (GPU, model, scenario, accuracy target), or None when it has.

        The GPU itself must be in the table (:meth:`sku_for_gpu`).
        """
        table = self.sku_for_gpu(gpu_name)
        model = _spelled_as_in(table.configs, model)
        accuracy = "k_99_9" if high_accuracy else "k_99"
        target = "99.9%" if high_accuracy else "99%"
        targets = table.configs.get(model, {}).get(scenario)
        if targets is None or accuracy not in targets:
            # spelled as the unpublished section spells it (a model with no entry at all is not in configs)
            why = table.unpublished.get(_spelled_as_in(table.unpublished, model), {}).get(scenario)
            # Up to v5.0 a config is a registered class; from v5.1 an EXPORTS entry of a per-system file.
            kind = "class" if self.round in ("v4.1", "v5.0") else "config"
            return (
                f"NVIDIA's {self.round} configs have no {table.sku} {model} {scenario} {kind} for the {target} "
                f"target ({why or 'not published'}); {self.label(table.sku)} holds only NVIDIA's published values"
            )
        return None

    def resolve(
        self, gpu_name: str, gpu_count: int, model: str, scenario: str, *, high_accuracy: bool = False
    ) -> ResolvedConfig:
        """The fields for ``gpu_count`` GPUs of that SKU; ProfileError when the table has no such entry."""
        table = self.sku_for_gpu(gpu_name)
        problem = self.entry_problem(gpu_name, model, scenario, high_accuracy=high_accuracy)
        if problem is not None:
            raise ProfileError(self.label(table.sku), problem)
        accuracy = "k_99_9" if high_accuracy else "k_99"
        counts = table.configs[_spelled_as_in(table.configs, model)][scenario][accuracy]
        base = _nearest_count(sorted(counts), gpu_count)
        entry = counts[base]
        fields = entry_fields(counts, base)
        if base != gpu_count:
            for name in THROUGHPUT_FIELDS:
                if name in fields:
                    fields[name] = round(fields[name] * gpu_count / base, 6)
        return ResolvedConfig(
            sku=table.sku,
            model=model,
            scenario=scenario,
            accuracy=accuracy,
            gpu_count=gpu_count,
            fields=fields,
            source_file=entry.file,
            source_class=entry_source(counts, base).removeprefix(f"{entry.file} "),
            scaled_from=None if base == gpu_count else base,
            env=tuple((entry.env or {}).items()),
            enums=tuple(entry.enums or ()),
        )


def _spelled_as_in(configs: dict[str, Any], model: str) -> str:
    """``model`` as the round's files spell it: later rounds write ``llama3_1-8b`` for ``llama3.1-8b``."""
    if model in configs:
        return model
    canonical = canonical_benchmark(model)
    for key in configs:
        if canonical_benchmark(key) == canonical:
            return key
    return model


def _nearest_count(published: list[int], wanted: int) -> int:
    """The published count to derive ``wanted`` from: itself, else the largest below, else the smallest above."""
    if wanted in published:
        return wanted
    below = [c for c in published if c < wanted]
    return below[-1] if below else published[0]


def load_table(folder: Path | None = None, harness_round: str = DEFAULT_ROUND) -> GpuConfigTable:
    """Load and validate every ``*.json`` of one round's table.

    ``folder`` is the round's folder itself (default: the shipped ``gpuconfigs/`` plus the round's subfolder). A
    round this module has no table for, or a file of another round in the folder, is a ProfileError naming it.
    """
    if harness_round not in ROUNDS:
        raise ProfileError(
            "gpuconfigs", f"no table for the harness round {harness_round!r} (rounds: {', '.join(ROUNDS)})"
        )
    if folder is None:
        from workload.resources import gpuconfig_dir

        folder = gpuconfig_dir() / ROUNDS[harness_round] if ROUNDS[harness_round] else gpuconfig_dir()
    prefix = f"gpuconfigs/{ROUNDS[harness_round]}/" if ROUNDS[harness_round] else "gpuconfigs/"
    skus: dict[str, SkuTable] = {}
    for path in sorted(Path(folder).glob("*.json")):
        label = f"{prefix}{path.name}"
        table = read_table_file(path, label, SkuTable)
        if table.sku != path.stem:
            raise ProfileError(f"{label}: sku", f"is {table.sku!r} but the file is named {path.stem!r}")
        if table.round != harness_round:
            raise ProfileError(f"{label}: round", f"is {table.round!r} but the file lies in the {harness_round} table")
        skus[table.sku] = table
    return GpuConfigTable(skus=skus, folder=Path(folder), round=harness_round)


def read_table_file(path: Path, label: str, model: type[TableModel]) -> TableModel:
    """One ``gpuconfigs`` file validated as ``model``; ProfileError naming ``label`` (and the line or field)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(label, f"cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{label}: line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ProfileError(label, _first_problem(exc)) from None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    # Model-level validators put the key path in the message itself.
    return f"{where}: {message}" if where else message
