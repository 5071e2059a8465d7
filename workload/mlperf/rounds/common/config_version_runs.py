"""Runs by config version (v4.1, v5.0): ``make generate_engines`` once for the scenarios, then ``make run_harness``
per test mode, ``RUN_ARGS`` with ``--config_ver`` and the quick flag of the checkout's version, each run in its own
``LOG_DIR`` (NVIDIA's ``Makefile``: ``generate_engines``, ``run_harness``; ``code/common/fields.py`` of v4.1)."""

from __future__ import annotations

from collections.abc import Sequence

from workload.mlperf.harness import RunGroup, run_args
from workload.mlperf.ops import CollectResults, MakeTarget, Op
from workload.mlperf.results import Expected
from workload.mlperf.rounds.base import PlanInputs
from workload.mlperf.rounds.common.make_harness import MakeTargets


class ConfigVersionRuns(MakeTargets):
    """``engine_ops`` and ``run_ops`` of a round whose harness takes ``--config_ver`` (all accuracy targets a run)."""

    def engine_ops(self, inputs: PlanInputs, scenarios: Sequence[str]) -> list[Op]:
        settings = inputs.settings
        engines = run_args(model=settings.model, scenarios=scenarios, config_version=settings.config_version)
        return [
            MakeTarget(
                inputs.container,
                f"generate the engines of {settings.model} {','.join(scenarios)} (once for every test mode)",
                "generate_engines",
                self._variables(RUN_ARGS=engines),
                scenarios=tuple(scenarios),
            )
        ]

    def run_ops(self, inputs: PlanInputs, group: RunGroup, test_mode: str, index: int) -> list[Op]:
        settings, quick = inputs.settings, inputs.params.Quick
        flag = self.quick_flag(inputs.version)
        args = run_args(
            model=settings.model,
            scenarios=group.scenarios,
            config_version=settings.config_version,
            test_mode=test_mode,
            quick_flag=flag if quick else None,
            fields=group.fields,
        )
        overrides = f" with {', '.join(f'{k}={v}' for k, v in group.fields)}" if group.fields else ""
        title = (
            f"run {settings.model} {','.join(group.scenarios)} {test_mode}"
            + (f" (quick: {flag})" if quick else "")
            + overrides
        )
        logs = self.results_dir(inputs.run_id, settings.model, test_mode, index)
        expected = tuple(
            Expected(settings.model, benchmark, scenario, test_mode)
            for scenario in group.scenarios
            for benchmark in settings.benchmarks
            if (scenario, benchmark) not in inputs.blocked
        )
        return [
            MakeTarget(
                inputs.container,
                title,
                "run_harness",
                self._variables(RUN_ARGS=args, LOG_DIR=logs),
                log_dir=logs,
                expected=expected,
                scenarios=tuple(group.scenarios),
                test_mode=test_mode,
            ),
            CollectResults(f"{inputs.nvidia_dir}/{logs}", test_mode, expected),
        ]
