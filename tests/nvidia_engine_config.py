"""Run INSIDE NVIDIA's v5.1 or v6.0 harness environment (not by pytest): the config step of ``generate_engines`` on one
of our config files, with NVIDIA's code, and print what it made of it as JSON.

Usage: ``python nvidia_engine_config.py CONFIG_DIR SYSTEM BENCHMARK SCENARIO ACCURACY``, run by
``tests/upstream_nvidia.py`` ``run_in_round`` (a staged closed/NVIDIA, nvmitten and ``tests/upstream_standins`` on
``PYTHONPATH``; the CUDA stand-in reports the GPUs of ``STANDIN_CUDA_GPUS``). What NVIDIA's ``code/main.py`` does for
``--action=generate_engines --core_type=trtllm_endpoint`` before any engine is built (v5.1 lines 137-149, v6.0 lines
131-144: load ``configs/<SYSTEM>/<Scenario>/<benchmark>.py`` into a ``ConfigurationIndex``; v5.1 163-191, v6.0
490-538: get the setting's config, parse string values with each Field's ``from_string``, add the ``Workload`` and
``force_build_engines``; v5.1 193-249, v6.0 542-607: under ``config.autoapply()`` read the core type from
``HarnessConfig`` and build ``TrtllmEndpointConfig``, whose ``__post_init__`` chain, v5.1 ``code/llmlib/config.py``
``HarnessConfig`` line 178 among it, checks and completes the values), then the flag checks
``TRTLLMBuilderOp.__init__`` makes (``code/llmlib/builder.py``: v5.1 lines 381-386, v6.0 388-392).

``code.llmlib`` is imported as a bare package: its ``__init__.py`` (v5.1 line 29) imports ``code.ops.harness``,
which the public trees (and ``shared/upstream``) lack, for the harness run, not the config step. CUDA, TensorRT,
NVTX and the absent torch/scipy/matplotlib/ONNX are stand-ins (tests/upstream_standins/upstream_standins_boot.py).
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

import upstream_standins_boot  # noqa: F401  (installs the stand-ins before NVIDIA's imports)

# beside this script (its folder is sys.path[0] when NVIDIA's environment runs it)
from nvidia_v60_values import plain


def main(config_dir: Path, system: str, bench: str, scenario_name: str, accuracy: float) -> dict[str, Any]:
    root = Path(importlib.import_module("code").__file__ or "").parent  # NVIDIA's ``code`` shadows the stdlib's
    package = types.ModuleType("code.llmlib")
    package.__path__ = [str(root / "llmlib")]
    sys.modules["code.llmlib"] = package

    from nvmitten.configurator import ConfigurationIndex, Field
    from nvmitten.importer import ScopedImporter

    C = importlib.import_module("code.common.constants")
    workload = importlib.import_module("code.common.workload")
    builder_fields = importlib.import_module("code.fields.gen_engines")
    harness_fields = importlib.import_module("code.fields.harness")
    llm_config = importlib.import_module("code.llmlib.config")
    systems = importlib.import_module("code.common.systems.system_list")

    benchmark = C.Benchmark.get_match(bench)
    scenario = C.Scenario.get_match(scenario_name)
    index = ConfigurationIndex()
    with ScopedImporter([str(config_dir / system), *sys.path]):
        index.load_module(f"{scenario.valstr}.{benchmark.valstr}", prefix=[system, benchmark, scenario])
    setting = C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(accuracy), C.PowerSetting.MaxP)
    config = index.get([system, benchmark, scenario, setting])
    if config is None:
        raise SystemExit(
            f"no config for {system} {bench} {scenario_name} {accuracy}: NVIDIA's harness would run minimal"
        )
    for key, value in config.items():
        assert isinstance(key, Field), key
        if isinstance(value, str) and key.from_string and key.from_string is not str:
            config[key] = key.from_string(value)
    config[workload.Workload.FIELD] = workload.Workload(
        benchmark, scenario, system=systems.DETECTED_SYSTEM, setting=setting
    )
    config[builder_fields.force_build_engines] = True
    config[harness_fields.core_type] = harness_fields.CoreType.TRTLLM_ENDPOINT
    with config.autoapply():
        core_type = llm_config.HarnessConfig().core_type
        endpoint = llm_config.TrtllmEndpointConfig()
        backend = endpoint.runtime_flags.get("trtllm_backend")
    for flag in ("tensor_parallelism", "pipeline_parallelism", "max_batch_size"):
        if flag in (config.get(importlib.import_module("code.llmlib.fields").trtllm_build_flags) or {}):
            raise SystemExit(f"TRTLLMBuilderOp refuses {flag!r} in trtllm_build_flags (code/llmlib/builder.py)")
    return {
        "system_id": systems.DETECTED_SYSTEM.extras.get("id"),
        "core_type": plain(core_type),
        "trtllm_backend": backend,
        "precision": plain(config[importlib.import_module("code.fields.models").precision]),
        "gen_config_path": plain(endpoint.gen_config_path),
        "build_flags": plain(endpoint.build_flags),
        "runtime_flags": plain(endpoint.runtime_flags),
        "checkpoint_flags": plain(endpoint.checkpoint_flags),
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])), indent=1))
