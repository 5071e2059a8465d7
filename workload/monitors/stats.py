"""One host's telemetry summary: per device and metric min / avg / max, throttling seen, notes, errors.

A GPU "throttles" when it reports a clocks event reason that means slower than it could be (power
cap, thermal or HW slowdown; :data:`workload.monitors.nvsmi.THROTTLE_MASK`). Of those, ``faults`` are
the reasons of heat or the board's protection (:data:`workload.monitors.nvsmi.FAULT_MASK`): the SW
power cap alone is a GPU at its power limit, where a healthy one runs under full load.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workload.monitors.nvsmi import FAULT_MASK, METRICS, THROTTLE_MASK, describe_reasons

#: metric -> unit, for every metric a sample may hold.
UNITS: dict[str, str] = {name: unit for _, name, unit in METRICS if unit != "bitmask"} | {
    "cpu_utilization": "%",
    "load_1m": "",
}
#: At most this many distinct error texts are kept per host.
MAX_ERRORS = 20


@dataclass
class Stats:
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


class HostStats:
    """What one host's sampler saw; thread-safe (the sampler adds, the summary reads)."""

    def __init__(self, host: str) -> None:
        self.host = host
        #: The nvidia-smi that answered (None: none did).
        self.nvidia_smi: str | None = None
        self._lock = threading.Lock()
        self._stats: dict[str, dict[str, Stats]] = {}
        self._names: dict[str, str] = {}
        self._reasons: dict[str, int] = {}
        self._errors: list[str] = []
        self._notes: list[str] = []
        self._failed = 0
        self._first: str | None = None
        self._last: str | None = None

    def error(self, text: str) -> None:
        with self._lock:
            if len(self._errors) < MAX_ERRORS and text not in self._errors:
                self._errors.append(text)

    def note(self, text: str) -> None:
        with self._lock:
            if text not in self._notes:
                self._notes.append(text)

    def failed(self) -> None:
        with self._lock:
            self._failed += 1

    def count(self, device: str, metric: str) -> int:
        with self._lock:
            stats = self._stats.get(device, {}).get(metric)
            return stats.count if stats else 0

    def add(self, records: list[dict[str, Any]], stamp: str) -> None:
        with self._lock:
            if records:
                self._first = self._first or stamp
                self._last = stamp
            for record in records:
                device = record["device"]
                self._names[device] = record["name"]
                per = self._stats.setdefault(device, {})
                for metric, value in record["values"].items():
                    if value is None:
                        continue
                    if metric == "clocks_event_reasons":
                        self._reasons[device] = self._reasons.get(device, 0) | int(value)
                        continue
                    per.setdefault(metric, Stats()).add(float(value))

    def summary(self) -> dict[str, Any]:
        with self._lock:
            devices = {
                device: {"name": self._names.get(device, device),
                         "metrics": {m: st.as_dict(UNITS.get(m, "")) for m, st in sorted(per.items())}}
                for device, per in self._stats.items()
            }  # fmt: skip
            throttled = {d: describe_reasons(mask & THROTTLE_MASK) for d, mask in self._reasons.items()}
            throttled = {d: reasons for d, reasons in throttled.items() if reasons}
            faults = {d: describe_reasons(mask & FAULT_MASK) for d, mask in self._reasons.items() if mask & FAULT_MASK}
            ecc_key = "ecc_uncorrected_volatile"
            ecc = max((st[ecc_key].high for st in self._stats.values() if ecc_key in st), default=None)
            gpus = sum(1 for d in devices if d.startswith("gpu"))
            notes = list(self._notes)
            if gpus:  # nvidia-smi came during the run (the driver was installed): say so, not "host only"
                notes = [n if "no nvidia-smi" not in n else "nvidia-smi appeared during the run" for n in notes]
            return {
                "host": self.host,
                "started": self._first,
                "ended": self._last,
                "nvidia_smi": self.nvidia_smi,
                "gpus": gpus,
                "devices": devices,
                "throttling": {
                    "seen": bool(throttled),
                    "devices": throttled,
                    "faults": faults,
                    "reasons_seen": {d: describe_reasons(m) for d, m in self._reasons.items()},
                },
                "ecc_uncorrected_max": ecc,
                "failed_samples": self._failed,
                "notes": notes,
                "errors": list(self._errors),
            }


def power_limit_only(throttling: Mapping[str, Any]) -> str:
    """``"; the power limit only, no fault"`` when a summary's reasons hold no fault (the SW power cap
    alone: a GPU at its power limit, as under full load), else ``""`` (also for older summaries, which
    do not say)."""
    faults = throttling.get("faults")
    return "; the power limit only, no fault" if throttling.get("seen") and faults == {} else ""
