"""Every registered step type declares the facts each phase reads (issue 28): preflight and plan, then verify, run
on this real host through a host that records every command; each one must be a query the step declared for that
phase (:meth:`workload.steps.Step.facts`), so the engine's prefetch and memo cover it and ``doctor``-style readers
can trust the declaration.

Real local host (a LocalHost that records what it is asked to run). This machine is no GPU server and has none of
the steps' disks or checkouts: a refusal is fine, a command that is not declared is not.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.steptypes import step_context
from workload import registry
from workload.commands import Command, cmd
from workload.errors import WorkloadError
from workload.facts.fact import Fact, HostFacts
from workload.hosts.base import CommandResult, LineSink
from workload.hosts.local import LocalHost
from workload.steps import FactPhase, Step, StepContext, StepParameters, StepPlan


class RecordingHost(LocalHost):
    """A real local host that records every command it is asked to run outside a declared fact's reader.

    A fact's reader may run commands that depend on its own first answer (``blkid`` of each disk ``lsblk``
    listed); those belong to the declared fact. Everything else a phase runs must be a declared query.
    """

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[Command] = []
        #: How many declared facts are being read right now (HostFacts lookups in progress).
        self.reading = 0

    def run(self, command: Command, *, on_line: LineSink | None = None, capture_limit: int = 1 << 20) -> CommandResult:
        if not self.reading:
            self.commands.append(command)
        return super().run(command, on_line=on_line, capture_limit=capture_limit)


@pytest.fixture(autouse=True)
def fact_reads_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mark the commands a declared fact's reader runs (the view's own lookup, unchanged, around it)."""
    lookup = HostFacts.__getitem__

    def marked(self: HostFacts, fact: Fact[Any]) -> Any:
        host = self.host
        if isinstance(host, RecordingHost):
            host.reading += 1
            try:
                return lookup(self, fact)
            finally:
                host.reading -= 1
        return lookup(self, fact)

    monkeypatch.setattr(HostFacts, "__getitem__", marked)


def parameters(type_name: str, tmp_path: Path) -> dict[str, Any]:
    """Values each type needs to plan here, and what it reads made real under ``tmp_path`` where a step reads more
    of an existing thing than of a missing one (a clone, a harness checkout). Nothing shared between tests."""
    if type_name == "GitRepoClone":
        clone = tmp_path / "packages" / "repo"
        clone.mkdir(parents=True)
        for argv in (["init", "-q"], ["remote", "add", "origin", "https://example.invalid/other.git"]):
            subprocess.run(["git", "-C", str(clone), *argv], check=True, capture_output=True)
        return {
            "RepoUri": "https://example.invalid/repo.git",
            "PackageName": "repo",
            "PackageDir": str(tmp_path / "packages"),
            "Commit": "abcdef1",
        }
    if type_name == "MLPerfExecutor":
        nvidia = tmp_path / "repo" / "closed" / "NVIDIA"
        (nvidia / "build" / "logs").mkdir(parents=True)
        (nvidia / "VERSION").write_text("4.1\n")
        return {
            "Model": "bert",
            "RepoPath": str(nvidia),
            "ScratchPath": str(tmp_path / "scratch"),
            "DockerBaseUrl": "tcp://127.0.0.1:9",
        }
    if type_name == "NvidiaCudaInstallation":
        return {
            "LinuxDriverVersion": "550",
            "LinuxCudaVersion": "12.4",
            "LinuxLocalRunFile": "https://example.invalid/cuda_12.4.0_550.54.14_linux.run",
        }
    return {}


def undeclared_commands(step: Step, ctx: StepContext) -> dict[FactPhase, list[str]]:
    """The commands each phase (preflight and plan; verify) ran outside a declared fact, on ``ctx``'s RecordingHost."""
    host = ctx.host
    assert isinstance(host, RecordingHost)
    found: dict[FactPhase, list[str]] = {}
    phases: list[tuple[FactPhase, list[Callable[[StepContext], Any]]]] = [
        ("plan", [step.preflight, step.plan]),
        ("verify", [step.verify]),
    ]
    for phase, calls in phases:
        declared = {q.display() for q in step.fact_queries(ctx, phase)}
        host.commands.clear()
        for call in calls:
            # This machine has no GPU, disk or checkout of the step's: a refusal is fine (an UndeclaredFact is no
            # WorkloadError: it fails the test).
            with contextlib.suppress(WorkloadError):
                call(ctx)
        found[phase] = [c.display() for c in host.commands if c.display() not in declared]
    return found


@pytest.mark.parametrize("type_name", registry.known_types())
def test_every_command_a_phase_runs_is_a_fact_it_declared(type_name: str, tmp_path: Path) -> None:
    step_type = registry.step_class(type_name)
    params = step_type.Parameters.model_validate(parameters(type_name, tmp_path))
    step = step_type(params, location="Steps[0]", kind=registry.step_kind(type_name) or "action")
    ctx = step_context(RecordingHost(), tmp_path)
    ctx.options = {"allow_no_gpu": True}
    assert undeclared_commands(step, ctx) == {"plan": [], "verify": []}


class ReadsWithoutDeclaring(Step):
    """Runs a read-only command in plan that it does not declare: what the check above must catch."""

    type_name: ClassVar[str] = "ReadsWithoutDeclaring"

    def plan(self, ctx: StepContext) -> StepPlan:
        ctx.host.run(cmd("uname", "-s", timeout=30, readonly=True))
        return StepPlan.noop("nothing to do")


def test_a_command_outside_a_declared_fact_is_found(tmp_path: Path) -> None:
    step = ReadsWithoutDeclaring(StepParameters(), location="Steps[0]", kind="action")
    ctx = step_context(RecordingHost(), tmp_path)
    assert undeclared_commands(step, ctx) == {"plan": ["uname -s"], "verify": []}
