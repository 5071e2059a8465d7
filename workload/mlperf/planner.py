"""The pure MLPerf planner: (parameters, facts) -> the ordered ops a run executes, and notes.

Called once, by the action's ``plan``; ``apply`` executes the plan it is handed
(:mod:`workload.mlperf.interpreter`). What only NVIDIA's system check can decide (the system id,
the runs it finds no config for, the LLM servers' ports) is an explicit :class:`Deferred` tail:
the ops after :class:`~workload.mlperf.ops.IdentifySystem` as planned now (what ``plan`` shows,
labelled ``decided after the system check``), and the function that plans them from the check's
:class:`SystemAnswer`, which apply calls with the answer it got. The round adapter chosen by
:func:`workload.mlperf.rounds.choose_round` supplies every round-specific op; this module only
orders them: scratch, image, container, system check (before any download), the free-space check
(:mod:`workload.mlperf.space_check`), setup, engines, runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from workload.mlperf import config_sources
from workload.mlperf.container import container_name
from workload.mlperf.harness import run_groups
from workload.mlperf.ops import ContainerRef, EnsureContainer, EnsureScratch, IdentifySystem, Op
from workload.mlperf.rounds import ROUNDS, Checkout, Chosen, HarnessRound, PlanInputs, choose_round
from workload.mlperf.server_urls import ServerUrls
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, for_host, settings_of
from workload.mlperf.space_check import place_space_check
from workload.mlperf.tuning import PlannedValues, plan_values
from workload.steps import PlanPayload

#: What ``plan`` says above the deferred tail (after ``decided after ``): what waits for the check's answer.
DEFERRED_LABEL = (
    "the system check (apply plans what follows from its answer: the system id, which runs have a config, "
    "the LLM servers' ports; shown here as planned before it)"
)


@dataclass(frozen=True)
class SystemAnswer:
    """What the system check decided: everything the deferred tail is planned from (see :class:`Deferred`)."""

    #: The SYSTEM_NAME the harness is told to use (rounds that name systems by id).
    system_name: str | None = None
    #: (scenario, benchmark) results without a config for this system, with why.
    blocked: Mapping[tuple[str, str], str] = field(default_factory=dict)
    #: (scenario, benchmark, accuracy target) runs whose config files have no values for the target (v6.x).
    blocked_targets: Mapping[tuple[str, str, str], str] = field(default_factory=dict)
    #: The LLM servers of each (scenario, accuracy target) the harness's configs start (v6.1).
    server_urls: Mapping[tuple[str, str], ServerUrls] = field(default_factory=dict)
    #: Where each (scenario, benchmark)'s config values come from (kept with each result; not planned from).
    sources: config_sources.Sources = field(default_factory=dict)

    @property
    def changes_plan(self) -> bool:
        """Whether the tail planned from this answer differs from the one ``plan`` showed."""
        return bool(self.blocked or self.blocked_targets or self.system_name or self.server_urls)


@dataclass(frozen=True)
class Deferred:
    """The ops that can only be known after ``after`` (the system check) answers.

    ``preview`` is the tail as planned before the answer (what ``plan`` shows, labelled with
    ``label``); :meth:`plan` gives the tail to execute for an answer.
    """

    after: Op
    preview: tuple[Op, ...]
    replan: Callable[[SystemAnswer], tuple[Op, ...]] = field(compare=False, repr=False)
    label: str = DEFERRED_LABEL

    def plan(self, answer: SystemAnswer) -> tuple[Op, ...]:
        """The ops to run after the check: the preview when the answer changes nothing, else planned from it."""
        return self.replan(answer) if answer.changes_plan else self.preview


@dataclass(frozen=True)
class MLPerfPlan(PlanPayload):
    """The ops before the system check, the check and the deferred tail after it, the notes ``plan`` shows, and
    what they were planned from."""

    #: The ops before the system check (``tail.after``).
    head: tuple[Op, ...]
    tail: Deferred
    notes: tuple[str, ...]
    round: HarnessRound
    inputs: PlanInputs

    @property
    def ops(self) -> tuple[Op, ...]:
        """Every op as planned now: the head, the system check, the tail's preview."""
        return (*self.head, self.tail.after, *self.tail.preview)

    def after_system_check(self) -> tuple[Op, ...]:
        """The ops after :class:`IdentifySystem` as planned now (what an answer may replace)."""
        return self.tail.preview


def round_of(params: MLPerfParameters, facts: MLPerfFacts, rounds: Sequence[type[HarnessRound]] = ROUNDS) -> Chosen:
    """The round adapter this action plans with: the one named by ``HarnessRound``, else the checkout's (of
    ``rounds``: :func:`workload.mlperf.rounds.discover`'s)."""
    return choose_round(Checkout(facts.version, facts.present), params.HarnessRound, rounds)


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
    chosen = round_of(params, facts, rounds)
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
    tail, tail_notes = _tail(harness, inputs, params.SkipFreeSpaceCheck)
    notes += tail_notes
    ignored = settings.ignored_overrides()
    if ignored:
        notes.append(
            f"overrides not read by {settings.model} {','.join(settings.scenarios)}: "
            + ", ".join(o.name for o in ignored)
        )
    if facts.docker_problem:
        notes.append(facts.docker_problem)
    deferred = Deferred(check, tuple(tail), partial(_replan, harness, inputs, params.SkipFreeSpaceCheck))
    return MLPerfPlan(tuple(ops), deferred, tuple(notes), harness, inputs)


def _tail(harness: HarnessRound, inputs: PlanInputs, skip_space_check: bool) -> tuple[list[Op], list[str]]:
    """(ops, notes) after the system check: the free-space check, setup, engines, runs (pure)."""
    settings = inputs.settings
    setup, setup_notes = harness.setup_ops(inputs)
    # Before the first download: refuse a setup the scratch disk cannot hold (stages already done need nothing).
    ops, space_notes = place_space_check(
        setup, scratch=inputs.scratch, harness_round=harness.name, skip=skip_space_check
    )
    notes = setup_notes + space_notes
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
    return ops, notes


def _replan(harness: HarnessRound, inputs: PlanInputs, skip_space_check: bool, answer: SystemAnswer) -> tuple[Op, ...]:
    """The tail planned from the system check's answer (:attr:`Deferred.replan`): what cannot run leaves it."""
    known = replace(
        inputs,
        blocked=frozenset(answer.blocked),
        blocked_targets=frozenset(answer.blocked_targets),
        system_name=answer.system_name,
        server_urls=dict(answer.server_urls),
    )
    return tuple(_tail(harness, known, skip_space_check)[0])
