"""A host's CPU, memory and load, from ``/proc`` (Linux) read on the host with one command.

:data:`PROC_ARGV` reads ``/proc/stat``, ``/proc/meminfo`` and ``/proc/loadavg`` in one ``cat`` (one
round trip on a remote host); the parsers below pick their lines out of the concatenation, so a
missing file only loses its own values.
"""

from __future__ import annotations

import re

#: One read-only command for the host part of a sample.
PROC_ARGV: tuple[str, ...] = ("cat", "/proc/stat", "/proc/meminfo", "/proc/loadavg")

#: ``/proc/loadavg``: "0.42 0.35 0.30 2/345 6789" (1, 5, 15 minute averages, runnable/total, last pid).
_LOADAVG = re.compile(r"^(\d+\.\d+) (\d+\.\d+) (\d+\.\d+) \d+/\d+ \d+$", re.M)


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


def load_1m(text: str) -> float | None:
    """The 1-minute load average from a ``/proc/loadavg`` line."""
    match = _LOADAVG.search(text)
    return float(match.group(1)) if match else None


class HostSampler:
    """Turns successive outputs of :data:`PROC_ARGV` into samples: CPU utilisation since the previous
    output, memory and load average now. Not thread-safe (one per host sampler)."""

    def __init__(self) -> None:
        self._last: tuple[int, int] | None = None

    def sample(self, proc_text: str) -> dict[str, float | None]:
        now = cpu_times(proc_text)
        cpu: float | None = None
        if now is not None and self._last is not None and now[1] > self._last[1]:
            cpu = round(100.0 * (now[0] - self._last[0]) / (now[1] - self._last[1]), 1)
        if now is not None:
            self._last = now
        values: dict[str, float | None] = {"cpu_utilization": cpu}
        values.update(memory(proc_text))
        values["load_1m"] = load_1m(proc_text)
        return values
