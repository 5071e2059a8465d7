"""Compare two runs metric by metric, and the hosts of one fleet run against their median.

A change is a regression when it moves the wrong way by more than the threshold, per the metric's
relativity (throughput down, latency up, a PASS/VALID flag going to 0). Undefined-relativity
metrics (settings, counts) are reported as changes but never as regressions. Where a metric has
two or more values on a side (iterations), the verdict comes from a confidence interval instead
(:mod:`workload.metrics.intervals`: regression, improvement, no change or cannot tell): paired
(the signed-rank interval of the ratios B_i / A_i) where the two sides' iterations alternated in
time (:mod:`workload.metrics.pairing` reads that from their start and end times) and the pairs
reach the confidence; otherwise unpaired (the exact rank interval of the ratio's Hodges-Lehmann
estimate where the sides are large enough, else Student's t on the log values), with the reason.
A value that is not a finite number (NaN, infinity in a run folder) of a metric with a direction is
not judged: the metric is listed as unusable, a failure for CI like a missing one.

Each figure is counted once: VirtualClient's names of a figure the result also carries under its
clear name (``samples_per_second_p99`` beside ``samples_per_second``) are left out. The settings
that decide a result (target QPS, latency bound, min duration, query count, the MLPerf round) are
compared on their own: a difference is named (:attr:`Comparison.settings`), never a regression.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from workload.metrics.collection import Collection
from workload.metrics.intervals import (
    CANNOT_TELL,
    IMPROVEMENT,
    NO_CHANGE,
    REGRESSION,
    Interval,
    interval,
    paired_interval,
    why_not_paired,
)
from workload.metrics.model import BenchmarkResult, Categorization, Metric, Relativity
from workload.metrics.names import is_vc_alias
from workload.metrics.pairing import pair_iterations

MetricKey = tuple[str, str, str, str, str]  # host, benchmark, scenario, test mode, metric name
ResultKey = tuple[str, str, str, str]  # host, benchmark, scenario, test mode

#: metric name -> how a setting of a result is called when two runs differ in it
SETTINGS = {
    "effective_target_qps": "target QPS",
    "effective_target_latency_ns": "latency bound",
    "effective_min_duration_ms": "min duration",
    "effective_min_query_count": "min query count",
}
#: the result's metadata key of its MLPerf round (its rules judge the result)
ROUND = "mlperf_round"


@dataclass(frozen=True)
class Aggregate:
    """The values one metric took in one run (one per iteration): median, best and how many."""

    values: tuple[float, ...]
    relativity: Relativity

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float:
        return float(statistics.median(self.values))

    @property
    def best(self) -> float:
        """The best value by the metric's direction (the median where it has none)."""
        if self.relativity is Relativity.HIGHER_IS_BETTER:
            return max(self.values)
        if self.relativity is Relativity.LOWER_IS_BETTER:
            return min(self.values)
        return self.median

    def as_dict(self) -> dict[str, object]:
        return {"median": self.median, "best": self.best, "n": self.n, "values": list(self.values)}


@dataclass(frozen=True)
class MetricChange:
    """One metric in both runs; ``before``/``after`` are medians over the runs' iterations."""

    key: MetricKey
    unit: str
    relativity: Relativity
    before: float
    after: float
    change_pct: float | None
    regression: bool
    improvement: bool
    a: Aggregate | None = None
    b: Aggregate | None = None
    interval: Interval | None = None

    @property
    def verdict(self) -> str:
        """regression, improvement, no change (threshold or interval) or cannot tell (interval only)."""
        if self.interval is not None:
            return self.interval.verdict
        return REGRESSION if self.regression else IMPROVEMENT if self.improvement else NO_CHANGE

    @property
    def label(self) -> str:
        host, bench, scen, mode, name = self.key
        prefix = f"[{host}] " if host else ""
        return f"{prefix}{bench} {scen} {mode}: {name}"

    def as_dict(self) -> dict[str, object]:
        host, bench, scen, mode, name = self.key
        return {
            "host": host or None,
            "benchmark": bench,
            "scenario": scen,
            "mode": mode,
            "metric": name,
            "unit": self.unit,
            "relativity": self.relativity.value,
            "before": self.a.as_dict() if self.a else {"median": self.before, "best": self.before, "n": 1},
            "after": self.b.as_dict() if self.b else {"median": self.after, "best": self.after, "n": 1},
            "change_pct": self.change_pct,
            "regression": self.regression,
            "improvement": self.improvement,
            "verdict": self.verdict,
            "interval": self.interval.as_dict() if self.interval else None,
        }


@dataclass(frozen=True)
class SettingChange:
    """A setting of one result that differs between the runs (values as the results state them)."""

    key: ResultKey
    setting: str
    before: object
    after: object
    unit: str = ""

    def as_dict(self) -> dict[str, object]:
        host, bench, scen, mode = self.key
        return {
            "host": host or None,
            "benchmark": bench,
            "scenario": scen,
            "mode": mode,
            "setting": self.setting,
            "before": self.before,
            "after": self.after,
            "unit": self.unit,
        }


@dataclass(frozen=True)
class Comparison:
    """Per-metric changes from run A (the baseline) to run B (the new run).

    ``missing`` are metrics of A that B lacks (a result or a metric that did not come: a failure
    for CI, see :attr:`failed`); ``only_in_b`` are new in B (information). ``incomplete`` are
    metrics of B with fewer values than the ``iterations`` asked for.
    """

    threshold_pct: float
    changes: list[MetricChange] = field(default_factory=list)
    only_in_a: list[MetricKey] = field(default_factory=list)
    only_in_b: list[MetricKey] = field(default_factory=list)
    incomplete: list[tuple[MetricKey, int]] = field(default_factory=list)
    iterations: int | None = None
    settings: list[SettingChange] = field(default_factory=list)
    confidence: float = 0.95
    #: metrics with a value that is not a finite number on a side (not judged; a failure like missing)
    unusable: list[MetricKey] = field(default_factory=list)

    @property
    def regressions(self) -> list[MetricChange]:
        return [c for c in self.changes if c.regression]

    @property
    def cannot_tell(self) -> list[MetricChange]:
        """Changes whose interval holds both no change and a regression past the threshold."""
        return [c for c in self.changes if c.verdict == CANNOT_TELL]

    @property
    def missing(self) -> list[MetricKey]:
        return self.only_in_a

    @property
    def missing_results(self) -> list[ResultKey]:
        """The results (host, benchmark, scenario, mode) of A with no metric at all in B."""
        present = {k[:4] for k in (*(c.key for c in self.changes), *self.only_in_b)}
        return list(dict.fromkeys(k[:4] for k in self.only_in_a if k[:4] not in present))

    def failed(self, *, allow_missing: bool = False) -> bool:
        """A regression, or (unless ``allow_missing``) a missing, incomplete or unusable metric."""
        return bool(self.regressions) or (
            not allow_missing and bool(self.only_in_a or self.incomplete or self.unusable)
        )


def _key(result: BenchmarkResult, metric: Metric, with_host: bool) -> MetricKey:
    host = (result.host or "") if with_host else ""
    bench = result.benchmark_full or result.model or metric.scenario_name
    return host, bench, result.scenario or "", result.test_mode or "", metric.name


def is_headline(result: BenchmarkResult, metric: Metric) -> bool:
    """A metric CI judges by default: the result's headline figure, its validity, its accuracy figures
    (verbosity 1). Latency percentiles other than the headline are not (``compare --all`` shows them)."""
    if result.headline is not None and metric.name == result.headline.name:
        return True
    if metric.name == "valid":
        return True
    return metric.categorization is Categorization.ACCURACY and metric.verbosity <= 1


def is_folded_alias(result: BenchmarkResult, metric: Metric) -> bool:
    """A VirtualClient name of a figure the result also has under its clear name (same value and unit)."""
    if not is_vc_alias(metric.name):
        return False
    return any(
        other is not metric
        and not is_vc_alias(other.name)
        and other.value == metric.value
        and other.unit == metric.unit
        for other in result.metrics
    )


def _index(collection: Collection, with_host: bool, headline_only: bool) -> dict[MetricKey, list[Metric]]:
    """Every metric by key, each figure once (aliases folded); a key met more than once (iterations,
    hosts merged) keeps every value."""
    found: dict[MetricKey, list[Metric]] = {}
    for result in collection.results:
        for metric in result.metrics:
            if headline_only and not is_headline(result, metric):
                continue
            if is_folded_alias(result, metric):
                continue
            found.setdefault(_key(result, metric, with_host), []).append(metric)
    return found


def _settings(collection: Collection, with_host: bool) -> dict[tuple[ResultKey, str], tuple[list[object], str]]:
    """Each result's settings (:data:`SETTINGS` and its round): (result key, setting) -> (values, unit)."""
    found: dict[tuple[ResultKey, str], tuple[list[object], str]] = {}
    for result in collection.results:
        key: ResultKey = (
            (result.host or "") if with_host else "",
            result.benchmark_full or result.model or "",
            result.scenario or "",
            result.test_mode or "",
        )
        for metric in result.metrics:
            name = SETTINGS.get(metric.name)
            if name is not None:
                found.setdefault((key, name), ([], metric.unit))[0].append(metric.value)
        round_name = next((m.metadata.get(ROUND) for m in result.metrics if m.metadata.get(ROUND)), None)
        if round_name is not None:
            found.setdefault((key, "MLPerf round"), ([], ""))[0].append(round_name)
    return found


def setting_changes(a: Collection, b: Collection, with_host: bool) -> list[SettingChange]:
    """The settings a result has in both runs with different values (iterations: the set of values)."""
    left, right = _settings(a, with_host), _settings(b, with_host)
    changes = []
    for (key, name), (values_a, unit) in left.items():
        got = right.get((key, name))
        if got is None:
            continue
        values_b = got[0]
        if sorted(set(map(str, values_a))) == sorted(set(map(str, values_b))):
            continue
        shown_a = values_a[0] if len(set(map(str, values_a))) == 1 else values_a
        shown_b = values_b[0] if len(set(map(str, values_b))) == 1 else values_b
        changes.append(SettingChange(key, name, shown_a, shown_b, unit))
    return changes


def _change(before: float, after: float) -> float | None:
    if before == 0:
        return 0.0 if after == 0 else None
    return (after - before) / abs(before) * 100.0


def judged_interval(
    before: Sequence[Metric], after: Sequence[Metric], *, better_sign: float, threshold_pct: float, confidence: float
) -> Interval | None:
    """The interval of one metric's iterations: paired when they alternated in time and the pairs
    reach ``confidence``, else unpaired with the reason (None: too few values for any interval)."""
    values_a, values_b = [m.value for m in before], [m.value for m in after]
    if max(len(values_a), len(values_b)) < 2:
        return None
    pairing = pair_iterations([(m.start_time, m.end_time) for m in before], [(m.start_time, m.end_time) for m in after])
    reason = pairing.reason
    if pairing.paired:
        ordered_a = [values_a[i] for i in pairing.order_a]
        ordered_b = [values_b[i] for i in pairing.order_b]
        paired = paired_interval(
            ordered_a, ordered_b, better_sign=better_sign, threshold_pct=threshold_pct, confidence=confidence
        )
        if paired is not None:
            return paired
        reason = why_not_paired(ordered_a, ordered_b, confidence)
    unpaired = interval(values_a, values_b, better_sign=better_sign, threshold_pct=threshold_pct, confidence=confidence)
    return replace(unpaired, unpaired_because=reason) if unpaired is not None else None


def compare(
    a: Collection,
    b: Collection,
    threshold_pct: float = 5.0,
    *,
    headline_only: bool = False,
    iterations: int | None = None,
    confidence: float = 0.95,
) -> Comparison:
    """Changes of every metric of ``a`` in ``b``; regressions past ``threshold_pct``.

    A metric met several times in one run (``--iterations``) is compared by its median (the
    best value and the count come along). Hosts are kept apart when the runs share a host name;
    runs on different machines are compared benchmark by benchmark (values of all hosts pooled).
    ``headline_only`` keeps the metrics of :func:`is_headline`; ``iterations`` asks every metric of
    ``b`` to have that many values (fewer: listed in ``incomplete``). A metric with two or more
    values on a side is judged by :func:`judged_interval` at ``confidence`` (regression only when the
    interval says so); otherwise by the threshold. A metric with a direction and a value that is not
    finite is listed in ``unusable`` and not judged.
    """
    with_host = bool(set(a.hosts) & set(b.hosts))
    left, right = _index(a, with_host, headline_only), _index(b, with_host, headline_only)
    changes: list[MetricChange] = []
    incomplete: list[tuple[MetricKey, int]] = []
    unusable: list[MetricKey] = []
    for key, before_list in left.items():
        after_list = right.get(key)
        if after_list is None:
            continue
        first = before_list[0]
        judged = first.relativity is not Relativity.UNDEFINED  # settings and counts are shown, never judged
        if judged and not all(math.isfinite(m.value) for m in (*before_list, *after_list)):
            unusable.append(key)
            continue
        agg_a = Aggregate(tuple(m.value for m in before_list), first.relativity)
        agg_b = Aggregate(tuple(m.value for m in after_list), first.relativity)
        before, after = agg_a.median, agg_b.median
        pct = _change(before, after)
        worse = better = False
        spread: Interval | None = None
        if judged:
            sign = 1.0 if first.relativity is Relativity.HIGHER_IS_BETTER else -1.0
            spread = judged_interval(
                before_list, after_list, better_sign=sign, threshold_pct=threshold_pct, confidence=confidence
            )
            if spread is not None:
                worse, better = spread.verdict == REGRESSION, spread.verdict == IMPROVEMENT
            elif pct is None:  # from 0 to something: direction only
                delta = sign * (after - before)
                worse, better = delta < 0, delta > 0
            else:
                worse, better = sign * pct < -threshold_pct, sign * pct > threshold_pct
        changes.append(
            MetricChange(key, first.unit, first.relativity, before, after, pct, worse, better, agg_a, agg_b, spread)
        )
        if iterations is not None and agg_b.n < iterations:
            incomplete.append((key, agg_b.n))
    return Comparison(
        threshold_pct=threshold_pct,
        changes=changes,
        only_in_a=[k for k in left if k not in right],
        only_in_b=[k for k in right if k not in left],
        incomplete=incomplete,
        iterations=iterations,
        settings=setting_changes(a, b, with_host),
        confidence=confidence,
        unusable=unusable,
    )


@dataclass(frozen=True)
class HostDeviation:
    """One host's headline metric against the fleet median for the same benchmark and scenario."""

    host: str
    benchmark: str
    scenario: str
    metric: str
    unit: str
    value: float
    median: float
    deviation_pct: float
    slow: bool


@dataclass(frozen=True)
class HostComparison:
    """Fleet comparison: hosts whose headline metric is more than ``threshold_pct`` worse than the median."""

    threshold_pct: float
    deviations: list[HostDeviation] = field(default_factory=list)

    @property
    def slow_hosts(self) -> list[str]:
        return sorted({d.host for d in self.deviations if d.slow})


def headline_of(result: BenchmarkResult) -> Metric | None:
    """The result's headline metric (the stored one, else the first verbosity-1 rate or latency)."""
    if result.headline is not None:
        return result.headline
    for metric in result.metrics:
        if metric.verbosity == 1 and metric.unit in ("samples/s", "tokens/s", "ns"):
            return metric
    return None


def compare_hosts(collection: Collection, threshold_pct: float = 5.0) -> HostComparison:
    """Compare each host's headline with the median of all hosts running the same benchmark/scenario."""
    groups: dict[tuple[str, str, str], list[tuple[str, Metric]]] = {}
    for result in collection.results:
        metric = headline_of(result)
        if metric is None or not result.host or not result.is_performance:
            continue
        key = (result.benchmark_full or result.model or metric.scenario_name, result.scenario or "", metric.name)
        groups.setdefault(key, []).append((result.host, metric))
    deviations: list[HostDeviation] = []
    for (bench, scen, name), members in sorted(groups.items()):
        if len({h for h, _ in members}) < 2:
            continue
        median = statistics.median(m.value for _, m in members)
        for host, metric in members:
            pct = _change(median, metric.value) or 0.0
            sign = -1.0 if metric.relativity is Relativity.LOWER_IS_BETTER else 1.0
            slow = sign * pct < -threshold_pct
            deviations.append(HostDeviation(host, bench, scen, name, metric.unit, metric.value, median, pct, slow))
    return HostComparison(threshold_pct=threshold_pct, deviations=deviations)
