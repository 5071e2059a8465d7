"""Test driver: run a v5.x plan's ops in a real harness container, the way ``apply`` runs them.

The executor's interpreter (issue 14) runs v4.1's ops; until it handles the v5 ones (server ops, SYSTEM_NAME, the
minimal-fallback check) this driver executes the same op list the planner returns, op by op, through the real
:class:`~workload.mlperf.container.HarnessContainer` (docker SDK exec),
:func:`~workload.mlperf.server_ops.run_with_servers` and :func:`~workload.mlperf.results.find_results`. Every
command it runs is an op's own argv: what ``plan`` prints.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.errors import BenchmarkFailed
from workload.hosts.local import LocalHost
from workload.mlperf import results
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
from workload.mlperf.server_ops import run_with_servers
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

    def run(argv: Sequence[str]) -> tuple[int, str]:
        api = container.client.api
        created = api.exec_create(container.spec.name, cmd=list(argv), user="0:0", workdir="/work")
        output = api.exec_start(created["Id"]).decode("utf-8", "replace")
        return int(api.exec_inspect(created["Id"]).get("ExitCode") or 0), output

    return run


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
