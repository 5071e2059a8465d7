"""v5.1 config files of a custom system: ``configs/<SYSTEM>/<Scenario>/<benchmark>.py`` holding ``EXPORTS``.

From v5.1 NVIDIA's harness keeps one Python file per system, scenario and benchmark; the system is the runtime
system's id (``SYSTEM_NAME`` when set), and a file missing for it makes the harness fall back to
``configs/minimal`` (``code/main.py`` ``MainRunner``). A custom system is therefore: our id in ``SYSTEM_NAME`` and
our files under ``configs/<our id>/``. The file format (upstream ``configs/B200-SXM-180GBx8/Offline/llama2-70b.py``)::

    import code.common.constants as C
    import code.llmlib.fields as llm_fields
    ...
    EXPORTS = {
        C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.99), C.PowerSetting.MaxP): {
            model_fields.gpu_batch_size: {'llama2-70b': 2048},
            ...
        },
    }

Text generation is pure. Every file starts with :data:`workload.mlperf.custom_system.HEADER` (so a file without it is
someone else's and is never overwritten), then where its values come from, and ``# untuned: ...`` when they are
another round's values for a GPU this round has no configs for (:class:`Provenance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workload.mlperf.catalog import ACCURACY_TARGETS, NVIDIA_SPELLING, WorkloadSetting
from workload.mlperf.custom_system import HEADER, CustomSystemError, GeneratedFile
from workload.mlperf.gpuconfigs import ResolvedConfig

#: The module each config field lives in (upstream v5.1 imports; values as read from NVIDIA's config files).
FIELD_MODULES: dict[str, str] = {
    "gpu_batch_size": "model_fields",
    "input_dtype": "model_fields",
    "precision": "model_fields",
    "min_duration": "loadgen_fields",
    "offline_expected_qps": "loadgen_fields",
    "server_target_qps": "loadgen_fields",
    "tensor_path": "harness_fields",
    "use_graphs": "harness_fields",
    "vboost_slider": "harness_fields",
    "gpu_copy_streams": "harness_fields",
    "gpu_inference_streams": "harness_fields",
    "llm_gen_config_path": "llm_fields",
    "tensor_parallelism": "llm_fields",
    "pipeline_parallelism": "llm_fields",
    "trtllm_build_flags": "llm_fields",
    "trtllm_checkpoint_flags": "llm_fields",
    "trtllm_runtime_flags": "llm_fields",
    "use_token_latencies": "llm_fields",
    # Fields of v5.1's other published files (B200-SXM-180GBx8 rgat, stable-diffusion-xl, whisper, deepseek-r1).
    "input_format": "model_fields",
    "min_query_count": "loadgen_fields",
    "warmup_iterations": "llm_fields",
    "moe_expert_parallelism": "llm_fields",
    "batcher_time_limit": "sdxl_fields",
    "whisper_encoder_build_flags": "whisper_fields",
    "whisper_decoder_build_flags": "whisper_fields",
}
#: Benchmark-specific field modules: a folder with a ``-`` is not importable by name, so NVIDIA's files bind them
#: with ``import_module`` (``sdxl_fields = import_module("code.stable-diffusion-xl.tensorrt.fields")``).
MODULE_IMPORTS: dict[str, str] = {
    "sdxl_fields": "code.stable-diffusion-xl.tensorrt.fields",
    "whisper_fields": "code.whisper.tensorrt.fields",
}
IMPORTS = (
    "import code.common.constants as C",
    "import code.llmlib.fields as llm_fields",
    "import code.fields.models as model_fields",
    "import code.fields.loadgen as loadgen_fields",
    "import code.fields.harness as harness_fields",
)
#: NVIDIA's AccuracyTarget values for our names.
ACCURACY = ACCURACY_TARGETS
#: TRT-LLM parallelism: a build flag in v5.0, a field of its own from v5.1 (TrtllmHarnessConfig copies it in).
_PARALLELISM = ("tensor_parallelism", "pipeline_parallelism")


@dataclass(frozen=True)
class Provenance:
    """Where one config's values come from, and whether the round tuned them for this GPU."""

    source: str
    #: None: this round's own values for the GPU; else why they are another round's (shown as ``# untuned:``).
    untuned: str | None = None

    @property
    def tuned(self) -> bool:
        return self.untuned is None


def config_path(system_id: str, model: str, scenario: str) -> str:
    """``configs/<SYSTEM>/<Scenario>/<benchmark>.py`` (relative to closed/NVIDIA).

    The file is named by the benchmark's value in NVIDIA's ``code/common/constants.py``
    (``llama3_1-8b``), not by its alias (``llama3.1-8b``, the catalog's name).
    """
    file_name = NVIDIA_SPELLING.get(model, model)
    return f"configs/{system_id}/{scenario}/{file_name}.py"


def lifted_parallelism(fields: dict[str, Any]) -> dict[str, Any]:
    """v5.0's ``trtllm_build_flags`` tensor/pipeline parallelism as the fields they are from v5.1 on (the flags
    dict without them, field order kept; a field already set wins)."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if name == "trtllm_build_flags" and isinstance(value, dict):
            flags = dict(value)
            for key in _PARALLELISM:
                if key in flags:
                    out.setdefault(key, flags.pop(key))
            out[name] = flags
        else:
            out[name] = value
    return out


def exports_fields(fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Fields as the EXPORTS files (v5.1 on) spell them, and the names they have no field for (left out, listed in a
    comment).

    v5.0 kept tensor/pipeline parallelism in ``trtllm_build_flags``; v5.1 has them as fields and fills the flags
    from them, so they move out of the dict. Field order is kept.
    """
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for name, value in lifted_parallelism(fields).items():
        if name in FIELD_MODULES:
            out[name] = value
        else:
            dropped.append(name)
    return out, dropped


def render(
    system_id: str,
    model: str,
    scenario: str,
    entries: Sequence[tuple[WorkloadSetting, ResolvedConfig, Provenance]],
) -> GeneratedFile:
    """One config file for ``system_id``: an ``EXPORTS`` entry per workload setting, every value spelled out.

    CustomSystemError when a setting is one v5.1 files do not hold (a Triton/HeteroMIG harness, an unknown accuracy
    target) or nothing is given.
    """
    if not entries:
        raise CustomSystemError(f"{config_path(system_id, model, scenario)}: no config to write")
    lines = [HEADER, f"# Custom system {system_id}: {model} {scenario}, values from gpuconfigs/."]
    for setting, _config, provenance in entries:
        lines.append(f"# {_label(setting)}: {provenance.source}")
        if provenance.untuned:
            lines.append(f"# untuned: {provenance.untuned}")
    converted = [(setting, config, *exports_fields(config.fields)) for setting, config, _ in entries]
    used = {FIELD_MODULES[name] for *_, fields, _ in converted for name in fields}
    extra = [f"{alias} = import_module({module!r})" for alias, module in MODULE_IMPORTS.items() if alias in used]
    lines += ["", *IMPORTS, *(["from importlib import import_module", *extra] if extra else [])]
    env = {key: value for _, config, _ in entries for key, value in config.env}
    if env:
        # NVIDIA's file sets these at import, before the harness reads its values (v5.1 deepseek-r1.py).
        lines += ["", "import os", *(f"os.environ[{key!r}] = {value!r}" for key, value in env.items())]
    lines += ["", "", "EXPORTS = {"]
    for setting, config, fields, dropped in converted:
        if dropped:
            lines.append(f"    # not a v5.1 field, left out: {', '.join(dropped)}")
        lines.append(f"    {_setting(setting)}: {{")
        for name, value in fields.items():
            text = _enum(value) if name in config.enums else repr(value)
            lines.append(f"        {FIELD_MODULES[name]}.{name}: {text},")
        lines.append("    },")
    lines.append("}")
    return GeneratedFile(config_path(system_id, model, scenario), "\n".join(lines) + "\n")


def _enum(value: Any) -> str:
    """A precision NVIDIA writes as a ``Precision`` member, per engine or not: ``C.Precision.FP8``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_enum(item)}" for key, item in value.items()) + "}"
    return f"C.Precision.{str(value).upper()}"


def _setting(setting: WorkloadSetting) -> str:
    if setting.harness != "Custom":
        raise CustomSystemError(f"v5.1 configs of a custom system hold the Custom harness only, not {setting.harness}")
    accuracy = ACCURACY.get(setting.accuracy)
    if accuracy is None:
        raise CustomSystemError(f"unknown accuracy target {setting.accuracy}")
    return f"C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget({accuracy}), C.PowerSetting.{setting.power})"


def _label(setting: WorkloadSetting) -> str:
    return f"{setting.harness}, {ACCURACY.get(setting.accuracy, setting.accuracy)}, {setting.power}"


def untuned_marks(text: str) -> list[str]:
    """The ``# untuned:`` lines of a generated file (what run metadata reports); empty for tuned values."""
    return [line.removeprefix("# untuned: ") for line in text.splitlines() if line.startswith("# untuned: ")]
