"""The MLPerf run loop: executes the plan it is handed, op by op, one handler per op type.

Called by ``MLPerfExecutor.apply`` with the :class:`~workload.mlperf.planner.MLPerfPlan` its ``plan``
made (and ``workload plan`` showed): nothing is gathered or planned again. The ops up to the system
check run as planned; the check's handler returns a :class:`~workload.mlperf.planner.SystemAnswer`,
and the plan's :class:`~workload.mlperf.planner.Deferred` tail gives the ops after it for that
answer (the previewed ones when the answer changes nothing; otherwise planned without what cannot
run and, v5.1+, with the SYSTEM_NAME and LLM servers the check decided).

State carried between ops, and only that: the image the image op chose (for the container op), the
container, the system check's answer, each run's output under its LOG_DIR (what the
:class:`~workload.mlperf.ops.CollectResults` of that LOG_DIR explains missing results with), the
engines' output, and the problems found.

Failures: a failed setup stage, build or engine generation stops the step at once; a failed run or
a missing result is collected, every run still happens, and one :class:`StepError` names them all
at the end (results found are kept either way).
"""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from workload.commands import cmd
from workload.errors import BenchmarkFailed, StepError
from workload.mlperf import config_sources, image, llm_server, results, system_support_files
from workload.mlperf.container import ContainerSpec, HarnessContainer
from workload.mlperf.docker_errors import docker_boundary, docker_failures
from workload.mlperf.endpoint_ops import RunEndpointsClient
from workload.mlperf.ops import (
    BuildHarness,
    BuildImage,
    CollectResults,
    EnsureContainer,
    EnsureScratch,
    IdentifySystem,
    MakeTarget,
    Op,
    PrepareTree,
    SetupStage,
    UseImage,
)
from workload.mlperf.planner import MLPerfPlan, SystemAnswer
from workload.mlperf.server_ops import StartServer, StopServer
from workload.mlperf.settings import STATE_KEY
from workload.mlperf.space_check import HINT, CheckFreeSpace, parse_df, refusal, shortfalls
from workload.mlperf.system_support import SystemSupport, system_text, tail
from workload.mlperf.system_support_by_id import prepare_by_id
from workload.steps import Step, StepContext


def _doing(op: Op) -> str:
    """What an op does, for error messages (its plan summary, lower-cased first letter)."""
    summary = op.summary()
    return summary[:1].lower() + summary[1:]


@dataclass(frozen=True)
class RunOutput:
    """What one harness run (a :class:`MakeTarget` with a LOG_DIR) left: its exit code and output, and whether the
    round refused that output (its results are then not kept)."""

    code: int
    output: str
    refused: bool = False


@dataclass
class Interpreter:
    """One apply of one MLPerf action (see the module docstring)."""

    step: Step
    ctx: StepContext
    #: The plan ``plan`` made and showed: executed as given.
    plan: MLPerfPlan
    #: Opens the docker client (first needed by the image op, after the scratch folders exist).
    connect: Callable[[], Any]
    #: The container for an image (the action's ``launch_docker`` equivalent).
    container_spec: Callable[[str], ContainerSpec]
    #: The image the image op chose or built, for the container op.
    image: str | None = None
    container: HarnessContainer | None = None
    #: What the system check decided (None before it ran).
    answer: SystemAnswer | None = None
    problems: list[str] = field(default_factory=list)
    #: Each run's output by its LOG_DIR (relative to closed/NVIDIA): the CollectResults of that LOG_DIR reads it.
    outputs: dict[str, RunOutput] = field(default_factory=dict)
    #: The engines' output (a target without a LOG_DIR): explains every missing result too.
    engine_output: str = ""
    client: Any = field(default=None, init=False)
    _stack: ExitStack = field(default_factory=ExitStack, init=False)

    def run(self) -> None:
        """Execute every op in order; raise StepError naming every problem at the end."""
        handlers: dict[type[Op], Callable[[Any], None]] = {
            EnsureScratch: self._scratch,
            UseImage: self._use_image,
            BuildImage: self._build_image,
            EnsureContainer: self._container,
            IdentifySystem: self._identify,
            CheckFreeSpace: self._check_space,
            SetupStage: self._setup_stage,
            BuildHarness: self._build_harness,
            PrepareTree: self._prepare_tree,
            MakeTarget: self._make_target,
            CollectResults: self._collect,
            StartServer: self._start_server,
            RunEndpointsClient: self._endpoints_client,
            StopServer: self._stop_server,
        }
        with self._stack:
            self._stack.callback(self._close)
            for op in self.plan.head:
                self._execute(handlers, op)
            self._execute(handlers, self.plan.tail.after)
            if self.answer is None:
                raise self.step.fail(f"internal: {type(self.plan.tail.after).__name__} gave no answer", self.ctx)
            # The deferred tail: the ops after the system check, for the answer it gave.
            for op in self.plan.tail.plan(self.answer):
                self._execute(handlers, op)
        if self.problems:
            kept = f" ({len(self.ctx.results)} result folder(s) kept)" if self.ctx.results else ""
            raise StepError(self.step.label, "; ".join(self.problems) + kept, host=self.ctx.host.name)

    def _execute(self, handlers: dict[type[Op], Callable[[Any], None]], op: Op) -> None:
        handler = handlers.get(type(op))
        if handler is None:
            raise self.step.fail(f"internal: no handler for the plan operation {type(op).__name__}", self.ctx)
        # The one place docker SDK exceptions become errors naming host, op and Docker call.
        with docker_boundary(self.ctx.host.name, doing=_doing(op)):
            handler(op)

    def _docker(self) -> Any:
        if self.client is None:
            self.client = self.connect()
        return self.client

    def _close(self) -> None:
        if self.client is not None:
            # Closing frees the client's connections; a broken one must not hide the run's own error.
            with contextlib.suppress(*docker_failures()):
                self.client.close()

    # -- handlers ------------------------------------------------------------------------------
    def _scratch(self, op: EnsureScratch) -> None:
        for command in op.commands():
            self.ctx.check(command)

    def _use_image(self, op: UseImage) -> None:
        # A pull the daemon cannot do (registry unreachable, not logged in) becomes a DockerError naming
        # `docker pull IMAGE` and the daemon's answer, at the boundary around every op (see run()).
        self.image = image.use_image(self.ctx, self._docker(), op)

    def _build_image(self, op: BuildImage) -> None:
        user = self.plan.inputs.facts.user
        assert user is not None
        self.image = image.build(self.step, self.ctx, self._docker(), op, user)

    def _container(self, op: EnsureContainer) -> None:
        """The container object; it is (re)started by the first exec and checked before every one."""
        assert self.image is not None, "an image op comes before EnsureContainer"
        container = HarnessContainer(
            self._docker(),
            self.container_spec(self.image),
            self.ctx.log,
            outer=self.ctx.host,
            docker_url=self.plan.inputs.params.DockerBaseUrl,
        )
        # Ctrl-C must end the commands in the container too: killing a `docker exec` client does not.
        self._stack.enter_context(self.ctx.host.on_interrupt(container.stop))
        self.container = container

    def _identify(self, op: IdentifySystem) -> None:
        """Run the system check (the deferred tail's ``after``) and keep its answer, which the tail is planned from."""
        self.answer = self._ask_system(op)
        self._refuse_blocked(self.answer)

    def _ask_system(self, op: IdentifySystem) -> SystemAnswer:
        inputs = self.plan.inputs
        generated = self.plan.round.generated_files()  # config files generated from the round's own tables
        if generated is not None:
            decision = system_support_files.prepare(
                self.step,
                self.ctx,
                self._running(),
                inputs.params,
                inputs.facts,
                inputs.settings,
                generated,
                op,
                self.ctx.log,
            )
            return SystemAnswer(
                system_name=decision.system_name,
                blocked=decision.blocked,
                blocked_targets=decision.blocked_targets,
                server_urls=decision.server_urls,
                sources=decision.sources,
            )
        support = SystemSupport(
            self.step,
            self.ctx,
            self._running(),
            inputs.params,
            inputs.facts,
            inputs.settings,
            inputs.version,
            self.plan.round,
        )
        if self.plan.round.system_support == "by id":
            blocked, support.system_name = prepare_by_id(support, op)
        else:
            blocked = support.prepare(op)
        return SystemAnswer(system_name=support.system_name, blocked=blocked, sources=support.sources)

    def _refuse_blocked(self, answer: SystemAnswer) -> None:
        settings = self.plan.inputs.settings
        modes = ", ".join(settings.test_modes)
        for (scenario, benchmark), why in answer.blocked.items():
            self.problems.append(f"no result for {benchmark} {scenario} ({modes}): {why}")
        for (scenario, benchmark, target), why in answer.blocked_targets.items():
            self.problems.append(f"no result for {benchmark} {scenario} ({modes}; accuracy target {target}): {why}")
        # Stop before any download when nothing of this action can run, naming each reason.
        left = replace(
            self.plan.inputs, blocked=frozenset(answer.blocked), blocked_targets=frozenset(answer.blocked_targets)
        )
        if not any(left.runs(s, t) for s in settings.scenarios for t in settings.targets):
            raise StepError(
                self.step.label, "; ".join(self.problems) + " (nothing set up or run)", host=self.ctx.host.name
            )

    def _check_space(self, op: CheckFreeSpace) -> None:
        """``df`` the scratch folders (read-only) and refuse before the first download when they lack room."""
        (command,) = op.commands()
        result = self.ctx.run(command)
        try:
            if not result.ok:
                raise ValueError(f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[-300:]}")
            rows = parse_df(result.stdout, len(op.folders()))
        except ValueError as exc:
            raise self.step.fail(
                f"could not measure the free space of {op.scratch} ({command.display()}): {exc}",
                self.ctx,
                hint="SkipFreeSpaceCheck=true runs the setup without this check",
            ) from None
        short = shortfalls(op, rows)
        if short:
            raise self.step.fail(refusal(op, short), self.ctx, hint=HINT)
        free = ", ".join(f"{r.mount} {r.available / 2**30:.1f} GiB" for r in dict.fromkeys(rows))
        self.ctx.log(f"free space for {op.model}'s setup: {op.total / 2**30:.1f} GiB needed; free: {free}")

    def _setup_stage(self, op: SetupStage) -> None:
        if op.done:
            self.ctx.log(f"{op.stage} for {op.model}: already done ({op.done})")
            return
        self._exec(f"make {op.stage} BENCHMARKS={op.model}", op.argv)
        self._mark(op.state_key)

    def _prepare_tree(self, op: PrepareTree) -> None:
        if op.done:
            self.ctx.log(f"{op.folder}: already prepared ({op.done})")
            return
        self._exec(f"preparing {op.folder}", op.argv)
        self._mark(op.state_key)

    def _build_harness(self, op: BuildHarness) -> None:
        if op.done:
            self.ctx.log(f"{shlex.join(op.argv[:2])}: already done for commit {(op.commit or '')[:12]}")
            return
        self._exec(shlex.join(op.argv[:2]), op.argv)
        self._mark(op.state_key)

    def _make_target(self, op: MakeTarget) -> None:
        code, output = self._make(op)
        refused = self.plan.round.refused_output(output)
        if refused is not None:
            self.problems.append(f"make {op.target} ({','.join(op.scenarios)}): {refused}")
            if op.log_dir is None:
                raise StepError(self.step.label, "; ".join(self.problems), host=self.ctx.host.name)
            self.outputs[op.log_dir] = RunOutput(code, output, refused=True)
            return
        if op.log_dir is None:
            if code != 0:
                self.problems.append(
                    f"make {op.target} failed with exit {code}, so nothing ran; last lines:\n{tail(output, 10)}"
                )
                raise StepError(self.step.label, "; ".join(self.problems), host=self.ctx.host.name)
            self.engine_output += output
            return
        self.outputs[op.log_dir] = RunOutput(code, output)
        if code != 0:
            self.problems.append(
                f"make {op.target} ({','.join(op.scenarios)} {op.test_mode}) failed with exit {code}; "
                f"last lines:\n{tail(output, 10)}"
            )

    def _collect(self, op: CollectResults) -> None:
        # The run that wrote this LOG_DIR (none: the endpoints client, whose output explains nothing here).
        run = self.outputs.get(self._relative(op.log_dir))
        if run is not None and run.refused:
            self.ctx.log(f"{op.test_mode}: results in {self._relative(op.log_dir)} not kept (the run was refused)")
            return
        found = results.find_results(self.ctx.host, op.log_dir, op.test_mode)
        self._keep(found, op.log_dir)
        have = {f.expected for f in found}
        output = run.output if run is not None else ""
        for expected in op.expected:
            if expected not in have:
                self.problems.append(f"no result for {expected}: {self._why(expected, self.engine_output + output)}")
        self.ctx.log(f"{op.test_mode}: {len(found)} result folder(s) in {self._relative(op.log_dir)}")

    def _endpoints_client(self, op: RunEndpointsClient) -> None:
        """Write the client's config into the checkout, then run the client in the container (v6.1)."""
        target = posixpath.join(self.plan.inputs.nvidia_dir, op.config_path)
        self.ctx.check(cmd("mkdir", "-p", posixpath.dirname(target), timeout=60))
        self.ctx.host.write_text(target, op.config_text)
        container = self._running()
        self.ctx.stop_if_cancelled("the endpoints client")
        self.ctx.log(f"$ docker exec {container.spec.name} {shlex.join(op.argv)}")
        code, output = container.exec(list(op.argv), on_line=self.ctx.line_sink())
        self.ctx.log(f"# exit {code}")
        if code != 0:
            self.problems.append(
                f"the endpoints client ({','.join(op.scenarios)} {op.test_mode}) failed with exit {code}; "
                f"last lines:\n{tail(output, 10)}"
            )

    def _start_server(self, op: StartServer) -> None:
        """Start the server detached; from here on it is stopped when the step ends, however it ends."""
        container = self._running()
        self.ctx.stop_if_cancelled(f"the LLM server for {op.what}")
        if not all(url.rpartition(":")[2].isdigit() for url in op.spec.urls):
            raise self.step.fail(f"internal: no server URLs for {op.what} from the system check", self.ctx)
        self.ctx.log(f"$ docker exec {container.spec.name} {shlex.join(op.spec.argv)} (detached)")
        self._stack.callback(self._stop_server_at_exit, op)
        try:
            llm_server.start(self._server_exec, op.spec)
            took = llm_server.wait_ready(self._server_exec, op.spec, log=self.ctx.log)
        except BenchmarkFailed as exc:
            raise self.step.fail(str(exc), self.ctx) from None
        self.ctx.log(f"LLM server for {op.what} answers on {op.spec.where()} after {took:.0f}s")

    def _stop_server(self, op: StopServer) -> None:
        import docker

        try:
            llm_server.stop(self._root_exec, op.spec)
        except (BenchmarkFailed, docker.errors.DockerException) as exc:
            self.problems.append(f"could not stop the LLM server for {op.what}: {exc}")
            return
        self.ctx.log(f"LLM server for {op.what} stopped")

    def _stop_server_at_exit(self, op: StartServer) -> None:
        """The step is ending (done, failed, interrupted): stop the server if it still runs (a no-op if stopped)."""
        try:
            llm_server.stop(self._root_exec, op.spec)
        except Exception as exc:  # the step's own outcome matters more: report and go on
            self.ctx.log(f"could not stop the LLM server for {op.what}: {exc}")

    def _server_exec(self, argv: Sequence[str]) -> tuple[int, str]:
        return self._running().exec(list(argv), on_line=None)

    def _root_exec(self, argv: Sequence[str]) -> tuple[int, str]:
        """An exec as root that also works after the container's commands were stopped (Ctrl-C)."""
        return self._running().root_exec(argv)

    # -- helpers -------------------------------------------------------------------------------
    def _running(self) -> HarnessContainer:
        assert self.container is not None, "EnsureContainer comes before in-container ops"
        return self.container

    def _relative(self, log_dir: str) -> str:
        nvidia_dir = self.plan.inputs.nvidia_dir.rstrip("/") + "/"
        return log_dir[len(nvidia_dir) :] if log_dir.startswith(nvidia_dir) else log_dir

    def _make(self, op: MakeTarget) -> tuple[int, str]:
        ctx, container = self.ctx, self._running()
        ctx.stop_if_cancelled(f"make {op.target}")  # after Ctrl-C no further harness run starts
        argv = list(op.argv)
        ctx.log(f"$ docker exec {container.spec.name} {shlex.join(argv)}")
        code, output = container.exec(argv, on_line=ctx.line_sink())
        ctx.log(f"# exit {code}")
        return code, output

    def _exec(self, what: str, argv: Sequence[str]) -> str:
        """Run ``argv`` in the container (``what``: how messages name it, ``make build``); StepError on failure."""
        ctx, container = self.ctx, self._running()
        ctx.stop_if_cancelled(what)
        ctx.log(f"$ docker exec {container.spec.name} {shlex.join(argv)}")
        code, output = container.exec(list(argv), on_line=ctx.line_sink())
        ctx.log(f"# exit {code}")
        if code != 0:
            raise self.step.fail(f"{what} failed in the container (exit {code}); last lines:\n{tail(output, 15)}", ctx)
        return output

    def _mark(self, key: str) -> None:
        # merged on the host: stages another run marked meanwhile (another model) are kept
        self.ctx.state.merge(STATE_KEY, {key: time.strftime("%Y-%m-%dT%H:%M:%S")})

    def _why(self, expected: results.Expected, output: str) -> str:
        params = self.plan.inputs.params
        custom = params.RequireCustomSystemSupport
        why = results.explain_missing(expected, output, system_text=None, custom_support=custom)
        if "did not recognise" in why:
            text = system_text(params, self.ctx)
            why = results.explain_missing(expected, output, system_text=text, custom_support=custom)
        return why

    def _keep(self, found: Sequence[results.Found], log_dir: str) -> None:
        for item in found:
            if self.ctx.host.files_are_local:
                kept = Path(item.directory)
            else:
                destination = self.ctx.host_dir / "mlperf" / posixpath.basename(log_dir)
                kept = results.copy_local(self.ctx.host, item, destination)
            self.ctx.results.append(kept)
            self._record_source(kept, item.expected)

    def _record_source(self, kept: Path, expected: results.Expected) -> None:
        """Write where the result's config values came from next to it (the metrics read it into the metadata)."""
        source = self.answer.sources.get((expected.scenario, expected.benchmark)) if self.answer else None
        if source is None:
            return  # the system check decided nothing for it (a v4.1 checkout without a system script)
        try:
            config_sources.write_sidecar(kept, expected.benchmark, expected.scenario, source)
        except OSError as exc:
            # without it the metrics would not say the values are untuned: the step must not pass as if they were tuned
            self.problems.append(f"could not record the config source of {expected} in {kept}: {exc.strerror or exc}")
