"""The step framework: every profile element (dependency or action) is a :class:`Step`.

A step's life on one host, driven by :mod:`workload.engine`:

1. ``plan(ctx)`` reads the facts it declares (:meth:`Step.facts`: read-only queries, re-read each
   time, see :mod:`workload.facts.fact`) from the host and returns a
   :class:`StepPlan`: the changes it would make, each with the exact commands, or a no-op with a
   reason. ``workload plan`` stops here; nothing on the host changes.
2. ``apply(ctx, plan)`` makes the changes (the default runs each planned command with ``check``).
3. ``verify(ctx)`` re-reads facts and raises :class:`~workload.errors.StepError` unless the step's
   promise holds. A step succeeds when verify passes, not when its commands exit 0.

Installers keep the decision pure: ``plan`` gathers facts, then calls a function of
(parameters, facts) that returns the plan, so planners are tested without any host.

Parameters are pydantic models whose field names are the profile's PascalCase names
(``LinuxDriverVersion``); they are matched case-insensitively, like VirtualClient.
"""

from __future__ import annotations

import abc
import difflib
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic_core import PydanticUseDefault

from workload.commands import Command, Secrets, mask_text
from workload.errors import Interrupted, OutputError, StepError
from workload.facts.fact import Fact, HostFacts, queries_of
from workload.hosts.base import CommandResult, Host, LineSink, raise_for_result
from workload.hoststate import HostState as HostState  # re-exported: steps and tests import it from here
from workload.safefile import append_text

#: When a step reads its facts (see :meth:`Step.facts`).
FactPhase = Literal["plan", "verify"]

StepKind = Literal["dependency", "action", "monitor"]


#: VirtualClient's generic component parameters (its reference notes, section 8.1) that this runner
#: accepts on every step and ignores, so VirtualClient profiles load unchanged. ``Scenario``,
#: ``MetricScenario``, ``Tags``, ``FailFast`` and ``SupportedPlatforms`` are declared on
#: :class:`StepParameters` instead, because the engine uses them.
GENERIC_PARAMETERS = frozenset(
    name.lower()
    for name in (
        "PackageName",
        "Platforms",
        "SupportedLinuxDistributions",
        "Role",
        "Roles",
        "MetricFilters",
        "LogFileName",
        "LogFolderName",
        "LogToFile",
        "ContentPathTemplate",
        "DeferUpload",
        "DeleteOnUpload",
        "ProfileIteration",
        "ProfileIterationStartTime",
    )
)
#: Prefixes of generic parameter families (VirtualClient's ``ProfilingEnabled``, ``ProfilingScenario``...).
GENERIC_PREFIXES = ("profiling",)


class StepParameters(BaseModel):
    """Base of every step's parameter model.

    A profile may give a step only the parameters its model declares, VirtualClient's generic
    ones (:data:`GENERIC_PARAMETERS`, kept as extras and ignored), and the extra names
    :meth:`accepts_extra` allows; anything else is reported at profile load with a "did you
    mean" (:func:`unknown_parameter_problem`). The VirtualClient common parameters used by the
    engine are declared here.
    """

    # Numbers given for text parameters ("LinuxDriverVersion": 550) are accepted as text, like VC.
    # allow_inf_nan=False: "inf", "nan", 1e999 are refused for every number (no tool can use them).
    model_config = ConfigDict(
        extra="allow", validate_default=True, frozen=True, coerce_numbers_to_str=True, allow_inf_nan=False
    )

    Scenario: str | None = None
    MetricScenario: str | None = None
    Tags: str | None = None
    FailFast: bool = False
    SupportedPlatforms: str | None = None

    #: Parameters of older VirtualClient releases of this step that this runner reads and ignores,
    #: each with why it changes nothing here: a profile that has one loads, with a warning naming
    #: the places (VirtualClient's older profiles keep working), instead of "unknown parameter".
    RETIRED: ClassVar[dict[str, str]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _blank_means_default(cls, value: object) -> object:
        # VirtualClient profiles say "not given" with "" (a "$.Parameters.X" that is empty), so
        # a blank text takes the parameter's default instead of failing its type.
        if isinstance(value, str) and not value.strip():
            raise PydanticUseDefault()
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _integers_in_range(cls, value: object) -> object:
        # Integers go to tools as 64-bit numbers (LoadGen's settings, timeouts); a bigger one
        # would overflow there, after the run started, instead of being refused here.
        if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
            raise ValueError("the number is out of range (more than 64 bits)")
        return value

    @classmethod
    def accepts_extra(cls, name: str) -> bool:
        """Whether ``name``, not a declared parameter, still means something to this step.

        Default: VirtualClient's generic parameters, and, for steps that declare
        ``LoadGenOverrides``, LoadGen overrides given as parameters named like the key
        (``bert.Server.target_qps``: model, scenario, key). Steps override this for their own
        families of names.
        """
        lower = name.lower()
        if lower in GENERIC_PARAMETERS or lower.startswith(GENERIC_PREFIXES):
            return True
        return "LoadGenOverrides" in cls.model_fields and name.count(".") == 2


def unknown_parameter_problem(params: type[StepParameters], name: str) -> str | None:
    """None when a step with this parameter model accepts ``name`` (any case); else the problem.

    The problem says "unknown parameter" with the closest declared name (difflib), if any.
    """
    declared = {field.lower(): field for field in params.model_fields}
    if name.lower() in declared or params.accepts_extra(name):
        return None
    close = difflib.get_close_matches(name.lower(), list(declared), n=1, cutoff=0.75)
    suggestion = f" (did you mean {declared[close[0]]!r}?)" if close else ""
    return f"unknown parameter{suggestion}"


@dataclass(frozen=True)
class Change:
    """One thing a step will change, in words, with the exact commands that change it."""

    summary: str
    commands: tuple[Command, ...] = ()
    #: What the change acts on (a disk's device path), for an apply that records it: set by the
    #: planner, so nobody looks for it in the commands' argv.
    target: str | None = None
    #: Set on the changes of a deferred tail: what they wait for and what its answer decides
    #: (``the system check: ...``). They are shown as planned now, and apply plans them again from
    #: that answer; ``plan`` prints ``decided after <this>:`` above the first of them.
    decided_after: str | None = None


class PlanPayload:
    """Base of a step's own typed plan, carried by :attr:`StepPlan.payload` (subclasses: frozen dataclasses).

    The engine never reads it: it hands the plan ``plan`` returned to ``apply`` untouched, so a step
    whose plan is richer than its printable changes (the MLPerf action's typed ops) executes exactly
    what was planned and shown, without gathering facts or planning again.
    """


@dataclass(frozen=True)
class StepPlan:
    """What a step would do on a host: changes, or nothing with the reason why."""

    changes: tuple[Change, ...] = ()
    noop_reason: str | None = None
    #: The host must reboot after apply for the change to take effect (e.g. a new kernel driver).
    reboot_required: bool = False
    #: Remarks shown with the plan (assumptions, previews of what depends on earlier steps).
    notes: tuple[str, ...] = ()
    #: The step's typed plan, from which ``changes`` were rendered (None: ``changes`` are the plan).
    #: Passed through to ``apply`` untouched; not compared (the changes say what differs).
    payload: PlanPayload | None = field(default=None, compare=False, repr=False)

    @classmethod
    def noop(cls, reason: str, *, notes: tuple[str, ...] = ()) -> StepPlan:
        return cls(noop_reason=reason, notes=notes)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def commands(self) -> tuple[Command, ...]:
        return tuple(c for change in self.changes for c in change.commands)


class CancelToken:
    """The run-wide stop signal: set once (Ctrl-C, SIGTERM, ``--fail-fast``), never cleared.

    The engine owns one per run and hands it to every step (:attr:`StepContext.cancel`). Killing
    the running command is not enough to stop an action that runs several benchmarks one after
    the other (each LoadGen scenario, each ``make run_harness``): the next one would start. So
    everything that starts new work checks the token first (:meth:`StepContext.stop_if_cancelled`,
    and :meth:`StepContext.run` for every command it starts). Event-compatible (``is_set``,
    ``wait``), plus :attr:`reason`.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def set(self, reason: str = "the run was stopped") -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


#: The timeout of a step's command that sets none (seconds): generous, since a command without
#: its own bound may be an install, but finite. Long-running commands set their own
#: (apt: workload.installers.apt.APT_TIMEOUT_S, downloads: DOWNLOAD_TIMEOUT_S, image builds: 4 h).
DEFAULT_COMMAND_TIMEOUT_S = 2 * 3600.0


@dataclass
class StepContext:
    """Everything a step may use on one host during one run."""

    host: Host
    #: This host's folder in the local run folder (results, copies of remote logs).
    host_dir: Path
    #: This step's log file (every command line and output line goes there).
    log_path: Path
    state: HostState
    #: Values exported by earlier steps for later ones (e.g. ``MLPERF_SCRATCH_PATH``).
    exports: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False
    #: Result folders (local paths) produced by an action; the engine parses them into metrics.
    results: list[Path] = field(default_factory=list)
    #: What a step keeps between its own plan, apply and verify on this host (one run of one step;
    #: a Step object is shared by every host of a fleet, so it keeps nothing itself).
    memo: dict[str, Any] = field(default_factory=dict)
    #: Console sink for progress lines (``[host]`` prefixed by the reporter); may be None.
    console: Callable[[str], None] | None = None
    #: Iteration number (1-based) when actions repeat with ``--iterations``.
    iteration: int = 1
    #: Extra values for steps from the CLI (e.g. ``allow_no_gpu`` in tests).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The run's stop signal (the engine's); a step checks it before it starts anything new.
    cancel: CancelToken = field(default_factory=CancelToken)
    #: Log files that could not be written (shared by the run; the CLI reports them).
    write_errors: list[OutputError] = field(default_factory=list)
    #: The run's secret values (the engine's): masked in every line this context logs.
    secrets: Secrets = field(default_factory=Secrets)

    def stop_if_cancelled(self, what: str) -> None:
        """Raise :class:`~workload.errors.Interrupted` when the run was stopped, before ``what`` starts."""
        if self.cancel.is_set():
            raise Interrupted(f"stopped before {what}: {self.cancel.reason}", host=self.host.name)

    def log(self, message: str) -> None:
        """A line for the step log and the console (URL passwords and known secrets masked)."""
        message = mask_text(message, self.secrets)
        self._write_log(message)
        if self.console is not None:
            self.console(message)

    def _write_log(self, line: str) -> None:
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            append_text(
                self.log_path, mask_text(line, self.secrets).rstrip("\n") + "\n"
            )  # never through a planted link
        except (OSError, ValueError) as exc:
            # A full disk must not stop the benchmark that is running (or hide its result):
            # the failure is recorded once and reported by the CLI (exit 8), naming the file.
            if not self.write_errors:
                error = exc if isinstance(exc, OSError) else OSError(str(exc))
                self.write_errors.append(OutputError.from_os_error("the step log", self.log_path, error))

    def line_sink(self, *, echo: bool = True) -> LineSink:
        """A sink for command output: every line to the step log, and to the console if ``echo``."""

        def sink(stream: str, line: str) -> None:
            self._write_log(line if stream == "stdout" else f"[stderr] {line}")
            if echo and self.console is not None:
                self.console(line)

        return sink

    def run(self, command: Command, *, echo: bool = False) -> CommandResult:
        """Run a command on the host, logging it and its output to the step log.

        Raises :class:`~workload.errors.Interrupted` instead when the run was stopped: nothing new
        starts after Ctrl-C.
        """
        self.stop_if_cancelled(command.display())
        if command.timeout is None:
            # Nothing a step runs may hang a run for ever (a stuck install once held a fleet 12 minutes
            # with no timeout firing); commands that may run long say so with their own timeout.
            command = command.with_options(timeout=DEFAULT_COMMAND_TIMEOUT_S)
        self._write_log(f"$ {command.display()}")
        result = self.host.run(command, on_line=self.line_sink(echo=echo))
        if result.timed_out:
            self._write_log(f"# killed at its timeout ({command.timeout:g}s) after {result.duration_s:.1f}s")
        else:
            self._write_log(f"# exit {result.returncode} after {result.duration_s:.1f}s")
        return result

    def check(self, command: Command, *, echo: bool = False, hint: str | None = None) -> CommandResult:
        """Like :meth:`run` but raises :class:`~workload.errors.CommandFailed` on failure.

        A command with a :attr:`~workload.commands.Command.retry` policy runs again as it says (a
        stop ends the pause at once, and the next run then raises Interrupted); a command without
        one runs once, whatever its argv.
        """
        policy = command.retry
        attempt = 1
        while True:
            result = self.run(command, echo=echo)
            if result.ok or policy is None or not policy.retries(attempt, result.stderr):
                break
            self.cancel.wait(policy.pause_s(attempt))
            attempt += 1
            self.log(f"retrying (attempt {attempt} of {policy.attempts})")
        raise_for_result(result, hint=hint, sudo_used=command.sudo or command.user is not None)
        return result


class Step(abc.ABC):
    """Base class of every profile element type (registered by name in :mod:`workload.registry`)."""

    #: The profile ``Type`` this class implements, e.g. ``"NvidiaCudaInstallation"``.
    type_name: ClassVar[str]
    #: The pydantic model of this step's parameters.
    Parameters: ClassVar[type[StepParameters]] = StepParameters
    #: Whether re-applying after a partial failure is safe (shown in ``plan``).
    idempotent: ClassVar[bool] = True

    def __init__(self, params: StepParameters, *, location: str, kind: StepKind) -> None:
        self.params = params
        self.location = location
        self.kind = kind

    @property
    def scenario(self) -> str:
        return self.params.Scenario or self.type_name

    @property
    def label(self) -> str:
        """How the step is named in messages: ``Dependencies[3] NvidiaCudaInstallation (InstallNvidiaCuda)``."""
        suffix = f" ({self.params.Scenario})" if self.params.Scenario else ""
        return f"{self.location} {self.type_name}{suffix}"

    def exports(self) -> tuple[str, ...]:
        """The export names this step sets in ``ctx.exports`` (declared, so later steps read a known name).

        Names of a package's values are built by :func:`package_export`; the engine persists
        every export on the host for later runs. Default: none.
        """
        return ()

    @abc.abstractmethod
    def plan(self, ctx: StepContext) -> StepPlan:
        """Read facts (read-only) and return what :meth:`apply` would do."""

    def needs_nvidia_gpu(self) -> bool:
        """Whether this step can succeed only on a host with an NVIDIA GPU (on its PCI bus; the driver
        may still be missing). ``workload plan`` names such steps as failing on a host without one,
        and its summary says each host's GPU situation. Default: no."""
        return False

    def preflight(self, ctx: StepContext) -> None:
        """Raise :class:`StepError` when this step cannot possibly succeed on this host.

        The engine calls it for every step of a run before the first step changes anything on
        the host (``plan`` shows the same), so a run that could never finish stops with a clear
        message instead of half-way, after earlier steps formatted disks or cloned repositories.
        Only read-only facts that no earlier step can change may decide it (OS release,
        architecture, hardware). The default checks nothing.
        """

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """The facts this step's ``phase`` reads ("plan": preflight, plan and re-plan; "verify").

        The one declaration of what the step reads (:mod:`workload.facts.fact`): the engine
        prefetches the facts' queries in one round trip before the phase (:meth:`fact_queries`),
        and the step reads them through :meth:`read_facts`, which refuses a fact not declared
        here. The default declares none.
        """
        return ()

    def fact_queries(self, ctx: StepContext, phase: FactPhase) -> Sequence[Command]:
        """The read-only commands the engine prefetches before ``phase``: derived from :meth:`facts`.

        The engine runs them in one round trip just before (:meth:`Host.prefetch`), so the reads
        that follow need no round trip of their own. Steps declare :meth:`facts`, not this.
        """
        return queries_of(self.facts(ctx, phase))

    def read_facts(self, ctx: StepContext, phase: FactPhase) -> HostFacts:
        """The facts declared for ``phase`` (:meth:`facts`), each read from the host at most once.

        Reading a fact the declaration does not name raises
        :class:`~workload.facts.fact.UndeclaredFact` (a programming error the tests catch).
        """
        return HostFacts(ctx.host, self.facts(ctx, phase), reader=f"{self.label} ({phase})")

    def apply(self, ctx: StepContext, plan: StepPlan) -> StepPlan | None:
        """Make the planned changes. The default runs every planned command with ``check``.

        A step that plans again while applying (an installer re-plans after refreshing apt's
        package lists) returns the plan whose changes it made; the engine decides the reboot from
        that plan. None means ``plan`` itself was applied.
        """
        for change in plan.changes:
            ctx.log(f"-> {change.summary}")
            for command in change.commands:
                ctx.check(command)
        return None

    def verify(self, ctx: StepContext) -> None:
        """Raise :class:`StepError` unless what this step promises now holds on the host."""

    def fail(self, problem: str, ctx: StepContext | None = None, *, hint: str | None = None) -> StepError:
        """Build a StepError naming this step (and the host when known)."""
        return StepError(self.label, problem, host=ctx.host.name if ctx else None, hint=hint)

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        """Cross-field checks at profile load; raise ``ValueError("Param: problem")`` on bad input."""


def package_export(package: str, value: str = "PATH") -> str:
    """The declared export name of a package's value: (``mlperf``, ``PATH``) -> ``MLPERF_PATH``.

    GitRepoClone publishes a clone's path (``PATH``) and commit (``COMMIT``) under these names; a
    later step reads ``ctx.exports[package_export(name)]`` without knowing which step published it.
    """
    return f"{re.sub(r'[^A-Za-z0-9]', '_', package).upper()}_{value}"


def split_list(value: str | None) -> list[str]:
    """Split a VirtualClient list parameter (``"a,b"`` or ``"a;b"``) into stripped items."""
    if not value:
        return []
    for sep in (";", ","):
        if sep in value:
            return [v.strip() for v in value.split(sep) if v.strip()]
    return [value.strip()]
