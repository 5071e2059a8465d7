"""The pure MLPerf planner: (parameters, facts) -> the ordered ops a run executes, and notes.

Called by the action at ``plan`` (ops rendered as changes) and at ``apply`` (the same ops
executed by :mod:`workload.mlperf.interpreter`; after the system check, again with the results it
found no config for, see :class:`workload.mlperf.ops.IdentifySystem`). The round adapter chosen by
:func:`workload.mlperf.rounds.choose_round` supplies every round-specific op; this module only
orders them: scratch, image, container, system check (before any download), the free-space check
(:mod:`workload.mlperf.space_check`), setup, engines, runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from workload.mlperf.container import container_name
from workload.mlperf.harness import run_groups
from workload.mlperf.ops import ContainerRef, EnsureContainer, EnsureScratch, IdentifySystem, Op
from workload.mlperf.rounds import ROUNDS, Checkout, HarnessRound, PlanInputs, choose_round
from workload.mlperf.server_urls import ServerUrls
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, for_host, settings_of
from workload.mlperf.space_check import place_space_check
from workload.mlperf.tuning import PlannedValues, plan_values


@dataclass(frozen=True)
class MLPerfPlan:
    """The ops in order, the notes ``plan`` shows with them, and what they were planned from."""

    ops: tuple[Op, ...]
    notes: tuple[str, ...]
    round: HarnessRound
    inputs: PlanInputs

    def after_system_check(self) -> tuple[Op, ...]:
        """The ops after :class:`IdentifySystem` (what a re-plan with blocked results replaces)."""
        index = next((i for i, op in enumerate(self.ops) if isinstance(op, IdentifySystem)), -1)
        return self.ops[index + 1 :]


def plan_ops(
    params: MLPerfParameters,
    facts: MLPerfFacts,
    *,
    run_id: str = "<run id>",
    blocked: frozenset[tuple[str, str]] = frozenset(),
    blocked_targets: frozenset[tuple[str, str, str]] = frozenset(),
    system_name: str | None = None,
    server_urls: Mapping[tuple[str, str], ServerUrls] | None = None,
    rounds: Sequence[type[HarnessRound]] = ROUNDS,
) -> MLPerfPlan:
    """Every op of one MLPerf action, in the order ``apply`` runs them (pure); ``rounds``: the rounds to choose from
    (:func:`workload.mlperf.rounds.discover`'s)."""
    settings = settings_of(params)
    chosen = choose_round(Checkout(facts.version, facts.present), params.HarnessRound, rounds)
    harness = chosen.round
    scenario_note: str | None = None
    values: PlannedValues | None = None
    if params.HarnessRound or (facts.version is not None and chosen.note is None):
        # The round is known (named, or recognised from the checkout): a benchmark it lacks must not be set up.
        harness.check_benchmark(settings.model)
        harness.check_client(params.Client)
        settings, scenario_note = harness.fit_scenarios(settings, requested=bool(params.Scenarios))
        # Whether the round's configs tune this machine's GPU (the rule the system check applies at run time):
        # refused here, before any image or download, when only untuned values exist and they were not asked for.
        values = plan_values(
            harness.name,
            facts.system,
            settings.model,
            settings.scenarios,
            settings.accuracies,
            custom=params.RequireCustomSystemSupport,
            # v6.x generate a custom system's files with the round's own function: plan summarises what it writes.
            generate=getattr(harness, "system_files", None),
        )
        if values is not None and values.refusal is not None:
            raise values.refusal
    version = facts.version or harness.assumed_version
    notes = list(facts.notes)
    if facts.version is None:
        notes.append(f"harness version not readable yet (closed/NVIDIA/VERSION); assuming {version}")
    if chosen.note:
        notes.append(chosen.note)
    if scenario_note:
        notes.append(scenario_note)
    if values is not None and values.note:
        notes.append(values.note)
    user = facts.user.name if facts.user else "<user>"
    container = ContainerRef(
        for_host(params.DockerName, facts.host_name) or container_name(user, facts.machine),
        f"{facts.user.uid}:{facts.user.gid}" if facts.user else user,
    )
    inputs = PlanInputs(
        params=params,
        settings=settings,
        facts=facts,
        version=version,
        container=container,
        nvidia_dir=facts.nvidia_dir or "<repo>/closed/NVIDIA",
        scratch=facts.scratch_path or "<MLPERF_SCRATCH_PATH>",
        user_name=user,
        run_id=run_id,
        blocked=blocked,
        blocked_targets=blocked_targets,
        system_name=system_name,
        server_urls=dict(server_urls or {}),
    )
    ops: list[Op] = [EnsureScratch(inputs.scratch)]
    ops += harness.image_ops(inputs)
    ops.append(EnsureContainer(container, facts.container_status))
    # The folders the round's code needs before it imports at all (the system check imports it).
    ops += harness.tree_ops(inputs)
    # The system check runs before any download: an unknown system must not cost hours of setup.
    check = harness.system_check(inputs)
    if isinstance(check, IdentifySystem) and values is not None:
        check = replace(check, values=values.values)
    ops.append(check)
    setup, setup_notes = harness.setup_ops(inputs)
    # Before the first download: refuse a setup the scratch disk cannot hold (stages already done need nothing).
    setup, space_notes = place_space_check(
        setup, scratch=inputs.scratch, harness_round=harness.name, skip=params.SkipFreeSpaceCheck
    )
    ops += setup
    notes += setup_notes + space_notes
    # A scenario is run while one of its accuracy targets is (its result and the target not blocked).
    runnable = [s for s in settings.scenarios if any(inputs.runs(s, t) for t in settings.targets)]
    groups = run_groups(settings.model, runnable, settings.overrides)
    if runnable:
        ops += harness.engine_ops(inputs, runnable)
        for mode in settings.test_modes:
            for index, group in enumerate(groups, 1):
                ops += harness.run_ops(inputs, group, mode, index)
    if len(groups) > 1:
        notes.append(
            f"{len(groups)} runs per test mode: the scenarios' LoadGen overrides differ "
            "(RUN_ARGS reach every scenario of one run)"
        )
    ignored = settings.ignored_overrides()
    if ignored:
        notes.append(
            f"overrides not read by {settings.model} {','.join(settings.scenarios)}: "
            + ", ".join(o.name for o in ignored)
        )
    if facts.docker_problem:
        notes.append(facts.docker_problem)
    return MLPerfPlan(tuple(ops), tuple(notes), harness, inputs)
