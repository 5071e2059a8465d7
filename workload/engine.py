"""The execution engine: a resolved profile, run on one or many hosts.

Per host, step after step: gather facts -> plan -> apply -> (reboot) -> verify.

* Dependencies run once, in order, and fail fast: a failed dependency stops that host.
* Actions run ``iterations`` rounds (or rounds until ``timeout_s``, VirtualClient's ``--timeout``:
  the running action always finishes). A failed action is recorded and the next one runs, unless
  ``fail_fast`` (or the step's ``FailFast`` parameter) is set.
* A step whose plan says ``reboot_required``: a remote host is rebooted and the engine waits for
  it, then re-plans the step; the local host stops with :class:`RebootRequired` (exit code 5) and
  the next run resumes (facts decide what is done; host state remembers the pending reboot).
* Hosts run independently in a bounded thread pool; a failing host does not stop the others
  unless ``fail_fast``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from workload.errors import Interrupted, RebootRequired, StepError, WorkloadError
from workload.hosts.base import Host, HostSpec
from workload.profile import ResolvedProfile
from workload.rundir import RunFolder
from workload.steps import HostState, Step, StepContext, StepPlan

StepStatus = Literal["changed", "unchanged", "failed", "skipped", "planned", "reboot"]
HostStatus = Literal["ok", "failed", "reboot-required", "interrupted"]

#: Opens a connection to a host; the CLI passes one built from its SSH options.
HostFactory = Callable[[HostSpec], Host]

PENDING_REBOOT_KEY = "pending_reboot"


@dataclass
class RunOptions:
    dependencies_only: bool = False
    iterations: int = 1
    #: VirtualClient's --timeout: repeat action rounds until this many seconds have passed.
    timeout_s: float | None = None
    fail_fast: bool = False
    parallel: int = 8
    reboot_timeout_s: float = 1800.0
    #: Where host state lives on each host (default: /var/lib/workload/state.json as root).
    state_path: str | None = None
    #: Values handed to every step as ``ctx.options``.
    step_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepOutcome:
    label: str
    status: StepStatus
    duration_s: float = 0.0
    message: str = ""
    plan: StepPlan | None = None


@dataclass
class HostOutcome:
    name: str
    status: HostStatus = "ok"
    steps: list[StepOutcome] = field(default_factory=list)
    error: WorkloadError | None = None
    results: list[Path] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def steps_done(self) -> int:
        return sum(1 for s in self.steps if s.status in ("changed", "unchanged"))

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.name,
            "status": self.status,
            "duration_s": round(self.duration_s, 3),
            "error": str(self.error) if self.error else None,
            "steps": [
                {"step": s.label, "status": s.status, "duration_s": round(s.duration_s, 3), "message": s.message}
                for s in self.steps
            ],
            "results": [str(p) for p in self.results],
        }


class Reporter(Protocol):
    """Receives progress events; the CLI renders them (rich), tests record them."""

    def step_started(self, host: str, step: Step) -> None: ...

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None: ...

    def line(self, host: str, text: str) -> None: ...

    def host_finished(self, host: str, outcome: HostOutcome) -> None: ...


class NullReporter:
    def step_started(self, host: str, step: Step) -> None:
        pass

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        pass

    def line(self, host: str, text: str) -> None:
        pass

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        pass


class Engine:
    """Runs (or plans) one resolved profile on hosts. Thread-safe per host; one Engine per command."""

    def __init__(
        self,
        profile: ResolvedProfile,
        folder: RunFolder,
        open_host: HostFactory,
        options: RunOptions | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.profile = profile
        self.folder = folder
        self.open_host = open_host
        self.options = options or RunOptions()
        self.reporter: Reporter = reporter or NullReporter()
        self.cancel = threading.Event()

    # -- fleet -----------------------------------------------------------------------------------
    def run(self, specs: Sequence[HostSpec], *, plan_only: bool = False) -> list[HostOutcome]:
        """Run (or plan) on every host; bounded concurrency; outcomes in the order of ``specs``."""
        workers = max(1, min(self.options.parallel, len(specs)))
        if workers == 1:
            return [self._run_host(spec, plan_only) for spec in specs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="host") as pool:
            futures = [pool.submit(self._run_host, spec, plan_only) for spec in specs]
            try:
                return [f.result() for f in futures]
            except KeyboardInterrupt:
                self.cancel.set()
                pool.shutdown(wait=True, cancel_futures=True)
                raise

    def _run_host(self, spec: HostSpec, plan_only: bool) -> HostOutcome:
        outcome = HostOutcome(name=spec.name)
        started = time.monotonic()
        host: Host | None = None
        try:
            if self.cancel.is_set():
                raise Interrupted(f"[{spec.name}] not started: the run was stopped")
            host = self.open_host(spec)
            host.default_sink = None
            if plan_only:
                self._plan_host(host, outcome)
            else:
                self._run_on_host(host, outcome)
        except RebootRequired as exc:
            outcome.status, outcome.error = "reboot-required", exc
        except Interrupted as exc:
            outcome.status, outcome.error = "interrupted", exc
        except WorkloadError as exc:
            outcome.status, outcome.error = "failed", exc
            if self.options.fail_fast:
                self.cancel.set()
        finally:
            if host is not None:
                host.close()
            outcome.duration_s = time.monotonic() - started
            self.reporter.host_finished(spec.name, outcome)
        return outcome

    # -- one host --------------------------------------------------------------------------------
    def _context(self, host: Host, state: HostState, index: int, step: Step, exports: dict[str, str]) -> StepContext:
        name = host.name
        return StepContext(
            host=host,
            host_dir=self.folder.host_dir(name),
            log_path=self.folder.step_log(name, index, step.type_name, step.params.Scenario),
            state=state,
            exports=exports,
            console=lambda text: self._host_line(name, text),
            options=self.options.step_options,
        )

    def _host_line(self, host: str, text: str) -> None:
        """Every progress line of a host goes to ``<host>/host.log`` and to the reporter."""
        stamp = time.strftime("%H:%M:%S")
        with (self.folder.host_dir(host) / "host.log").open("a", encoding="utf-8") as fh:
            fh.write(f"{stamp} [{host}] {text}\n")
        self.reporter.line(host, text)

    def _plan_host(self, host: Host, outcome: HostOutcome) -> None:
        """Plan every step without changing anything; a step that cannot be planned is reported."""
        state = HostState(host, self.options.state_path)
        exports: dict[str, str] = dict(state.get("exports", {}) or {})
        for index, step in enumerate(self._steps(), start=1):
            ctx = self._context(host, state, index, step, exports)
            ctx.dry_run = True
            self.reporter.step_started(host.name, step)
            started = time.monotonic()
            try:
                plan = step.plan(ctx)
                result = StepOutcome(step.label, "planned", time.monotonic() - started, plan=plan)
            except WorkloadError as exc:
                result = StepOutcome(step.label, "failed", time.monotonic() - started, message=str(exc))
            outcome.steps.append(result)
            self.reporter.step_finished(host.name, step, result)

    def _steps(self) -> list[Step]:
        if self.options.dependencies_only:
            return self.profile.dependencies
        return self.profile.steps

    def _run_on_host(self, host: Host, outcome: HostOutcome) -> None:
        state = HostState(host, self.options.state_path)
        exports: dict[str, str] = dict(state.get("exports", {}) or {})
        steps = list(enumerate(self._steps(), start=1))
        for index, step in steps:
            if step.kind == "dependency":
                self._run_step(host, state, index, step, exports, outcome)  # raises: dependencies fail fast
        actions = [(i, s) for i, s in steps if s.kind == "action"]
        if not actions:
            return
        deadline = time.monotonic() + self.options.timeout_s if self.options.timeout_s else None
        iteration = 0
        failed: WorkloadError | None = None
        while True:
            iteration += 1
            for index, step in actions:
                try:
                    self._run_step(host, state, index, step, exports, outcome, iteration=iteration)
                except (RebootRequired, Interrupted):
                    raise
                except WorkloadError as exc:
                    failed = failed or exc
                    if self.options.fail_fast or step.params.FailFast:
                        raise
            if deadline is not None:
                if time.monotonic() >= deadline:
                    break
            elif iteration >= self.options.iterations:
                break
        if failed is not None:
            raise failed

    def _run_step(
        self,
        host: Host,
        state: HostState,
        index: int,
        step: Step,
        exports: dict[str, str],
        outcome: HostOutcome,
        *,
        iteration: int = 1,
    ) -> None:
        if self.cancel.is_set():
            raise Interrupted(f"[{host.name}] stopped before {step.label}")
        ctx = self._context(host, state, index, step, exports)
        ctx.iteration = iteration
        self._host_line(host.name, f"== {step.label} (iteration {iteration})")
        self.reporter.step_started(host.name, step)
        started = time.monotonic()
        result = StepOutcome(step.label, "failed")
        try:
            plan = step.plan(ctx)
            result.plan = plan
            ctx.log(f"plan: {describe_plan(plan)}")
            if plan.changed:
                step.apply(ctx, plan)
            if plan.reboot_required:
                self._reboot(ctx, step, state)
                plan = step.plan(ctx)
                if plan.reboot_required:
                    raise step.fail("the host still needs a reboot after rebooting", ctx)
                if plan.changed:
                    step.apply(ctx, plan)
            step.verify(ctx)
            result.status = "changed" if result.plan and result.plan.changed else "unchanged"
            result.message = (
                "" if result.status == "changed" else (result.plan.noop_reason or "") if result.plan else ""
            )
            if ctx.exports:
                state.set("exports", dict(ctx.exports))
            outcome.results.extend(ctx.results)
        except RebootRequired as exc:
            result.status, result.message = "reboot", str(exc)
            raise
        except WorkloadError as exc:
            result.message = str(exc)
            outcome.results.extend(ctx.results)  # results that did come are kept
            if not isinstance(exc, StepError) and not str(exc).startswith(f"[{host.name}]"):
                raise StepError(step.label, str(exc), host=host.name) from exc
            raise
        finally:
            result.duration_s = time.monotonic() - started
            self._host_line(host.name, f"== {step.label}: {result.status} ({result.duration_s:.1f}s) {result.message}")
            outcome.steps.append(result)
            self.reporter.step_finished(host.name, step, result)

    def _reboot(self, ctx: StepContext, step: Step, state: HostState) -> None:
        """Reboot a remote host and wait for it; stop a local run with RebootRequired."""
        from workload.hosts.local import LocalHost

        host = ctx.host
        boot_id = read_boot_id(host)
        pending = state.get(PENDING_REBOOT_KEY)
        if isinstance(host, LocalHost):
            if pending and pending.get("boot_id") != boot_id:
                # We were asked to reboot before and the machine did reboot; the plan still wants one.
                state.set(PENDING_REBOOT_KEY, None)
                raise step.fail("the host still needs a reboot after rebooting", ctx)
            state.set(PENDING_REBOOT_KEY, {"step": step.label, "boot_id": boot_id})
            raise RebootRequired(
                f"[{host.name}] {step.label} needs a reboot to take effect",
                hint="reboot this machine, then run the same command again: it resumes where it stopped",
            )
        from workload.hosts.reboot import reboot, wait_for_reboot

        ctx.log("rebooting the host and waiting for it to come back")
        state.set(PENDING_REBOOT_KEY, {"step": step.label, "boot_id": boot_id})
        reboot(host)
        wait_for_reboot(host, boot_id_before=boot_id, timeout_s=self.options.reboot_timeout_s)
        state.set(PENDING_REBOOT_KEY, None)
        ctx.log("the host is back")


def read_boot_id(host: Host) -> str:
    from workload.commands import cmd

    result = host.run(cmd("cat", "/proc/sys/kernel/random/boot_id", timeout=30))
    return result.stdout.strip()


def describe_plan(plan: StepPlan) -> str:
    """One line: what a plan would do."""
    if plan.changed:
        n = len(plan.commands)
        text = f"{len(plan.changes)} change(s), {n} command(s)"
    else:
        text = f"no change: {plan.noop_reason or 'nothing to do'}"
    if plan.reboot_required:
        text += "; then a reboot"
    return text
