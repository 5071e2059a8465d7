"""Facts declared once (workload/facts/fact.py): the declaration drives prefetching, memoising and
doctor, and a read that is not declared fails, so declarations cannot drift from the reads.

Real local hosts and the real engine; the only stand-in is a LocalHost that records the commands
it is asked to run (to compare them with the declarations).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.steptypes import step_context
from workload import doctor, registry
from workload.commands import Command, cmd
from workload.engine import Engine, HostOutcome, RunOptions, StepOutcome
from workload.errors import WorkloadError
from workload.facts import docker as docker_facts
from workload.facts import nvidia, packages, system
from workload.facts.fact import Fact, HostFacts, UndeclaredFact, command_fact, queries_of
from workload.hosts.base import CommandResult, Host, HostSpec, LineSink, parse_host_spec
from workload.hosts.local import LocalHost
from workload.installers.docker import DockerInstallation, DockerParameters
from workload.installers.download import download_state
from workload.installers.nvidia_container_toolkit import NvidiaContainerToolkitInstallation, ToolkitParameters
from workload.installers.nvidia_cuda import NvidiaCudaInstallation, NvidiaCudaParameters
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder
from workload.steps import Change, FactPhase, Step, StepContext, StepParameters, StepPlan


class CountingParameters(StepParameters):
    #: The file the fact's command appends a line to each time it runs on the host.
    Marker: str
    #: "change": plan a change (a command that is not read-only); "noop": plan nothing.
    Mode: str = "noop"


def counting_fact(marker: str) -> Fact[str]:
    """A real read-only command that leaves a trace each time it runs."""
    query = cmd("sh", "-c", 'echo read >> "$1"; echo value', "fact", marker, readonly=True)
    return command_fact(f"counting({marker})", query, lambda _host, result: result.stdout.strip())


class CountingFactStep(Step):
    """Declares one counting fact for plan and verify and reads it in preflight, plan and verify."""

    type_name: ClassVar[str] = "CountingFactStep"
    Parameters: ClassVar[type[StepParameters]] = CountingParameters

    @property
    def p(self) -> CountingParameters:
        assert isinstance(self.params, CountingParameters)
        return self.params

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        return [counting_fact(self.p.Marker)]

    def preflight(self, ctx: StepContext) -> None:
        assert self.read_facts(ctx, "plan")[counting_fact(self.p.Marker)] == "value"

    def plan(self, ctx: StepContext) -> StepPlan:
        facts = self.read_facts(ctx, "plan")
        assert facts[counting_fact(self.p.Marker)] == facts[counting_fact(self.p.Marker)] == "value"
        if self.p.Mode == "change":
            return StepPlan(changes=(Change("change something", (cmd("true"),)),))
        return StepPlan.noop("nothing to do")

    def verify(self, ctx: StepContext) -> None:
        self.read_facts(ctx, "verify")[counting_fact(self.p.Marker)]


class UndeclaredReaderStep(CountingFactStep):
    """Declares nothing, yet reads the counting fact: the drift the declarations must catch."""

    type_name: ClassVar[str] = "UndeclaredReaderStep"

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        return [system.ARCHITECTURE] if phase == "plan" else []


@pytest.fixture(autouse=True)
def step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    here = {name: f"tests.test_facts_declared:{name}" for name in ("CountingFactStep", "UndeclaredReaderStep")}
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **here})


class Quiet:
    def step_started(self, host: str, step: Step) -> None:
        pass

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        pass

    def line(self, host: str, text: str) -> None:
        pass

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        pass


def run_profile(tmp_path: Path, steps: list[dict[str, Any]], *, plan_only: bool) -> HostOutcome:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"Description": "t", "Dependencies": steps}))
    profile = resolve_profile(load_profile(str(path)))
    options = RunOptions(state_path=str(tmp_path / "state.json"))
    folder = RunFolder.create(tmp_path / "runs", profile.name)

    def factory(spec: HostSpec) -> Host:
        return LocalHost(spec.name)

    engine = Engine(profile, folder, factory, options, Quiet())
    (outcome,) = engine.run([parse_host_spec("local://")], plan_only=plan_only)
    return outcome


def reads(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


# -- memoising: one read per host per phase ------------------------------------------------------------
def test_a_fact_two_steps_need_is_read_once_per_host_when_planning(tmp_path: Path) -> None:
    marker = tmp_path / "reads"
    step = {"Type": "CountingFactStep", "Parameters": {"Marker": str(marker), "Mode": "change"}}
    outcome = run_profile(tmp_path, [step, step], plan_only=True)
    assert [s.status for s in outcome.steps] == ["planned", "planned"], outcome.error
    # Two steps, each with a preflight and a plan that reads the fact twice: one command on the host.
    assert reads(marker) == 1


def test_a_fact_is_read_again_only_after_the_host_changed(tmp_path: Path) -> None:
    marker = tmp_path / "reads"
    noop = {"Type": "CountingFactStep", "Parameters": {"Marker": str(marker)}}
    outcome = run_profile(tmp_path, [noop, noop], plan_only=False)
    assert [s.status for s in outcome.steps] == ["unchanged", "unchanged"], outcome.error
    assert reads(marker) == 1  # nothing changed: every phase of both steps shares one read

    marker.unlink()
    change = {"Type": "CountingFactStep", "Parameters": {"Marker": str(marker), "Mode": "change"}}
    outcome = run_profile(tmp_path, [change, change], plan_only=False)
    assert outcome.status == "ok", outcome.error
    # preflight+plan of step 1 (one read); step 1 changes the host, so its verify reads again and
    # step 2's plan reuses that; step 2 changes the host, so its verify reads once more.
    assert reads(marker) == 3


def test_a_view_reads_each_fact_once_even_where_the_host_remembers_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "reads"
    fact = counting_fact(str(marker))
    view = HostFacts(LocalHost(), [fact], reader="test")
    assert view[fact] == view[counting_fact(str(marker))] == "value"  # same name: the same fact
    assert reads(marker) == 1
    assert view.read_names == [fact.name]
    assert HostFacts(LocalHost(), [fact], reader="test")[fact] == "value"  # a new phase reads again
    assert reads(marker) == 2


# -- prefetching is derived from the declaration ------------------------------------------------------
def test_the_engine_prefetches_exactly_the_declared_queries(tmp_path: Path) -> None:
    params = DockerParameters.model_validate({"Username": "alice"})
    step = DockerInstallation(params, location="Dependencies[0]", kind="dependency")
    ctx = step_context(LocalHost(), tmp_path)
    declared = step.facts(ctx, "plan")
    assert step.fact_queries(ctx, "plan") == queries_of(declared)
    lines = {q.display() for q in step.fact_queries(ctx, "plan")}
    assert system.user_home_query("alice").display() in lines
    assert docker_facts.docker_info_query().display() in lines
    assert [q.display() for q in step.fact_queries(ctx, "verify")] == [docker_facts.docker_info_query().display()]


def test_a_fact_that_would_change_the_host_cannot_be_declared() -> None:
    with pytest.raises(ValueError, match="not read-only"):
        Fact("bad", lambda host: None, (cmd("rm", "-f", "/tmp/x"),))


# -- reads that are not declared fail -----------------------------------------------------------------
def test_a_step_that_reads_an_undeclared_fact_fails_loudly(tmp_path: Path) -> None:
    marker = tmp_path / "reads"
    params = CountingParameters.model_validate({"Marker": str(marker)})
    step = UndeclaredReaderStep(params, location="Dependencies[0]", kind="dependency")
    ctx = step_context(LocalHost(), tmp_path)
    with pytest.raises(UndeclaredFact, match=r"Dependencies\[0\] UndeclaredReaderStep \(plan\) reads the fact") as e:
        step.plan(ctx)
    assert f"counting({marker})" in str(e.value) and "declared: architecture" in str(e.value)
    with pytest.raises(UndeclaredFact, match=r"\(verify\).*declared: none"):
        step.verify(ctx)
    assert reads(marker) == 0  # refused before anything ran
    assert not isinstance(e.value, WorkloadError)  # a programming error, never a user's message


class RecordingHost(LocalHost):
    """A real local host that also records every command it is asked to run."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[Command] = []

    def run(self, command: Command, *, on_line: LineSink | None = None, capture_limit: int = 1 << 20) -> CommandResult:
        self.commands.append(command)
        return super().run(command, on_line=on_line, capture_limit=capture_limit)


INSTALLERS: list[tuple[type[Step], type[StepParameters], dict[str, Any]]] = [
    (DockerInstallation, DockerParameters, {}),
    (NvidiaContainerToolkitInstallation, ToolkitParameters, {}),
    (
        NvidiaCudaInstallation,
        NvidiaCudaParameters,
        {
            "LinuxDriverVersion": "550",
            "LinuxCudaVersion": "12.4",
            "LinuxLocalRunFile": "https://example.invalid/cuda_12.4.0_550.54.14_linux.run",
        },
    ),
]


@pytest.mark.parametrize(("step_type", "params_type", "values"), INSTALLERS, ids=lambda v: getattr(v, "__name__", ""))
def test_installers_read_only_what_they_declare(
    tmp_path: Path, step_type: type[Step], params_type: type[StepParameters], values: dict[str, Any]
) -> None:
    """Preflight, plan and verify on this real host: every fact read is declared (or the view would
    raise), and every query declared is one the phase runs (no stale declarations)."""
    step = step_type(params_type.model_validate(values), location="Dependencies[0]", kind="dependency")
    host = RecordingHost()
    ctx = step_context(host, tmp_path)
    ctx.options = {"allow_no_gpu": True}
    for phase, calls in (("plan", (step.preflight, step.plan)), ("verify", (step.verify,))):
        host.commands.clear()
        for call in calls:
            # This machine is no GPU server: a refusal is fine, an undeclared read is not.
            with contextlib.suppress(WorkloadError):
                call(ctx)
        ran = {c.display() for c in host.commands}
        declared = {q.display() for q in step.fact_queries(ctx, phase)}
        if phase == "plan":
            assert declared <= ran, f"{step_type.__name__} declares queries its {phase} never runs"


# -- the library's declarations match their readers ---------------------------------------------------
LIBRARY: list[Fact[Any]] = [
    system.ARCHITECTURE,
    system.user_home(None),
    system.free_space("/tmp/not/yet/there"),
    packages.LISTS_FRESH,
    packages.package_facts(("dpkg", "coreutils")),
    docker_facts.DOCKER_INFO,
    docker_facts.NVIDIA_CTK_VERSION,
    nvidia.GPUS,
    nvidia.FABRIC_MANAGER,
    nvidia.DRIVER_ORIGIN,
    nvidia.cuda_toolkit("/usr/local/cuda-12.4"),
    download_state("/tmp/not-downloaded.run"),
]


@pytest.mark.parametrize("fact", LIBRARY, ids=lambda f: f.name)
def test_a_fact_declares_exactly_the_commands_its_reader_runs(fact: Fact[Any]) -> None:
    host = RecordingHost()
    with contextlib.suppress(WorkloadError):  # e.g. apt-cache missing here: the commands tried count
        fact.read(host)
    ran = [c.display() for c in host.commands]
    assert ran == [q.display() for q in fact.queries]


def test_a_declared_fact_reads_from_the_prefetched_batch() -> None:
    host = RecordingHost()
    facts = [system.ARCHITECTURE, nvidia.GPUS, docker_facts.NVIDIA_CTK_VERSION]
    with host.remembering_facts():
        view = HostFacts(host, facts, reader="test")
        assert view.prefetch() == 4  # arch, nvidia-smi, the PCI scan, nvidia-ctk in one round trip
        host.commands.clear()
        view[system.ARCHITECTURE]
        view[nvidia.GPUS]
        memo = host._fact_memo
        assert memo is not None and len(memo) == 4  # answered from the batch: nothing new remembered


# -- doctor -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scratch", [None, "/tmp"])
def test_doctor_reads_exactly_the_facts_it_declares(monkeypatch: pytest.MonkeyPatch, scratch: str | None) -> None:
    views: list[HostFacts] = []

    class Kept(HostFacts):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            views.append(self)

    monkeypatch.setattr(doctor, "HostFacts", Kept)
    monkeypatch.setenv("WORKLOAD_STATE_PATH", "/nonexistent/state.json")
    facts = doctor.read_doctor_facts(LocalHost(), scratch_path=scratch)
    (view,) = views
    declared = [f.name for f in doctor.doctor_facts(scratch)]
    assert sorted(view.read_names) == sorted(declared)
    assert ("free-space(/tmp)" in declared) == (scratch is not None)
    checks = {c.name: c for c in doctor.run_checks(facts)}
    assert (checks["scratch space"].status == "skip") == (scratch is None)
