"""The metrics layer: parse MLPerf result files into metrics, judge them, write and compare them.

Public API (imported lazily, so ``import workload.metrics`` stays cheap)::

    collect(path, *, host=None) -> Collection            # results + issues; never raises
    Collection.metrics / .results / .issues
    Verdict.from_results(results, issues) -> Verdict     # .ok only if all VALID, accuracy passed, all files read
    write_outputs(out_dir, results, context, issues=()) -> list[Path]   # metrics.jsonl/.csv, summary.json
    OutputContext(...)                                   # experiment id, profile, client id, tags
    load_run(path) -> Collection                         # a previous run folder (metrics.jsonl) or raw files
    render_table(collection) -> rich.table.Table
    compare(a, b, threshold_pct) -> Comparison           # per-metric change, regressions by relativity
    compare_hosts(collection, pct) -> HostComparison     # hosts more than pct worse than the fleet median
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at runtime __getattr__ imports on first use
    from workload.metrics.collection import Collection as Collection
    from workload.metrics.collection import collect as collect
    from workload.metrics.compare import Comparison as Comparison
    from workload.metrics.compare import HostComparison as HostComparison
    from workload.metrics.compare import compare as compare
    from workload.metrics.compare import compare_hosts as compare_hosts
    from workload.metrics.model import BenchmarkResult as BenchmarkResult
    from workload.metrics.model import Categorization as Categorization
    from workload.metrics.model import Metric as Metric
    from workload.metrics.model import ParseIssue as ParseIssue
    from workload.metrics.model import Relativity as Relativity
    from workload.metrics.outputs import OutputContext as OutputContext
    from workload.metrics.outputs import load_run as load_run
    from workload.metrics.outputs import write_outputs as write_outputs
    from workload.metrics.table import render_table as render_table
    from workload.metrics.verdict import Verdict as Verdict

_EXPORTS = {
    "collect": "collection",
    "Collection": "collection",
    "Metric": "model",
    "BenchmarkResult": "model",
    "ParseIssue": "model",
    "Relativity": "model",
    "Categorization": "model",
    "Verdict": "verdict",
    "write_outputs": "outputs",
    "OutputContext": "outputs",
    "load_run": "outputs",
    "render_table": "table",
    "compare": "compare",
    "compare_hosts": "compare",
    "Comparison": "compare",
    "HostComparison": "compare",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'workload.metrics' has no attribute {name!r}")
    return getattr(importlib.import_module(f"workload.metrics.{module}"), name)
