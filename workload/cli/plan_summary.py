"""What ``workload plan`` shows first: per host its GPU situation and its steps in three groups.

A plan in full (every command, every parameter, every note) runs to hundreds of lines per host; it
is shown with ``--details``. The summary says per host: the GPUs (read once, from the facts the
plan fetched anyway where a step reads them: :class:`GpuSurvey`), then
the steps that would change something (with the first change), those with nothing to do (with the
reason) and those that would fail if run now (with the reason and the hint). A step that needs an
NVIDIA GPU (:meth:`workload.steps.Step.needs_nvidia_gpu`) on a host with none on its PCI bus is
one that would fail, even where its own plan could be made.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from workload.cli.forwarding import ForwardingReporter
from workload.commands import Secrets, mask_text

if TYPE_CHECKING:
    from rich.console import Console

    from workload.cli.target_opener import TargetOpener
    from workload.commands import Secret
    from workload.facts.nvidia import GpuInventory
    from workload.hosts.base import Host, HostSpec
    from workload.outcomes import HostOutcome, Reporter, StepOutcome
    from workload.steps import Step

#: What a step that needs a GPU is told on a host without one.
NO_GPU_PROBLEM = "needs an NVIDIA GPU, and this host has none on its PCI bus"


@dataclass(frozen=True)
class GpuSituation:
    """A host's GPUs as plan read them, or why they could not be read."""

    inventory: GpuInventory | None
    problem: str = ""

    @property
    def none_present(self) -> bool:
        """True only when the host was read and has no NVIDIA GPU (unknown is not none)."""
        return self.inventory is not None and not self.inventory.has_gpu

    def describe(self) -> str:
        """``GPU: 1x NVIDIA H200 (143771 MiB), driver 580.159.04`` and the like, one line."""
        gpus = self.inventory
        if gpus is None:
            return f"GPU: could not be read ({self.problem})"
        switches = f"; {gpus.nvswitch_count} NVSwitch(es)" if gpus.nvswitch_count else ""
        if gpus.driver_loaded and gpus.gpus:
            return f"GPU: {gpus.describe()}{switches}"
        driver = gpus.message or f"nvidia-smi: {gpus.status}"
        if not gpus.has_gpu:
            return f"GPU: none (no NVIDIA GPU on the PCI bus; {driver})"
        return f"GPU: {gpus.pci_gpus} NVIDIA GPU(s) on the PCI bus, no working driver yet ({driver}){switches}"


@dataclass
class GpuSurvey:
    """Opens hosts like ``opener`` (a ``TargetOpener``) and reads each one's GPUs (:attr:`found`, by host name).

    The read happens when the host's first step starts (:class:`SurveyingReporter`): after the
    engine's preflight has fetched every step's facts in one round trip and inside the plan's fact
    memo (``Host.remembering_facts``), so on a host where a step reads the GPUs anyway this costs no
    command, and elsewhere one round trip.
    """

    opener: TargetOpener
    found: dict[str, GpuSituation] = field(default_factory=dict)
    _hosts: dict[str, Host] = field(default_factory=dict)

    def __call__(self, spec: HostSpec) -> Host:
        host = self.opener(spec)
        self._hosts[spec.name] = host
        return host

    @property
    def secrets(self) -> list[Secret]:
        return self.opener.secrets

    def read(self, name: str) -> None:
        """Read the GPUs of the host opened as ``name``, once."""
        from workload.errors import WorkloadError
        from workload.facts.nvidia import GPUS

        host = self._hosts.get(name)
        if host is None or name in self.found:
            return
        try:
            host.prefetch(GPUS.queries)  # one round trip where no step had them read already
            self.found[name] = GpuSituation(GPUS.read(host))
        except WorkloadError as exc:  # the steps meet the same trouble and say so
            self.found[name] = GpuSituation(None, exc.message)


class SurveyingReporter(ForwardingReporter):
    """A reporter that passes every event on to ``inner`` and has ``survey`` read a host's GPUs when
    its first step starts."""

    def __init__(self, inner: Reporter, survey: GpuSurvey) -> None:
        super().__init__(inner)
        self.survey = survey

    def step_started(self, host: str, step: Step) -> None:
        self.survey.read(host)
        self.inner.step_started(host, step)


@dataclass(frozen=True)
class Line:
    """One step in the summary: its label, what it would do or why not, and a hint."""

    label: str
    text: str
    hint: str = ""


@dataclass
class HostSummary:
    host: str
    gpu: GpuSituation | None
    change: list[Line] = field(default_factory=list)
    unchanged: list[Line] = field(default_factory=list)
    fail: list[Line] = field(default_factory=list)

    @property
    def gpu_missing_for(self) -> list[str]:
        """The steps that would fail only because the host has no GPU."""
        return [line.label for line in self.fail if line.text == NO_GPU_PROBLEM]


def summarize(
    outcome: HostOutcome, gpu: GpuSituation | None, gpu_steps: Iterable[str], secrets: Secrets | None = None
) -> HostSummary:
    """Sort a host's planned steps into would-change / no-change / would-fail (texts masked).

    ``gpu_steps`` are the labels of the steps that need an NVIDIA GPU: on a host known to have
    none, such a step would fail whatever its own plan says.
    """
    from workload.cli.console import changes_in_words

    needs_gpu = set(gpu_steps) if gpu is not None and gpu.none_present else set()
    summary = HostSummary(outcome.name, gpu)
    for step in outcome.steps:
        if step.status == "failed":
            problem, hint = _failure(step, outcome.name, secrets)
            summary.fail.append(Line(step.label, problem, hint))
        elif step.label in needs_gpu:
            summary.fail.append(Line(step.label, NO_GPU_PROBLEM, "run this profile on a GPU machine"))
        elif step.plan is not None and step.plan.changed:
            summary.change.append(Line(step.label, changes_in_words(step.plan, secrets)))
        elif step.plan is not None:
            summary.unchanged.append(Line(step.label, mask_text(step.plan.noop_reason or "nothing to do", secrets)))
        else:
            summary.fail.append(Line(step.label, f"not planned ({step.status})"))
    return summary


def _failure(step: StepOutcome, host: str, secrets: Secrets | None) -> tuple[str, str]:
    """The problem (without the ``[host] step:`` prefix the full message starts with) and its hint."""
    lines = [line.strip() for line in mask_text(step.message, secrets).splitlines() if line.strip()]
    first = lines[0] if lines else "failed"
    first = first.removeprefix(f"[{host}] ").removeprefix(f"{step.label}: ")
    hint = next((line.removeprefix("hint:").strip() for line in lines if line.startswith("hint:")), "")
    return first, hint


def print_summary(console: Console, summary: HostSummary) -> None:
    """The host's block: GPU line, then the three groups (empty groups left out)."""
    from workload.cli.console import styled

    if summary.gpu is not None:
        style = "red" if summary.gpu_missing_for else "cyan" if summary.gpu.none_present else "green"
        console.print(styled("  ", (summary.gpu.describe(), style)), highlight=False)
    groups = (
        ("would change", "green", summary.change),
        ("no change", "cyan", summary.unchanged),
        ("would fail if run now", "red", summary.fail),
    )
    for title, style, lines in groups:
        if not lines:
            continue
        console.print(styled("  ", (f"{title} ({len(lines)}):", style)), highlight=False)
        for line in lines:
            console.print(styled(f"    {line.label}: {line.text}"), highlight=False)
            if line.hint:
                console.print(styled((f"      hint: {line.hint}", "dim")), highlight=False)


def total_line(summaries: Sequence[HostSummary]) -> str:
    """``8 step(s) on 1 host(s): 4 would change, 1 no change, 3 would fail if run now.``"""
    steps = sum(len(s.change) + len(s.unchanged) + len(s.fail) for s in summaries)
    return (
        f"{steps} step(s) on {len(summaries)} host(s): {sum(len(s.change) for s in summaries)} would change, "
        f"{sum(len(s.unchanged) for s in summaries)} no change, "
        f"{sum(len(s.fail) for s in summaries)} would fail if run now."
    )
