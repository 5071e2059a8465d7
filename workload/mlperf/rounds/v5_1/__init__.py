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
from workload.mlperf.catalog import (
    NVIDIA_SPELLING,
    WorkloadSetting,
    canonical_benchmark,
    model_info,
)
from workload.mlperf.custom_system import GeneratedFile
from workload.mlperf.exports_config import ACCURACY, Provenance, config_path, lifted_parallelism, render
from workload.mlperf.gpu_architecture import architecture, borrowed_fields
from workload.mlperf.gpuconfigs import GpuConfigTable, ResolvedConfig, SkuTable, load_table
from workload.mlperf.harness import SETUP_STAGES, HarnessVersion, RunGroup, make_argv
from workload.mlperf.llm_server import ServerSpec
from workload.mlperf.ops import CollectResults, IdentifySystem, MakeTarget, Op, PrepareTree, SetupStage
from workload.mlperf.results import Expected
from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.base import PlanInputs, tree_state
from workload.mlperf.rounds.common.system_name import SYSTEM_PLACEHOLDER, system_variables, targets
from workload.mlperf.rounds.v4_1 import V4_1Round
from workload.mlperf.server_ops import StartServer, StopServer
from workload.mlperf.system import HostSystem
from workload.mlperf.tuning import LAST_TUNED, decide, nearest_by_memory, untuned_config

#: The last round whose NVIDIA configs tune Hopper (H100/H200): its table is where untuned values come from (the rule
#: is :func:`workload.mlperf.tuning.decide`'s).
LAST_HOPPER_ROUND = LAST_TUNED["H100"]
#: Benchmarks the v5.1 harness runs as LLMs (``code/common/constants.py`` ``Benchmark.is_llm``; whisper aside).
LLM_BENCHMARKS = ("gptj", "llama2-70b", "llama3_1-8b", "llama3_1-405b", "mixtral-8x7b", "deepseek-r1")
#: Lines NVIDIA's v5.1 ``code/main.py`` logs when a run falls back to ``configs/minimal`` (or runs unregistered).
FALLBACK_MARKS = (
    "Loading minimal configs as default",
    "Attempting to load minimal config",
    "Runtime system not found in built-ins",
)
#: Setup stages a benchmark's own scripts do instead of ``make <stage>`` (v5.1 ``Makefile.data`` runs
#: ``bash code/<b>/tensorrt/download_{model,data}.sh``; whisper has ``download_models.sh``/``download_dataset.sh``,
#: which its README runs by hand: ``bash -x /work/code/whisper/tensorrt/download_models.sh``).
SETUP_SCRIPTS: dict[tuple[str, str], str] = {
    ("whisper", "download_model"): "code/whisper/tensorrt/download_models.sh",
    ("whisper", "download_data"): "code/whisper/tensorrt/download_dataset.sh",
}
#: NVIDIA's own system detection (v5.1+): ``code/main.py`` imports ``DETECTED_SYSTEM`` from
#: ``code/common/systems/system_list.py`` (nvmitten's ``System.detect()`` matched against NVIDIA's systems, or the
#: ``SYSTEM_NAME`` override) and logs ``DETECTED_SYSTEM.extras['id']``; the check prints that id, nothing else, on
#: stdout (the module's own log lines go to stderr).
DETECTION_ARGV: tuple[str, ...] = (
    "python3",
    "-c",
    "from code.common.systems.system_list import DETECTED_SYSTEM; print(DETECTED_SYSTEM.extras['id'])",
)


def minimal_fallback(output: str) -> list[str]:
    """The harness's own lines saying it ran (or would run) minimal settings instead of this system's configs."""
    return [line.strip() for line in output.splitlines() if any(mark in line for mark in FALLBACK_MARKS)]


def missing_configs(system_id: str, model: str, scenarios: Sequence[str], exists: Callable[[str], bool]) -> list[str]:
    """The config files (relative to closed/NVIDIA) the harness would not find for ``system_id``: for each of them
    it would run ``configs/minimal`` instead, so a run must not start (``exists`` tests a relative path)."""
    return [p for p in (config_path(system_id, model, s) for s in scenarios) if not exists(p)]


def system_answer(output: str) -> str | None:
    """The id the system check printed: the last line that is one token (the harness's log lines around it, on
    stderr, are ``[time file:line LEVEL] ...``); None when there is none."""
    answers = [line.strip() for line in output.splitlines() if line.strip() and len(line.split()) == 1]
    answers = [a for a in answers if not a.startswith("[")]
    return answers[-1] if answers else None


def is_unregistered(system_id: str) -> bool:
    """Whether the v5.1 system check's answer is its placeholder for a machine it does not know."""
    return system_id.strip().startswith("UNREGISTERED")


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


class V5_1Round(V4_1Round):
    """v5.1: per-system config files, SYSTEM_NAME, ``--accuracy_target``, LLMs behind a server."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)

    creates_config_dirs: ClassVar[bool] = True
    system_id_argv: ClassVar[tuple[str, ...]] = DETECTION_ARGV
    #: (model, stage) -> the benchmark's own script run instead of ``make <stage>``.
    setup_scripts: ClassVar[dict[tuple[str, str], str]] = SETUP_SCRIPTS

    def system_check(self, inputs: PlanInputs) -> Op:
        op = super().system_check(inputs)
        assert isinstance(op, IdentifySystem)
        return replace(op, registry="SYSTEM_NAME=WL_<SKU>x<count> with its own configs/<system>/ folder")

    def tree_ops(self, inputs: PlanInputs) -> list[Op]:
        """``build/`` by ``make link_dirs`` (the README's "make clean; make link_dirs" without the clean, which would
        delete earlier engines): ``code/common/paths.py`` needs it before anything of NVIDIA's imports."""
        key, done = tree_state(inputs, "build")
        argv = tuple(make_argv("link_dirs", dict(self.extra_variables())))
        why = "v5.1 code/common/paths.py will not import without it; README: make link_dirs"
        return [PrepareTree(inputs.container, "build", why, argv, key, done=done)]

    def setup_argv(self, model: str, stage: str) -> tuple[str, ...]:
        """One setup stage of ``model``: ``make <stage> BENCHMARKS=<NVIDIA's folder name>`` (``code/<b>/``, spelled as
        NVIDIA's ``Benchmark`` value: ``llama3_1-8b``), or the benchmark's own script where it has one."""
        script = self.setup_scripts.get((model, stage))
        if script is not None:
            return ("bash", script)
        folder = NVIDIA_SPELLING.get(model, model)
        return tuple(make_argv(stage, dict(self._variables(BENCHMARKS=folder))))

    def setup_ops(self, inputs: PlanInputs) -> tuple[list[Op], list[str]]:
        """v4.1's setup (stages, then ``make build``) with this round's argv per stage (:meth:`setup_argv`)."""
        ops, notes = super().setup_ops(inputs)
        staged = [
            replace(op, argv=self.setup_argv(op.model, op.stage))
            if isinstance(op, SetupStage) and op.stage in SETUP_STAGES
            else op
            for op in ops
        ]
        return staged, notes

    def refused_output(self, output: str) -> str | None:
        fallback = minimal_fallback(output)
        if not fallback:
            return None
        return f"the harness ran its minimal settings instead of this system's configs ({fallback[0]})"

    def _args(self, inputs: PlanInputs, scenarios: Sequence[str], accuracy: str) -> list[str]:
        parts = [
            f"--benchmarks={inputs.settings.model}",
            f"--scenarios={','.join(scenarios)}",
            f"--accuracy_target={accuracy}",
        ]
        if self.serves(inputs.settings.model):
            parts.append("--core_type=trtllm_endpoint")
        return parts

    @staticmethod
    def serves(model: str) -> bool:
        """Whether v5.1 runs ``model`` against an LLM server."""
        # The catalog's names are canonical (llama3.1-8b); NVIDIA's v5.1 files write llama3_1-8b.
        return canonical_benchmark(model) in {canonical_benchmark(name) for name in LLM_BENCHMARKS}

    def engine_ops(self, inputs: PlanInputs, scenarios: Sequence[str]) -> list[Op]:
        ops: list[Op] = []
        for accuracy, _ in targets(inputs):
            planned = [s for s in scenarios if inputs.runs(s, accuracy)]
            if not planned:
                continue
            args = " ".join(self._args(inputs, planned, accuracy))
            ops.append(
                MakeTarget(
                    inputs.container,
                    f"generate the engines of {inputs.settings.model} {','.join(planned)} "
                    f"(accuracy target {accuracy}; once for every test mode)",
                    "generate_engines",
                    self._variables(RUN_ARGS=args, **system_variables(inputs)),
                    scenarios=tuple(planned),
                )
            )
        return ops

    def run_ops(self, inputs: PlanInputs, group: RunGroup, test_mode: str, index: int) -> list[Op]:
        settings, quick = inputs.settings, inputs.params.Quick
        model = settings.model
        serve = self.serves(model)
        ops: list[Op] = []
        for accuracy, _version in targets(inputs):
            planned = tuple(s for s in group.scenarios if inputs.runs(s, accuracy))
            # A server serves one scenario's engine: LLM runs go one scenario at a time.
            batches = [(s,) for s in planned] if serve else [planned] if planned else []
            for scenarios in batches:
                suffix = f"-{scenarios[0].lower()}" if serve else ""
                suffix += "-999" if accuracy == "0.999" and len(targets(inputs)) > 1 else ""
                logs = self.results_dir(inputs.run_id, model, test_mode, index) + suffix
                args = [*self._args(inputs, scenarios, accuracy), f"--test_mode={test_mode}"]
                if quick:
                    args.append(inputs.version.quick_flag)
                args += [f"--{name}={value}" for name, value in group.fields]
                benchmark = _benchmark_full(model, accuracy)
                expected = tuple(
                    Expected(model, benchmark, scenario, test_mode)
                    for scenario in scenarios
                    if (scenario, benchmark) not in inputs.blocked
                )
                spec = self.server_spec(inputs, scenarios[0], accuracy, logs) if serve else None
                if spec is not None:
                    args.append(f"--trtllm_server_urls={','.join(spec.urls)}")
                    ops.append(StartServer(inputs.container, spec, f"{model} {scenarios[0]}"))
                title = (
                    f"run {model} {','.join(scenarios)} {test_mode} (accuracy target {accuracy})"
                    + (f" (quick: {inputs.version.quick_flag})" if quick else "")
                    + (f" with {', '.join(f'{k}={v}' for k, v in group.fields)}" if group.fields else "")
                    + (f" against the LLM server on {spec.where()}" if spec else "")
                )
                ops.append(
                    MakeTarget(
                        inputs.container,
                        title,
                        "run_harness",
                        self._variables(RUN_ARGS=" ".join(args), LOG_DIR=logs, **system_variables(inputs)),
                        log_dir=logs,
                        expected=expected,
                        scenarios=tuple(scenarios),
                        test_mode=test_mode,
                    )
                )
                ops.append(CollectResults(f"{inputs.nvidia_dir}/{logs}", test_mode, expected))
                if spec is not None:
                    ops.append(StopServer(inputs.container, spec, f"{model} {scenarios[0]}"))
        return ops

    def server_spec(self, inputs: PlanInputs, scenario: str, accuracy: str, logs: str) -> ServerSpec:
        """The server of one (model, scenario, accuracy target): ``make run_llm_server`` in the foreground of its
        own process group, its log and process-group file beside the run's results."""
        url = f"127.0.0.1:{inputs.params.LLMServerPort}"
        args = [*self._args(inputs, (scenario,), accuracy), "--server_in_foreground", f"--trtllm_server_urls={url}"]
        variables = self._variables(RUN_ARGS=" ".join(args), **system_variables(inputs))
        argv = ("make", "run_llm_server", *(f"{k}={v}" for k, v in variables))
        return ServerSpec(argv=argv, urls=(url,), log_path=f"{logs}.server.log", pid_path=f"{logs}.server.pgid")

    def custom_config_path(self, model: str, scenario: str) -> str:
        return config_path(SYSTEM_PLACEHOLDER, model, scenario)

    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        """v5.1 registers nothing: the system is named by SYSTEM_NAME and its config folder."""
        return ""

    def custom_config(
        self,
        model: str,
        scenario: str,
        member: str,
        class_base: str,
        classes: Sequence[tuple[WorkloadSetting, ResolvedConfig]],
        version: HarnessVersion,
    ) -> GeneratedFile:
        return render(member, model, scenario, [(s, c, Provenance(c.source())) for s, c in classes])


def _benchmark_full(model: str, accuracy: str) -> str:
    """v5.1 ``submission_benchmark_name``: ``-99``/``-99.9`` for high-accuracy capable benchmarks only."""
    info = model_info(model)
    if not info.high_accuracy:
        return info.name
    return f"{info.name}-{'99.9' if accuracy == '0.999' else '99'}"


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
