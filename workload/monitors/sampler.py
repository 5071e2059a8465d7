"""The run-wide telemetry monitor: one sampler per host of the run, its files and their summary.

:class:`TelemetryMonitor` runs a :class:`~workload.monitors.hostmonitor.HostMonitor` (a thread with
a connection of its own) for every host, local or SSH, from the moment the engine reaches the host
(:meth:`TelemetryMonitor.watch`) until the host is done or the run ends. Files, in
``<run folder>/telemetry/``:

* ``samples.jsonl`` - one line per host, device and moment: ``{"time", "host", "device", "name",
  "values"}`` (``device`` is ``host`` or ``gpu<index>``; ``time`` is this machine's UTC time,
  ``gpu_time`` nvidia-smi's own timestamp on the host; values keyed by :data:`UNITS`' names);
* ``<host folder>/nvidia-smi.csv`` - the host's nvidia-smi lines, the query as a header comment
  (``<host folder>`` as the run folder names host folders: :func:`workload.rundir.host_folder_name`);
* ``summary.json`` - ``{"interval_s", "started", "ended", "gpus", "throttling_seen", "hosts": {host:
  summary}}``, each host's summary as :meth:`~workload.monitors.stats.HostStats.summary` makes it:
  per device and metric min / avg / max, throttling seen and its reasons, ECC errors, notes (no
  nvidia-smi) and errors (failed samples).

A host whose sampling fails is sampled for what still works; a monitor never fails a run. After the
run's cancel token is set (Ctrl-C, SIGTERM, ``--fail-fast``) no sampling command starts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workload.hosts.base import Host, HostSpec
from workload.hosts.local import LocalHost
from workload.monitors.hostmonitor import Cancel, HostMonitor, own_connection
from workload.monitors.stats import UNITS, power_limit_only
from workload.rundir import host_folder_name
from workload.safefile import append_text, atomic_write_text

__all__ = ["UNITS", "MonitorSettings", "TelemetryMonitor", "summary_lines", "wait_for_samples"]

TELEMETRY_DIR = "telemetry"
SAMPLES_FILE = "samples.jsonl"
RAW_FILE = "nvidia-smi.csv"
SUMMARY_FILE = "summary.json"
DEFAULT_INTERVAL_S = 2.0
#: How long stop() waits for the samplers' last samples before it kills what they run.
STOP_GRACE_S = 3.0
#: The same after the run was cancelled (Ctrl-C, SIGTERM): no last sample then, only the one under way.
CANCELLED_GRACE_S = 0.5
#: ... and then for the killed commands to return.
STOP_KILL_WAIT_S = 3.0


@dataclass
class MonitorSettings:
    interval_s: float = DEFAULT_INTERVAL_S
    warmup_s: float = 0.0
    gpus: bool = True
    host: bool = True


class TelemetryMonitor:
    """Samples the run's hosts in background threads (see the module docstring); thread-safe.

    ``hosts``: hosts to sample from :meth:`start` on; None means this machine (``local``). A run
    gives none and adds each host as the engine opens it (:meth:`watch`).
    """

    def __init__(
        self, run_folder: Path, settings: MonitorSettings | None = None, hosts: Sequence[Host] | None = None
    ) -> None:
        self.dir = run_folder / TELEMETRY_DIR
        self.settings = settings or MonitorSettings()
        self._initial = list(hosts) if hosts is not None else [LocalHost("local")]
        self._lock = threading.Lock()
        self._monitors: dict[str, HostMonitor] = {}
        self._cancel: Cancel | None = None
        self._started = False
        self._stopped = False

    # -- life ------------------------------------------------------------------------------------
    def start(self, *, cancel: Cancel | None = None) -> TelemetryMonitor:
        """Start sampling the hosts given; ``cancel``: the run's stop token (no new command once set)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._cancel = cancel
        self._started = True
        for host in self._initial:
            self.add(host, ready=lambda: True)
        return self

    def watch(self, factory: Callable[[HostSpec], Host]) -> Callable[[HostSpec], Host]:
        """A host factory for the engine: each host it opens is sampled once the engine has reached it."""

        def opening(spec: HostSpec) -> Host:
            host = factory(spec)
            self.add(host)
            return host

        return opening

    def add(self, host: Host, *, ready: Callable[[], bool] | None = None) -> None:
        """Sample ``host`` (through a connection of its own) from when ``ready()`` is true; default: once
        ``host`` has connected (a local host is always ready). A host added twice is sampled once."""
        if ready is None:
            ready = lambda: host.has_connected  # noqa: E731  (read at each poll, not now)
        with self._lock:
            if self._stopped or not self._started or host.name in self._monitors:
                return
            monitor = HostMonitor(
                host.name,
                own_connection(host),
                interval_s=self.settings.interval_s,
                warmup_s=self.settings.warmup_s,
                gpus=self.settings.gpus,
                host_part=self.settings.host,
                raw_path=self.dir / host_folder_name(host.name) / RAW_FILE,
                write=self._write,
                ready=ready,
                cancel=self._cancel,
            )
            self._monitors[host.name] = monitor
        monitor.start()

    def host_done(self, name: str) -> None:
        """The engine is done with this host: its sampler takes a last sample and ends (returns at once)."""
        with self._lock:
            monitor = self._monitors.get(name)
        if monitor is not None:
            monitor.request_stop(final_sample=True)

    def stop(self) -> dict[str, Any]:
        """Stop every sampler (a last sample unless the run was cancelled), write ``summary.json``, return it.

        Prompt: samplers get :data:`STOP_GRACE_S` for their last sample (:data:`CANCELLED_GRACE_S`
        after a cancel), then their running commands are killed; a sampler still stuck after that is
        left behind (its samples are no longer written).
        """
        with self._lock:
            self._stopped = True
            monitors = list(self._monitors.values())
        cancelled = self._cancel is not None and self._cancel.is_set()
        for monitor in monitors:
            monitor.request_stop(final_sample=not cancelled)
        # After Ctrl-C/SIGTERM a sample under way is not waited for: it is killed at once if it lingers.
        deadline = time.monotonic() + (CANCELLED_GRACE_S if cancelled else STOP_GRACE_S)
        stuck = [m for m in monitors if not m.join(deadline - time.monotonic())]
        if stuck:
            killers = [threading.Thread(target=m.abort, daemon=True) for m in stuck]
            for killer in killers:
                killer.start()
            deadline = time.monotonic() + STOP_KILL_WAIT_S
            for monitor in stuck:
                if not monitor.join(deadline - time.monotonic()):
                    monitor.stats.error("the sampler did not stop in time; its last sample is missing")
        with self._lock:
            self._closed = True
        for monitor in monitors:
            monitor.close()
        summary = self.summary()
        try:  # telemetry is a side show: a full disk must not cost the run its verdict
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        except OSError as exc:
            summary["write_error"] = f"{SUMMARY_FILE} not written: {exc.strerror or exc}"
        return summary

    def __enter__(self) -> TelemetryMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    _closed = False

    def _write(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            if self._closed:
                return
            append_text(self.dir / SAMPLES_FILE, "".join(json.dumps(record) + "\n" for record in records))

    # -- summary ---------------------------------------------------------------------------------
    def monitor(self, host: str) -> HostMonitor | None:
        with self._lock:
            return self._monitors.get(host)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            monitors = dict(self._monitors)
        hosts = {name: m.stats.summary() for name, m in monitors.items()}
        starts = [s["started"] for s in hosts.values() if s["started"]]
        ends = [s["ended"] for s in hosts.values() if s["ended"]]
        return {
            "interval_s": self.settings.interval_s,
            "started": min(starts, default=None),
            "ended": max(ends, default=None),
            "gpus": sum(s["gpus"] for s in hosts.values()),
            "throttling_seen": any(s["throttling"]["seen"] for s in hosts.values()),
            "hosts": hosts,
        }


_HEADLINE = ("cpu_utilization", "gpu_utilization", "power_draw", "temperature", "sm_clock", "memory_used")


def _figures(metrics: dict[str, Any], names: Sequence[str]) -> list[str]:
    parts = []
    for metric in names:
        st = metrics.get(metric)
        if st:
            parts.append(f"{metric} {st['min']:g}/{st['avg']:g}/{st['max']:g} {st['unit']}".rstrip())
    return parts


def _merged_gpu_metrics(devices: dict[str, Any]) -> dict[str, Any]:
    """Every GPU of a host together: min of mins, sample-weighted average, max of maxes."""
    merged: dict[str, Any] = {}
    for device, data in devices.items():
        if not device.startswith("gpu"):
            continue
        for metric, st in (data.get("metrics") or {}).items():
            m = merged.setdefault(metric, {"min": st["min"], "max": st["max"], "sum": 0.0, "n": 0, "unit": st["unit"]})
            m["min"], m["max"] = min(m["min"], st["min"]), max(m["max"], st["max"])
            m["sum"] += st["avg"] * st["samples"]
            m["n"] += st["samples"]
    return {k: {**v, "avg": round(v["sum"] / v["n"], 1)} for k, v in merged.items() if v["n"]}


def _host_lines(host: dict[str, Any], *, detailed: bool) -> list[str]:
    """The console lines of one host: per device (one host in the run), or one line for the host."""
    name = str(host.get("host", ""))
    devices = host.get("devices") or {}
    lines: list[str] = []
    if detailed:
        for device, data in devices.items():
            parts = _figures(data.get("metrics") or {}, _HEADLINE)
            if parts:
                lines.append(f"telemetry {device} ({data.get('name', device)}) min/avg/max: " + ", ".join(parts))
    else:
        parts = _figures((devices.get("host") or {}).get("metrics") or {}, ("cpu_utilization", "memory_used"))
        if host.get("gpus"):
            gpu = _figures(_merged_gpu_metrics(devices), ("gpu_utilization", "power_draw", "temperature", "sm_clock"))
            parts.append(f"{host['gpus']} GPU(s) " + ", ".join(gpu))
        if parts:
            lines.append(f"telemetry {name} min/avg/max: " + ", ".join(parts))
    prefix = "telemetry: " if detailed else f"telemetry {name}: "
    if host.get("gpus"):
        throttling = host.get("throttling") or {}
        if throttling.get("seen"):
            seen = "; ".join(f"{d}: {', '.join(r)}" for d, r in (throttling.get("devices") or {}).items())
            lines.append(f"{prefix}GPU throttling seen: yes ({seen}){power_limit_only(throttling)}")
        else:
            lines.append(f"{prefix}GPU throttling seen: no")
        if host.get("ecc_uncorrected_max"):
            lines.append(f"{prefix}uncorrected ECC errors (volatile): {host['ecc_uncorrected_max']:g}")
    for note in host.get("notes") or []:
        lines.append(f"{prefix}{note}")
    if host.get("failed_samples"):
        lines.append(f"{prefix}{host['failed_samples']} sample(s) failed")
    for error in (host.get("errors") or [])[:3]:
        lines.append(f"{prefix}{error}")
    return lines


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The console's telemetry lines: with one host, each device's headline figures; with several,
    one line per host (its GPUs together); then throttling seen yes/no, notes and errors per host."""
    hosts = list((summary.get("hosts") or {}).values())
    lines: list[str] = []
    for host in hosts:
        lines += _host_lines(host, detailed=len(hosts) == 1)
    if summary.get("write_error"):
        lines.append(f"telemetry: {summary['write_error']}")
    return lines


def wait_for_samples(monitor: TelemetryMonitor, count: int, timeout_s: float = 10.0, *, host: str = "local") -> None:
    """Block until ``count`` host samples of ``host`` were taken (tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sampler = monitor.monitor(host)
        if sampler is not None and sampler.stats.count("host", "load_1m") >= count:
            return
        time.sleep(0.05)
