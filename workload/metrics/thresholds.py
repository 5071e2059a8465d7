"""Accuracy targets by benchmark, from the newest round that knows it (see :mod:`workload.metrics.rules`).

Kept for callers that have a benchmark name but no round; results are judged by their own round's
rules in :mod:`workload.metrics.judge`.
"""

from __future__ import annotations

from workload.metrics.rules import ROUNDS, rules_for


def target(benchmark_full: str | None, metric: str, round_name: str | None = None) -> tuple[float, float | None] | None:
    """The (lower, upper) target of ``metric`` for ``benchmark_full`` in ``round_name`` (default: the
    newest round that knows the benchmark), or None if unknown. A figure with only an upper limit has
    lower bound ``-inf``."""
    for name in [round_name] if round_name else reversed(ROUNDS):
        bench = rules_for(name).benchmark(benchmark_full)
        if bench is None:
            continue
        found = bench.target(metric)
        if found is None:
            return None
        return (found.lower if found.lower is not None else float("-inf"), found.upper)
    return None
