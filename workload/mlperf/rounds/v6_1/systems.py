"""A custom system's files for NVIDIA's v6.1 harness, from the host's facts and gpuconfigs/v6.1 (pure).

Per scenario: ``server.py``, ``harness.py`` and the trtllm-serve YAMLs under ``SYSTEM_NAME=<our id>``, each part from
the GPU's own published part (nearest count, throughput scaled: *tuned*), else the nearest GPU's (*untuned*, only
with ``allow_untuned``), else the harness's defaults (:data:`V61_HARNESS_DEFAULTS`). Nothing here touches a host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workload.mlperf.custom_system import GeneratedFile
from workload.mlperf.gpuconfigs_parts import BENCHMARKS as V61_BENCHMARKS
from workload.mlperf.gpuconfigs_parts import PartsTable
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import SYSTEM_PREFIX, Provenance, SystemFiles, system_id
from workload.mlperf.tuning import gpu_family, last_tuned_round, refuse_untuned

from . import configgen as gen

#: The fields v6.1's harness.py gets from the round when no NVIDIA harness.py for the GPU gives them (the values of
#: NVIDIA's llama2_70b GB300x8 harness.py, intel-ai-tce/inference_results_v6.1 @ 5174fca8; paths as NVIDIA spells them).
V61_HARNESS_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama2-70b": {
        "llm_gen_config_path": "src/nv_mlpinf/benchmarks/llama2_70b/generation_config.json",
        "min_duration": 2400000,
        "precision": "fp4",
        "input_dtype": "int32",
    },
    "gpt-oss-120b": {"min_duration": 600000, "precision": "fp4", "input_dtype": "int32"},
    "deepseek-r1": {"min_duration": 600000, "precision": "fp4", "input_dtype": "int32"},
}


def v61_files(
    system: HostSystem,
    table: PartsTable,
    benchmark: str,
    scenarios: Sequence[str],
    *,
    allow_untuned: bool,
    base_port: int = 30000,
) -> SystemFiles:
    """server.py, harness.py and the trtllm-serve YAMLs per scenario for ``SYSTEM_NAME=<our id>`` (v6.1)."""
    if benchmark not in V61_BENCHMARKS:
        raise ValueError(f"{benchmark} is not a v6.1 benchmark (known: {', '.join(V61_BENCHMARKS)})")
    own = table.sku_for_gpu(system.gpu_name)
    family = gpu_family(system.gpu_name)
    prefix = own.system_prefix if own else SYSTEM_PREFIX.get(family or "", system.gpu_name.replace(" ", "-"))
    ident = system_id(system, prefix)
    files: list[GeneratedFile] = []
    notes: list[str] = []
    written: list[tuple[str, tuple[str, ...], Provenance]] = []
    skipped: list[tuple[str, str]] = []
    tuned_all = True
    for scenario in scenarios:
        resolved = table.resolve(system.gpu_name, system.gpu_memory_mib, system.gpu_count, benchmark, scenario)
        if not resolved.parts and benchmark not in V61_HARNESS_DEFAULTS:
            skipped.append((scenario, f"no published v6.1 config of {benchmark} {scenario} for any GPU"))
            continue
        untuned = [p for p in resolved.parts.values() if not p.tuned]
        missing = [k for k in ("harness", "trtllm_serve", "topology") if k not in resolved.parts]
        why = ""
        if own is None or untuned or missing:
            if not allow_untuned and (own is None or not resolved.parts):
                raise refuse_untuned(system, "v6.1", table, f"{benchmark} {scenario}")
            parts = ", ".join(f"{p.kind} from {p.source}" for p in untuned)
            gaps = f"; {', '.join(missing)}: the harness's defaults" if missing else ""
            why = f"NVIDIA publishes no complete v6.1 {benchmark} {scenario} config for {system.gpu_name}"
            if last_tuned_round(system.gpu_name):
                why += f" (the last round NVIDIA tunes it in is {last_tuned_round(system.gpu_name)})"
            why += (f": {parts}" if parts else "") + gaps
            tuned_all = False
        topology = resolved.parts.get("topology")
        per_server = int(topology.values.get("gpus_per_dp_rank", 1)) if topology else 1
        servers = max(1, system.gpu_count // per_server)
        urls = [f"0.0.0.0:{base_port + i}" for i in range(servers)]
        folder = gen.v61_folder(benchmark, ident, scenario)
        provenance = Provenance(
            resolved.sources(),
            not why,
            why,
            tuple(dict.fromkeys(p.sku for p in resolved.parts.values())),
            any(p.note for p in resolved.parts.values()),
        )
        harness_part = resolved.parts.get("harness")
        fields = {**V61_HARNESS_DEFAULTS.get(benchmark, {}), **(harness_part.values if harness_part else {})}
        throughput = "offline_expected_qps" if scenario == "Offline" else "server_target_qps"
        if throughput not in fields:
            if scenario != "Offline" and "offline_expected_qps" in fields:
                fields[throughput] = fields.pop("offline_expected_qps")
            else:
                skipped.append((scenario, f"no {throughput} for {benchmark} {scenario} in any v6.1 table entry"))
                continue
        serve = resolved.parts.get("trtllm_serve")
        env = resolved.parts.get("serve_env")
        options = dict(serve.values) if serve else {"backend": "pytorch", "tensor_parallel_size": per_server}
        precision = str(fields.get("precision", "fp4"))
        files += [
            GeneratedFile(
                f"{folder}/server.py", gen.v61_server(folder, urls, precision, provenance, ident, system.describe())
            ),
            GeneratedFile(
                f"{folder}/harness.py",
                gen.v61_harness(fields, urls, provenance, ident, system.describe(), tensor_dir=f"{benchmark}/"),
            ),
            GeneratedFile(
                f"{folder}/trtllm-serve.yaml", gen.v61_serve_yaml(options, provenance, ident, system.describe())
            ),
            # NVIDIA's env YAML of the nearest published config (trtllm-serve-*-env.yaml), else an empty one.
            GeneratedFile(f"{folder}/trtllm-serve-env.yaml", gen.v61_env_yaml(dict(env.values) if env else {})),
        ]
        notes.append(f"{folder}: " + ("tuned (NVIDIA's values for this GPU)" if not why else f"UNTUNED ({why})"))
        written.append((scenario, ("k_99",), provenance))  # v61_server/v61_harness export the 0.99 target only
    return SystemFiles(ident, tuple(files), tuple(notes), tuned_all, tuple(written), tuple(skipped))
