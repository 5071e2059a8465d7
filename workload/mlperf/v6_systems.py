"""A custom system's files for NVIDIA's v6.0 and v6.1 harness, from the host's facts and gpuconfigs (pure).

Rule (issue 18): NVIDIA's published values of the round for this GPU, the nearest published GPU count scaled
(*tuned*); when NVIDIA publishes nothing for this GPU in the round (Hopper from v5.1 on) the values of the
published GPU with the nearest memory size, scaled by count, marked *untuned* in every generated file and in the
notes; only with ``allow_untuned`` (``RequireCustomSystemSupport=true``), otherwise :class:`NotTuned` names the
last round that tunes the GPU. Nothing here touches a host: the caller writes the files it gets, never over a
file without :data:`~workload.mlperf.configgen_v6.MARK` (NVIDIA's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workload.mlperf import configgen_v6 as gen
from workload.mlperf.custom_system import SYSTEM_ID_PREFIX, GeneratedFile
from workload.mlperf.exports_config import lifted_parallelism
from workload.mlperf.gpu_architecture import architecture, borrowed_fields
from workload.mlperf.gpuconfig_rounds import ROUND_MODELS
from workload.mlperf.gpuconfigs import (
    GpuConfigTable,
    PublishedConfig,
    SkuTable,
    entry_fields,
    entry_source,
    gpu_count_problem,
    load_table,
)
from workload.mlperf.gpuconfigs_parts import BENCHMARKS as V61_BENCHMARKS
from workload.mlperf.gpuconfigs_parts import PartsTable
from workload.mlperf.system import HostSystem
from workload.mlperf.tuning import (
    LAST_TUNED,
    decide,
    gpu_family,
    last_tuned_round,
    nearest_by_memory,
    same_architecture,
)

# The rule's names (issue 18) live in workload.mlperf.tuning, shared with the planner; importable here as before.
__all__ = ["LAST_TUNED", "NotTuned", "SystemFiles", "gpu_family", "last_tuned_round", "v60_files", "v61_files"]

#: NVIDIA's system-id prefix per GPU (``<prefix>x<count>``) for the GPUs the v6 tables lack.
SYSTEM_PREFIX = {"H100": "H100-SXM-80GB", "H200": "H200-SXM-141GB", "GH200": "GH200-96GB_aarch64"}
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


class NotTuned(ValueError):
    """NVIDIA publishes no config for this GPU in the round and untuned configs were not allowed."""


@dataclass(frozen=True)
class SystemFiles:
    """What a custom system needs: the system id, files to write, the notes for ``plan``/the run, tuned or not."""

    system_id: str
    files: tuple[GeneratedFile, ...]
    notes: tuple[str, ...]
    tuned: bool
    #: Per scenario written: (scenario, the accuracy targets its file holds (empty: all), where its values come from).
    provenance: tuple[tuple[str, tuple[str, ...], gen.Provenance], ...] = ()
    #: Per scenario no file is generated for: (scenario, why). Whether it then runs is the caller's to say: config
    #: files the user put under the system id (or an earlier run left) still run it
    #: (:func:`workload.mlperf.system_support_v6.prepare`).
    skipped: tuple[tuple[str, str], ...] = ()


def _untuned_reason(system: HostSystem, round_name: str, donor: str) -> str:
    last = last_tuned_round(system.gpu_name)
    why = f"NVIDIA publishes no {system.gpu_name} config in {round_name}"
    if last:
        why += f" (the last round NVIDIA tunes it in is {last})"
    return f"{why}; values of {donor}, scaled to {system.gpu_count} GPUs"


def refuse_untuned(system: HostSystem, round_name: str, table: Any = None, what: str = "") -> NotTuned:
    """Untuned values were needed but not allowed: the round's refusal for a GPU it does not tune
    (:meth:`workload.mlperf.tuning.Tuning.refusal`, the one ``plan`` and the system check give), else (a GPU it tunes,
    lacking ``what``) why that config would be another GPU's."""
    tuning = decide(round_name, system.gpu_name, system.gpu_memory_mib, tables={round_name: table} if table else None)
    if tuning is not None and tuning.refuses:
        refusal = tuning.refusal()
        return NotTuned(f"{refusal.problem}: {refusal.hint}")
    return NotTuned(
        f"NVIDIA's {round_name} configs have no {system.gpu_name} {what} config".replace("  ", " ")
        + ": set RequireCustomSystemSupport=true to run it with another GPU's values, marked untuned"
    )


def system_id(system: HostSystem, prefix: str) -> str:
    """``WL_B200-SXM-180GBx8``: ours (NVIDIA's ids never start with WL_), ``x<count>`` last as NVIDIA's."""
    return f"{SYSTEM_ID_PREFIX}{prefix}x{system.gpu_count}"


# ---- v6.0 -----------------------------------------------------------------------------------------------------


def _v60_entry(
    table: GpuConfigTable, sku: SkuTable, stem: str, scenario: str, accuracy: str, count: int
) -> tuple[int, PublishedConfig, dict[str, Any], str, dict[str, str]] | None:
    """The published count used for ``count``, its entry, fields and source, and the environment of its file.

    For a harness-only entry the fields and environment of its servers' (atomic) file lie under its own: NVIDIA's
    servers import that file, which sets its ``os.environ`` lines.
    """
    counts = sku.configs.get(stem, {}).get(scenario, {}).get(accuracy)
    if not counts:
        return None
    published = sorted(counts)
    below = [c for c in published if c <= count]
    base = below[-1] if below else published[0]
    entry = counts[base]
    env = {**(counts[entry.atomic].env or {} if entry.atomic else {}), **(entry.env or {})}
    return base, entry, entry_fields(counts, base), entry_source(counts, base), env


def v60_files(
    system: HostSystem,
    table: GpuConfigTable,
    benchmark: str,
    scenarios: Sequence[str],
    accuracies: Sequence[str],
    *,
    allow_untuned: bool,
    sid: str | None = None,
) -> SystemFiles:
    """One config file per scenario under the system id the harness is given as ``SYSTEM_NAME`` (v6.0).

    ``sid``: that id (default: ours, :func:`system_id`). A (scenario, accuracy) no table entry covers is left out:
    named in the notes when the scenario's file holds another target, in ``skipped`` when no file is written.
    """
    stem = benchmark.replace(".", "_")
    own = next((t for t in table.skus.values() if system.gpu_name.lower() in (n.lower() for n in t.gpu_names)), None)
    family = gpu_family(system.gpu_name)
    prefix = own.sku.replace("_", "-") if own else SYSTEM_PREFIX.get(family or "", system.gpu_name.replace(" ", "-"))
    if own is not None:
        prefix = _v60_prefix(own)
    ident = sid or system_id(system, prefix)
    files: list[GeneratedFile] = []
    notes: list[str] = []
    written: list[tuple[str, tuple[str, ...], gen.Provenance]] = []
    skipped: list[tuple[str, str]] = []
    tuned_all = own is not None  # a GPU the round does not tune has no tuned file, even when it gets none
    # The rule's donors (workload.mlperf.tuning.decide): the same architecture's GPUs of this table, nearest first;
    # for a GPU of an architecture v6.0 does not tune (Hopper), the last round that tunes it.
    donors = [table.skus[sku] for sku in same_architecture(table, system.gpu_name, system.gpu_memory_mib)]
    older = _older_round(system, table) if own is None and not donors else None
    for scenario in scenarios:
        settings: dict[str, dict[str, Any]] = {}
        sources: list[str] = []
        env: dict[str, str] = {}
        overrides: dict[str, dict[str, Any]] = {}
        why = ""
        lacking: list[str] = []
        used: list[str] = []
        scaled_any = False
        for accuracy in accuracies:
            found = _v60_entry(table, own, stem, scenario, accuracy, system.gpu_count) if own else None
            donor = own
            if found is None:
                for candidate in donors:
                    found = _v60_entry(table, candidate, stem, scenario, accuracy, system.gpu_count)
                    if found:
                        donor = candidate
                        break
            if found is None and older is not None:
                borrowed = _borrowed(system, table, older, stem, scenario, accuracy)
                if isinstance(borrowed, str):
                    lacking.append(accuracy)
                    notes.append(f"{benchmark} {scenario} ({accuracy}): {borrowed}")
                    continue
                if not allow_untuned:
                    raise refuse_untuned(system, "v6.0", table, f"{benchmark} {scenario} ({accuracy})")
                fields, source, sku, was_scaled, why = borrowed
                settings[accuracy] = fields
                sources.append(source)
                used.append(sku)
                scaled_any = scaled_any or was_scaled
                tuned_all = False
                continue
            if found is None or donor is None:
                lacking.append(accuracy)
                continue
            if donor is not own:
                if not allow_untuned:
                    raise refuse_untuned(system, "v6.0", table, f"{benchmark} {scenario} ({accuracy})")
                tuned_all = False
                why = _untuned_reason(system, "v6.0", f"{donor.sku} ({found[1].file})")
            base, published, fields, source, file_env = found
            used.append(donor.sku)
            scaled_any = scaled_any or base != system.gpu_count
            if base != system.gpu_count:
                for name in ("offline_expected_qps", "server_target_qps"):
                    if name in fields:
                        fields[name] = round(fields[name] * system.gpu_count / base, 6)
            settings[accuracy] = fields
            env.update(file_env)
            if published.accuracy_overrides:
                overrides[accuracy] = dict(published.accuracy_overrides)
            scaled = f" (scaled from x{base} to x{system.gpu_count})" if base != system.gpu_count else ""
            sources.append(f"{source}{scaled}" + (f" [{published.read_from}]" if published.read_from else ""))
            if published.exported and published.exported.startswith(("ctx_", "gen_")):
                # NVIDIA's EXPORTS of this system is one side of its disaggregated run: its target is that run's.
                notes.append(
                    f"{benchmark} {scenario} ({accuracy}): NVIDIA's {published.file} exports {published.exported}, "
                    "the context/generation server of its disaggregated multi-node run (server_target_qps is that "
                    "run's); lower it with the harness's --server_target_qps if this machine cannot reach it"
                )
        if lacking:
            missing = f"no published v6.0 config of {benchmark} {scenario} ({', '.join(lacking)}) for any GPU"
            if older is not None:
                missing = (
                    f"no {architecture(system.gpu_name)} config of {benchmark} {scenario} ({', '.join(lacking)}) "
                    f"in v6.0 or {older[0]}"
                )
            if not settings:
                skipped.append((scenario, missing))
                continue
            notes.append(f"{missing}: the generated file has no values for {', '.join(lacking)}")
        tuned = not why
        provenance = gen.Provenance(tuple(sources), tuned, why, tuple(dict.fromkeys(used)), scaled_any)
        text = gen.v60_config(ident, system.describe(), settings, provenance, env=env, accuracy_overrides=overrides)
        files.append(GeneratedFile(gen.v60_config_path(ident, scenario, benchmark), text))
        written.append((scenario, tuple(settings), provenance))
        notes.append(
            f"{gen.v60_config_path(ident, scenario, benchmark)}: "
            + ("tuned (NVIDIA's values for this GPU)" if tuned else f"UNTUNED ({why})")
        )
    return SystemFiles(ident, tuple(files), tuple(notes), tuned_all, tuple(written), tuple(skipped))


def _v60_prefix(sku: SkuTable) -> str:
    """NVIDIA's system-id prefix of a SKU, read from its config files (``configs/B200-SXM-180GBx4/...``)."""
    for scenarios in sku.configs.values():
        for targets in scenarios.values():
            for counts in targets.values():
                for count, entry in counts.items():
                    folder = entry.file.split("/")[3]
                    if folder.endswith(f"x{count}"):
                        return folder[: -len(f"x{count}")]
    return sku.sku.replace("_", "-")


def _older_round(system: HostSystem, table: GpuConfigTable) -> tuple[str, GpuConfigTable] | None:
    """The last round that tunes this GPU and its table, when the rule takes values from it (Hopper on v6.0)."""
    tuning = decide("v6.0", system.gpu_name, system.gpu_memory_mib, tables={"v6.0": table})
    if tuning is None or tuning.values_round in (None, "v6.0"):
        return None
    assert tuning.values_round is not None
    return tuning.values_round, load_table(harness_round=tuning.values_round)


def _borrowed(
    system: HostSystem,
    table: GpuConfigTable,
    older: tuple[str, GpuConfigTable],
    stem: str,
    scenario: str,
    accuracy: str,
) -> tuple[dict[str, Any], str, str, bool, str] | str:
    """Untuned v6.0 fields of a GPU v6.0 does not tune, from the last round that tunes it (same architecture): that
    round's config for the GPU, completed with the fields only v6.0's files carry from v6.0's nearest published file
    (:func:`~workload.mlperf.gpu_architecture.borrowed_fields`). Returns (fields, source, SKU, scaled, why), or why
    there are none."""
    round_name, old = older
    high = accuracy == "k_99_9"
    model, old_scenario = stem, scenario
    if scenario == "Interactive" and f"{stem}-interactive" in ROUND_MODELS[round_name]:
        # before v5.1's Interactive scenario, NVIDIA ran it as a benchmark of its own in Server (v5.0's Benchmark
        # ``llama2-70b-interactive``)
        model, old_scenario = f"{stem}-interactive", "Server"
    problem = old.entry_problem(system.gpu_name, model, old_scenario, high_accuracy=high)
    if problem is not None:
        return f"no {architecture(system.gpu_name)} config in v6.0 or {round_name} ({problem})"
    resolved = old.resolve(system.gpu_name, system.gpu_count, model, old_scenario, high_accuracy=high)
    count_problem = gpu_count_problem(resolved)
    if count_problem is not None:
        return count_problem
    frame = next(
        (
            found
            for sku in nearest_by_memory(table, system.gpu_memory_mib)
            if (found := _v60_entry(table, table.skus[sku], stem, scenario, accuracy, system.gpu_count))
        ),
        None,
    )
    if frame is None:
        return f"no v6.0 config of {stem} {scenario} ({accuracy}) for any GPU to take v6.0's fields from"
    arch = architecture(system.gpu_name)
    fields = borrowed_fields(frame[2], lifted_parallelism(resolved.fields), arch)
    source = f"{round_name} {resolved.source()}, with v6.0's fields its files lack from {frame[3]}"
    why = (
        f"NVIDIA publishes no {system.gpu_name} config in v6.0 (the last round NVIDIA tunes it in is {round_name}); "
        f"{round_name}'s {resolved.sku} values ({arch}, precision {resolved.fields.get('precision')}), "
        f"completed with v6.0's {frame[1].file} for the fields {round_name} files lack"
    )
    return fields, source, resolved.sku, resolved.scaled_from is not None, why


# ---- v6.1 -----------------------------------------------------------------------------------------------------


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
    written: list[tuple[str, tuple[str, ...], gen.Provenance]] = []
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
        provenance = gen.Provenance(
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
