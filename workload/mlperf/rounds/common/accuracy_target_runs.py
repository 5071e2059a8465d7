"""Runs by accuracy target (v5.1, v6.0): one ``--accuracy_target`` a harness run (``code/fields/meta.py``), the
custom system named by ``SYSTEM_NAME``, and LLM benchmarks run against a server: ``make run_llm_server``
(``--core_type=trtllm_endpoint --server_in_foreground``, on LLMServerPort) started detached and stopped after the
run (:mod:`workload.mlperf.llm_server`), then ``make run_harness ... --trtllm_server_urls=127.0.0.1:<port>``, one
scenario at a time (each scenario's engine flags differ). Which benchmarks are served is the round's data
(``served_benchmarks`` of its ``round.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from workload.mlperf.catalog import canonical_benchmark, model_info
from workload.mlperf.harness import RunGroup
from workload.mlperf.llm_server import ServerSpec
from workload.mlperf.ops import CollectResults, MakeTarget, Op
from workload.mlperf.results import Expected
from workload.mlperf.rounds.base import PlanInputs
from workload.mlperf.rounds.common.make_harness import MakeTargets
from workload.mlperf.rounds.common.system_name import system_variables, targets
from workload.mlperf.server_ops import StartServer, StopServer


def benchmark_full(model: str, accuracy: str) -> str:
    """v5.1 ``submission_benchmark_name``: ``-99``/``-99.9`` for high-accuracy capable benchmarks only."""
    info = model_info(model)
    if not info.high_accuracy:
        return info.name
    return f"{info.name}-{'99.9' if accuracy == '0.999' else '99'}"


class AccuracyTargetRuns(MakeTargets):
    """``engine_ops``, ``run_ops`` and the LLM server of a round whose harness takes one accuracy target a run."""

    #: Benchmarks the round runs against an LLM server (``served_benchmarks`` of ``round.json``).
    served_benchmarks: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def serves(cls, model: str) -> bool:
        """Whether the round runs ``model`` against an LLM server (NVIDIA's spelling or the catalog's)."""
        return canonical_benchmark(model) in {canonical_benchmark(name) for name in cls.served_benchmarks}

    def _args(self, inputs: PlanInputs, scenarios: Sequence[str], accuracy: str) -> list[str]:
        parts = [
            f"--benchmarks={inputs.settings.model}",
            f"--scenarios={','.join(scenarios)}",
            f"--accuracy_target={accuracy}",
        ]
        if self.serves(inputs.settings.model):
            parts.append("--core_type=trtllm_endpoint")
        return parts

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
                    args.append(self.quick_flag(inputs.version))
                args += [f"--{name}={value}" for name, value in group.fields]
                benchmark = benchmark_full(model, accuracy)
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
                    + (f" (quick: {self.quick_flag(inputs.version)})" if quick else "")
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
