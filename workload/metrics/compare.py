"""Compare two runs metric by metric, and the hosts of one fleet run against their median.

A change is a regression when it moves the wrong way by more than the threshold, per the metric's
relativity (throughput down, latency up, a PASS/VALID flag going to 0). Undefined-relativity
metrics (settings, counts) are reported as changes but never as regressions.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from workload.metrics.collection import Collection
from workload.metrics.model import BenchmarkResult, Metric, Relativity

MetricKey = tuple[str, str, str, str, str]  # host, benchmark, scenario, test mode, metric name


@dataclass(frozen=True)
class MetricChange:
    """One metric in both runs."""

    key: MetricKey
    unit: str
    relativity: Relativity
    before: float
    after: float
    change_pct: float | None
    regression: bool
    improvement: bool

    @property
    def label(self) -> str:
        host, bench, scen, mode, name = self.key
        prefix = f"[{host}] " if host else ""
        return f"{prefix}{bench} {scen} {mode}: {name}"


@dataclass(frozen=True)
class Comparison:
    """Per-metric changes from run A to run B."""

    threshold_pct: float
    changes: list[MetricChange] = field(default_factory=list)
    only_in_a: list[MetricKey] = field(default_factory=list)
    only_in_b: list[MetricKey] = field(default_factory=list)

    @property
    def regressions(self) -> list[MetricChange]:
        return [c for c in self.changes if c.regression]


def _key(result: BenchmarkResult, metric: Metric, with_host: bool) -> MetricKey:
    host = (result.host or "") if with_host else ""
    bench = result.benchmark_full or result.model or metric.scenario_name
    return host, bench, result.scenario or "", result.test_mode or "", metric.name


def _index(collection: Collection, with_host: bool) -> dict[MetricKey, Metric]:
    return {_key(r, m, with_host): m for r in collection.results for m in r.metrics}


def _change(before: float, after: float) -> float | None:
    if before == 0:
        return 0.0 if after == 0 else None
    return (after - before) / abs(before) * 100.0


def compare(a: Collection, b: Collection, threshold_pct: float = 5.0) -> Comparison:
    """Changes of every metric present in both ``a`` and ``b``; regressions past ``threshold_pct``."""
    with_host = bool(a.hosts) and set(a.hosts) == set(b.hosts)
    left, right = _index(a, with_host), _index(b, with_host)
    changes: list[MetricChange] = []
    for key, before in left.items():
        after = right.get(key)
        if after is None:
            continue
        pct = _change(before.value, after.value)
        worse = better = False
        if before.relativity is not Relativity.UNDEFINED:
            sign = 1.0 if before.relativity is Relativity.HIGHER_IS_BETTER else -1.0
            if pct is None:  # from 0 to something: direction only
                delta = sign * (after.value - before.value)
                worse, better = delta < 0, delta > 0
            else:
                worse, better = sign * pct < -threshold_pct, sign * pct > threshold_pct
        changes.append(MetricChange(key, before.unit, before.relativity, before.value, after.value, pct, worse, better))
    return Comparison(
        threshold_pct=threshold_pct,
        changes=changes,
        only_in_a=[k for k in left if k not in right],
        only_in_b=[k for k in right if k not in left],
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
