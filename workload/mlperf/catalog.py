"""What NVIDIA's v4.1 harness knows about models, scenarios and config versions (reference notes §2-§4).

Pure data and small pure functions; nothing here touches a host.
"""

from __future__ import annotations

from dataclasses import dataclass

#: LoadGen scenarios, spelled the way the harness spells its folders and classes.
SCENARIOS: tuple[str, ...] = ("Offline", "Server", "SingleStream", "MultiStream")


@dataclass(frozen=True)
class ModelInfo:
    """One benchmark of the harness (``--benchmarks=<name>``)."""

    name: str
    #: Scenarios with config files in v4.1 ``configs/<name>/`` (the default ``Scenarios``).
    scenarios: tuple[str, ...]
    #: ``G_HIGH_ACC_ENABLED_BENCHMARKS``: results go to ``<name>-99`` / ``<name>-99.9``.
    high_accuracy: bool
    #: ``G_DEFAULT_HARNESS_TYPES``: the harness of ``--config_ver=default``.
    harness: str = "Custom"
    #: Needs TRT-LLM, which v4.1 builds only for Hopper and newer (notes §9.8).
    llm: bool = False


MODELS: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("bert", ("Offline", "Server", "SingleStream"), True),
        ModelInfo("3d-unet", ("Offline", "SingleStream"), True),
        ModelInfo("resnet50", ("Offline", "Server", "SingleStream", "MultiStream"), False, harness="LWIS"),
        ModelInfo("retinanet", ("Offline", "Server", "SingleStream", "MultiStream"), False, harness="LWIS"),
        ModelInfo("dlrm-v2", ("Offline", "Server"), True),
        ModelInfo("gptj", ("Offline", "Server", "SingleStream"), True, llm=True),
        ModelInfo("llama2-70b", ("Offline", "Server"), True, llm=True),
        ModelInfo("mixtral-8x7b", ("Offline", "Server"), False, llm=True),
        ModelInfo("stable-diffusion-xl", ("Offline", "Server", "SingleStream"), False),
        # Benchmarks of later rounds (v5.x/v6.x, LLMs served by trtllm-serve); which round has which is the round
        # adapter's to say (workload/mlperf/rounds/).
        ModelInfo("llama3.1-8b", ("Offline", "Server", "Interactive"), False, llm=True),
        ModelInfo("llama3.1-405b", ("Offline", "Server", "Interactive"), False, llm=True),
        ModelInfo("gpt-oss-120b", ("Offline", "Server", "Interactive"), False, llm=True),
        ModelInfo("deepseek-r1", ("Offline", "Server", "Interactive"), False, llm=True),
        # v5.0/v5.1 benchmarks with Offline configs only (NVIDIA's v5.1 B200-SXM-180GBx8 folder: Offline/rgat.py,
        # Offline/whisper.py; both a single accuracy target, results under the plain name).
        ModelInfo("rgat", ("Offline",), False),
        ModelInfo("whisper", ("Offline",), False),
    )
}
#: Scenarios later rounds add to a v4.1 benchmark (v5.1+: Interactive, a folder of its own; not a default).
LATER_SCENARIOS: dict[str, tuple[str, ...]] = {"llama2-70b": ("Interactive",)}
#: Every scenario name a round may use (LoadGen's four, and Interactive: LoadGen's Server with tighter latencies).
ALL_SCENARIOS: tuple[str, ...] = (*SCENARIOS, "Interactive")
#: How later rounds' config files spell some benchmarks (``llama3_1-405b.py``).
ALIASES: dict[str, str] = {"llama3_1-8b": "llama3.1-8b", "llama3_1-405b": "llama3.1-405b"}
#: The other way: the spelling of NVIDIA's constants (``Benchmark`` values) for a catalog name.
NVIDIA_SPELLING: dict[str, str] = {canonical: alias for alias, canonical in ALIASES.items()}


def canonical_benchmark(name: str) -> str:
    """The catalog's name of a benchmark given either spelling (``llama3_1-8b`` -> ``llama3.1-8b``)."""
    return ALIASES.get(name, name)


#: Parts a ``--config_ver`` value is made of (``default``, ``high_accuracy``, ``high_accuracy_triton``, ``maxq``, ...).
CONFIG_VERSION_PARTS: tuple[str, ...] = ("default", "high_accuracy", "triton", "triton_unified", "maxq", "hetero")
TEST_MODES: tuple[str, ...] = ("PerformanceOnly", "AccuracyOnly", "SubmissionRun", "FindPeakPerformance")


@dataclass(frozen=True)
class WorkloadSetting:
    """The harness's (HarnessType, AccuracyTarget, PowerSetting) triple for one config version."""

    harness: str  # Custom | LWIS | Triton | TritonUnified | HeteroMIG
    accuracy: str  # k_99 | k_99_9
    power: str  # MaxP | MaxQ


def known_models() -> str:
    return ", ".join(MODELS)


def model_info(name: str) -> ModelInfo:
    """The model named ``name`` (case-insensitive) or ValueError listing the known ones."""
    key = name.strip().lower()
    info = MODELS.get(canonical_benchmark(key))
    if info is None:
        raise ValueError(f"unknown model {name!r} (known: {known_models()})")
    return info


def canonical_scenario(name: str) -> str:
    """``offline`` -> ``Offline``; ValueError for names LoadGen does not have."""
    by_lower = {s.lower(): s for s in ALL_SCENARIOS}
    found = by_lower.get(name.strip().lower().replace("-", "").replace("_", ""))
    if found is None:
        raise ValueError(f"unknown scenario {name!r} (known: {', '.join(ALL_SCENARIOS)})")
    return found


def check_config_version(value: str) -> str:
    """Validate a ``--config_ver`` value the way the harness reads it; return it stripped."""
    text = value.strip()
    rest = text
    # Longest parts first so "triton_unified" is not read as "triton" + "_unified".
    for part in sorted(CONFIG_VERSION_PARTS, key=len, reverse=True):
        rest = rest.replace(part, " ")
    if not text or rest.replace("_", " ").strip():
        raise ValueError(
            f"unknown config version {value!r} (made of: {', '.join(CONFIG_VERSION_PARTS)}, "
            "e.g. default, high_accuracy, triton, high_accuracy_triton, maxq)"
        )
    return text


def workload_setting(model: str, config_version: str) -> WorkloadSetting:
    """``constants.config_ver_to_workload_setting``: which registration a config version selects."""
    info = model_info(model)
    harness = info.harness
    if "triton_unified" in config_version:
        harness = "TritonUnified"
    elif "triton" in config_version:
        harness = "Triton"
    elif "hetero" in config_version:
        harness = "HeteroMIG"
    power = "MaxQ" if "maxq" in config_version else "MaxP"
    return WorkloadSetting(harness, accuracy_key(config_version), power)


#: NVIDIA's accuracy keys and the ``AccuracyTarget`` / ``--accuracy_target`` value of each (v5.1 on).
ACCURACY_TARGETS = {"k_99": "0.99", "k_99_9": "0.999"}


def accuracy_key(config_version: str) -> str:
    """The accuracy a config version selects: ``k_99_9`` for ``high_accuracy`` ones, else ``k_99``."""
    return "k_99_9" if "high_accuracy" in config_version else "k_99"


def accuracy_target(config_version: str) -> str:
    """The ``--accuracy_target`` of a config version: ``0.999`` for ``high_accuracy`` ones, else ``0.99``."""
    return ACCURACY_TARGETS[accuracy_key(config_version)]


def benchmark_full(model: str, config_version: str) -> str:
    """The result folder name: ``bert-99``, ``bert-99.9``, or the plain name (notes §4)."""
    info = model_info(model)
    if not info.high_accuracy:
        return info.name
    return f"{info.name}-99.9" if "high_accuracy" in config_version else f"{info.name}-99"
