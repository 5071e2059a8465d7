"""A custom system's files for NVIDIA's v6.0 harness, from the host's facts and gpuconfigs/v6.0 (pure).

Rule (issue 18): NVIDIA's published values of the round for this GPU, the nearest published GPU count scaled
(*tuned*); for a GPU v6.0 does not tune, the nearest GPU of its architecture in v6.0's table, else (Hopper) the last
round that tunes it completed with the fields only v6.0's files carry, marked *untuned* in every generated file and
in the notes; only with ``allow_untuned`` (``RequireCustomSystemSupport=true``), otherwise
:class:`~workload.mlperf.system_files.NotTuned` names the last round that tunes the GPU. Nothing here touches a host:
the caller writes the files it gets, never over a file without :data:`~workload.mlperf.system_files.MARK`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workload.mlperf.custom_system import GeneratedFile
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
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import SYSTEM_PREFIX, Provenance, SystemFiles, system_id
from workload.mlperf.tuning import (
    decide,
    gpu_family,
    nearest_by_memory,
    refuse_untuned,
    same_architecture,
    untuned_reason,
)

from . import configgen as gen


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
    written: list[tuple[str, tuple[str, ...], Provenance]] = []
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
                why = untuned_reason(system, "v6.0", f"{donor.sku} ({found[1].file})")
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
        provenance = Provenance(tuple(sources), tuned, why, tuple(dict.fromkeys(used)), scaled_any)
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
