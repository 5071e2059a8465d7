"""NVIDIA's v5.1 harness (``closed/NVIDIA`` of mlcommons/inference_results_v5.1).

What changed from v5.0, and the upstream file each behaviour comes from (``tests/fixtures/harness/rounds/v5.1/
UPSTREAM.md`` names repository and commit):
* configs are one file per system, scenario and benchmark, ``configs/<SYSTEM>/<Scenario>/<benchmark>.py`` with an
  ``EXPORTS`` dict (``code/main.py`` ``MainRunner.conf_path``); the system is the detected one or ``SYSTEM_NAME``
  (``code/fields/general.py``), and a system without its file silently runs ``configs/minimal``: we write our
  custom system's files (:mod:`workload.mlperf.exports_config`), pass ``SYSTEM_NAME``, and refuse any run whose
  output shows the minimal fallback (:func:`minimal_fallback`);
* the system check is NVIDIA's own detection, run in the container: v5.1 ships no ``scripts/get_system_id.py`` (only
  ``get_system_id.sh``, which runs NVIDIA's internal image), so the check imports ``code/common/systems/
  system_list.py`` as ``code/main.py`` does and prints ``DETECTED_SYSTEM.extras["id"]`` (:data:`DETECTION_ARGV`):
  the runtime id; an unknown machine is ``UNREGISTERED_<arch>_<gpu>x<n>`` and is refused without
  ``RequireCustomSystemSupport``;
* ``build/`` is made first, as the README has it (``make link_dirs``): ``code/common/paths.py`` refuses to import
  without it (``_verify_path(BUILD_DIR)``), so the system check could not run (:meth:`V5_1Round.tree_ops`);
* the accuracy target is ``--accuracy_target=0.99|0.999`` (``code/fields/meta.py``), one per harness run;
* setup stages name NVIDIA's benchmark folder (``make download_model BENCHMARKS=llama3_1-8b``: ``Makefile.data`` runs
  ``bash code/<b>/tensorrt/download_model.sh``), and whisper runs its own scripts (:data:`SETUP_SCRIPTS`);
* LLM benchmarks run against a server: ``make run_llm_server`` (``--core_type=trtllm_endpoint
  --server_in_foreground``, port 30000 or the parameter LLMServerPort) started detached and stopped after the run
  (:mod:`workload.mlperf.llm_server`), then ``make run_harness ... --trtllm_server_urls=127.0.0.1:<port>``, one
  scenario at a time (each scenario's engine flags differ);
* NVIDIA's v5.1 configs tune Blackwell only: a Hopper GPU is refused naming v5.0 (the last round that tunes it), or
  with ``RequireCustomSystemSupport=true`` runs v5.0's values marked untuned (:func:`values_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar

from workload.errors import ProfileError
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.custom_system import GeneratedFile
from workload.mlperf.exports_config import ACCURACY, Provenance, config_path, lifted_parallelism, render
from workload.mlperf.gpu_architecture import architecture, borrowed_fields
from workload.mlperf.gpuconfigs import GpuConfigTable, ResolvedConfig, SkuTable, load_table
from workload.mlperf.harness import make_argv
from workload.mlperf.ops import Op, PrepareTree
from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.base import PlanInputs, tree_state
from workload.mlperf.rounds.common.accuracy_target_runs import AccuracyTargetRuns
from workload.mlperf.rounds.common.detection import DETECTION_ARGV, is_unregistered, system_answer
from workload.mlperf.rounds.common.make_harness import HarnessSystemCheck, ImageFromRecipe, MakeSetup
from workload.mlperf.rounds.common.results import LogDirResults
from workload.mlperf.rounds.common.system_configs import FALLBACK_MARKS, PerSystemConfigs, minimal_fallback
from workload.mlperf.system import HostSystem
from workload.mlperf.tuning import LAST_TUNED, decide, nearest_by_memory, untuned_config

#: The last round whose NVIDIA configs tune Hopper (H100/H200): its table is where untuned values come from (the rule
#: is :func:`workload.mlperf.tuning.decide`'s).
LAST_HOPPER_ROUND = LAST_TUNED["H100"]
#: Benchmarks the v5.1 harness runs as LLMs (``code/common/constants.py`` ``Benchmark.is_llm``; whisper aside).
LLM_BENCHMARKS = ("gptj", "llama2-70b", "llama3_1-8b", "llama3_1-405b", "mixtral-8x7b", "deepseek-r1")
#: Setup stages a benchmark's own scripts do instead of ``make <stage>`` (v5.1 ``Makefile.data`` runs
#: ``bash code/<b>/tensorrt/download_{model,data}.sh``; whisper has ``download_models.sh``/``download_dataset.sh``,
#: which its README runs by hand: ``bash -x /work/code/whisper/tensorrt/download_models.sh``).
SETUP_SCRIPTS: dict[tuple[str, str], str] = {
    ("whisper", "download_model"): "code/whisper/tensorrt/download_models.sh",
    ("whisper", "download_data"): "code/whisper/tensorrt/download_dataset.sh",
}


def missing_configs(system_id: str, model: str, scenarios: Sequence[str], exists: Callable[[str], bool]) -> list[str]:
    """The config files (relative to closed/NVIDIA) the harness would not find for ``system_id``: for each of them
    it would run ``configs/minimal`` instead, so a run must not start (``exists`` tests a relative path)."""
    return [p for p in (config_path(system_id, model, s) for s in scenarios) if not exists(p)]


def custom_system_id(system: HostSystem, sku: SkuTable) -> str:
    """``WL_<SKU>x<count>``: the SYSTEM_NAME (and configs folder) of a custom system."""
    return f"WL_{sku.sku}x{system.gpu_count}"


def values_for(
    gpu_name: str,
    gpu_count: int,
    model: str,
    scenario: str,
    setting: WorkloadSetting,
    *,
    allow_untuned: bool,
    tables: dict[str, GpuConfigTable] | None = None,
    gpu_memory_mib: int = 0,
) -> tuple[ResolvedConfig, Provenance]:
    """NVIDIA's v5.1 values for this GPU, or (Hopper, ``allow_untuned``) v5.0's marked untuned, completed with the
    fields only v5.1's files carry from v5.1's published file nearest in memory (``gpu_memory_mib``; 0: the smallest
    GPU's) without its precision-specific flags (:func:`~workload.mlperf.gpu_architecture.borrowed_fields`).

    ProfileError (exit 2: the user chooses) when v5.1 has no values for the GPU: naming the last round that tunes it
    and the parameter that runs it untuned; or when neither round has values for (model, scenario, accuracy).
    """
    tables = tables or {}
    current = tables.get("v5.1") or load_table(harness_round="v5.1")
    tuning = decide("v5.1", gpu_name, tables={**tables, "v5.1": current})
    high = setting.accuracy == "k_99_9"
    if tuning is not None and tuning.tuned:
        problem = current.entry_problem(gpu_name, model, scenario, high_accuracy=high)
        if problem is not None:
            # the one rule (tuning.decide with the config): the nearest same-architecture GPU's config, untuned
            gap = decide(
                "v5.1", gpu_name, gpu_memory_mib, tables={"v5.1": current}, config=(model, scenario, setting.accuracy)
            )
            if gap is None or gap.sku is None:
                raise ProfileError(current.label(current.sku_for_gpu(gpu_name).sku), problem)
            if not allow_untuned:
                raise gap.refusal()
            gpus = (gpu_name, gpu_memory_mib, gpu_count)
            borrowed = untuned_config("v5.1", current, gpus, model, scenario, setting.accuracy)
            assert borrowed is not None and borrowed.untuned
            return borrowed, Provenance(borrowed.source(), untuned=borrowed.untuned)
        resolved = current.resolve(gpu_name, gpu_count, model, scenario, high_accuracy=high)
        return resolved, Provenance(resolved.source())
    if tuning is None or tuning.values_round is None:
        raise ProfileError(
            "HarnessRound v5.1",
            f"neither NVIDIA's v5.1 nor its {LAST_HOPPER_ROUND} configs have values for the GPU {gpu_name!r}",
        )
    if not allow_untuned:
        raise tuning.refusal()
    older = tables.get(tuning.values_round) or load_table(harness_round=tuning.values_round)
    problem = older.entry_problem(gpu_name, model, scenario, high_accuracy=high)
    if problem is None:
        resolved = older.resolve(gpu_name, gpu_count, model, scenario, high_accuracy=high)
    else:  # that round lacks it for this GPU too: the same rule there (another Hopper's config of that round)
        gpus = (gpu_name, gpu_memory_mib, gpu_count)
        kin = untuned_config(tuning.values_round, older, gpus, model, scenario, setting.accuracy)
        if kin is None:
            raise ProfileError(older.label(older.sku_for_gpu(gpu_name).sku), problem)
        resolved = kin
    # v5.0's classes inherit what v5.1's files spell out (generation config, data path, run length, the full flag
    # dicts): those come from v5.1's nearest published file of the same config, the values from v5.0's
    frame = next(
        (
            current.resolve(sku.gpu_names[0], gpu_count, model, scenario, high_accuracy=high)
            for sku in (current.skus[name] for name in nearest_by_memory(current, gpu_memory_mib))
            if current.entry_problem(sku.gpu_names[0], model, scenario, high_accuracy=high) is None
        ),
        None,
    )
    completed = ""
    if frame is not None:
        fields = borrowed_fields(frame.fields, lifted_parallelism(resolved.fields), architecture(gpu_name))
        resolved = replace(resolved, fields=fields)
        completed = f", with the fields v5.1's files carry from {frame.source()}"
    why = (
        f"NVIDIA's v5.1 configs do not tune {gpu_name}; these are its {tuning.values_round} values "
        f"({resolved.source()}){completed}"
    )
    if resolved.untuned:  # not even that round's values for this GPU: another of its architecture's
        why += f"; {resolved.untuned}"
    return resolved, Provenance(f"{tuning.values_round} {resolved.source()}{completed}", untuned=why)


def custom_files(
    system: HostSystem,
    sku: SkuTable,
    model: str,
    scenarios: Sequence[str],
    settings: Sequence[WorkloadSetting],
    *,
    allow_untuned: bool,
) -> list[tuple[GeneratedFile, tuple[Provenance, ...]]]:
    """Every config file a custom system needs for (model, scenarios, settings), with where its values come from."""
    system_id = custom_system_id(system, sku)
    out = []
    for scenario in scenarios:
        entries = []
        for setting in settings:
            resolved, provenance = values_for(
                system.gpu_name,
                system.gpu_count,
                model,
                scenario,
                setting,
                allow_untuned=allow_untuned,
                gpu_memory_mib=system.gpu_memory_mib,
            )
            entries.append((setting, resolved, provenance))
        out.append((render(system_id, model, scenario, entries), tuple(p for _, _, p in entries)))
    return out


class V5_1Round(HarnessSystemCheck, ImageFromRecipe, MakeSetup, AccuracyTargetRuns, PerSystemConfigs, LogDirResults):
    """v5.1: per-system config files, SYSTEM_NAME, ``--accuracy_target``, LLMs behind a server; composed from the
    make-target harness's strategies with runs by accuracy target and per-system configs (``rounds/common/``)."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)

    system_id_argv: ClassVar[tuple[str, ...]] = DETECTION_ARGV
    registry: ClassVar[str | None] = "SYSTEM_NAME=WL_<SKU>x<count> with its own configs/<system>/ folder"
    nvidia_benchmark_names: ClassVar[bool] = True
    setup_scripts: ClassVar[dict[tuple[str, str], str]] = SETUP_SCRIPTS
    served_benchmarks: ClassVar[tuple[str, ...]] = LLM_BENCHMARKS

    def tree_ops(self, inputs: PlanInputs) -> list[Op]:
        """``build/`` by ``make link_dirs`` (the README's "make clean; make link_dirs" without the clean, which would
        delete earlier engines): ``code/common/paths.py`` needs it before anything of NVIDIA's imports."""
        key, done = tree_state(inputs, "build")
        argv = tuple(make_argv("link_dirs", dict(self.extra_variables())))
        why = "v5.1 code/common/paths.py will not import without it; README: make link_dirs"
        return [PrepareTree(inputs.container, "build", why, argv, key, done=done)]


__all__ = [
    "ACCURACY",
    "DETECTION_ARGV",
    "FALLBACK_MARKS",
    "LAST_HOPPER_ROUND",
    "V5_1Round",
    "custom_files",
    "custom_system_id",
    "is_unregistered",
    "minimal_fallback",
    "missing_configs",
    "system_answer",
    "values_for",
]


#: The adapter :func:`workload.mlperf.rounds.discover` finds in this folder.
ADAPTER = V5_1Round
