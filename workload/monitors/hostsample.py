"""This machine's CPU, memory and load, read from ``/proc`` (Linux); a missing file gives no values."""

from __future__ import annotations

import os
from pathlib import Path


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_times(stat: str) -> tuple[int, int] | None:
    """(busy, total) jiffies from the ``cpu`` line of ``/proc/stat`` (iowait counts as idle)."""
    for line in stat.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            numbers = [int(p) for p in parts[1:] if p.isdigit()]
            if len(numbers) < 4:
                return None
            idle = numbers[3] + (numbers[4] if len(numbers) > 4 else 0)
            total = sum(numbers[:8])  # guest times are already in user/nice
            return total - idle, total
    return None


def memory(meminfo: str) -> dict[str, float]:
    """Used and total memory in MiB (used = total - available)."""
    kib: dict[str, int] = {}
    for line in meminfo.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            kib[key] = int(parts[0])
    if "MemTotal" not in kib or "MemAvailable" not in kib:
        return {}
    return {
        "memory_used": round((kib["MemTotal"] - kib["MemAvailable"]) / 1024, 1),
        "memory_total": round(kib["MemTotal"] / 1024, 1),
    }


class HostSampler:
    """CPU utilisation between two calls, plus memory and load average now."""

    def __init__(self) -> None:
        self._last = cpu_times(_read("/proc/stat"))

    def sample(self) -> dict[str, float | None]:
        now = cpu_times(_read("/proc/stat"))
        cpu: float | None = None
        if now is not None and self._last is not None and now[1] > self._last[1]:
            cpu = round(100.0 * (now[0] - self._last[0]) / (now[1] - self._last[1]), 1)
        self._last = now
        values: dict[str, float | None] = {"cpu_utilization": cpu}
        values.update(memory(_read("/proc/meminfo")))
        try:
            values["load_1m"] = round(os.getloadavg()[0], 2)
        except OSError:
            values["load_1m"] = None
        return values
