"""Strategies of NVIDIA's make-target harness (every round up to v6.0): the image from the checkout's recipe, the
harness's own system check, the setup stages as ``make <stage> BENCHMARKS=<b>`` and the one-off build.

Upstream (``closed/NVIDIA`` of inference_results_v4.1 ... v6.0): ``make build_docker`` / ``launch_docker``
(``docker/release/Dockerfile`` then ``docker/Dockerfile.user`` adding the user), ``Makefile.data``
(``download_data``, ``download_model``, ``preprocess_data`` with ``BENCHMARKS``), ``Makefile.build`` (``build``, the
round's ``build_target`` in ``round.json``; none from v6.0).

Each strategy is an abstract :class:`~workload.mlperf.rounds.base.HarnessRound` implementing one part of it; a round
composes the ones its harness has (``class V4_1Round(HarnessSystemCheck, ImageFromRecipe, MakeSetup, ...)``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from workload.mlperf.catalog import NVIDIA_SPELLING
from workload.mlperf.harness import SETUP_STAGES, make_argv
from workload.mlperf.ops import BuildHarness, BuildImage, IdentifySystem, Op, SetupStage, UseImage
from workload.mlperf.rounds.base import HarnessRound, PlanInputs, done_at
from workload.mlperf.settings import build_key, setup_key


class MakeTargets(HarnessRound):
    """``make`` argv with the round's variables (``make_variables`` of its ``round.json``)."""

    def _variables(self, **variables: str) -> tuple[tuple[str, str], ...]:
        return tuple({**variables, **self.extra_variables()}.items())


class ImageFromRecipe(HarnessRound):
    """The harness image: ``ContainerImage`` when given, else built from the checkout's recipe."""

    def image_tag(self, inputs: PlanInputs) -> str:
        """The tag of the image built when no ContainerImage is given."""
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


class HarnessSystemCheck(HarnessRound):
    """The ``IdentifySystem`` op running the round's own system detection in the container, from closed/NVIDIA."""

    #: The round's own system detection (prints the system's name or id).
    system_id_argv: ClassVar[tuple[str, ...]]
    #: Where a custom system is registered, as the op shows it (None: the op's default, v4.1's custom_list.py).
    registry: ClassVar[str | None] = None

    def system_check(self, inputs: PlanInputs) -> Op:
        settings = inputs.settings
        op = IdentifySystem(
            container=inputs.container,
            argv=self.system_id_argv,
            custom_support=inputs.params.RequireCustomSystemSupport,
            config_targets=tuple(self.custom_config_path(settings.model, s) for s in settings.scenarios)
            if inputs.params.RequireCustomSystemSupport
            else (),
        )
        return replace(op, registry=self.registry) if self.registry is not None else op


class MakeSetup(MakeTargets):
    """The model's setup stages (``make <stage> BENCHMARKS=<b>``, or the benchmark's own script), then the round's
    one-off build target once per harness commit (none: the stages only)."""

    #: The make target built once per harness commit (``build_target`` of ``round.json``).
    build_target: ClassVar[str | None]
    #: Whether ``BENCHMARKS`` names NVIDIA's folder (``llama3_1-8b``, v5.1 on) instead of the catalog's name.
    nvidia_benchmark_names: ClassVar[bool] = False
    #: (model, stage) -> the benchmark's own script run instead of ``make <stage>``.
    setup_scripts: ClassVar[dict[tuple[str, str], str]] = {}

    def setup_argv(self, model: str, stage: str) -> tuple[str, ...]:
        """One setup stage of ``model``: the benchmark's own script where it has one, else ``make <stage>
        BENCHMARKS=<b>``."""
        script = self.setup_scripts.get((model, stage))
        if script is not None:
            return ("bash", script)
        folder = NVIDIA_SPELLING.get(model, model) if self.nvidia_benchmark_names else model
        return tuple(make_argv(stage, dict(self._variables(BENCHMARKS=folder))))

    def setup_ops(self, inputs: PlanInputs) -> tuple[list[Op], list[str]]:
        facts, model = inputs.facts, inputs.settings.model
        ops: list[Op] = []
        notes: list[str] = []
        for stage in SETUP_STAGES:
            key = setup_key(inputs.scratch, model, stage)
            argv = self.setup_argv(model, stage)
            ops.append(SetupStage(inputs.container, model, stage, argv, key, done=done_at(facts.done.get(key))))
        if not any(op.shown for op in ops):
            notes.append(f"setup of {model} already done ({', '.join(SETUP_STAGES)})")
        if self.build_target is None:
            return ops, notes
        key = build_key(inputs.nvidia_dir, facts.commit)
        built = done_at(facts.done.get(key)) if facts.build_exists else None
        if built:
            notes.append(f"make {self.build_target} already done for commit {(facts.commit or '')[:12]}")
        build_argv = tuple(make_argv(self.build_target, dict(self.extra_variables())))
        ops.append(BuildHarness(inputs.container, facts.commit, build_argv, key, done=built))
        return ops, notes
