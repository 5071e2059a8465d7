"""``workload run`` and ``workload plan``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from workload.cli.history_hook import record_options
from workload.cli.numbers import FiniteFloatRange
from workload.cli.options import (
    Targets,
    build_targets,
    host_options,
    parameter_options,
    profile_options,
    resolve_from_options,
)

if TYPE_CHECKING:
    from rich.console import Console

    from workload.commands import Secrets
    from workload.engine import HostOutcome


def _output_option(func: Any) -> Any:
    return click.option(
        "--output-dir",
        type=click.Path(path_type=Path),
        default=Path("workload-runs"),
        show_default=True,
        help="Where run folders are created (one per run).",
    )(func)


@click.command("run")
@profile_options
@parameter_options
@host_options
@click.option("--dependencies", "-d", "dependencies_only", is_flag=True, help="Run only the dependency steps.")
@click.option("--iterations", type=click.IntRange(1), default=None, help="Rounds of all actions (default 1).")
@click.option(
    "--timeout",
    "timeout_min",
    type=FiniteFloatRange(0, min_open=True, max=10_000_000),
    default=None,
    help="Repeat action rounds until this many minutes have passed (the running action finishes).",
)
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed action (and stop the other hosts).")
@click.option(
    "--allow-invalid",
    is_flag=True,
    help="Report INVALID results, failed accuracy or unreadable files without exit code 6.",
)
@click.option(
    "--only-failed",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="RUN_FOLDER",
    help="Only the hosts that did not finish in that earlier run (same --host/--inventory).",
)
@_output_option
@record_options
@click.option("-v", "--verbose", count=True, help="Show command output on the console (always in the step logs).")
def run_command(
    profile: str,
    parameters: tuple[str, ...],
    scenarios: str | None,
    targets: Targets,
    dependencies_only: bool,
    iterations: int | None,
    timeout_min: float | None,
    fail_fast: bool,
    allow_invalid: bool,
    only_failed: Path | None,
    output_dir: Path,
    history: str | None,
    tag: str | None,
    junit: Path | None,
    verbose: int,
) -> int:
    """Run PROFILE's steps on the hosts, then parse the results into metrics.

    \b
    Every run gets a folder under --output-dir with the resolved profile, a log per step and
    host, the result files, and metrics.jsonl / metrics.csv (VirtualClient's columns) /
    summary.json. The exit code is the verdict: 0 only when every step succeeded, every result
    is VALID and every accuracy check passed.

    \b
    Examples:
      workload run --profile PERF-CPU-MLPERF
      workload run --profile PERF-GPU-MLPERF --host ssh://azureuser@10.0.0.4 -i ~/.ssh/id_ed25519
      workload run --profile PERF-GPU-MLPERF --inventory fleet.txt --parallel 16 \\
          --parameters "LinuxDriverVersion=550,,,DiskFilter=SizeGreaterThan:500gb"
    """
    from workload.cli.console import ConsoleReporter, hosts_table, make_console, styled
    from workload.engine import Engine, RunOptions, unfinished_hosts
    from workload.errors import OutputError, UsageError
    from workload.rundir import RunFolder

    if iterations is not None and timeout_min is not None:
        raise UsageError("--iterations and --timeout cannot be used together (as in VirtualClient)")
    resolved = resolve_from_options(profile, parameters, scenarios)
    unfinished = set(unfinished_hosts(only_failed)) if only_failed is not None else None
    specs, factory = build_targets(targets, only=unfinished)
    hosts_factory = factory  # before telemetry wraps it (--slurm-requeue asks it for other nodes)
    # what this run masks in everything it shows or logs: the profile's secrets and the passwords it connects with
    secrets = resolved.secrets.union(*factory.secrets)
    if unfinished is not None:
        specs = [spec for spec in specs if spec.name in unfinished]
        if not specs:
            raise UsageError(
                f"--only-failed {only_failed}: no host to run",
                hint="every host of that run finished, or none of its unfinished hosts is among --host/--inventory",
            )
    from workload.cli import COMMAND_LINE
    from workload.runmeta import now_iso, run_metadata

    # taken now: the controller's load average is the load the run started under, not the one it left
    start_meta = run_metadata(now_iso(), COMMAND_LINE or None, secrets=secrets)
    console = make_console()
    try:
        folder = RunFolder.create(output_dir, resolved.name)
        folder.write_json("profile.json", resolved.to_json())
    except OSError as exc:  # nothing ran yet: a bad --output-dir is bad input
        raise UsageError(
            f"--output-dir {output_dir}: cannot create the run folder: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename else ""),
            hint="pick a writable folder with free space",
        ) from None
    options = RunOptions(
        dependencies_only=dependencies_only,
        iterations=iterations or 1,
        timeout_s=timeout_min * 60 if timeout_min else None,
        fail_fast=fail_fast,
        parallel=targets.parallel,
    )
    console.print(styled((resolved.name, "bold"), f" on {len(specs)} host(s); run folder ", (str(folder.root), "cyan")))
    total_steps = len(resolved.dependencies if dependencies_only else resolved.steps)
    engine_reporter = ConsoleReporter(
        console, hosts=[s.name for s in specs], verbose=verbose, total_steps=total_steps, secrets=secrets
    )
    from workload.cli import telemetry_hook

    # Telemetry of every host (workload.monitors), each sampled while the engine works on it.
    monitor, open_host, reporter = telemetry_hook.attach(
        folder.root, resolved, dependencies_only, factory, engine_reporter
    )
    engine = Engine(resolved, folder, open_host, options, reporter, secrets=secrets)
    if monitor is not None:
        monitor.start(cancel=engine.cancel)
    try:
        with engine_reporter:
            # Ctrl-C is handled inside: the hosts' commands are killed and every host gets an outcome.
            outcomes = engine.run(specs)
    finally:
        telemetry = telemetry_hook.detach(monitor)
    if not engine.interrupted:  # --slurm-requeue: the work of lost Slurm nodes once more on other nodes
        from workload.cli.slurm_targets import requeue_lost_nodes

        def rerun(more: list[Any], opener: Any) -> list[HostOutcome]:
            specs.extend(more)
            again = ConsoleReporter(console, hosts=[s.name for s in more], verbose=verbose, total_steps=total_steps)
            with again:
                return Engine(resolved, folder, opener, options, again).run(more)

        outcomes = requeue_lost_nodes(hosts_factory, outcomes, rerun)
    # From here on the benchmark has run: a file that cannot be written (disk full) is named and
    # the run goes on to print what was collected, then exits 8 (OutputError), not 1.
    write_errors: list[OutputError] = list(engine.write_errors)
    stopped = engine.interrupted or any(o.status == "interrupted" for o in outcomes)
    try:
        _write_run_json(folder, resolved.name, specs, options, outcomes, start_meta, secrets, tag)
    except OSError as exc:
        write_errors.append(OutputError.from_os_error("run.json", folder.root / "run.json", exc))
    metrics_code, main_metric, results_lines = _report_results(
        console, folder, resolved.name, outcomes, allow_invalid, write_errors=write_errors
    )
    from workload.cli.run_verdict import banner, run_reasons, write_verdict
    from workload.errors import EXIT_INTERRUPTED

    interrupt = (engine.cancel_reason or "interrupted") if stopped else None
    code = EXIT_INTERRUPTED if engine.interrupted else _exit_code(outcomes, metrics_code)
    if write_errors and code in (0, 6):
        code = write_errors[0].exit_code
    reasons = run_reasons(outcomes, secrets, interrupt)
    try:  # every run leaves a summary.json saying how it ended and why (CI may read only that file)
        write_verdict(folder, resolved.name, reasons, code, interrupt)
    except OSError as exc:
        write_errors.append(OutputError.from_os_error("summary.json", folder.root / "summary.json", exc))
        code = write_errors[0].exit_code if code in (0, 6) else code
    for line in _retry_lines(outcomes) + telemetry:
        console.print(line, highlight=False, markup=False)
    if len(specs) > 1:
        console.print(hosts_table(outcomes, main_metric, total_steps=total_steps))
    for outcome in outcomes:
        if outcome.error is not None:
            console.print(styled(("error: ", "red"), secrets.mask(str(outcome.error))), highlight=False)
    for line in banner(results_lines, reasons, code):
        console.print(line, highlight=False, markup=False)
    console.print(styled(f"run folder: {folder.root}"))
    for problem in write_errors:
        console.print(styled(("error: ", "red"), str(problem)), highlight=False)
    from workload.cli.history_hook import after_run

    after_run(folder.root, exit_code=code, history=history, tag=tag, junit=junit, echo=console.out)
    if engine.interrupted:
        console.print(styled(("interrupted", "yellow"), f": {_resume_note(resolved, outcomes)}"))
    return _finish(console, folder, code, history)


def _retry_lines(outcomes: list[HostOutcome]) -> list[str]:
    """Both attempts of every LoadGen test that was run again (workload.loadgen.retry)."""
    from workload.loadgen.retry import attempt_lines

    return [line for o in outcomes for line in attempt_lines(o.name, list(o.results))]


def _write_report(console: Console, folder: Any, history: str | None) -> None:
    """report.html in the run folder (with the history's trends of its headline metrics); a report
    that cannot be written is a warning, not a failed run."""
    from workload.cli.history_hook import history_trends
    from workload.errors import WorkloadError
    from workload.report.write import write_report

    try:
        path = write_report([folder.root], trends=history_trends(folder.root, history))
    except (WorkloadError, OSError, ValueError) as exc:
        console.print(f"warning: no report.html: {exc}", highlight=False, markup=False)
        return
    console.print(f"report: {path}", highlight=False, markup=False)


def _finish(console: Console, folder: Any, code: int, history: str | None) -> int:
    """run.json gets the end time and the exit code, the run folder its report.html; the code is returned."""
    from workload.runmeta import record_exit

    record_exit(folder.root / "run.json", code)
    _write_report(console, folder, history)
    return code


def _resume_note(resolved: Any, outcomes: list[HostOutcome]) -> str:
    """What a re-run would do after an interrupt, said only as far as it is true.

    Dependencies re-plan from the host's facts, so a re-run skips the finished ones; an action
    runs again from its start (LoadGen reruns every scenario; the MLPerf harness skips only its
    recorded setup stages and build). So "run again to resume" only when the stop hit dependencies.
    """
    kept = "finished steps and results are kept in the run folder; nothing new was started"
    actions = {step.label for step in resolved.actions}
    reached_actions = any(s.label in actions for o in outcomes for s in o.steps)
    if reached_actions:
        return f"{kept}; a new run starts the actions over (finished dependencies are not redone)"
    return f"{kept}; run again to resume (finished dependency steps are not redone)"


def _exit_code(outcomes: list[HostOutcome], metrics_code: int) -> int:
    from workload import errors

    failed = [o for o in outcomes if o.status == "failed"]
    if any(isinstance(o.error, errors.HostBug) for o in failed):
        return errors.EXIT_INTERNAL  # after every host finished and the run folder was written
    if failed:
        if all(isinstance(o.error, errors.ConnectError) for o in failed):
            return errors.EXIT_CONNECT
        return errors.EXIT_STEP_FAILED
    if any(o.status == "interrupted" for o in outcomes):
        return errors.EXIT_INTERRUPTED
    if any(o.status == "reboot-required" for o in outcomes):
        return errors.EXIT_REBOOT_REQUIRED
    return metrics_code


def _report_results(
    console: Console,
    folder: Any,
    profile_name: str,
    outcomes: list[HostOutcome],
    allow_invalid: bool,
    *,
    write_errors: list[Any],
) -> tuple[int, dict[str, str], list[str]]:
    """Parse every host's result folders, write the merged metrics files, print the table.

    Returns the verdict exit code (0 or 6), each host's main metric for the hosts table and the
    results' verdict lines (printed with the run's verdict once the exit code is known).
    """
    from workload.errors import EXIT_INVALID_RESULTS, EXIT_OK

    if not any(outcome.results for outcome in outcomes):
        return EXIT_OK, {}, []  # e.g. a provisioning-only profile: no need to load the metrics package
    from workload.metrics import Collection, OutputContext, Verdict, collect, render_table, write_outputs

    merged = Collection()
    main_metric: dict[str, str] = {}
    for outcome in outcomes:
        for path in outcome.results:
            # inventory labels (rack=r12) go into each metric's metadata; parsed values win
            merged.extend(collect(path, host=outcome.name, labels=outcome.labels))
        headline = merged.headline_for_host(outcome.name)
        if headline:
            main_metric[outcome.name] = headline
    if not merged.results and not merged.issues:
        return EXIT_OK, main_metric, []
    context = OutputContext(experiment_id=folder.run_id, profile_name=profile_name)
    try:
        write_outputs(folder.root, merged.results, context, issues=merged.issues)
    except OSError as exc:  # the verdict below is still printed
        from workload.errors import OutputError

        write_errors.append(OutputError.from_os_error("the metrics files", folder.root, exc))
    console.print(render_table(merged))
    verdict = Verdict.from_results(merged.results, merged.issues)  # unreadable files fail it, each named
    if verdict.ok or allow_invalid:
        return EXIT_OK, main_metric, verdict.lines()
    return EXIT_INVALID_RESULTS, main_metric, verdict.lines()


def _write_run_json(
    folder: Any,
    profile_name: str,
    specs: list[Any],
    options: Any,
    outcomes: list[HostOutcome],
    start_meta: dict[str, Any],
    secrets: Secrets,
    tag: str | None,
) -> None:
    from dataclasses import asdict

    folder.write_json(
        "run.json",
        {
            "run_id": folder.run_id,
            "profile": profile_name,
            "tag": tag,  # the run's own: a later `results RUN --record` keeps it
            **start_meta,
            "hosts": [{"name": s.name, "labels": s.labels} for s in specs],
            "options": {k: v for k, v in asdict(options).items() if k != "step_options"},
            "outcomes": [o.to_json(secrets) for o in outcomes],
        },
    )


@click.command("plan")
@profile_options
@parameter_options
@host_options
@click.option("--dependencies", "-d", "dependencies_only", is_flag=True, help="Plan only the dependency steps.")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 4 when a step would fail if run now (it cannot be planned, or it needs a GPU the host lacks).",
)
@click.option(
    "--output-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Ignored: plan writes no run folder. Accepted so that a run command line works as a plan one.",
)
@click.option(
    "--details",
    is_flag=True,
    help="Every step in full: its parameters, each exact command, notes (the summary follows).",
)
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="--details, with embedded shell scripts in full (they are shortened otherwise).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the plans as JSON on stdout (the progress goes to stderr)."
)
def plan_command(
    profile: str,
    parameters: tuple[str, ...],
    scenarios: str | None,
    targets: Targets,
    dependencies_only: bool,
    strict: bool,
    output_dir: Path | None,
    details: bool,
    verbose: int,
    as_json: bool,
) -> int:
    """Show what `run` would do on each host, changing nothing (a dry run).

    \b
    Each step reads facts from the host (read-only commands). Per host, plan first says what
    GPUs it has, then which steps would change something, which have nothing to do (and why),
    and which would fail if run now (and why); --details prints every step in full: the exact
    commands it would run, or "no change" with the reason. On a fresh machine the plans of later
    steps are previews: they depend on what earlier steps install, and `run` re-plans each step
    right before applying it. plan writes no run folder (its step logs go to a temporary folder
    that is removed, and --output-dir is ignored). Whatever the steps would do, it exits 0 (bad
    input is 2, a host it cannot reach 3); --strict exits 4 when a step would fail.

    \b
    Examples:
      workload plan --profile PERF-GPU-MLPERF --host ssh://azureuser@10.0.0.4
      workload plan --profile PERF-GPU-MLPERF --inventory fleet.txt --strict
      workload plan --profile PERF-GPU-MLPERF --details
    """
    import tempfile

    from workload.cli.console import ConsoleReporter, make_console, styled
    from workload.cli.plan_summary import GpuSurvey, SurveyingReporter, print_summary, summarize, total_line
    from workload.engine import Engine, RunOptions
    from workload.errors import EXIT_STEP_FAILED
    from workload.outcomes import NullReporter, Reporter
    from workload.rundir import RunFolder

    del output_dir  # accepted for run's command lines; plan writes nothing to keep
    details = details or verbose > 0
    resolved = resolve_from_options(profile, parameters, scenarios)
    specs, factory = build_targets(targets)
    secrets = resolved.secrets.union(*factory.secrets)
    console = make_console(stderr=as_json)
    console.print(styled((resolved.name, "bold"), f": {resolved.shown_description}"))
    gpu_steps = [step.label for step in resolved.steps if step.needs_nvidia_gpu()]
    survey = GpuSurvey(factory)
    summaries = []
    with tempfile.TemporaryDirectory(prefix="workload-plan-") as tmp:
        folder = RunFolder.create(Path(tmp), resolved.name)
        options = RunOptions(dependencies_only=dependencies_only, parallel=targets.parallel)
        outcomes: list[HostOutcome] = []
        for spec in specs:  # one host at a time so the plans print in order
            console.print(styled(("\n== host " + spec.name + " ==", "bold")))
            shown: Reporter = NullReporter()
            if details:
                shown = ConsoleReporter(
                    console, hosts=[spec.name], show_parameters=True, verbose=verbose, planning=True, secrets=secrets
                )
            engine = Engine(resolved, folder, survey, options, SurveyingReporter(shown, survey), secrets=secrets)
            outcome = engine.run([spec], plan_only=True)[0]
            outcomes.append(outcome)
            summaries.append(summarize(outcome, survey.found.get(spec.name), gpu_steps, secrets))
            if details:
                console.print(styled(("-- summary of " + spec.name, "bold")))
            print_summary(console, summaries[-1])
    errors = [o for o in outcomes if o.error is not None]
    for outcome in errors:
        console.print(styled(("error: ", "red"), secrets.mask(str(outcome.error))), highlight=False)
    console.print(styled("\n" + total_line(summaries)))
    would_fail = any(summary.fail for summary in summaries)
    if would_fail and not strict:
        console.print(styled(("exit 0: plan only reports; --strict exits 4 when a step would fail", "dim")))
    if not details:
        console.print(styled(("every step in full (parameters, exact commands, notes): add --details", "dim")))
    code = _exit_code(outcomes, 0) if errors else EXIT_STEP_FAILED if strict and would_fail else 0
    if as_json:
        from workload.cli.plan_json import plan_document

        click.echo(plan_document(resolved.name, outcomes, code, secrets, summaries=summaries))
    return code
