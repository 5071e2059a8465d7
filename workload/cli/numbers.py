"""Number options that refuse what no run can use: NaN, infinities, and values past a bound.

click's ``FloatRange`` accepts ``nan`` (every comparison with it is false, so no bound catches
it) and ``inf``; a ``--timeout nan`` then never ends a run and ``--threshold nan`` never flags a
regression. :class:`FiniteFloatRange` is ``FloatRange`` without them.
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteFloatRange(click.FloatRange):
    """A ``click.FloatRange`` of finite numbers (``nan``, ``inf`` and overflowing values refused)."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
