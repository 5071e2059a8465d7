"""The execution engine: a resolved profile, run on one or many hosts.

Per host, step after step: gather facts -> plan -> apply -> (reboot) -> verify.

* Dependencies run once, in order, and fail fast: a failed dependency stops that host.
* Actions run ``iterations`` rounds (or rounds until ``timeout_s``, VirtualClient's ``--timeout``:
  the running action always finishes). A failed action is recorded and the next one runs, unless
  ``fail_fast`` (or the step's ``FailFast`` parameter) is set.
* A step whose plan says ``reboot_required``: a remote host is rebooted and the engine waits for
  it, then re-plans the step; the local host stops with :class:`RebootRequired` (exit code 5) and
  the next run resumes (facts decide what is done; host state remembers the pending reboot).

Fleets (Fabric's ``ThreadingGroup``/``GroupResult``, without a scheduler of our own): each host
runs the whole profile in a worker of one bounded ``ThreadPoolExecutor`` (``parallel`` workers,
one connection per host, opened by the worker and closed when the host is done).
:meth:`Engine.run` always returns one :class:`HostOutcome` per host, in the order given; it never
raises for a host's failure. A failing host does not stop the others, and one host's reboot wait
blocks only its own worker.

Stopping (:meth:`Engine.stop`): Ctrl-C in :meth:`Engine.run`, or a failed host under
``fail_fast``, sets :attr:`Engine.cancel` and kills the commands running on every open host
(:meth:`Host.interrupt`). Each host stops at its next step boundary, or at once when its running
command dies, with status ``interrupted``; hosts not started yet are not started. Nothing else
needs undoing: steps re-plan from facts on the next run, and host state is written atomically.

Why this module is still ~540 lines: it is the :class:`Engine` class alone (one job: the per-host
step loop, with its reboots and stops, and the run folder it writes), whose methods share the
engine's state; splitting the class would scatter that state. Its values live in
:mod:`workload.outcomes`, one step's life in :mod:`workload.stepdrive`, stopping commands in
:mod:`workload.interrupts`; every moved name is re-exported here.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from workload.commands import Secrets, mask_text
from workload.errors import FactError, HostBug, Interrupted, OutputError, RebootRequired, StepError, WorkloadError
from workload.hosts.base import Host, HostSpec

# Moved by job (issue 14); re-exported so that every name stays importable from here.
from workload.interrupts import INTERRUPT_TIMEOUT_S, KILL_GRACE_S, interrupt_hosts, interrupt_reason, wait_all
from workload.outcomes import (
    HostOutcome,
    HostStatus,
    NullReporter,
    Reporter,
    RunOptions,
    StepOutcome,
    StepStatus,
    unfinished_hosts,
)
from workload.profile import ResolvedProfile
from workload.rundir import RunFolder
from workload.safefile import append_text, atomic_write_text
from workload.stepdrive import PREFLIGHT_NOTE, DrivenStep, _with_preflight_note, describe_plan, drive_step, read_boot_id
from workload.steps import CancelToken, HostState, Step, StepContext

__all__ = [
    "INTERRUPT_TIMEOUT_S",
    "KILL_GRACE_S",
    "PENDING_REBOOT_KEY",
    "PREFLIGHT_NOTE",
    "REBOOT_POLL_SLICE_S",
    "DrivenStep",
    "Engine",
    "HostFactory",
    "HostOutcome",
    "HostStatus",
    "NullReporter",
    "Reporter",
    "RunOptions",
    "StepOutcome",
    "StepStatus",
    "describe_plan",
    "drive_step",
    "interrupt_hosts",
    "read_boot_id",
    "unfinished_hosts",
]

#: Opens a connection to a host; the CLI passes one built from its SSH options.
HostFactory = Callable[[HostSpec], Host]

PENDING_REBOOT_KEY = "pending_reboot"

#: A reboot wait is cut into slices this long, so a stop is noticed while a host reboots.
REBOOT_POLL_SLICE_S = 10.0


class Engine:
    """Runs (or plans) one resolved profile on hosts. One Engine per command.

    ``interrupted`` is True after :meth:`run` saw Ctrl-C (the CLI then exits 130);
    ``cancel_reason`` says why the hosts were stopped, when they were.
    """

    def __init__(
        self,
        profile: ResolvedProfile,
        folder: RunFolder,
        open_host: HostFactory,
        options: RunOptions | None = None,
        reporter: Reporter | None = None,
        secrets: Secrets | None = None,
    ) -> None:
        self.profile = profile
        #: What this run masks in every text it logs (the profile's, plus e.g. connection passwords).
        self.secrets = secrets if secrets is not None else profile.secrets
        self.folder = folder
        self.open_host = open_host
        self.options = options or RunOptions()
        self.reporter: Reporter = reporter or NullReporter()
        self.cancel = CancelToken()
        self.cancel_reason = ""
        self.interrupted = False
        #: Files of the run folder that could not be written (disk full...); reported by the CLI.
        self.write_errors: list[OutputError] = []
        self._open: dict[str, Host] = {}
        #: Per host: the step whose pending reboot the host has done since the last run.
        self._rebooted_for: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- fleet -----------------------------------------------------------------------------------
    def run(self, specs: Sequence[HostSpec], *, plan_only: bool = False) -> list[HostOutcome]:
        """Run (or plan) on every host; bounded concurrency; outcomes in the order of ``specs``.

        Every host runs in a worker thread, even a single one, so that Ctrl-C always reaches this
        (main) thread, which then stops the hosts cleanly instead of abandoning a remote command.
        Repeated Ctrl-C repeats the kill; the call returns once every worker has finished.
        """
        workers = max(1, min(self.options.parallel, len(specs)))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="host")
        futures = [pool.submit(self._run_host, spec, plan_only) for spec in specs]
        try:
            while True:
                try:
                    wait_all(futures)  # wakes often: a signal another thread took is acted on here
                    break
                except KeyboardInterrupt as exc:
                    self.interrupted = True
                    for future in futures:
                        future.cancel()  # hosts not started yet are not started
                    with contextlib.suppress(KeyboardInterrupt):  # another Ctrl-C: kill again, below
                        self.stop(interrupt_reason(exc))
        finally:
            pool.shutdown(wait=True)
        return [self._outcome(spec, future) for spec, future in zip(specs, futures, strict=True)]

    def stop(self, reason: str) -> None:
        """Stop every host: no new steps, and the commands running now are killed.

        Safe from any thread, and more than once (each call kills again).
        """
        with self._lock:
            if not self.cancel.is_set():
                self.cancel_reason = reason
            self.cancel.set(reason)
            hosts = list(self._open.values())
        interrupt_hosts(hosts, timeout_s=INTERRUPT_TIMEOUT_S)

    def _outcome(self, spec: HostSpec, future: Future[HostOutcome]) -> HostOutcome:
        if not future.cancelled():
            error = future.exception()
            if error is not None:
                # A bug in a step or the engine (not a WorkloadError): the CLI reports it as one,
                # after every other host has finished.
                raise error
            return future.result()
        outcome = HostOutcome(
            name=spec.name,
            status="interrupted",
            error=Interrupted(f"not started: {self.cancel_reason or 'the run was stopped'}", host=spec.name),
            labels=dict(spec.labels),
        )
        self.reporter.host_finished(spec.name, outcome)
        return outcome

    def _run_host(self, spec: HostSpec, plan_only: bool) -> HostOutcome:
        outcome = HostOutcome(name=spec.name, labels=dict(spec.labels))
        started = time.monotonic()
        host: Host | None = None
        try:
            if self.cancel.is_set():
                raise Interrupted(f"not started: {self.cancel_reason or 'the run was stopped'}", host=spec.name)
            host = self.open_host(spec)
            host.default_sink = None
            with self._lock:
                self._open[spec.name] = host
            if self.cancel.is_set():  # stopped while we were opening: stop() did not see this host
                raise Interrupted(f"not started: {self.cancel_reason or 'the run was stopped'}", host=spec.name)
            if plan_only:
                self._plan_host(host, outcome)
            else:
                self._run_on_host(host, outcome)
        except RebootRequired as exc:
            outcome.status, outcome.error = "reboot-required", exc
        except Interrupted as exc:
            outcome.status, outcome.error = "interrupted", exc
        except WorkloadError as exc:
            if self.cancel.is_set():
                # Whatever broke after a stop (a killed command, a closed connection) is the stop.
                outcome.status = "interrupted"
                outcome.error = Interrupted(f"stopped: {self.cancel_reason}: {exc.message}", host=spec.name)
                outcome.error.__cause__ = exc  # what it stopped (its step, for ``reason``)
            else:
                outcome.status, outcome.error = "failed", exc
                if self.options.fail_fast and not plan_only:
                    self.stop(f"stopped by --fail-fast: {spec.name} failed")
        except Exception as exc:  # a bug: this host fails, the others and the run folder are kept
            outcome.status = "failed"
            outcome.error = HostBug(
                f"internal error: {type(exc).__name__}: {exc}",
                hint=f"a bug in workload; the traceback is in {self._save_traceback(spec.name)}",
                host=spec.name,
            )
        finally:
            with self._lock:
                self._open.pop(spec.name, None)
            if host is not None:
                with contextlib.suppress(Exception):  # closing a broken connection must not hide the outcome
                    host.close()
            outcome.duration_s = time.monotonic() - started
            self._finish_host_log(spec.name, outcome)
            self.reporter.host_finished(spec.name, outcome)
        return outcome

    def _save_traceback(self, name: str) -> str:
        import tempfile
        import traceback

        text = traceback.format_exc()
        try:
            path = self.folder.host_dir(name) / "traceback.txt"
            atomic_write_text(path, text)
        except OSError:
            with tempfile.NamedTemporaryFile("w", prefix="workload-debug-", suffix=".log", delete=False) as fh:
                fh.write(text)
                return fh.name
        return str(path)

    def _finish_host_log(self, name: str, outcome: HostOutcome) -> None:
        """The last lines of ``host.log``: the host's outcome and its whole error message."""
        self._write_host_log(
            name, f"== host {outcome.status} after {outcome.duration_s:.1f}s, {outcome.steps_done} step(s) done"
        )
        if outcome.error is not None:
            for text in str(outcome.error).splitlines():
                self._write_host_log(name, f"   {text}")

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
            cancel=self.cancel,
            write_errors=self.write_errors,
            secrets=self.secrets,
        )

    def _host_line(self, host: str, text: str) -> None:
        """Every progress line of a host goes to ``<host>/host.log`` and to the reporter (masked)."""
        text = mask_text(text, self.secrets)
        self._write_host_log(host, text)
        self.reporter.line(host, text)

    def _write_host_log(self, host: str, text: str) -> None:
        """Append to ``<host>/host.log``: the host's timeline (steps, plans, outcome, errors).

        Every line carries the time and ``[host]``, also the continuation lines of a multi-line
        message, so ``grep`` over several hosts' logs keeps working. Command output is in the
        per-step logs next to it.
        """
        stamp = time.strftime("%H:%M:%S")
        text = mask_text(text, self.secrets)
        lines = "".join(f"{stamp} [{host}] {line}\n" for line in text.rstrip("\n").splitlines() or [""])
        try:
            append_text(self.folder.host_dir(host) / "host.log", lines)  # never through a planted link
        except (OSError, ValueError) as exc:
            # Logging must not stop a running benchmark; the CLI names the file and exits 8.
            error = exc if isinstance(exc, OSError) else OSError(str(exc))
            with self._lock:
                if not self.write_errors:
                    self.write_errors.append(OutputError.from_os_error("the host log", self.folder.root, error))

    def _plan_host(self, host: Host, outcome: HostOutcome) -> None:
        """Plan every step without changing anything; a step that cannot be planned is reported.

        A step whose preflight fails is reported as failed with that reason: ``run`` would stop
        there before its first step, so nothing would change on the host.
        """
        with host.remembering_facts():  # plan changes nothing, so its facts hold for every step
            self._plan_steps(host, outcome)

    def _plan_steps(self, host: Host, outcome: HostOutcome) -> None:
        state = HostState(host, self.options.state_path)
        exports = self._exports_of(host, state)
        steps = list(enumerate(self._steps(), start=1))
        impossible = {index: exc for index, _step, exc in self._preflight(host, state, steps, exports)}
        for index, step in steps:
            if self.cancel.is_set():
                raise Interrupted(f"stopped before {step.label}: {self.cancel_reason}", host=host.name)
            ctx = self._context(host, state, index, step, exports)
            ctx.dry_run = True
            self.reporter.step_started(host.name, step)
            started = time.monotonic()
            try:
                if index in impossible:
                    raise impossible[index]
                plan = step.plan(ctx)
                result = StepOutcome(step.label, "planned", time.monotonic() - started, plan=plan)
            except WorkloadError as exc:
                message = _with_preflight_note(exc) if index in impossible else str(exc)
                result = StepOutcome(step.label, "failed", time.monotonic() - started, message=message)
            outcome.steps.append(result)
            self.reporter.step_finished(host.name, step, result)

    def _preflight(
        self, host: Host, state: HostState, steps: Sequence[tuple[int, Step]], exports: dict[str, str]
    ) -> list[tuple[int, Step, WorkloadError]]:
        """Every step's :meth:`~workload.steps.Step.preflight` on this host: the ones that cannot run."""
        impossible: list[tuple[int, Step, WorkloadError]] = []
        contexts = [(index, step, self._context(host, state, index, step, exports)) for index, step in steps]
        # Nothing changes the host until the first step applies: one round trip reads what every
        # step's preflight and the first step's plan need.
        host.prefetch([query for _i, step, ctx in contexts for query in step.fact_queries(ctx, "plan")])
        for index, step, ctx in contexts:
            ctx.dry_run = True
            try:
                step.preflight(ctx)
            except (StepError, FactError) as exc:
                impossible.append((index, step, exc))
        return impossible

    def _stop_if_impossible(
        self,
        host: Host,
        state: HostState,
        steps: Sequence[tuple[int, Step]],
        exports: dict[str, str],
        outcome: HostOutcome,
    ) -> None:
        """Raise, before anything changes, when a step of the run cannot succeed on this host."""
        impossible = self._preflight(host, state, steps, exports)
        if not impossible:
            return
        for _index, step, exc in impossible:
            self.reporter.step_started(host.name, step)
            result = StepOutcome(step.label, "failed", message=_with_preflight_note(exc))
            self._host_line(host.name, f"== {step.label}: failed (preflight) {exc}")
            outcome.steps.append(result)
            self.reporter.step_finished(host.name, step, result)
        _index, step, first = impossible[0]
        problem = first.message_in(host.name, step.label)
        others = [f"{s.label}: {e.message_in(host.name, s.label)}" for _i, s, e in impossible[1:]]
        lines = [problem, PREFLIGHT_NOTE]
        lines += [f"also impossible here: {text}" for text in others]
        raise StepError(step.label, "\n".join(lines), host=host.name, hint=first.hint)

    def _exports_of(self, host: Host, state: HostState) -> dict[str, str]:
        """The values earlier runs exported on this host; problems with the state file are shown, not fatal."""
        exports = {k: v for k, v in state.mapping("exports").items() if isinstance(v, str)}
        for warning in state.warnings:
            self._host_line(host.name, f"warning: {warning}")
        return exports

    def _steps(self) -> list[Step]:
        if self.options.dependencies_only:
            return self.profile.dependencies
        return self.profile.steps

    def _run_on_host(self, host: Host, outcome: HostOutcome) -> None:
        self._write_host_log(host.name, f"== connecting ({len(self._steps())} step(s) to run)")
        state = HostState(host, self.options.state_path)
        exports = self._exports_of(host, state)
        steps = list(enumerate(self._steps(), start=1))
        self._note_reboot_done(host, state)
        # Every step reads its facts in preflight, plan, re-plan and verify, and the next step reads
        # many of the same: each is read once until something changes the host (any command that is
        # not a read, a file write, a reboot, a wait for another process's lock), so a step always
        # plans from facts read after the last change. Actions run outside the memo: they change
        # hosts through other channels too (the docker SDK).
        with host.remembering_facts():
            self._stop_if_impossible(host, state, steps, exports, outcome)
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
            first_of_round = len(outcome.steps)
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
            # The round started when its first step was announced, not when this loop came round:
            # building the first step's context can take a while on a loaded machine, and the
            # spacing is promised between the starts that the log and the reporter show.
            self._space_rounds(host, outcome.steps[first_of_round].started_at, deadline)
            if deadline is not None and time.monotonic() >= deadline:
                break  # the spacing ran into the deadline: no round starts after it
        if failed is not None:
            raise failed

    def _space_rounds(self, host: Host, round_started: float, deadline: float | None) -> None:
        """Wait until ``MinimumExecutionInterval`` has passed since the round started (VirtualClient's
        spacing of rounds), but not past the ``--timeout`` deadline; a stop ends the wait at once."""
        resume = round_started + self.profile.minimum_interval_s
        if deadline is not None:
            resume = min(resume, deadline)
        wait_s = resume - time.monotonic()
        if wait_s <= 0:
            return
        self._host_line(host.name, f"== waiting {wait_s:.0f}s for the next round (MinimumExecutionInterval)")
        if self.cancel.wait(min(wait_s, threading.TIMEOUT_MAX)):  # a wait past TIMEOUT_MAX overflows
            raise Interrupted(f"stopped between rounds: {self.cancel_reason}", host=host.name)

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
            raise Interrupted(f"stopped before {step.label}: {self.cancel_reason}", host=host.name)
        ctx = self._context(host, state, index, step, exports)
        ctx.iteration = iteration
        self._host_line(host.name, f"== {step.label} (iteration {iteration})")
        self.reporter.step_started(host.name, step)
        started = time.monotonic()
        result = StepOutcome(step.label, "failed", started_at=started)
        try:

            def reboot(ctx: StepContext) -> StepContext:
                self._reboot(ctx, step, state)
                return ctx

            result.plan = drive_step(step, ctx, reboot).plan
            result.status = "changed" if result.plan and result.plan.changed else "unchanged"
            result.message = (
                "" if result.status == "changed" else (result.plan.noop_reason or "") if result.plan else ""
            )
            if ctx.exports:
                state.merge("exports", dict(ctx.exports))  # another run's exports on this host stay
            outcome.results.extend(ctx.results)
        except RebootRequired as exc:
            result.status, result.message = "reboot", str(exc)
            raise
        except WorkloadError as exc:
            outcome.results.extend(ctx.results)  # results that did come are kept
            if self.cancel.is_set():
                # The command died because we killed it: report the stop, not the symptom.
                result.status = "interrupted"
                result.message = f"{self.cancel_reason} ({exc.message.splitlines()[0]})"
                raise Interrupted(result.message, host=host.name, step=step.label) from exc
            result.message = str(exc)
            if exc.host != host.name and exc.step is None:
                # Said where it happened (this host, this step), unless the error already says so.
                raise StepError(step.label, exc.message, host=host.name, hint=exc.hint) from exc
            raise
        finally:
            result.duration_s = time.monotonic() - started
            self._host_line(host.name, f"== {step.label}: {result.status} ({result.duration_s:.1f}s) {result.message}")
            outcome.steps.append(result)
            self.reporter.step_finished(host.name, step, result)

    def _note_reboot_done(self, host: Host, state: HostState) -> None:
        """Clear a pending reboot the host has done since (its boot id changed).

        The step that asked for it is remembered for this run only: if that step still wants a
        reboot, rebooting did not help and :meth:`_reboot` fails instead of asking again. Any
        other step may ask for a reboot of its own later.
        """
        pending = state.get(PENDING_REBOOT_KEY)
        if not isinstance(pending, dict):
            if pending is not None:
                state.set(PENDING_REBOOT_KEY, None)
            return
        if pending.get("boot_id") != read_boot_id(host):
            with self._lock:
                self._rebooted_for[host.name] = str(pending.get("step", ""))
            state.set(PENDING_REBOOT_KEY, None)
            self._write_host_log(host.name, f"== resuming after the reboot {pending.get('step', 'a step')} asked for")

    def _reboot(self, ctx: StepContext, step: Step, state: HostState) -> None:
        """Reboot a remote host and wait for it; stop a local run with RebootRequired."""
        host = ctx.host
        if host.is_local:
            boot_id = read_boot_id(host)
            with self._lock:
                rebooted_for = self._rebooted_for.get(host.name)
            if rebooted_for == step.label:
                # This step asked for a reboot before, the machine did reboot, and it still wants one.
                raise step.fail("the host still needs a reboot after rebooting", ctx)
            state.set(PENDING_REBOOT_KEY, {"step": step.label, "boot_id": boot_id})
            raise RebootRequired(
                f"{step.label} needs a reboot to take effect",
                hint="reboot this machine, then run the same command again: it resumes where it stopped",
                host=host.name,
            )
        from workload.hosts.reboot import prepare_reboot, reboot

        ctx.log("rebooting the host and waiting for it to come back")
        ticket = prepare_reboot(host)  # reads the boot id and leaves the marker the wait looks for
        state.set(PENDING_REBOOT_KEY, {"step": step.label, "boot_id": ticket.boot_id})
        reboot(host, ticket=ticket)
        self._wait_for_reboot(host, ticket.boot_id, ticket.marker)
        state.set(PENDING_REBOOT_KEY, None)
        ctx.log("the host is back")

    def _wait_for_reboot(self, host: Host, boot_id: str, marker: str) -> None:
        """``wait_for_reboot`` in slices, so that a stop is noticed while the host is down.

        The marker (in tmpfs ``/run``) proves a reboot where ``boot_id`` cannot change (containers).
        """
        from workload.errors import ConnectError
        from workload.hosts.reboot import wait_for_reboot

        deadline = time.monotonic() + self.options.reboot_timeout_s
        while True:
            if self.cancel.is_set():
                raise Interrupted(f"stopped while waiting for the reboot: {self.cancel_reason}", host=host.name)
            left = deadline - time.monotonic()
            try:
                wait_for_reboot(host, boot_id_before=boot_id, marker=marker, timeout_s=min(REBOOT_POLL_SLICE_S, left))
                return
            except ConnectError:
                if left <= REBOOT_POLL_SLICE_S:
                    raise
