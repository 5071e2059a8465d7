"""NVIDIA's v6.1 harness: the ``nv-mlpinf`` package (``closed/NVIDIA`` of mlcommons/inference_results_v6.1).

What changed from v6.0, and the upstream file each behaviour comes from (``tests/fixtures/harness/rounds/v6.1/
UPSTREAM.md`` names repository and commit):
* the harness is a package (``src/nv_mlpinf``, ``pip install -e ".[llm]"``; the Makefile's ``ensure_installed``);
  no image is built: NVIDIA's image is pulled (``ContainerImage``, default the LLM image ``docs/ENV_SETUP.md``
  names) and the checkout attached at ``/work``;
* configs are grouped by model, then system, backend and scenario:
  ``configs/<model with _>/<SYSTEM>/TRTLLM/<Scenario>/{server.py,harness.py}`` plus the trtllm-serve options YAML;
  a missing file is an error (no minimal fallback);
* the system check is ``nv-mlpinf show_paths`` (``system_name = <id> [auto-detected|env: SYSTEM_NAME]``, or
  ``Detected system did not match any known systems.``); a custom system is ``SYSTEM_NAME=WL_<system>`` with our
  files under its name (:func:`.systems.v61_files`);
* every LLM benchmark runs against trtllm-serve: ``make run_llm_server`` (foreground, in its own process group,
  stopped after the run) then ``make run_harness`` (a date-stamped ``LOG_DIR``); one make starts one server per
  data-parallel rank, the URLs its config files give (:meth:`V6_1Round.served_urls`, read by the system check),
  and every one is port-checked, waited for and, with ``Client=endpoints``, sent to;
* qwen3-vl and wan2.2 run only through nv-sflow on Slurm in v6.1: refused here.
* ``Client=endpoints`` sends the queries with MLCommons' endpoints client instead of ``make run_harness``
  (:class:`~workload.mlperf.endpoint_ops.RunEndpointsClient`; Server/Interactive at the target QPS of
  :mod:`workload.mlperf.endpoint_target`); PerformanceOnly only and no LoadGen overrides (refused, with why:
  :mod:`workload.mlperf.endpoint_checks`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import ClassVar

from workload.errors import ProfileError
from workload.metrics import rules
from workload.mlperf import endpoint_checks, endpoint_target
from workload.mlperf.catalog import NVIDIA_SPELLING, WorkloadSetting
from workload.mlperf.custom_system import CustomSystemError, GeneratedFile
from workload.mlperf.endpoint_ops import RunEndpointsClient
from workload.mlperf.endpoint_target import TargetQps
from workload.mlperf.gpuconfigs import ResolvedConfig, SkuTable
from workload.mlperf.harness import HarnessVersion, RunGroup
from workload.mlperf.llm_server import ServerSpec
from workload.mlperf.ops import CollectResults, IdentifySystem, MakeTarget, Op, SetupStage, UseImage
from workload.mlperf.results import Expected
from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.base import GeneratedFiles, HarnessRound, PlanInputs, done_at
from workload.mlperf.rounds.common.results import LogDirResults
from workload.mlperf.rounds.common.system_name import SYSTEM_PLACEHOLDER, system_variables, targets
from workload.mlperf.server_ops import StartServer, StopServer
from workload.mlperf.server_urls import LOCAL_HOST, ServerUrls, resolve
from workload.mlperf.settings import setup_key
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import SystemFiles

from . import configgen
from .systems import v61_files

#: The LLM image NVIDIA's v6.1 docs/ENV_SETUP.md pulls (B200/B300, x86_64).
DEFAULT_IMAGE = (
    "nvcr.io/nvidia/mlperf/mlperf-inference:tensorrt_llm_release-feat-1.2-mlpinf-b5ddff4_mlperf-main-f538816_jan28_x86"
)
#: The harness's system check: its ``show_paths`` action prints the system name and where it came from.
SYSTEM_CHECK = ("bash", "-c", "PYTHONPATH=src exec python3 -m nv_mlpinf.main show_paths")
SYSTEM_LINE = re.compile(r"^\s*system_name\s*=\s*(\S+)\s+\[(.+)\]\s*$", re.M)
#: Benchmarks one node runs in v6.1 (the others are nv-sflow/Slurm only: q3vl README, configs/SLURM_SUPPORT.md).
SINGLE_NODE = ("llama2-70b", "gpt-oss-120b", "deepseek-r1")
SLURM_ONLY = ("qwen3-vl-235b-a22b", "wan-2.2-t2v-a14b")
#: NVIDIA's v6.1 ``Benchmark`` values (``nv_mlpinf/common/constants.py``) this runner does not run, and why.
NOT_RUN: dict[str, str] = {
    "llama3_1-8b": "NVIDIA's v6.1 configs have no llama3_1_8b folder (no published values for any system)",
    "whisper": "it runs without trtllm-serve in v6.1 (Benchmark.supports_trtllm_endpoint_harness leaves it out); "
    "this runner drives v6.1's served benchmarks",
}
SETUP = ("ensure_installed", "download_data", "download_model", "preprocess_data")
#: What ``plan`` shows for the servers before the system check has chosen the config files.
URLS_PLACEHOLDER = f"{LOCAL_HOST}:<ports from the system check>"


def system_name_of(output: str) -> str | None:
    """The id ``nv-mlpinf show_paths`` printed, or None when the harness does not know the machine."""
    found = SYSTEM_LINE.search(output)
    return found.group(1) if found else None


class V6_1Round(LogDirResults, HarnessRound):
    """v6.1: nv-mlpinf, pulled image, configs by model/system/backend/scenario, every LLM behind trtllm-serve.

    Composed, not inherited: the result layout (:class:`~workload.mlperf.rounds.common.results.LogDirResults`) and
    the per-system layout's SYSTEM_NAME and accuracy-target rules (:mod:`~workload.mlperf.rounds.common.system_name`)
    are the shared strategies; everything else is this round's own."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)

    def image_ops(self, inputs: PlanInputs) -> list[Op]:
        return [UseImage(inputs.params.ContainerImage or DEFAULT_IMAGE)]

    def _check_model(self, model: str) -> None:
        if model in SLURM_ONLY:
            raise ProfileError(
                "HarnessRound v6.1",
                f"{model} runs only through nv-sflow on Slurm in NVIDIA's v6.1 harness (its README: no single-node "
                "docker launch); this runner does one node",
            )
        reason = NOT_RUN.get(NVIDIA_SPELLING.get(model, model))
        if reason is not None:
            raise ProfileError("HarnessRound v6.1", f"{model} is a v6.1 benchmark this runner does not run: {reason}")
        if model not in SINGLE_NODE:
            raise ProfileError(
                "HarnessRound v6.1",
                f"{model} is not a v6.1 benchmark for one node (v6.1 has: {', '.join(SINGLE_NODE)})",
            )

    def system_check(self, inputs: PlanInputs) -> Op:
        self._check_model(inputs.settings.model)
        # Before any op: what the endpoints client cannot run (accuracy modes, LoadGen overrides) is refused.
        endpoint_checks.check(inputs.params, inputs.settings)
        return IdentifySystem(
            container=inputs.container,
            argv=SYSTEM_CHECK,
            custom_support=inputs.params.RequireCustomSystemSupport,
            config_targets=tuple(self.custom_config_path(inputs.settings.model, s) for s in inputs.settings.scenarios)
            if inputs.params.RequireCustomSystemSupport
            else (),
            # v6.1 registers nothing: the system is SYSTEM_NAME and its own folder under configs/<model>/.
            registry="SYSTEM_NAME=WL_<system> with its own configs/<model>/<system>/ folder",
        )

    def tree_ops(self, inputs: PlanInputs) -> list[Op]:
        """None: v6.1's layout (``src/nv_mlpinf``) is a stand-in of ours; no clones of v6.0's are known to it."""
        return []

    def setup_ops(self, inputs: PlanInputs) -> tuple[list[Op], list[str]]:
        model = inputs.settings.model
        ops: list[Op] = []
        for stage in SETUP:
            key = setup_key(inputs.scratch, model, stage)
            argv = ("make", stage, f"BENCHMARKS={model}")
            ops.append(SetupStage(inputs.container, model, stage, argv, key, done=done_at(inputs.facts.done.get(key))))
        notes = [] if any(op.shown for op in ops) else [f"setup of {model} already done ({', '.join(SETUP)})"]
        return ops, notes

    @staticmethod
    def serves(model: str) -> bool:
        return model in SINGLE_NODE

    def engine_ops(self, inputs: PlanInputs, scenarios: Sequence[str]) -> list[Op]:
        return []  # trtllm-serve loads the checkpoint itself: no engine step in v6.1

    def _args(self, inputs: PlanInputs, scenarios: Sequence[str], accuracy: str) -> list[str]:
        return [
            f"--benchmarks={inputs.settings.model}",
            f"--scenarios={','.join(scenarios)}",
            f"--accuracy_target={accuracy}",
        ]

    def server_spec(self, inputs: PlanInputs, scenario: str, accuracy: str, logs: str) -> ServerSpec:
        """``make run_llm_server`` of one (scenario, accuracy target): every server its config starts (the system
        check read them: :mod:`workload.mlperf.server_urls`), or a placeholder in ``plan`` before the check."""
        served = inputs.server_urls.get((scenario, accuracy))
        args = [*self._args(inputs, (scenario,), accuracy), "--server_in_foreground"]
        variables = {**system_variables(inputs), "LOG_DIR": f"{logs}/server"}
        argv = ("make", "run_llm_server", f"RUN_ARGS={' '.join(args)}", *(f"{k}={v}" for k, v in variables.items()))
        return ServerSpec(
            argv=argv,
            urls=served.urls if served else (URLS_PLACEHOLDER,),
            log_path=f"{logs}.server.log",
            pid_path=f"{logs}.server.pgid",
            origin=served.source if served else "",
            server_logs=f"{logs}/server",
        )

    def run_ops(self, inputs: PlanInputs, group: RunGroup, test_mode: str, index: int) -> list[Op]:
        settings, quick = inputs.settings, inputs.params.Quick
        model = settings.model
        ops: list[Op] = []
        for accuracy, _version in targets(inputs):
            for scenario in (s for s in group.scenarios if inputs.runs(s, accuracy)):
                logs = self.results_dir(inputs.run_id, model, test_mode, index) + f"-{scenario.lower()}"
                if accuracy == "0.999" and len(targets(inputs)) > 1:
                    logs += "-999"
                benchmark = f"{model}-{'99.9' if accuracy == '0.999' else '99'}" if model == "llama2-70b" else model
                expected = tuple(
                    Expected(model, benchmark, s, test_mode)
                    for s in (scenario,)
                    if (s, benchmark) not in inputs.blocked
                )
                spec = self.server_spec(inputs, scenario, accuracy, logs)
                args = [*self._args(inputs, (scenario,), accuracy), f"--test_mode={test_mode}"]
                if quick:
                    args.append(self.quick_flag(inputs.version))
                args += [f"--{name}={value}" for name, value in group.fields]
                what = f"{model} {scenario}"
                ops.append(StartServer(inputs.container, spec, what))
                if inputs.params.Client == "endpoints":
                    ops.append(
                        self._endpoints(inputs, scenario, benchmark, accuracy, test_mode, logs, expected, spec.urls)
                    )
                    ops.append(CollectResults(f"{inputs.nvidia_dir}/{logs}", test_mode, expected))
                    ops.append(StopServer(inputs.container, spec, what))
                    continue
                ops.append(
                    MakeTarget(
                        inputs.container,
                        f"run {what} {test_mode} (accuracy target {accuracy})"
                        + (f" (quick: {self.quick_flag(inputs.version)})" if quick else "")
                        + f" against trtllm-serve on {spec.where()}",
                        "run_harness",
                        tuple({"RUN_ARGS": " ".join(args), "LOG_DIR": logs, **system_variables(inputs)}.items()),
                        log_dir=logs,
                        expected=expected,
                        scenarios=(scenario,),
                        test_mode=test_mode,
                    )
                )
                ops.append(CollectResults(f"{inputs.nvidia_dir}/{logs}", test_mode, expected))
                ops.append(StopServer(inputs.container, spec, what))
        return ops

    def refused_output(self, output: str) -> str | None:
        """v6.1 has no minimal fallback (a missing config is an error naming the file): nothing to refuse."""
        return None

    def system_answer(self, output: str) -> str | None:
        return system_name_of(output)

    def config_files(self, system_id: str, model: str, scenario: str) -> tuple[str, ...]:
        folder = configgen.v61_folder(model, system_id, scenario)
        return (f"{folder}/server.py", f"{folder}/harness.py")

    def served_urls(
        self,
        read: Callable[[str], str | None],
        system_id: str,
        model: str,
        scenario: str,
        accuracy: str,
        *,
        gpu_count: Callable[[], int],
        port: int,
        client: str,
    ) -> ServerUrls:
        """The servers ``make run_llm_server`` starts for (model, system_id, scenario, accuracy target), read from
        the config files the harness uses for them (``read``: a file's text relative to closed/NVIDIA, None when it
        does not exist); ``port`` is LLMServerPort. With NVIDIA's harness as the client, its harness.py's own URLs,
        when it names some, are checked against them (a warning when they differ)."""
        server_py, harness_py = self.config_files(system_id, model, scenario)
        return resolve(
            server_py,
            read,
            accuracy,
            gpu_count=gpu_count,
            base_port=port,
            harness_py=harness_py if client == "harness" else None,
        )

    def _endpoints(
        self,
        inputs: PlanInputs,
        scenario: str,
        benchmark: str,
        accuracy: str,
        test_mode: str,
        logs: str,
        expected: tuple[Expected, ...],
        urls: tuple[str, ...],
    ) -> RunEndpointsClient:
        """The endpoints client's run: its report where NVIDIA's harness would put this scenario's results.

        Offline issues a fixed sample count at once; Server and Interactive are a Poisson load at the target QPS
        :func:`workload.mlperf.endpoint_target.choose` gives (the parameter, else NVIDIA's value for this GPU, else
        a ProfileError naming the parameter)."""
        system = inputs.system_name or SYSTEM_PLACEHOLDER
        report = f"/work/{logs}/{system}_TRT/{benchmark}/{scenario}"
        config_path = f"{logs}/endpoint.yaml"
        target: TargetQps | None = None
        if scenario in endpoint_target.PARAMETERS:
            from workload.mlperf.gpuconfigs_parts import load_parts_table

            given = inputs.params.ServerTargetQps if scenario == "Server" else inputs.params.InteractiveTargetQps
            key = "k_99_9" if accuracy == "0.999" else "k_99"
            target = endpoint_target.choose(
                scenario, given, inputs.facts.system, load_parts_table(), inputs.settings.model, key
            )
        elif scenario != "Offline":
            raise ProfileError(
                "Client", f"MLCommons' endpoints client runs Offline, Server and Interactive, not {scenario}"
            )
        text = configgen.endpoint_config(
            name=f"{benchmark}-{scenario.lower()}-{test_mode.lower()}",
            model=benchmark,
            scenario=scenario,
            urls=urls,
            report_dir=report,
            min_duration_ms=60000 if inputs.params.Quick else 600000,
            samples=24576,
            target_qps=target.value if target else None,
            max_new_tokens=1024,
            seeds=rules.rules_for("v6.1").seeds,
        )
        argv = ("inference-endpoint", "benchmark", "from-config", "-c", f"/work/{config_path}", "--timeout", "7200")
        load = f"Poisson at {target.value:g} queries/s ({target.source})" if target else "all samples at once"
        return RunEndpointsClient(
            inputs.container, config_path, text, argv, logs, expected, (scenario,), test_mode, urls, load
        )

    def system_files(
        self,
        system: HostSystem,
        model: str,
        scenarios: Sequence[str],
        accuracies: Sequence[str],
        *,
        allow_untuned: bool,
        port: int = 30000,
    ) -> SystemFiles:
        from workload.mlperf.gpuconfigs_parts import load_parts_table

        return v61_files(system, load_parts_table(), model, scenarios, allow_untuned=allow_untuned, base_port=port)

    def generated_files(self) -> GeneratedFiles:
        return self

    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        """v6.1 registers nothing: the system is SYSTEM_NAME and its own folder under ``configs/<model>/``."""
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
        """Not a v6.1 file: its custom system is the set :meth:`system_files` generates (``generated files``)."""
        raise CustomSystemError(
            f"NVIDIA's {self.name} harness has no config classes: its custom system is generated files"
        )

    def custom_config_path(self, model: str, scenario: str) -> str:
        return configgen.v61_folder(model, "<system id from the system check>", scenario) + "/{server,harness}.py"


#: The adapter :func:`workload.mlperf.rounds.discover` finds in this folder.
ADAPTER = V6_1Round
