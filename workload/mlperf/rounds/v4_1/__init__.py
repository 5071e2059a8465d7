"""NVIDIA's v4.0 / v4.1 harness (``closed/NVIDIA`` of mlcommons/inference_results_v4.0 and v4.1).

What this round does, and the upstream file each value comes from (see
``tests/fixtures/harness/UPSTREAM.md`` for the stand-in harness that reproduces them):
* image: ``docker/release/Dockerfile`` (named build contexts ``docker/<name>``) then
  ``docker/Dockerfile.user`` adding the user, as ``make build_docker`` / ``launch_docker`` do;
* system check: ``python3 -m scripts.get_system_id`` (prints ``None`` or ``KnownSystem.<member>``);
* setup: ``make download_data|download_model|preprocess_data BENCHMARKS=<model>`` (Makefile.data),
  then ``make build`` once per commit;
* runs: ``make generate_engines`` once, ``make run_harness`` per test mode with ``RUN_ARGS`` and a
  per-run ``LOG_DIR`` (Makefile); quick runs ``--test_run`` (v4.1) / ``--fast`` (v4.0);
* custom systems: a marked block in ``code/common/systems/custom_list.py`` and
  ``configs/<model>/<Scenario>/custom.py`` (:mod:`workload.mlperf.custom_system`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from workload.mlperf import custom_system
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.gpuconfigs import ResolvedConfig, SkuTable
from workload.mlperf.harness import SETUP_STAGES, HarnessVersion, RunGroup, make_argv, run_args
from workload.mlperf.ops import (
    BuildHarness,
    BuildImage,
    CollectResults,
    IdentifySystem,
    MakeTarget,
    Op,
    SetupStage,
    UseImage,
)
from workload.mlperf.results import Expected
from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.base import HarnessRound, PlanInputs, done_at
from workload.mlperf.rounds.common.results import LogDirResults
from workload.mlperf.settings import build_key, setup_key
from workload.mlperf.system import HostSystem

#: The harness's own system detection (``scripts/get_system_id.py``, run as a module from closed/NVIDIA).
SYSTEM_ID_ARGV: tuple[str, ...] = ("python3", "-m", "scripts.get_system_id")


class V4_1Round(LogDirResults, HarnessRound):
    """v4.0 and v4.1: the layout this runner was first written for."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)

    #: The round's own system detection, run in the container from closed/NVIDIA (prints the system's name or id).
    system_id_argv: ClassVar[tuple[str, ...]] = SYSTEM_ID_ARGV

    def _variables(self, **variables: str) -> tuple[tuple[str, str], ...]:
        return tuple({**variables, **self.extra_variables()}.items())

    def image_tag(self, inputs: PlanInputs) -> str:
        """The tag of the image this round builds when no ContainerImage is given."""
        return f"mlperf-inference:{inputs.user_name}-{inputs.facts.machine}"

    def image_ops(self, inputs: PlanInputs) -> list[Op]:
        params = inputs.params
        if params.ContainerImage:
            return [UseImage(params.ContainerImage)]
        return [
            BuildImage(
                tag=self.image_tag(inputs),
                nvidia_dir=inputs.nvidia_dir,
                base_image=params.BaseImage,
                build=params.BuildImage,
            )
        ]

    def system_check(self, inputs: PlanInputs) -> Op:
        settings = inputs.settings
        return IdentifySystem(
            container=inputs.container,
            argv=self.system_id_argv,
            custom_support=inputs.params.RequireCustomSystemSupport,
            config_targets=tuple(self.custom_config_path(settings.model, s) for s in settings.scenarios)
            if inputs.params.RequireCustomSystemSupport
            else (),
        )

    def setup_ops(self, inputs: PlanInputs) -> tuple[list[Op], list[str]]:
        facts, model = inputs.facts, inputs.settings.model
        ops: list[Op] = []
        notes: list[str] = []
        for stage in SETUP_STAGES:
            key = setup_key(inputs.scratch, model, stage)
            argv = make_argv(stage, dict(self._variables(BENCHMARKS=model)))
            ops.append(SetupStage(inputs.container, model, stage, tuple(argv), key, done=done_at(facts.done.get(key))))
        if not any(op.shown for op in ops):
            notes.append(f"setup of {model} already done ({', '.join(SETUP_STAGES)})")
        if self.build_target is None:
            return ops, notes
        key = build_key(inputs.nvidia_dir, facts.commit)
        built = done_at(facts.done.get(key)) if facts.build_exists else None
        if built:
            notes.append(f"make {self.build_target} already done for commit {(facts.commit or '')[:12]}")
        argv = make_argv(self.build_target, dict(self.extra_variables()))
        ops.append(BuildHarness(inputs.container, facts.commit, tuple(argv), key, done=built))
        return ops, notes

    def engine_ops(self, inputs: PlanInputs, scenarios: Sequence[str]) -> list[Op]:
        settings = inputs.settings
        engines = run_args(
            model=settings.model, scenarios=scenarios, config_version=settings.config_version, version=inputs.version
        )
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
        args = run_args(
            model=settings.model,
            scenarios=group.scenarios,
            config_version=settings.config_version,
            version=inputs.version,
            test_mode=test_mode,
            quick=quick,
            fields=group.fields,
        )
        overrides = f" with {', '.join(f'{k}={v}' for k, v in group.fields)}" if group.fields else ""
        title = (
            f"run {settings.model} {','.join(group.scenarios)} {test_mode}"
            + (f" (quick: {inputs.version.quick_flag})" if quick else "")
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

    def custom_config_path(self, model: str, scenario: str) -> str:
        return custom_system.custom_config_path(model, scenario)

    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        return custom_system.custom_list_block(system, sku)

    def custom_config(
        self,
        model: str,
        scenario: str,
        member: str,
        class_base: str,
        classes: Sequence[tuple[WorkloadSetting, ResolvedConfig]],
        version: HarnessVersion,
    ) -> custom_system.GeneratedFile:
        return custom_system.custom_config(model, scenario, member, class_base, classes, version)


#: The adapter :func:`workload.mlperf.rounds.discover` finds in this folder.
ADAPTER = V4_1Round
