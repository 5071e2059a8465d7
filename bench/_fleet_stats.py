"""Per-node figures of a fleet run and their straight-line extrapolation (``bench_fleet.py``'s arithmetic).

Pure functions of numbers, tested by ``tests/test_bench_fleet.py``; no test bed needed.

* :func:`fan_out` reads one controller trace (``_fleet_trace.py``) into per-host latencies, in
  seconds after the fan-out started (``Engine.run``): each host's first remote operation started and
  done (the SSH connection included: it opens lazily on the first one), and each step's start and
  length.
* :func:`fit_line` / :func:`extrapolate`: a figure measured at several node counts ``N`` in one
  round, fitted by least squares as ``fixed + per_node * N`` and read at a larger ``N``. One fit
  per round (rounds interleave the counts, so one round's counts met the same neighbours); the
  per-round predictions then get the median and interval of ``_measure.py`` like any figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Line:
    """``fixed + per_node * n``."""

    fixed: float
    per_node: float

    def at(self, n: float) -> float:
        return self.fixed + self.per_node * n


def fit_line(points: Sequence[tuple[float, float]]) -> Line:
    """Least-squares line through ``(n, value)`` points; needs two distinct ``n``."""
    ns = {n for n, _ in points}
    if len(ns) < 2:
        raise ValueError(f"a line needs values at two node counts at least, got {sorted(ns)}")
    k = len(points)
    mean_n = sum(n for n, _ in points) / k
    mean_v = sum(v for _, v in points) / k
    var = sum((n - mean_n) ** 2 for n, _ in points)
    cov = sum((n - mean_n) * (v - mean_v) for n, v in points)
    slope = cov / var
    return Line(mean_v - slope * mean_n, slope)


def extrapolate(per_round: Sequence[Mapping[int, float]], n: int) -> tuple[list[Line], list[float]]:
    """One line per round (``{node count: value}``) and its value at ``n``."""
    lines = [fit_line(sorted(r.items())) for r in per_round]
    return lines, [line.at(n) for line in lines]


@dataclass
class FanOut:
    """One run's per-host latencies (seconds after the fan-out started)."""

    startup_s: float  # interpreter start to the fan-out (imports, profile, inventory, run folder)
    first_sent: dict[str, float] = field(default_factory=dict)
    first_done: dict[str, float] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)
    #: step index -> host -> (start, duration)
    steps: dict[int, dict[str, tuple[float, float]]] = field(default_factory=dict)


def fan_out(trace: Mapping[str, Any]) -> FanOut:
    """Read a ``_fleet_trace.py`` trace; a trace without a fan-out (the CLI stopped before it) raises ``ValueError``."""
    start = trace.get("run_start")
    if start is None:
        raise ValueError("the controller never reached the fan-out (Engine.run)")
    out = FanOut(startup_s=float(start))
    for host, operations in trace["operations"].items():
        first = min(operations, key=lambda c: c[0])
        out.first_sent[host] = first[0] - start
        out.first_done[host] = first[1] - start
        out.operations[host] = len(operations)
    for host, steps in trace["steps"].items():
        for index, began, ended in steps:
            # A step re-planned after a reboot is one step: keep its first start and whole length.
            slot = out.steps.setdefault(int(index), {})
            if host in slot:
                first_start, _ = slot[host]
                slot[host] = (first_start, ended - start - first_start)
            else:
                slot[host] = (began - start, ended - began)
    return out


def spread(values: Mapping[str, float]) -> tuple[float, float]:
    """The median host's and the last host's value."""
    ordered = sorted(values.values())
    if not ordered:
        raise ValueError("no hosts")
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return median, ordered[-1]
