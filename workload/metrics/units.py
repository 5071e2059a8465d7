"""Numbers as people read them: times in ns/µs/ms/s instead of ``1.82466e+10 ns``, thousands separated.

One scale is picked for a group of values (the largest decides), so that the two sides of a
comparison or the points of a trend read in the same unit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: time units -> seconds
_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
#: the scales a time is shown in, smallest first, with the largest value each is used up to
_STEPS = (("ns", 1e-9, 1e-6), ("µs", 1e-6, 1e-3), ("ms", 1e-3, 10.0), ("s", 1.0, math.inf))


def scale_for(values: Iterable[float], unit: str) -> tuple[float, str]:
    """(factor, unit): multiply each value by factor to show it in the returned unit."""
    base = _TIME.get(unit)
    if base is None:
        return 1.0, unit
    finite = [abs(v) for v in values if math.isfinite(v)]
    seconds = max(finite, default=0.0) * base
    for name, size, upto in _STEPS:
        if seconds < upto:
            return base / size, name
    return base, "s"  # pragma: no cover - the last step has no upper bound


def number(value: float) -> str:
    """``73,309.5``, ``57,609.27``, ``0.9042``: separators, at most 2 decimals above 100, 4 digits below."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{value:.4g}"


def readable(value: float, unit: str, *, like: Iterable[float] = ()) -> str:
    """``value`` with its unit, scaled with the values in ``like`` (and itself) for times."""
    factor, shown = scale_for([value, *like], unit)
    text = number(value * factor)
    if shown in ("VALID/INVALID", "PASS/FAIL"):
        return ("VALID" if value == 1.0 else "INVALID") if shown == "VALID/INVALID" else ("PASS" if value else "FAIL")
    return f"{text} {shown}".strip()
