"""Tell a change from noise: a confidence interval for the relative change of a metric between two
runs with repeated values (iterations), and the verdict it supports.

Performance noise on a shared machine is multiplicative (a neighbour taking a share of the CPU
scales throughput and latency, it does not add a constant), so positive values are compared on the
log scale: the change is a ratio, and the interval is turned into percent of the baseline so that
positive means better (throughput up, latency down). Which interval (``Interval.method``):

* ``rank``: both sides have two or more values, all positive, and the sizes allow the confidence
  asked for. The Hodges-Lehmann estimate of the shift of the log values (the median of every
  difference ``log b_j - log a_i``) with its exact distribution-free interval from the
  Mann-Whitney statistic U: with the ``m = n_a n_b`` differences sorted, ``[d_(k), d_(m+1-k)]``,
  ``k`` the largest with ``2 P(U <= k - 1) <= 1 - confidence`` under no change. Its coverage,
  ``Interval.achieved`` (at least the confidence asked), holds for any distribution of the
  iterations as long as the two sides differ by a shift of the log values (Lehmann, *Nonparametrics*,
  ch. 2); when they come from one distribution (identical runs), the chance that the interval
  lies wholly below 0 is at most ``(1 - achieved) / 2``, whatever the distribution: that bounds how
  often identical runs are called a regression. A median-like estimate: one iteration hit by a load
  spike moves it little. Sizes: 4 and 4 values reach 0.971, 5 and 5 reach 0.968 (``k = 3``); 3 and 3
  reach at most 0.9, so at 0.95 they take the next method.
* ``t-log``: otherwise, for positive values: Student's t interval of the difference of the mean log
  values (Welch's, with the Welch-Satterthwaite degrees of freedom, when both sides have two or more
  values; when only one side has, its spread stands for both). Assumes roughly normal log values.
* ``t``: a value of 0 or below on a side: the same t interval on the values themselves, in percent
  of the baseline's mean.

With ``t`` the threshold in percent and ``[lo, hi]`` the interval:

* **regression**: ``hi < 0`` (worse, at the confidence asked for) and the change itself worse than ``-t``;
* **improvement**: ``lo > 0`` and the change better than ``+t``;
* **no change**: the interval lies within ``[-t, +t]``, or holds 0 without reaching ``-t``;
* **cannot tell**: the interval holds 0 and reaches beyond ``-t``: the runs are too noisy to say
  whether the new one is worse by more than the threshold (more iterations narrow it).

Student's t quantile is computed here (no SciPy): its CDF by Simpson's rule on the density, then
bisection; accurate to ~1e-6 for one or more degrees of freedom, which the tests check against
tabulated values. The U distribution is counted exactly (the recursion of Mann and Whitney, 1947)
for up to :data:`RANK_MAX` values a side; larger sides use ``t-log``.
"""

from __future__ import annotations

import functools
import itertools
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
    #: rank, t-log or t (see the module docstring)
    method: str = "t"
    #: the coverage the interval has (rank: at least ``confidence``; t: ``confidence``)
    achieved: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "change_pct": self.change_pct,
            "low_pct": self.low_pct,
            "high_pct": self.high_pct,
            "confidence": self.confidence,
            "achieved_confidence": self.achieved or self.confidence,
            "method": self.method,
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


#: the most values a side may have for the exact rank interval (its U table has n_a * n_b + 1 counts)
RANK_MAX = 30


@functools.lru_cache(maxsize=4096)
def u_counts(na: int, nb: int) -> tuple[int, ...]:
    """How many of the ``C(na + nb, na)`` orderings of two samples give each Mann-Whitney U (the number
    of (a, b) pairs with b above a), U = 0 .. na * nb: ``f(na, nb) = f(na - 1, nb) + f(na, nb - 1)``
    shifted by ``nb`` (the largest value is an a, above no b, or a b, above every a)."""
    if na == 0 or nb == 0:
        return (1,)
    without_a, without_b = u_counts(na - 1, nb), u_counts(na, nb - 1)
    counts = [0] * (na * nb + 1)
    for u, count in enumerate(without_a):
        counts[u] += count
    for u, count in enumerate(without_b):
        counts[u + na] += count
    return tuple(counts)


def rank_depth(na: int, nb: int, confidence: float) -> tuple[int, float] | None:
    """``k`` and the coverage of ``[d_(k), d_(m+1-k)]``: the largest ``k`` whose two tails
    ``2 P(U <= k - 1)`` stay within ``1 - confidence``; None when even ``k = 1`` does not."""
    counts = u_counts(na, nb)
    total = math.comb(na + nb, na)
    tails, depth = 0, 0
    for count in counts[: len(counts) // 2]:
        if 2 * (tails + count) > (1 - confidence) * total * (1 + 1e-9):  # 1 - 0.8 is 0.19999...
            break
        tails += count
        depth += 1
    if depth == 0:
        return None
    return depth, 1 - 2 * tails / total


def _rank(
    before: Sequence[float], after: Sequence[float], confidence: float
) -> tuple[float, float, float, float] | None:
    """Hodges-Lehmann shift ``after - before`` with its exact interval and coverage, or None."""
    na, nb = len(before), len(after)
    if min(na, nb) < 2 or max(na, nb) > RANK_MAX:
        return None
    found = rank_depth(na, nb, confidence)
    if found is None:
        return None
    depth, achieved = found
    differences = sorted(b - a for a, b in itertools.product(before, after))
    return statistics.median(differences), differences[depth - 1], differences[-depth], achieved


def _student(before: Sequence[float], after: Sequence[float], confidence: float) -> tuple[float, float]:
    """Difference of the means ``after - before`` and the half width of its t interval."""
    na, nb = len(before), len(after)
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
    return statistics.fmean(after) - statistics.fmean(before), half


def interval(
    before: Sequence[float], after: Sequence[float], *, better_sign: float, threshold_pct: float, confidence: float
) -> Interval | None:
    """The interval of the change from ``before`` to ``after`` (``better_sign`` +1: higher is better,
    -1: lower is; method as the module docstring says); None when neither side has two values, or a
    side is empty, or (values of 0 or below) the baseline's mean is 0."""
    na, nb = len(before), len(after)
    if max(na, nb) < 2 or na == 0 or nb == 0:
        return None
    if min(*before, *after) > 0:
        logs_a, logs_b = [math.log(v) for v in before], [math.log(v) for v in after]
        ranked = _rank(logs_a, logs_b, confidence)
        if ranked is not None:
            shift, low, high, achieved = ranked
            method = "rank"
        else:
            shift, half = _student(logs_a, logs_b, confidence)
            low, high, achieved, method = shift - half, shift + half, confidence, "t-log"
        change = better_sign * math.expm1(shift) * 100.0
        ends = sorted(better_sign * math.expm1(end) * 100.0 for end in (low, high))
    else:
        mean_a = statistics.fmean(before)
        if mean_a == 0:
            return None
        difference, half = _student(before, after, confidence)
        scale = better_sign * 100.0 / abs(mean_a)
        change = difference * scale
        ends = sorted(((difference - half) * scale, (difference + half) * scale))
        achieved, method = confidence, "t"
    verdict = judge(ends[0], ends[1], change, threshold_pct)
    return Interval(change, ends[0], ends[1], confidence, verdict, method, achieved)
