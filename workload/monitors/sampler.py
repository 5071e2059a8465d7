"""The background sampler of a run, its files and their summary.

:class:`TelemetryMonitor` samples every ``interval_s`` seconds, from :meth:`start` to :meth:`stop`
(the run's actions), on this machine: each GPU with one ``nvidia-smi --query-gpu`` call (when
nvidia-smi is on PATH; otherwise the host only) and the host from ``/proc``. Files, in
``<run folder>/telemetry/``:

* ``samples.jsonl`` - one line per device and moment: ``{"time", "host", "device", "name", "values"}``
  (``device`` is ``host`` or ``gpu<index>``; values keyed by :data:`UNITS`' names);
* ``nvidia-smi.csv`` - nvidia-smi's own lines, with the query as a header comment, for the record;
* ``summary.json`` - per device and metric min / avg / max, and whether a GPU reported a clocks
  event reason that means throttling (power cap, thermal or HW slowdown; see
  :data:`workload.monitors.nvsmi.THROTTLE_MASK`), with the reasons seen and the ECC error counts.

A failing nvidia-smi call is recorded (``errors`` in the summary) and sampling goes on: a
monitor never fails a run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workload.monitors.hostsample import HostSampler
from workload.monitors.nvsmi import (
    EVENT_FIELD,
    LEGACY_EVENT_FIELD,
    METRICS,
    THROTTLE_MASK,
    describe_reasons,
    invalid_field,
    parse_query,
    query_argv,
)
from workload.safefile import append_text, atomic_write_text

TELEMETRY_DIR = "telemetry"
SAMPLES_FILE = "samples.jsonl"
RAW_FILE = "nvidia-smi.csv"
SUMMARY_FILE = "summary.json"
#: metric -> unit, for every metric a sample may hold.
UNITS: dict[str, str] = {name: unit for _, name, unit in METRICS if unit != "bitmask"} | {
    "cpu_utilization": "%",
    "load_1m": "",
}
DEFAULT_INTERVAL_S = 2.0
NVIDIA_SMI_TIMEOUT_S = 20.0


@dataclass
class MonitorSettings:
    interval_s: float = DEFAULT_INTERVAL_S
    warmup_s: float = 0.0
    gpus: bool = True
    host: bool = True


@dataclass
class _Stats:
    count: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def as_dict(self, unit: str) -> dict[str, Any]:
        return {
            "min": round(self.low, 3),
            "avg": round(self.total / self.count, 3),
            "max": round(self.high, 3),
            "samples": self.count,
            "unit": unit,
        }


@dataclass
class _Summary:
    stats: dict[str, dict[str, _Stats]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    reasons_seen: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None


class TelemetryMonitor:
    """Samples this machine in a background thread (see the module docstring); thread-safe."""

    def __init__(self, run_folder: Path, settings: MonitorSettings | None = None, *, host: str = "local") -> None:
        self.dir = run_folder / TELEMETRY_DIR
        self.settings = settings or MonitorSettings()
        self.host = host
        self.nvidia_smi = shutil.which("nvidia-smi") if self.settings.gpus else None
        self._event_field = EVENT_FIELD
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._summary = _Summary()
        self._host = HostSampler() if self.settings.host else None

    # -- life --------------------------------------------------------------------------------------
    def start(self) -> TelemetryMonitor:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.nvidia_smi:
            self._append(RAW_FILE, f"# {' '.join(query_argv('nvidia-smi'))}\n")
        self._thread = threading.Thread(target=self._loop, name="workload-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stop sampling (one last sample first), write ``summary.json`` and return it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=NVIDIA_SMI_TIMEOUT_S + 5)
        summary = self.summary()
        try:  # telemetry is a side show: a full disk must not cost the run its verdict
            atomic_write_text(self.dir / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
        except OSError as exc:
            summary.setdefault("errors", []).append(f"{SUMMARY_FILE} not written: {exc.strerror or exc}")
        return summary

    def __enter__(self) -> TelemetryMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        if self.settings.warmup_s and self._stop.wait(self.settings.warmup_s):
            return
        while True:
            self.sample_once()
            if self._stop.wait(self.settings.interval_s):
                self.sample_once()  # the state at the end of the run
                return

    # -- one sample --------------------------------------------------------------------------------
    def sample_once(self) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        records: list[dict[str, Any]] = []
        if self._host is not None:
            records.append({"time": stamp, "host": self.host, "device": "host", "name": "host",
                            "values": self._host.sample()})  # fmt: skip
        if self.nvidia_smi:
            records.extend(self._gpu_records(stamp))
        self._append(SAMPLES_FILE, "".join(json.dumps(record) + "\n" for record in records))
        with self._lock:
            self._add(records, stamp)

    def _gpu_records(self, stamp: str) -> list[dict[str, Any]]:
        assert self.nvidia_smi is not None
        output = self._query()
        if output is None:
            return []
        self._append(RAW_FILE, output if output.endswith("\n") else output + "\n")
        records = []
        for sample in parse_query(output):
            values: dict[str, float | None] = dict(sample.values)
            records.append({"time": stamp, "gpu_time": sample.timestamp, "host": self.host,
                            "device": f"gpu{sample.index}", "name": sample.name, "values": values})  # fmt: skip
        if not records:
            self._error(f"nvidia-smi printed no GPU rows: {output.strip()[:200]!r}")
        return records

    def _query(self) -> str | None:
        assert self.nvidia_smi is not None
        for _ in range(2):
            try:
                proc = subprocess.run(
                    query_argv(self.nvidia_smi, self._event_field),
                    capture_output=True,
                    text=True,
                    timeout=NVIDIA_SMI_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                self._error(f"nvidia-smi: {exc}")
                return None
            if proc.returncode == 0:
                return proc.stdout
            rejected = invalid_field(proc.stdout + proc.stderr)
            if rejected == EVENT_FIELD and self._event_field == EVENT_FIELD:
                self._event_field = LEGACY_EVENT_FIELD  # a driver before R535
                continue
            self._error(f"nvidia-smi exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:200]}")
            return None
        return None

    def _append(self, name: str, text: str) -> None:
        """Append to a telemetry file (never through a link); a write that fails is an error of the
        summary, not of the run (the samples stay in memory for the summary)."""
        try:
            append_text(self.dir / name, text)
        except OSError as exc:
            self._error(f"{name} not written: {exc.strerror or exc}")

    def _error(self, text: str) -> None:
        with self._lock:
            if len(self._summary.errors) < 20 and text not in self._summary.errors:
                self._summary.errors.append(text)

    def _add(self, records: list[dict[str, Any]], stamp: str) -> None:
        s = self._summary
        s.first = s.first or stamp
        s.last = stamp
        for record in records:
            device = record["device"]
            s.names[device] = record["name"]
            per = s.stats.setdefault(device, {})
            for metric, value in record["values"].items():
                if value is None:
                    continue
                if metric == "clocks_event_reasons":
                    s.reasons_seen[device] = s.reasons_seen.get(device, 0) | int(value)
                    continue
                per.setdefault(metric, _Stats()).add(float(value))

    # -- summary -----------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        with self._lock:
            s = self._summary
            devices = {
                device: {"name": s.names.get(device, device),
                         "metrics": {m: st.as_dict(UNITS.get(m, "")) for m, st in sorted(per.items())}}
                for device, per in s.stats.items()
            }  # fmt: skip
            throttled = {d: describe_reasons(mask & THROTTLE_MASK) for d, mask in s.reasons_seen.items()}
            throttled = {d: reasons for d, reasons in throttled.items() if reasons}
            ecc = max(
                (st["ecc_uncorrected_volatile"].high for st in s.stats.values() if "ecc_uncorrected_volatile" in st),
                default=None,
            )
            return {
                "host": self.host,
                "interval_s": self.settings.interval_s,
                "started": s.first,
                "ended": s.last,
                "nvidia_smi": self.nvidia_smi,
                "gpus": sum(1 for d in devices if d.startswith("gpu")),
                "devices": devices,
                "throttling": {
                    "seen": bool(throttled),
                    "devices": throttled,
                    "reasons_seen": {d: describe_reasons(m) for d, m in s.reasons_seen.items()},
                },
                "ecc_uncorrected_max": ecc,
                "errors": list(s.errors),
            }


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The console's telemetry lines: host CPU/memory, each GPU's headline figures, throttling yes/no."""
    lines: list[str] = []
    for device, data in summary.get("devices", {}).items():
        metrics = data.get("metrics", {})
        parts = []
        for metric in ("cpu_utilization", "gpu_utilization", "power_draw", "temperature", "sm_clock", "memory_used"):
            st = metrics.get(metric)
            if st:
                parts.append(f"{metric} {st['min']:g}/{st['avg']:g}/{st['max']:g} {st['unit']}".rstrip())
        if parts:
            lines.append(f"telemetry {device} ({data.get('name', device)}) min/avg/max: " + ", ".join(parts))
    if summary.get("gpus"):
        throttling = summary.get("throttling", {})
        if throttling.get("seen"):
            seen = "; ".join(f"{d}: {', '.join(r)}" for d, r in throttling.get("devices", {}).items())
            lines.append(f"telemetry: GPU throttling seen: yes ({seen})")
        else:
            lines.append("telemetry: GPU throttling seen: no")
        if summary.get("ecc_uncorrected_max"):
            lines.append(f"telemetry: uncorrected ECC errors (volatile): {summary['ecc_uncorrected_max']:g}")
    for error in summary.get("errors", [])[:3]:
        lines.append(f"telemetry: {error}")
    return lines


def wait_for_samples(monitor: TelemetryMonitor, count: int, timeout_s: float = 10.0) -> None:
    """Block until ``count`` host samples were taken (tests)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = monitor._summary.stats.get("host", {}).get("load_1m")
        if stats is not None and stats.count >= count:
            return
        time.sleep(0.05)
