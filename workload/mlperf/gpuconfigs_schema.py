"""The schema of one gpuconfigs file (:class:`SkuTable`): NVIDIA's published configs of one GPU SKU in one round.

Every file is validated at load against its round's facts (:mod:`workload.mlperf.gpuconfig_rounds`): an unknown
model, scenario, accuracy target or field is an error naming the JSON path; a file NVIDIA keeps elsewhere, an
entry without the field its scenario needs, or an ``atomic`` naming no count of its own is refused.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workload.mlperf.gpuconfig_rounds import (
    ACCURACY_TARGETS,
    DEFAULT_ROUND,
    REQUIRED_BY_SCENARIO,
    ROUND_FILE_PATTERNS,
    ROUND_MODELS,
    ROUND_SCENARIOS,
    ROUNDS,
)

#: Precision names of NVIDIA's configs (the strings they write, and nvmitten ``Precision`` members' names lower-cased).
Precision = Literal["int8", "fp16", "fp32", "fp8", "fp4"]


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
