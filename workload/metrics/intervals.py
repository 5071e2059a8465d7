"""Tell a change from noise: a confidence interval for the relative change of a metric between two
runs with repeated values (iterations), and the verdict it supports.

Performance noise on a shared machine is multiplicative (a neighbour taking a share of the CPU
scales throughput and latency, it does not add a constant), so positive values are compared on the
log scale: the change is a ratio, and the interval is turned into percent of the baseline so that
positive means better (throughput up, latency down). Which interval (``Interval.method``):

* ``signed-rank`` (:func:`paired_interval`): the two sides' iterations ran interleaved in time
  (A1 B1 A2 B2 ..., any order within a pair; :mod:`workload.metrics.pairing` decides that from the
  recorded start and end times), so each pair's ratio ``b_i / a_i`` cancels the slow load swings both
  runs of the pair shared. The Hodges-Lehmann estimate of the log ratios ``d_i = log b_i - log a_i``
  (the median of the ``M = n (n + 1) / 2`` Walsh averages ``(d_i + d_j) / 2``, ``i <= j``) with its
  exact interval from Wilcoxon's signed-rank statistic W+: ``[w_(k), w_(M+1-k)]``, ``k`` the largest
  with ``2 P(W+ <= k - 1) <= 1 - confidence`` when the log ratios are symmetric about 0 (Lehmann,
  *Nonparametrics*, ch. 4). W+ takes each of its values with probability (subsets of the ranks
  ``1..n`` summing to it) / ``2**n``, so ``n`` pairs reach at most ``1 - 2 / 2**n``: 5 pairs 0.9375,
  6 pairs 0.969 (:func:`pairs_needed`: 0.95 needs 6); fewer pairs than the confidence needs take the
  unpaired interval below, and the interval says why (``Interval.unpaired_because``). Its coverage
  holds for any symmetric distribution of the pairs' log ratios, however the load moved between pairs.

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

Values that are not finite (NaN, infinity) give no interval (the caller names them); a ratio past
``e**700`` is shown as ``e**700`` (no float overflow, whatever the values).

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
    #: the pairs of a ``signed-rank`` interval (0: the sides were compared unpaired)
    pairs: int = 0
    #: why an interval of iterations is not paired (empty when it is, or when nothing was to pair)
    unpaired_because: str = ""

    @property
    def paired(self) -> bool:
        return self.pairs > 0

    def as_dict(self) -> dict[str, object]:
        return {
            "paired": self.paired,
            "pairs": self.pairs or None,
            "unpaired_because": self.unpaired_because or None,
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
    return _depth(u_counts(na, nb), math.comb(na + nb, na), confidence)


def _depth(counts: Sequence[int], total: int, confidence: float) -> tuple[int, float] | None:
    """The largest ``k`` whose two tails of a symmetric statistic (``counts`` of each value out of
    ``total``) stay within ``1 - confidence``, and the coverage it gives; None when ``k = 1`` does not."""
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


#: the most pairs for the exact signed-rank interval (its W+ table has n (n + 1) / 2 + 1 counts)
PAIRED_MAX = 100
#: the largest log ratio shown (``e**700`` is near the largest float; beyond, expm1 overflows)
_LOG_RATIO_CAP = 700.0


@functools.lru_cache(maxsize=256)
def signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the ``2**n`` sign patterns of ``n`` ranked differences give each Wilcoxon W+ (the
    sum of the ranks with a positive sign), W+ = 0 .. n (n + 1) / 2: the number of subsets of
    ``1..n`` with that sum, grown one rank at a time (rank r left out, or in: shifted by r)."""
    counts = [1]
    for rank in range(1, n + 1):
        grown = counts + [0] * rank
        for total, count in enumerate(counts):
            grown[total + rank] += count
        counts = grown
    return tuple(counts)


def signed_rank_depth(n: int, confidence: float) -> tuple[int, float] | None:
    """``k`` and the coverage of ``[w_(k), w_(M+1-k)]`` for ``n`` pairs; None when ``n`` pairs cannot
    reach ``confidence`` (see :func:`pairs_needed`)."""
    if n < 1:
        return None
    return _depth(signed_rank_counts(n), 2**n, confidence)


def pairs_needed(confidence: float) -> int:
    """The fewest pairs whose signed-rank interval reaches ``confidence``: the widest interval of
    ``n`` pairs (their smallest and largest log ratio) covers ``1 - 2 / 2**n``."""
    for n in range(1, PAIRED_MAX + 1):
        if signed_rank_depth(n, confidence) is not None:
            return n
    return PAIRED_MAX + 1


def paired_coverage_best(n: int) -> float:
    """The highest coverage ``n`` pairs reach (``1 - 2 / 2**n``)."""
    return 1 - 2 / float(2**n)


def _finite(*sides: Sequence[float]) -> bool:
    return all(math.isfinite(v) for side in sides for v in side)


def _percent(log_ratio: float, better_sign: float) -> float:
    """A change of the log values as percent of the baseline (positive = better), overflow-free."""
    return better_sign * math.expm1(max(-_LOG_RATIO_CAP, min(_LOG_RATIO_CAP, log_ratio))) * 100.0


def paired_interval(
    before: Sequence[float], after: Sequence[float], *, better_sign: float, threshold_pct: float, confidence: float
) -> Interval | None:
    """The ``signed-rank`` interval of the pairs ``(before[i], after[i])`` (the module docstring);
    None when the sides differ in length, a value is not finite and positive, or the pairs are too
    few for ``confidence`` (or more than :data:`PAIRED_MAX`): the caller then compares unpaired."""
    n = len(before)
    if n != len(after) or not 1 <= n <= PAIRED_MAX or not _finite(before, after):
        return None
    if min(*before, *after) <= 0:
        return None
    found = signed_rank_depth(n, confidence)
    if found is None:
        return None
    depth, achieved = found
    logs = [math.log(b) - math.log(a) for a, b in zip(before, after, strict=True)]
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    shift, low, high = statistics.median(walsh), walsh[depth - 1], walsh[-depth]
    change = _percent(shift, better_sign)
    ends = sorted(_percent(end, better_sign) for end in (low, high))
    verdict = judge(ends[0], ends[1], change, threshold_pct)
    return Interval(change, ends[0], ends[1], confidence, verdict, "signed-rank", achieved, pairs=n)


def why_not_paired(before: Sequence[float], after: Sequence[float], confidence: float) -> str:
    """Why :func:`paired_interval` gives no interval for pairs that did alternate in time (empty: it does)."""
    n = len(before)
    if n != len(after) or n == 0:
        return f"the sides have {n} and {len(after)} values"
    if n > PAIRED_MAX:
        return f"more than {PAIRED_MAX} pairs"
    if not _finite(before, after) or min(*before, *after) <= 0:
        return "a value is 0 or below (no ratio)"
    if signed_rank_depth(n, confidence) is None:
        return (
            f"{n} pairs reach at most {paired_coverage_best(n):.4g} confidence; "
            f"{confidence:g} needs {pairs_needed(confidence)}"
        )
    return ""


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
    -1: lower is; method as the module docstring says, never ``signed-rank``); None when neither side
    has two values, a side is empty, a value is not finite, or (values of 0 or below) the baseline's
    mean is 0."""
    na, nb = len(before), len(after)
    if max(na, nb) < 2 or na == 0 or nb == 0 or not _finite(before, after):
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
        change = _percent(shift, better_sign)
        ends = sorted(_percent(end, better_sign) for end in (low, high))
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
