"""The gpuconfigs table: per GPU SKU x model x scenario, the harness config values for a custom system.

One JSON file per SKU in the shipped ``gpuconfigs/`` folder (:func:`workload.resources.gpuconfig_dir`)::

    {"sku": "A100_SXM4_40GB", "known_gpu": "A100_SXM4_40GB", "gpu_names": ["NVIDIA A100-SXM4-40GB"],
     "source": "...", "configs": {"bert": {"Offline": {"gpu_batch_size": 1024, "offline_expected_qps": 3750}}}}

Throughput values (``offline_expected_qps``, ``server_target_qps``) are PER GPU and are multiplied by
the GPU count; latencies and every other field are used as they are. Every file is validated at load:
an unknown model, scenario or field is an error naming the file and the key.
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


class ScenarioConfig(BaseModel):
    """Config fields of one (SKU, model, scenario); names are the harness's config field names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_batch_size: int | dict[str, int] = Field(description="per engine; a plain int is keyed by the model")
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
    def _positive_batch(self) -> ScenarioConfig:
        sizes = self.gpu_batch_size.values() if isinstance(self.gpu_batch_size, dict) else [self.gpu_batch_size]
        if not sizes or any(s < 1 for s in sizes):
            raise ValueError("gpu_batch_size must be at least 1")
        return self


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

    def resolve(self, gpu_name: str, gpu_count: int, model: str, scenario: str) -> ResolvedConfig:
        """The fields for ``gpu_count`` GPUs of that SKU; ProfileError when the table has no such entry."""
        table = self.sku_for_gpu(gpu_name)
        config = table.configs.get(model, {}).get(scenario)
        if config is None:
            have = sorted(f"{m}.{s}" for m, ss in table.configs.items() for s in ss)
            raise ProfileError(
                f"gpuconfigs/{table.sku}.json",
                f"no config for {model} {scenario} (the file has: {', '.join(have) or 'nothing'})",
                hint=f"add configs.{model}.{scenario} with gpu_batch_size and {REQUIRED_BY_SCENARIO[scenario]}",
            )
        fields = config.model_dump(exclude_none=True, exclude={"note"})
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
