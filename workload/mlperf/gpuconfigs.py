"""The gpuconfigs table: per GPU SKU x model x scenario, the harness config values for a custom system.

One JSON file per SKU in the shipped ``gpuconfigs/`` folder (:func:`workload.resources.gpuconfig_dir`)::

    {"sku": "H100_SXM_80GB", "known_gpu": "H100_SXM_80GB", "gpu_names": ["NVIDIA H100 80GB HBM3"],
     "source": "...", "configs": {"bert": {"Server": {
         "gpu_batch_size": 128, "server_target_qps": 7000, "gpu_copy_streams": 2,
         "by_gpu_count": {"8": {"gpu_copy_streams": 4}},
         "high_accuracy": {"precision": "fp16", "gpu_batch_size": 512, "server_target_qps": 6200}}}}}

Throughput values (``offline_expected_qps``, ``server_target_qps``) are PER GPU and are multiplied by
the GPU count; latencies and every other field are used as they are. ``by_gpu_count`` holds what
NVIDIA sets differently for exactly that many GPUs; ``high_accuracy`` what its 99.9% configs
(``--config_ver=high_accuracy``) change, e.g. fp16 for bert. A (model, scenario) without an entry, or
without ``high_accuracy`` for a 99.9% run, has no values: the executor reports it and runs the rest.
Every file is validated at load: an unknown model, scenario or field is an error naming the file
and the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from workload.errors import ProfileError
from workload.mlperf.catalog import MODELS, SCENARIOS

#: Fields that scale with the number of GPUs (throughput); everything else is per system as is.
THROUGHPUT_FIELDS = ("offline_expected_qps", "server_target_qps")
#: The field each scenario cannot do without (the harness sizes the LoadGen run from it).
REQUIRED_BY_SCENARIO = {
    "Offline": "offline_expected_qps",
    "Server": "server_target_qps",
    "SingleStream": "single_stream_expected_latency_ns",
    "MultiStream": "multi_stream_expected_latency_ns",
}


class ConfigFields(BaseModel):
    """Config fields (the harness's names); every one optional, None = not set here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_batch_size: int | dict[str, int] | None = Field(
        default=None, description="per engine; a plain int is keyed by the model"
    )
    offline_expected_qps: float | None = Field(default=None, gt=0)
    server_target_qps: float | None = Field(default=None, gt=0)
    single_stream_expected_latency_ns: int | None = Field(default=None, gt=0)
    multi_stream_expected_latency_ns: int | None = Field(default=None, gt=0)
    precision: Literal["int8", "fp16", "fp32", "fp8"] | None = None
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
    kvcache_free_gpu_mem_frac: float | None = Field(default=None, gt=0, le=1)
    enable_sort: bool | None = None
    note: str | None = Field(default=None, description="where the value comes from; not written to the harness")

    @model_validator(mode="after")
    def _positive_batch(self) -> ConfigFields:
        if self.gpu_batch_size is None:
            return self
        sizes = self.gpu_batch_size.values() if isinstance(self.gpu_batch_size, dict) else [self.gpu_batch_size]
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError("gpu_batch_size must be at least 1")
        return self

    def set_fields(self) -> dict[str, Any]:
        """The fields set here (no note)."""
        return {
            k: v
            for k, v in self.model_dump(exclude_none=True, exclude={"note"}).items()
            if k in ConfigFields.model_fields
        }


class CountedFields(ConfigFields):
    """Fields plus what changes for exactly N GPUs (``by_gpu_count``: {"8": {...}})."""

    by_gpu_count: dict[int, ConfigFields] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _counts(self) -> CountedFields:
        if any(n < 1 for n in self.by_gpu_count):
            raise ValueError("by_gpu_count keys are GPU counts (1 or more)")
        return self

    def for_count(self, gpu_count: int) -> dict[str, Any]:
        values = self.set_fields()
        extra = self.by_gpu_count.get(gpu_count)
        if extra is not None:
            values.update(extra.set_fields())
        return values


class ScenarioConfig(CountedFields):
    """Config fields of one (SKU, model, scenario); ``high_accuracy``: what the 99.9% config changes."""

    gpu_batch_size: int | dict[str, int] = Field(description="per engine; a plain int is keyed by the model")
    #: None: no published 99.9% values (a high_accuracy run of it is reported, not guessed).
    #: {} : the 99.9% config is the same as the 99% one (NVIDIA's 3d-unet configs).
    high_accuracy: CountedFields | None = None


class SkuTable(BaseModel):
    """One file of the table: a GPU SKU and its configs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sku: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    #: The harness's ``KnownGPU`` member used in custom_list.py (``KnownGPU.<known_gpu>.value``).
    known_gpu: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    #: ``nvidia-smi`` names of this SKU (matched case-insensitively).
    gpu_names: list[str] = Field(min_length=1)
    source: str
    configs: dict[str, dict[str, ScenarioConfig]]

    @model_validator(mode="after")
    def _known_keys(self) -> SkuTable:
        for model, scenarios in self.configs.items():
            if model not in MODELS:
                raise ValueError(f"configs.{model}: unknown model (known: {', '.join(MODELS)})")
            for scenario, config in scenarios.items():
                if scenario not in SCENARIOS:
                    raise ValueError(f"configs.{model}.{scenario}: unknown scenario (known: {', '.join(SCENARIOS)})")
                needed = REQUIRED_BY_SCENARIO[scenario]
                if getattr(config, needed) is None:
                    raise ValueError(f"configs.{model}.{scenario}: {scenario} needs {needed}")
        return self


@dataclass(frozen=True)
class ResolvedConfig:
    """The config fields for one system: per-GPU throughput already multiplied by the GPU count."""

    sku: str
    model: str
    scenario: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class GpuConfigTable:
    """All SKUs, by SKU name."""

    skus: dict[str, SkuTable]
    folder: Path

    def sku_for_gpu(self, gpu_name: str) -> SkuTable:
        """The SKU whose ``gpu_names`` holds ``gpu_name``; ProfileError listing SKUs and how to add one."""
        wanted = gpu_name.strip().lower()
        for table in self.skus.values():
            if any(name.lower() == wanted for name in table.gpu_names):
                return table
        raise ProfileError(
            "gpuconfigs",
            f"no entry for the GPU {gpu_name!r} (SKUs in the table: {', '.join(sorted(self.skus)) or 'none'})",
            hint=(
                f"add a file {self.folder}/<SKU>.json with sku, known_gpu (the harness's KnownGPU name), "
                f"gpu_names ([{gpu_name!r}]), source and per-GPU configs per model and scenario "
                "(see an existing file)"
            ),
        )

    def entry_problem(self, gpu_name: str, model: str, scenario: str, *, high_accuracy: bool = False) -> str | None:
        """Why the table has no values for this (GPU, model, scenario[, 99.9%]), or None when it has.

        The GPU itself must be in the table (:meth:`sku_for_gpu`).
        """
        table = self.sku_for_gpu(gpu_name)
        config = table.configs.get(model, {}).get(scenario)
        if config is None:
            return f"no gpuconfigs entry for {table.sku} {model} {scenario}; add one to gpuconfigs/{table.sku}.json"
        if high_accuracy and config.high_accuracy is None:
            return (
                f"no gpuconfigs high_accuracy entry for {table.sku} {model} {scenario} (NVIDIA's 99.9% config "
                f"differs, e.g. fp16); add configs.{model}.{scenario}.high_accuracy to gpuconfigs/{table.sku}.json"
            )
        return None

    def resolve(
        self, gpu_name: str, gpu_count: int, model: str, scenario: str, *, high_accuracy: bool = False
    ) -> ResolvedConfig:
        """The fields for ``gpu_count`` GPUs of that SKU; ProfileError when the table has no such entry."""
        table = self.sku_for_gpu(gpu_name)
        problem = self.entry_problem(gpu_name, model, scenario, high_accuracy=high_accuracy)
        if problem is not None:
            raise ProfileError(f"gpuconfigs/{table.sku}.json", problem)
        config = table.configs[model][scenario]
        fields = config.for_count(gpu_count)
        if high_accuracy and config.high_accuracy is not None:
            fields.update(config.high_accuracy.for_count(gpu_count))
        for name in THROUGHPUT_FIELDS:
            if name in fields:
                fields[name] = round(fields[name] * gpu_count, 6)
        return ResolvedConfig(table.sku, model, scenario, fields)


def load_table(folder: Path | None = None) -> GpuConfigTable:
    """Load and validate every ``*.json`` in ``folder`` (default: the shipped table)."""
    if folder is None:
        from workload.resources import gpuconfig_dir

        folder = gpuconfig_dir()
    skus: dict[str, SkuTable] = {}
    for path in sorted(Path(folder).glob("*.json")):
        label = f"gpuconfigs/{path.name}"
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ProfileError(label, f"cannot read: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{label}: line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
        try:
            table = SkuTable.model_validate(raw)
        except ValidationError as exc:
            raise ProfileError(label, _first_problem(exc)) from None
        if table.sku != path.stem:
            raise ProfileError(f"{label}: sku", f"is {table.sku!r} but the file is named {path.stem!r}")
        skus[table.sku] = table
    return GpuConfigTable(skus=skus, folder=Path(folder))


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    # Model-level validators put the key path in the message itself.
    return f"{where}: {message}" if where else message
