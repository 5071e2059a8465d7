"""``workload run``'s telemetry (workload.monitors): every host of the run is sampled while the engine works on it.

:func:`attach` wraps the engine's host factory (a host is sampled once the engine has reached it)
and its reporter (a host's sampler ends when the engine is done with it); :func:`detach` stops
the samplers and gives the console lines of the summary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workload.cli.forwarding import ForwardingReporter

if TYPE_CHECKING:
    from workload.engine import HostOutcome, Reporter
    from workload.hosts.base import Host, HostSpec
    from workload.monitors.sampler import TelemetryMonitor


class _HostsDone(ForwardingReporter):
    """A reporter that passes every event on and ends a host's sampler when the host finishes."""

    def __init__(self, inner: Reporter, monitor: TelemetryMonitor) -> None:
        super().__init__(inner)
        self.monitor = monitor

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        self.monitor.host_done(host)
        self.inner.host_finished(host, outcome)


def attach(
    run_folder: Path,
    resolved: Any,
    dependencies_only: bool,
    factory: Callable[[HostSpec], Host],
    reporter: Reporter,
) -> tuple[TelemetryMonitor | None, Callable[[HostSpec], Host], Reporter]:
    """A monitor (not started: :meth:`TelemetryMonitor.start` with the engine's cancel token), and the
    factory and reporter to give the engine. No monitor for a dependencies-only run (no actions)."""
    if dependencies_only:
        return None, factory, reporter
    from workload.monitors.sampler import TelemetryMonitor
    from workload.monitors.step import settings_from_monitors

    monitor = TelemetryMonitor(run_folder, settings_from_monitors(resolved.monitors), hosts=[])
    return monitor, monitor.watch(factory), _HostsDone(reporter, monitor)


def detach(monitor: TelemetryMonitor | None) -> list[str]:
    """Stop the samplers; the console lines of their summary."""
    if monitor is None:
        return []
    from workload.monitors.sampler import summary_lines

    return summary_lines(monitor.stop())
