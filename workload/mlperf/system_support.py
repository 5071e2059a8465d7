"""System support: make NVIDIA's harness able to run this host (known system, a config per expected result).

Called by the interpreter for :class:`~workload.mlperf.ops.IdentifySystem`, after the container is
up and before any download. :meth:`SystemSupport.prepare` returns the (scenario, benchmark) pairs
that still cannot run, each with why; the interpreter plans the remaining ops again without them.
The files a custom system needs come from the round adapter (its own format); the values from
``gpuconfigs/`` (:mod:`workload.mlperf.gpuconfigs`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from workload.errors import ProfileError, StepError, WorkloadError
from workload.mlperf import config_sources, custom_system
from workload.mlperf.catalog import WorkloadSetting, workload_setting
from workload.mlperf.container import HarnessContainer
from workload.mlperf.gpuconfigs import ResolvedConfig, gpu_count_problem
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import IdentifySystem
from workload.mlperf.registrations import Registration, registrations
from workload.mlperf.rounds.base import HarnessRound
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, Settings
from workload.mlperf.system import HostSystem, parse_system_description
from workload.mlperf.tuning import untuned_config
from workload.steps import Step, StepContext

#: What NVIDIA's ``scripts/get_system_id.py`` prints (v4.1: ``print(MATCHED_SYSTEM)``): ``None`` for a
#: machine no KnownSystem matches, ``KnownSystem.<member>`` for one that does; exit 0 either way.
KNOWN_SYSTEM_LINE = re.compile(r"^KnownSystem\.([A-Za-z_][A-Za-z0-9_]*)$")


def system_of(params: MLPerfParameters, ctx: StepContext, facts: MLPerfFacts | None = None) -> HostSystem:
    """The host's GPUs/CPU: the action's facts' when they hold them (read by ``gather`` for this apply, not read
    again), else SystemDescription when given (tests), else read from the host."""
    if facts is not None and facts.system is not None:
        return facts.system
    if params.SystemDescription:
        return parse_system_description(params.SystemDescription)
    from workload.mlperf.system import read_host_system

    return read_host_system(ctx.host)


def system_text(params: MLPerfParameters, ctx: StepContext) -> str:
    """The host's GPUs/CPU in words, or why they could not be read (for messages)."""
    try:
        return system_of(params, ctx).describe()
    except WorkloadError as exc:
        return f"GPU/CPU could not be read: {exc.message}"


def tail(output: str, lines: int) -> str:
    """The last ``lines`` non-blank lines of ``output``, indented (for failure messages)."""
    kept = [line for line in output.splitlines() if line.strip()][-lines:]
    return "\n".join(f"    {line}" for line in kept)


@dataclass
class SystemSupport:
    """One action's system check and registrations (see the module docstring)."""

    step: Step
    ctx: StepContext
    container: HarnessContainer
    params: MLPerfParameters
    facts: MLPerfFacts
    settings: Settings
    version: HarnessVersion
    round: HarnessRound
    #: The SYSTEM_NAME the harness is to run with (rounds that name systems by id), decided by :meth:`prepare`.
    system_name: str | None = None
    #: Where each (scenario, benchmark)'s config values come from, decided by :meth:`prepare` (for the metrics).
    sources: config_sources.Sources = field(default_factory=dict)

    def fail(self, problem: str, ctx: StepContext, *, hint: str | None = None) -> StepError:
        return self.step.fail(problem, ctx, hint=hint)

    @property
    def p(self) -> MLPerfParameters:
        return self.params

    def _system(self, ctx: StepContext) -> HostSystem:
        return system_of(self.params, ctx, self.facts)

    def _system_text(self, ctx: StepContext) -> str:
        return system_text(self.params, ctx)

    def prepare(self, op: IdentifySystem) -> dict[tuple[str, str], str]:
        """Run ``op`` (the harness's system check) and register what it lacks; the blocked results, with why (rounds
        whose ``system_support`` is ``registered``; ``by id``:
        :func:`workload.mlperf.system_support_by_id.prepare_by_id` with this object)."""
        return self._prepare_system(self.ctx, self.container, self.facts, self.settings, self.version, op)

    def _harness_member(
        self, ctx: StepContext, container: HarnessContainer, facts: MLPerfFacts, op: IdentifySystem
    ) -> str | None:
        """The ``KnownSystem`` member the harness's own script detects: "" when it knows none, None without a script.

        NVIDIA's ``scripts/get_system_id.py`` prints ``None`` for an unknown machine and
        ``KnownSystem.<member>`` for a known one (our custom systems included), exit 0 either way;
        anything else (a crash, an import error, other text) is a step failure that shows its output.
        """
        assert facts.nvidia_dir
        if op.script is not None and not ctx.host.exists(posixpath.join(facts.nvidia_dir, op.script)):
            return None
        argv = list(op.argv)
        code, output = container.exec(argv, on_line=ctx.line_sink(echo=False))
        # The answer is the last line that is one (the harness's logging may surround it).
        answers = [
            line.strip()
            for line in output.splitlines()
            if line.strip() == "None" or KNOWN_SYSTEM_LINE.match(line.strip())
        ]
        last = answers[-1] if answers else ""
        if code == 0 and last == "None":
            ctx.log("harness system: None (no KnownSystem matches this machine)")
            return ""
        match = KNOWN_SYSTEM_LINE.match(last)
        if code != 0 or match is None:
            raise self.fail(
                f"the harness's system detection failed: `{' '.join(argv)}` exited {code} "
                f"without printing None or KnownSystem.<name>; its output:\n{tail(output, 20) or '    (none)'}",
                ctx,
                hint="fix the harness or the container (the output above says what broke), then run again",
            )
        ctx.log(f"harness system: {last}")
        return match.group(1)

    def _registered(
        self,
        ctx: StepContext,
        nvidia_dir: str,
        model: str,
        scenario: str,
        names: tuple[str, ...] = ("__init__.py", "custom.py"),
    ) -> set[Registration]:
        """What the harness registers for (model, scenario), from its config files ``names`` (ours excluded)."""
        sources = []
        for name in names:
            path = posixpath.join(nvidia_dir, "configs", model, scenario, name)
            if not ctx.host.exists(path):
                continue
            text = ctx.host.read_text(path)
            if name == "custom.py" and custom_system.is_ours(text):
                continue  # ours is regenerated below
            sources.append((f"configs/{model}/{scenario}/{name}", text))
        try:
            return registrations(sources)
        except ValueError as exc:
            raise self.fail(f"cannot read the harness's configs: {exc}", ctx) from None

    def _prepare_system(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
        op: IdentifySystem,
    ) -> dict[tuple[str, str], str]:
        """Make the harness able to run this host: know the system and have a config for every expected result.

        Returns why each (scenario, benchmark) that still cannot run cannot (the other results run).
        An unknown system without RequireCustomSystemSupport is an error naming the GPU/CPU and the
        parameter. With it, an unknown system is registered as a custom system, and a known one
        gets the configs NVIDIA has none for (NVIDIA's files are never changed).
        """
        assert facts.nvidia_dir
        detected = self._harness_member(ctx, container, facts, op)
        if not op.custom_support:
            if detected == "":
                raise self.fail(
                    f"the harness does not recognise this system ({self._system_text(ctx)}) and would run nothing",
                    ctx,
                    hint="set the parameter RequireCustomSystemSupport=true to register it as a custom system",
                )
            member = detected
            if not member:
                return {}  # nothing to check against; the results check explains what is missing

            def unregistered(scenario: str, setting: str) -> str:
                return (
                    f"NVIDIA's harness has no {settings.model} {scenario} config for {member} ({setting}); set the "
                    "parameter RequireCustomSystemSupport=true to add one from gpuconfigs/"
                )

            registered = {s: self._registered(ctx, facts.nvidia_dir, settings.model, s) for s in settings.scenarios}
            blocked = self._missing_registrations(settings, member, registered, unregistered)
            user = self._user_pairs(ctx, facts.nvidia_dir, member, settings, registered)
            self.sources = config_sources.nvidia(
                settings.scenarios, settings.benchmarks, member, blocked=blocked, user=user
            )
            return blocked
        return self._add_configs(ctx, container, facts, settings, version, detected)

    def _user_pairs(
        self,
        ctx: StepContext,
        nvidia_dir: str,
        member: str,
        settings: Settings,
        registered: dict[str, set[Registration]],
    ) -> set[tuple[str, str]]:
        """The (scenario, benchmark) pairs only a user's ``custom.py`` registers (none in NVIDIA's ``__init__.py``)."""
        out: set[tuple[str, str]] = set()
        for scenario in settings.scenarios:
            nvidias = self._registered(ctx, nvidia_dir, settings.model, scenario, names=("__init__.py",))
            for benchmark in settings.benchmarks:
                needed = [
                    Registration(member, workload_setting(settings.model, cv)) for cv in settings.versions_of(benchmark)
                ]
                if any(r in registered[scenario] for r in needed) and not any(r in nvidias for r in needed):
                    out.add((scenario, benchmark))
        return out

    @staticmethod
    def _missing_registrations(
        settings: Settings,
        member: str,
        registered: dict[str, set[Registration]],
        why: Callable[[str, str], str],
    ) -> dict[tuple[str, str], str]:
        """(scenario, benchmark) -> ``why(scenario, setting)`` for each result no registered config can produce."""
        blocked: dict[tuple[str, str], str] = {}
        for scenario in settings.scenarios:
            for benchmark in settings.benchmarks:
                needed = [workload_setting(settings.model, cv) for cv in settings.versions_of(benchmark)]
                if not any(Registration(member, s) in registered[scenario] for s in needed):
                    shown = needed[0]
                    blocked[(scenario, benchmark)] = why(scenario, f"{shown.harness}, {shown.accuracy}, {shown.power}")
        return blocked

    def _add_configs(
        self,
        ctx: StepContext,
        container: HarnessContainer,
        facts: MLPerfFacts,
        settings: Settings,
        version: HarnessVersion,
        detected: str | None,
    ) -> dict[tuple[str, str], str]:
        """RequireCustomSystemSupport: register a custom system (unknown host) and the configs the harness lacks.

        A known system (NVIDIA's entry matched; ours from an earlier run does not count: it is
        regenerated) needs no host facts unless a config is missing.
        """
        assert facts.nvidia_dir
        from workload.mlperf.gpuconfigs import load_table

        model = settings.model
        registered: dict[str, set[Registration]] = {s: set() for s in settings.scenarios}
        member: str | None = None
        if detected and not detected.startswith(custom_system.SYSTEM_ID_PREFIX):
            # NVIDIA's own entry matches (Azure ND96asr_v4 is A100_SXM4_40GBx8): add only what it lacks.
            member = detected
            ctx.log(f"the harness knows this system as KnownSystem.{member}")
            registered = {s: self._registered(ctx, facts.nvidia_dir, model, s) for s in settings.scenarios}
            lacking = self._missing_registrations(settings, member, registered, lambda scenario, setting: setting)
            user = self._user_pairs(ctx, facts.nvidia_dir, member, settings, registered)
            self.sources = config_sources.nvidia(
                settings.scenarios, settings.benchmarks, member, blocked=lacking, user=user
            )
            if not lacking:
                self._install(ctx, facts.nvidia_dir, None, [], settings, f"configs for KnownSystem.{member}")
                return {}
        try:
            system = self._system(ctx)
        except ValueError as exc:
            raise self.fail(f"SystemDescription: {exc}", ctx) from None
        try:
            table = load_table(harness_round=self.round.name)
            sku = table.sku_for_gpu(system.gpu_name)
        except ProfileError as exc:
            if member is None:
                raise self.fail(exc.message, ctx, hint=exc.hint) from None
            return {
                key: f"NVIDIA's harness has no {model} {key[0]} config for {member} ({setting}), and gpuconfigs/ "
                f"has no values to add one: {exc.problem}"
                for key, setting in lacking.items()
            }
        if member is None:
            member = custom_system.system_id(system, sku)
            class_base, block = custom_system.class_name(member), self.round.custom_list_block(system, sku)
            what = f"custom system {member} ({system.describe()})"
        else:
            class_base, block, what = f"WL_{member}", None, f"configs for KnownSystem.{member}"
        blocked: dict[tuple[str, str], str] = {}
        files: list[custom_system.GeneratedFile] = []
        for scenario in settings.scenarios:
            classes: list[tuple[WorkloadSetting, ResolvedConfig]] = []
            for benchmark in settings.benchmarks:
                available, problems = False, []
                wanted = [workload_setting(model, cv) for cv in settings.versions_of(benchmark)]
                for cv in settings.versions_of(benchmark):
                    setting = workload_setting(model, cv)
                    if Registration(member, setting) in registered[scenario] or any(s == setting for s, _ in classes):
                        available = True
                        continue
                    high = setting.accuracy == "k_99_9"
                    problem = table.entry_problem(system.gpu_name, model, scenario, high_accuracy=high)
                    resolved = None
                    if problem is not None:
                        # the one rule (issue 27 item 7): the nearest same-architecture GPU's config, untuned
                        gpus = (system.gpu_name, system.gpu_memory_mib, system.gpu_count)
                        resolved = untuned_config(self.round.name, table, gpus, model, scenario, setting.accuracy)
                        if resolved is None:
                            problems.append(problem)
                            continue
                    resolved = resolved or table.resolve(
                        system.gpu_name, system.gpu_count, model, scenario, high_accuracy=high
                    )
                    unrunnable = gpu_count_problem(resolved)
                    if unrunnable is not None:
                        problems.append(f"not generated: {unrunnable}")
                        continue
                    classes.append((setting, resolved))
                    available = True
                if not available:
                    blocked[(scenario, benchmark)] = problems[0]
                elif (scenario, benchmark) not in self.sources:  # not NVIDIA's (or the user's): ours, this GPU's values
                    origins = [c.source() for s, c in classes if s in wanted]
                    untuned = "; ".join(dict.fromkeys(c.untuned for s, c in classes if s in wanted and c.untuned))
                    self.sources[(scenario, benchmark)] = config_sources.generated(member, origins, untuned or None)
            if classes:
                files.append(self.round.custom_config(model, scenario, member, class_base, classes, version))
        self._install(ctx, facts.nvidia_dir, block, files, settings, what)
        for (scenario, benchmark), why in blocked.items():
            ctx.log(f"cannot run {benchmark} {scenario}: {why}")
        return blocked

    def _install(
        self,
        ctx: StepContext,
        nvidia_dir: str,
        block: str | None,
        files: list[custom_system.GeneratedFile],
        settings: Settings,
        what: str,
    ) -> None:
        """Write the generated files; remove our custom.py of this run's other scenarios (they need none now)."""
        written_paths = {f.path for f in files}
        remove = [
            path
            for path in (self.round.custom_config_path(settings.model, s) for s in settings.scenarios)
            if path not in written_paths
        ]
        try:
            written = custom_system.install(
                ctx.host,
                nvidia_dir,
                block,
                files,
                remove,
                list_path=self.round.custom_list_path,
                merge=self.round.merge_custom_list,
                make_dirs=self.round.creates_config_dirs,
            )
        except custom_system.CustomSystemError as exc:
            raise self.fail(str(exc), ctx) from None
        ctx.log(f"registered {what}: {', '.join(written) or 'nothing was missing'}")
