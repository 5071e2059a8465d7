"""``NvidiaSmiMonitor``: the profile element (under ``Monitors``) that sets how telemetry is sampled.

As VirtualClient's monitor of the same name (``VirtualClient.Monitors/NvidiaSmiMonitor.cs``), it
samples ``nvidia-smi --query-gpu`` every ``MonitorFrequency`` after ``MonitorWarmupPeriod``
(.NET timespans, ``00:00:02``), in the background while the actions run. Here it samples every
host of the run (local and SSH), the host's CPU, memory and load too, and runs on hosts without
nvidia-smi with the host part only. Without a
``Monitors`` section a run samples every :data:`~workload.monitors.sampler.DEFAULT_INTERVAL_S`
seconds; ``--parameters`` reach these parameters through ``$.Parameters.X`` like any step's.

A monitor is not a step the engine plans or applies: :meth:`plan` says so, and the CLI starts the
sampler around the run (:func:`settings_from_monitors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import field_validator

from workload.monitors.sampler import DEFAULT_INTERVAL_S, MonitorSettings
from workload.steps import Step, StepContext, StepParameters, StepPlan


class MonitorParameters(StepParameters):
    MonitorFrequency: str = "00:00:02"
    MonitorWarmupPeriod: str = "00:00:00"
    #: Sample the host's CPU, memory and load too.
    Host: bool = True

    @field_validator("MonitorFrequency", "MonitorWarmupPeriod")
    @classmethod
    def _timespan(cls, value: str) -> str:
        from workload.profile import parse_timespan

        parse_timespan(str(value))  # ValueError names the expected form
        return str(value)


class NvidiaSmiMonitor(Step):
    """GPU (nvidia-smi) and host telemetry in the background while the actions run."""

    type_name: ClassVar[str] = "NvidiaSmiMonitor"
    Parameters: ClassVar[type[StepParameters]] = MonitorParameters

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        from workload.profile import parse_timespan

        assert isinstance(params, MonitorParameters)
        if parse_timespan(params.MonitorFrequency) <= 0:
            raise ValueError("MonitorFrequency: the frequency must be greater than zero (as in VirtualClient)")

    def settings(self) -> MonitorSettings:
        from workload.profile import parse_timespan

        assert isinstance(self.params, MonitorParameters)
        return MonitorSettings(
            interval_s=parse_timespan(self.params.MonitorFrequency),
            warmup_s=parse_timespan(self.params.MonitorWarmupPeriod),
            host=self.params.Host,
        )

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(noop_reason="a monitor samples in the background while the actions run")


def settings_from_monitors(monitors: Sequence[Step]) -> MonitorSettings:
    """The sampler settings of a profile's monitors: the shortest interval asked for; the default without any."""
    chosen = [m.settings() for m in monitors if isinstance(m, NvidiaSmiMonitor)]
    if not chosen:
        return MonitorSettings(interval_s=DEFAULT_INTERVAL_S)
    return MonitorSettings(
        interval_s=min(s.interval_s for s in chosen),
        warmup_s=min(s.warmup_s for s in chosen),
        host=any(s.host for s in chosen),
    )
