"""Test driver: run a v5.x plan's ops in a real harness container without the engine, op by op.

``workload run`` runs the ops through the interpreter (tests/test_mlperf_rounds_run.py); this driver runs the very
op list the planner returns through the real :class:`~workload.mlperf.container.HarnessContainer` (``docker
exec`` run by the host's transport), :mod:`workload.mlperf.llm_server` and
:func:`~workload.mlperf.results.find_results`, recording every argv, so the tests can compare what ran with what
``plan`` prints for the same inputs, and stop the container from another thread at a chosen moment. Every command
it runs is an op's own argv.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.errors import BenchmarkFailed
from workload.hosts.local import LocalHost
from workload.mlperf import llm_server, results
from workload.mlperf.container import HarnessContainer
from workload.mlperf.custom_system import is_ours
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.ops import (
    BuildHarness,
    CollectResults,
    ContainerRef,
    EnsureContainer,
    EnsureScratch,
    IdentifySystem,
    MakeTarget,
    Op,
    PrepareTree,
    SetupStage,
    UseImage,
)
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds.v5_1 import (
    custom_files,
    custom_system_id,
    is_unregistered,
    minimal_fallback,
    missing_configs,
    system_answer,
)
from workload.mlperf.server_ops import StartServer, StopServer
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters
from workload.mlperf.system import HostSystem


@dataclass
class Applied:
    """What a driven run did: every argv run in the container, the files written, results found, its log."""

    argvs: list[tuple[str, ...]] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    found: list[results.Found] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    system_name: str | None = None


def _exec(container: HarnessContainer, applied: Applied, argv: Sequence[str]) -> tuple[int, str]:
    applied.argvs.append(tuple(argv))
    return container.exec(list(argv), on_line=None)


def root_exec(container: HarnessContainer) -> Any:
    """An exec as root that works after ``container.stop()`` (what stops a server after an interrupt)."""

    return container.root_exec


def apply_v51(
    params: MLPerfParameters,
    facts: MLPerfFacts,
    container: HarnessContainer,
    system: HostSystem,
    *,
    run_id: str,
    applied: Applied,
) -> Applied:
    """Plan, then run the ops; after the system check, plan again with the system it decided (SYSTEM_NAME)."""
    assert facts.nvidia_dir
    plan = plan_ops(params, facts, run_id=run_id)
    before = list(plan.ops[: plan.ops.index(next(op for op in plan.ops if isinstance(op, IdentifySystem))) + 1])
    for op in before:
        _prepare(op, container, applied)
    check = before[-1]
    assert isinstance(check, IdentifySystem)
    code, output = _exec(container, applied, check.argv)
    answer = system_answer(output) or ""
    applied.log.append(f"system check: {answer!r} (exit {code})")
    if code != 0 or not answer:
        raise BenchmarkFailed(f"the system check failed: {output}")
    if is_unregistered(answer):
        if not check.custom_support:
            raise BenchmarkFailed(f"the v5.1 harness does not know this system ({answer}) and would run minimal")
        table = load_table(harness_round="v5.1")
        sku = table.sku_for_gpu(system.gpu_name) if table.has_gpu(system.gpu_name) else None
        sku = sku or load_table(harness_round="v5.0").sku_for_gpu(system.gpu_name)
        name = custom_system_id(system, sku)
        settings = plan.inputs.settings
        workload_settings = [_setting(v) for v in settings.config_versions]
        for generated, _provenance in custom_files(
            system, sku, settings.model, settings.scenarios, workload_settings, allow_untuned=True
        ):
            target = Path(facts.nvidia_dir) / generated.path
            if target.exists() and not is_ours(target.read_text()):
                raise BenchmarkFailed(f"{generated.path} is not ours; not overwriting it")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(generated.text)
            applied.written.append(generated.path)
        applied.system_name = name
    else:
        applied.system_name = answer
        nvidia = Path(facts.nvidia_dir)
        settings_ = plan.inputs.settings
        missing = missing_configs(answer, settings_.model, settings_.scenarios, lambda p: (nvidia / p).exists())
        if missing:
            raise BenchmarkFailed(
                f"the v5.1 harness has no config for {answer} ({', '.join(missing)}) and would run configs/minimal"
            )
    rest = plan_ops(params, facts, run_id=run_id, system_name=applied.system_name).after_system_check()

    def handle(op: Op) -> None:
        _run(op, container, applied)

    def exec_for(_ref: ContainerRef) -> Any:
        return lambda argv: _exec(container, applied, argv)

    run_with_servers(rest, handle, exec_for, stop_exec_for=lambda _ref: root_exec(container), log=applied.log.append)
    return applied


def _setting(config_version: str) -> Any:
    from workload.mlperf.catalog import WorkloadSetting

    return WorkloadSetting("Custom", "k_99_9" if "high_accuracy" in config_version else "k_99", "MaxP")


def _prepare(op: Op, container: HarnessContainer, applied: Applied) -> None:
    if isinstance(op, EnsureScratch):
        for folder in op.folders:
            Path(op.scratch, folder).mkdir(parents=True, exist_ok=True)
    elif isinstance(op, (UseImage, EnsureContainer)):
        container.ensure_running()
    elif isinstance(op, PrepareTree):
        if op.done:
            return
        code, output = _exec(container, applied, op.argv)
        if code != 0:
            raise BenchmarkFailed(f"preparing {op.folder} failed: {output[-500:]}")
    elif not isinstance(op, IdentifySystem):
        raise AssertionError(f"unexpected op before the system check: {op}")


def _run(op: Op, container: HarnessContainer, applied: Applied) -> None:
    if isinstance(op, (SetupStage, BuildHarness)):
        if op.done:
            return
        code, output = _exec(container, applied, op.argv)
        if code != 0:
            raise BenchmarkFailed(f"{' '.join(op.argv)} failed: {output[-500:]}")
    elif isinstance(op, MakeTarget):
        code, output = _exec(container, applied, op.argv)
        fallback = minimal_fallback(output)
        if fallback:
            raise BenchmarkFailed(f"make {op.target} ran the harness's minimal settings: {fallback[0]}")
        if code != 0:
            raise BenchmarkFailed(f"make {op.target} failed (exit {code}): {output[-800:]}")
    elif isinstance(op, CollectResults):
        found = results.find_results(LocalHost(), op.log_dir, op.test_mode)
        have = {f.expected for f in found}
        missing = [str(e) for e in op.expected if e not in have]
        if missing:
            raise BenchmarkFailed(f"no result for {', '.join(missing)} in {posixpath.basename(op.log_dir)}")
        applied.found += found
    else:
        raise AssertionError(f"unexpected op: {op}")


def apply_v50(
    params: MLPerfParameters,
    facts: MLPerfFacts,
    container: HarnessContainer,
    system: HostSystem,
    *,
    run_id: str,
    applied: Applied,
) -> Applied:
    """v5.0: the system check prints ``None``/``KnownSystem.<member>``; an unknown system becomes an entry of
    custom_list.json plus a custom.py per scenario (v5.0's values), then the planned runs."""
    from workload.mlperf.catalog import workload_setting
    from workload.mlperf.rounds.v5_0 import V5_0Round

    assert facts.nvidia_dir
    nvidia = Path(facts.nvidia_dir)
    plan = plan_ops(params, facts, run_id=run_id)
    check_index = plan.ops.index(next(op for op in plan.ops if isinstance(op, IdentifySystem)))
    for op in plan.ops[:check_index]:
        _prepare(op, container, applied)
    check = plan.ops[check_index]
    assert isinstance(check, IdentifySystem)
    code, output = _exec(container, applied, check.argv)
    answers = [
        line.strip() for line in output.splitlines() if line.strip() == "None" or line.startswith("KnownSystem.")
    ]
    answer = answers[-1] if answers else ""
    if code != 0 or not answer:
        raise BenchmarkFailed(f"the system check failed: {output}")
    if answer == "None":
        if not check.custom_support:
            raise BenchmarkFailed("the v5.0 harness does not know this system and would run nothing")
        harness = V5_0Round()
        table = load_table(harness_round="v5.0")
        sku = table.sku_for_gpu(system.gpu_name)
        member = f"WL_{sku.sku}x{system.gpu_count}"
        list_path = nvidia / harness.custom_list_path
        existing = list_path.read_text() if list_path.exists() else None
        list_path.write_text(harness.merge_custom_list(existing, harness.custom_list_block(system, sku)))
        applied.written.append(harness.custom_list_path)
        settings = plan.inputs.settings
        for scenario in settings.scenarios:
            classes = []
            for version in settings.config_versions:
                setting = workload_setting(settings.model, version)
                high = setting.accuracy == "k_99_9"
                classes.append(
                    (
                        setting,
                        table.resolve(system.gpu_name, system.gpu_count, settings.model, scenario, high_accuracy=high),
                    )
                )
            generated = harness.custom_config(
                settings.model, scenario, member, member.upper(), classes, plan.inputs.version
            )
            target = nvidia / generated.path
            if target.exists() and not is_ours(target.read_text()):
                raise BenchmarkFailed(f"{generated.path} is not ours; not overwriting it")
            target.write_text(generated.text)
            applied.written.append(generated.path)
        applied.system_name = member
    else:
        applied.system_name = answer.removeprefix("KnownSystem.")
    for op in plan.after_system_check():
        _run(op, container, applied)
    return applied


def run_with_servers(  # the interpreter does the same with its own handlers
    ops: Sequence[Op],
    handle: Callable[[Op], None],
    exec_for: Callable[[ContainerRef], llm_server.Exec],
    *,
    stop_exec_for: Callable[[ContainerRef], llm_server.Exec] | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> None:
    """Run ``ops`` in order: server ops here, every other op through ``handle``.

    ``exec_for(container)`` runs an argv in that container. A server started here and not yet stopped when an op
    raises (any exception, KeyboardInterrupt included) is stopped before the exception goes on, through
    ``stop_exec_for`` when given (an exec that still works after the runner was told to stop).
    """
    running: list[StartServer] = []
    try:
        for op in ops:
            if isinstance(op, StartServer):
                llm_server.start(exec_for(op.container), op.spec)
                running.append(op)
                took = llm_server.wait_ready(exec_for(op.container), op.spec)
                log(f"LLM server for {op.what} answers on {op.spec.where()} after {took:.0f}s")
            elif isinstance(op, StopServer):
                llm_server.stop(exec_for(op.container), op.spec)
                running[:] = [s for s in running if s.spec != op.spec]
                log(f"LLM server for {op.what} stopped")
            else:
                handle(op)
    finally:
        for started in reversed(running):
            stopper = (stop_exec_for or exec_for)(started.container)
            try:
                llm_server.stop(stopper, started.spec)
                log(f"LLM server for {started.what} stopped")
            except Exception as exc:  # the op's own error matters more: report and go on
                log(f"could not stop the LLM server for {started.what}: {exc}")
