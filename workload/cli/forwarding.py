"""A reporter that passes every engine event on to another: the base of the CLI's reporters that
add one thing to one event (telemetry ends a host's sampler, plan reads a host's GPUs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workload.outcomes import HostOutcome, Reporter, StepOutcome
    from workload.steps import Step


class ForwardingReporter:
    """A ``workload.outcomes.Reporter`` passing each event to ``inner``; subclasses extend one event."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner

    def step_started(self, host: str, step: Step) -> None:
        self.inner.step_started(host, step)

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        self.inner.step_finished(host, step, outcome)

    def line(self, host: str, text: str) -> None:
        self.inner.line(host, text)

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        self.inner.host_finished(host, outcome)
