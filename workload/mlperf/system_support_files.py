"""System support of rounds whose custom system is generated files: the harness's system check, then NVIDIA's
configs or a custom system.

Called by the interpreter for the ``IdentifySystem`` op of a round whose ``round.json`` says ``"system_support":
"generated files"`` (v6.0, v6.1: it names systems by ``SYSTEM_NAME`` and keeps one config set per system), through the
round's :class:`~workload.mlperf.rounds.base.GeneratedFiles` (:meth:`HarnessRound.generated_files`). The rule:

* the harness knows the machine and has every config the run needs: run NVIDIA's (its id as SYSTEM_NAME);
* it does not know it (or lacks configs) and ``RequireCustomSystemSupport`` is off: refuse before any download,
  naming the machine, the parameter and, for a GPU NVIDIA no longer tunes, the last round that does;
* with ``RequireCustomSystemSupport``: write the round's custom-system files (``WL_<system>``; values from
  gpuconfigs, untuned ones marked in the files and logged), never over a file without our mark, and run with
  ``SYSTEM_NAME=WL_<system>``; a scenario no published config covers is blocked, with why.

Either way, a run whose config files lack values for its accuracy target (no ``EXPORTS`` entry for
``AccuracyTarget(0.999)``, say: NVIDIA's file, the user's or the one we generated from gpuconfigs, which hold no such
values) is blocked as (scenario, benchmark, accuracy target), with why; the scenario's other targets run. Files that
are not ours are never changed. Without this NVIDIA's v6.1 harness stops at that run ("Config not found for current
system") and v6.0's runs it with an empty config (tests/fixtures/harness/rounds/v6.*/UPSTREAM.md).

Returns the system name for the rest of the plan and the blocked (scenario, benchmark) pairs with why; for v6.1
also the LLM servers each run waits for and sends to, read from the config files the harness uses for it (NVIDIA's,
the user's or ours: :mod:`workload.mlperf.server_urls`), logged with where they come from and, when they are not
``LLMServerPort`` upward, saying so.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from workload.commands import cmd
from workload.errors import StepError, WorkloadError
from workload.mlperf import config_sources
from workload.mlperf.container import HarnessContainer
from workload.mlperf.custom_system import SYSTEM_ID_PREFIX
from workload.mlperf.ops import IdentifySystem
from workload.mlperf.rounds.base import GeneratedFiles
from workload.mlperf.server_urls import ServerConfigError, ServerUrls, describe, exports_targets
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, Settings
from workload.mlperf.system_files import MARK, NotTuned, SystemFiles
from workload.mlperf.system_support import system_of, tail
from workload.mlperf.tuning import decide
from workload.steps import Step, StepContext


@dataclass(frozen=True)
class Decision:
    system_name: str
    blocked: dict[tuple[str, str], str]
    #: Where each (scenario, benchmark) that runs gets its config values (for the metrics).
    sources: config_sources.Sources = field(default_factory=dict)
    #: (scenario, benchmark, accuracy target ``0.99``/``0.999``) runs whose config files have no values for the
    #: target, with why (:func:`lacking_targets`).
    blocked_targets: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: The LLM servers of each (scenario, accuracy target ``0.99``/``0.999``) that runs, read from the config files
    #: the harness uses (rounds with ``served_urls``: v6.1).
    server_urls: dict[tuple[str, str], ServerUrls] = field(default_factory=dict)


def prepare(
    step: Step,
    ctx: StepContext,
    container: HarnessContainer,
    params: MLPerfParameters,
    facts: MLPerfFacts,
    settings: Settings,
    harness: GeneratedFiles,
    op: IdentifySystem,
    log: Callable[[str], None],
) -> Decision:
    """Run the system check and make the harness able to run this machine (see the module docstring); for a round
    whose servers come from its config files (v6.1), read them for every (scenario, accuracy target) that runs."""
    decision = _decide(step, ctx, container, params, facts, settings, harness, op, log)
    nvidia_dir = facts.nvidia_dir or ""
    texts: dict[str, str] = {}

    def read_text(path: str) -> str:
        # Each config file is read from the host once: the accuracy-target rule and the servers both look at it.
        if path not in texts:
            texts[path] = ctx.host.read_text(posixpath.join(nvidia_dir, path))
        return texts[path]

    def read(path: str) -> str | None:
        return read_text(path) if path in texts or ctx.host.exists(posixpath.join(nvidia_dir, path)) else None

    try:
        lacking = lacking_targets(read_text, harness, settings, decision.system_name, decision.blocked)
    except ServerConfigError as exc:
        raise StepError(step.label, str(exc), host=ctx.host.name) from None
    for (scenario, _benchmark, target), why in lacking.items():
        log(f"{settings.model} {scenario} (accuracy target {target}): {why}: not run")
    decision = replace(decision, blocked_targets=lacking)
    servers = _servers(step, ctx, params, facts, read, settings, harness, decision, log)
    return replace(decision, server_urls=servers) if servers is not None else decision


def _servers(
    step: Step,
    ctx: StepContext,
    params: MLPerfParameters,
    facts: MLPerfFacts,
    read: Callable[[str], str | None],
    settings: Settings,
    harness: GeneratedFiles,
    decision: Decision,
    log: Callable[[str], None],
) -> dict[tuple[str, str], ServerUrls] | None:
    """The servers of each runnable (scenario, accuracy target), logged with where they come from (None: the round's
    servers are not in its config files); StepError naming the file when a config's servers cannot be read.
    ``read``: a file's text relative to closed/NVIDIA (None: not there)."""

    def gpu_count() -> int:
        try:
            return system_of(params, ctx, facts).gpu_count
        except WorkloadError as exc:
            raise step.fail(
                f"the machine's GPUs could not be read to count the servers NVIDIA's harness starts: {exc.message}",
                ctx,
            ) from None

    accuracies = settings.targets
    out: dict[tuple[str, str], ServerUrls] = {}
    for scenario in settings.scenarios:
        if all((scenario, b) in decision.blocked for b in settings.benchmarks):
            continue
        for accuracy in accuracies:
            if (scenario, settings.benchmark_at(accuracy), accuracy) in decision.blocked_targets:
                continue  # not run: no server to read
            try:
                served = harness.served_urls(
                    read,
                    decision.system_name,
                    settings.model,
                    scenario,
                    accuracy,
                    gpu_count=gpu_count,
                    port=params.LLMServerPort,
                    client=params.Client,
                )
            except ServerConfigError as exc:
                raise StepError(step.label, str(exc), host=ctx.host.name) from None
            if served is None:  # the round's servers are not in its config files
                return None
            out[(scenario, accuracy)] = served
            what = f"{settings.model} {scenario}" + (f" (accuracy target {accuracy})" if len(accuracies) > 1 else "")
            log(f"{what}: trtllm-serve on {describe(served.urls)}: {served.source}")
            if served.note:
                log(f"{what}: {served.note}")
            if served.warning:
                log(f"{what}: WARNING: {served.warning}")
    return out


def lacking_targets(
    read: Callable[[str], str],
    harness: GeneratedFiles,
    settings: Settings,
    system_id: str,
    blocked: Mapping[tuple[str, str], str],
) -> dict[tuple[str, str, str], str]:
    """The rule: a (scenario, accuracy target) runs only when every config file the harness reads for the scenario
    has an ``EXPORTS`` entry for the target (what NVIDIA's harness looks up for ``--accuracy_target``). Returns each
    one that does not, keyed (scenario, benchmark, target), with why; scenarios ``blocked`` whole are not looked at.

    Pure: ``read`` gives the text of a config file that exists (path relative to closed/NVIDIA); ServerConfigError
    naming the file when one is not valid Python.
    """
    out: dict[tuple[str, str, str], str] = {}
    for scenario in settings.scenarios:
        if all((scenario, b) in blocked for b in settings.benchmarks):
            continue
        for path in harness.config_files(system_id, settings.model, scenario):
            text = read(path)
            has = exports_targets(text, path)
            for target in settings.targets:
                key = (scenario, settings.benchmark_at(target), target)
                if has is None or target in has or key in out:  # None: keys it cannot read, the harness decides
                    continue
                if text.startswith(MARK):
                    whose = (
                        f"workload generated it from gpuconfigs/{harness.name}, which has no {target} values of "
                        f"{settings.model} {scenario}"
                    )
                elif system_id.startswith(SYSTEM_ID_PREFIX):
                    whose = "the user's own file (without workload's mark), left as it is"
                else:
                    whose = "NVIDIA's file, left as it is"
                entry = f"no EXPORTS entry for AccuracyTarget({target})"
                out[key] = f"{path} has no values for accuracy target {target} ({entry}): {whose}"
    return out


def _decide(
    step: Step,
    ctx: StepContext,
    container: HarnessContainer,
    params: MLPerfParameters,
    facts: MLPerfFacts,
    settings: Settings,
    harness: GeneratedFiles,
    op: IdentifySystem,
    log: Callable[[str], None],
) -> Decision:
    """The system check's decision: NVIDIA's configs or a custom system's (see the module docstring)."""
    assert facts.nvidia_dir is not None
    log(f"$ docker exec {container.spec.name} {shlex.join(op.argv)}")
    code, output = container.exec(list(op.argv), on_line=None)
    if code != 0:
        raise step.fail(
            f"the harness's system check `{' '.join(op.argv)}` exited {code}; last lines:\n{tail(output, 10)}", ctx
        )
    answer = harness.system_answer(output)
    model = settings.model
    exists: Callable[[str], bool] = lambda path: ctx.host.exists(posixpath.join(facts.nvidia_dir or "", path))  # noqa: E731
    if answer is not None:
        missing = [p for s in settings.scenarios for p in harness.config_files(answer, model, s) if not exists(p)]
        if not missing:
            log(f"the harness knows this system: {answer}, with NVIDIA's configs for {model}")
            return Decision(answer, {}, config_sources.nvidia(settings.scenarios, settings.benchmarks, answer))
        if not params.RequireCustomSystemSupport:
            blocked = {}
            for scenario in settings.scenarios:
                lacking = [p for p in harness.config_files(answer, model, scenario) if not exists(p)]
                if lacking:
                    for benchmark in settings.benchmarks:
                        blocked[(scenario, benchmark)] = (
                            f"NVIDIA's {harness.name} harness knows this system ({answer}) but has no {lacking[0]}; "
                            "set RequireCustomSystemSupport=true to run it with generated configs"
                        )
            return Decision(
                answer, blocked, config_sources.nvidia(settings.scenarios, settings.benchmarks, answer, blocked=blocked)
            )
        log(f"the harness knows this system ({answer}) but lacks {', '.join(missing)}: running it as a custom system")
    try:
        system = system_of(params, ctx, facts)
    except WorkloadError as exc:
        raise step.fail(f"the machine's GPUs/CPU could not be read for a custom system: {exc.message}", ctx) from None
    if not params.RequireCustomSystemSupport:
        tuning = decide(harness.name, system.gpu_name, system.gpu_memory_mib)
        if tuning is not None and tuning.refuses:  # a GPU the round does not tune: the refusal plan shows too
            refusal = tuning.refusal()
            raise step.fail(refusal.message, ctx, hint=refusal.hint)
        raise StepError(
            step.label,
            f"NVIDIA's {harness.name} harness does not know this system ({system.describe()}); set "
            "RequireCustomSystemSupport=true to run it as a custom system (SYSTEM_NAME) with configs from gpuconfigs/",
            host=ctx.host.name,
        )
    try:
        files = harness.system_files(
            system, model, settings.scenarios, settings.accuracies, allow_untuned=True, port=params.LLMServerPort
        )
    except (NotTuned, ValueError) as exc:
        raise StepError(step.label, str(exc), host=ctx.host.name) from None
    for generated in files.files:
        target = posixpath.join(facts.nvidia_dir, generated.path)
        if ctx.host.exists(target) and not ctx.host.read_text(target).startswith(MARK):
            raise step.fail(f"{generated.path} exists and is not ours (no {MARK!r} line): not overwriting it", ctx)
        ctx.check(cmd("mkdir", "-p", posixpath.dirname(target), timeout=60))
        ctx.host.write_text(target, generated.text)
        log(f"wrote {generated.path}")
    for note in files.notes:
        log(note)
    skipped = dict(files.skipped)
    blocked = {}
    sources = _generated(files, model, settings.benchmarks, {})
    for scenario in settings.scenarios:
        paths = harness.config_files(files.system_id, model, scenario)
        if not all(exists(p) for p in paths):
            why = skipped.get(scenario, f"no {harness.name} values")
            log(f"{model} {scenario}: {why}: not run")
            for benchmark in settings.benchmarks:
                blocked[(scenario, benchmark)] = why
        elif scenario in skipped:
            # Nothing generated, yet the files are there (the user's own, or an earlier run's): the scenario runs
            # with them, and the log says so instead of "not run".
            ours = all(ctx.host.read_text(posixpath.join(facts.nvidia_dir, p)).startswith(MARK) for p in paths)
            whose = "written by an earlier workload run" if ours else "the user's own, without workload's mark"
            log(
                f"{model} {scenario}: {skipped[scenario]}; runs with the config files already there ({whose}): "
                + ", ".join(paths)
            )
            if not ours:
                for benchmark in settings.benchmarks:
                    sources[(scenario, benchmark)] = config_sources.user(files.system_id)
    return Decision(files.system_id, blocked, {k: v for k, v in sources.items() if k not in blocked})


def _generated(
    files: SystemFiles, model: str, benchmarks: tuple[str, ...], blocked: dict[tuple[str, str], str]
) -> config_sources.Sources:
    """Where the values of each (scenario, benchmark) the generated files cover come from (blocked ones left out)."""
    out: config_sources.Sources = {}
    for scenario, accuracies, provenance in files.provenance:
        covered = {config_sources.benchmark_of(model, a) for a in accuracies} if accuracies else set(benchmarks)
        for benchmark in benchmarks:
            if benchmark in covered and (scenario, benchmark) not in blocked:
                out[(scenario, benchmark)] = config_sources.generated(
                    files.system_id, provenance.sources, None if provenance.tuned else provenance.why
                )
    return out
