"""Tell a change from noise: a confidence interval for the relative change of a metric between two
runs with repeated values (iterations), and the verdict it supports.

The interval is Student's t interval for the difference of the two means (Welch's, with the
Welch-Satterthwaite degrees of freedom, when both sides have two or more values; when only one
side has, its spread stands for both), expressed in percent of the baseline's mean and turned so
that positive means better (throughput up, latency down). With ``t`` the threshold in percent and
``[lo, hi]`` the interval:

* **regression**: ``hi < 0`` (worse, at the confidence asked for) and the change itself worse than ``-t``;
* **improvement**: ``lo > 0`` and the change better than ``+t``;
* **no change**: the interval lies within ``[-t, +t]``, or holds 0 without reaching ``-t``;
* **cannot tell**: the interval holds 0 and reaches beyond ``-t``: the runs are too noisy to say
  whether the new one is worse by more than the threshold (more iterations narrow it).

Student's t quantile is computed here (no SciPy): its CDF by Simpson's rule on the density, then
bisection; accurate to ~1e-6 for one or more degrees of freedom, which the tests check against
tabulated values.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no change"
CANNOT_TELL = "cannot tell"


def _t_density(x: float, df: float) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(x * x / df))


def _t_cdf_above_half(x: float, df: float, steps: int = 2000) -> float:
    """P(T <= x) - 0.5 for x >= 0 (Simpson's rule on [0, x])."""
    h = x / steps
    total = _t_density(0.0, df) + _t_density(x, df)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * _t_density(i * h, df)
    return total * h / 3


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t distribution with ``df`` degrees of freedom
    (remembered: a comparison asks for the same few quantiles for every metric)."""
    if not 0.5 < p < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df > 0 (got p={p}, df={df})")
    target = p - 0.5
    lo, hi = 0.0, 1.0
    while _t_cdf_above_half(hi, df) < target:
        hi *= 2
        if hi > 1e6:
            return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_above_half(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Interval:
    """The relative change (percent, positive = better) with its interval and verdict."""

    change_pct: float
    low_pct: float
    high_pct: float
    confidence: float
    verdict: str

    def as_dict(self) -> dict[str, object]:
        return {
            "change_pct": self.change_pct,
            "low_pct": self.low_pct,
            "high_pct": self.high_pct,
            "confidence": self.confidence,
            "verdict": self.verdict,
        }


def judge(low: float, high: float, change: float, threshold_pct: float) -> str:
    """The verdict of an interval ``[low, high]`` around ``change`` (see the module docstring)."""
    if high < 0 and change < -threshold_pct:
        return REGRESSION
    if low > 0 and change > threshold_pct:
        return IMPROVEMENT
    if low >= -threshold_pct:
        return NO_CHANGE
    if high < 0:  # surely worse, but by less than the threshold as far as the point estimate says
        return NO_CHANGE
    return CANNOT_TELL


def interval(
    before: Sequence[float], after: Sequence[float], *, better_sign: float, threshold_pct: float, confidence: float
) -> Interval | None:
    """The interval of the change from ``before`` to ``after`` (``better_sign`` +1: higher is better,
    -1: lower is); None when neither side has two values or the baseline's mean is 0."""
    na, nb = len(before), len(after)
    if max(na, nb) < 2 or na == 0 or nb == 0:
        return None
    mean_a, mean_b = statistics.fmean(before), statistics.fmean(after)
    if mean_a == 0:
        return None
    var_a = statistics.variance(before) if na >= 2 else None
    var_b = statistics.variance(after) if nb >= 2 else None
    if var_a is not None and var_b is not None:
        se2 = var_a / na + var_b / nb
        if se2 == 0:
            df = float(na + nb - 2)
        else:
            df = se2 * se2 / ((var_a / na) ** 2 / (na - 1) + (var_b / nb) ** 2 / (nb - 1))
    else:
        spread = var_a if var_a is not None else var_b
        assert spread is not None
        se2 = spread * (1 / na + 1 / nb)
        df = float((na if var_a is not None else nb) - 1)
    half = t_quantile(0.5 + confidence / 2, round(max(df, 1.0), 2)) * math.sqrt(se2)
    scale = better_sign * 100.0 / abs(mean_a)
    change = (mean_b - mean_a) * scale
    ends = sorted(((mean_b - mean_a - half) * scale, (mean_b - mean_a + half) * scale))
    return Interval(change, ends[0], ends[1], confidence, judge(ends[0], ends[1], change, threshold_pct))
