"""The few MLPerf rules the endpoints verdict needs (:mod:`.endpoints`): latency limits, accuracy targets, min duration.

Values from ``mlcommons/inference`` ``tools/submission/submission_checker/constants.py`` (v6.0 ``MODEL_CONFIG``,
which the v6.1 round reuses for these benchmarks): ``LLM_LATENCY_LIMITS`` (TTFT/TPOT, ns),
``MODEL_CONFIG[...]["latency-constraint"]`` (Server latency, ns), ``accuracy-target`` and
``accuracy-upper-limit``, ``SPECIAL_UNIT_DICT`` (benchmarks whose metric is tokens/s), and
``TEST_DURATION_MS`` (600 s, ``min_duration_check`` of ``checks/performance_check.py``).

Kept here, small and local, until the per-round rules table (``workload/metrics/rules.py``) exists:
these functions should then read that table instead.
"""

from __future__ import annotations

import re

MIN_DURATION_MS = 600_000

#: LLM_LATENCY_LIMITS: benchmark -> scenario -> {"ttft": ns, "tpot": ns}
_LLM_LIMITS: dict[str, dict[str, dict[str, float]]] = {
    "llama2-70b": {"Server": {"ttft": 2000e6, "tpot": 200e6}, "Interactive": {"ttft": 450e6, "tpot": 40e6}},
    "mixtral-8x7b": {"Server": {"ttft": 2000e6, "tpot": 200e6}},
    "llama3.1-405b": {"Server": {"ttft": 6000e6, "tpot": 175e6}, "Interactive": {"ttft": 4500e6, "tpot": 80e6}},
    "llama3.1-8b": {"Server": {"ttft": 2000e6, "tpot": 100e6}, "Interactive": {"ttft": 500e6, "tpot": 30e6}},
    "deepseek-r1": {"Server": {"ttft": 2000e6, "tpot": 80e6}, "Interactive": {"ttft": 1500e6, "tpot": 15e6}},
    "gpt-oss-120b": {"Server": {"ttft": 3000e6, "tpot": 80e6}, "Interactive": {"ttft": 2000e6, "tpot": 15e6}},
}
#: latency-constraint (Server, ns) of benchmarks judged by their sample latency, not TTFT/TPOT
_SERVER_LATENCY: dict[str, float] = {
    "resnet": 15e6,
    "retinanet": 100e6,
    "dlrm-v2": 60e6,
    "stable-diffusion-xl": 20000e6,
    "qwen3-vl-235b-a22b": 60000e6,
    "dlrm-v3": 60000e6,
}
#: accuracy-target / accuracy-upper-limit: benchmark -> metric -> (lower, upper or None)
_TARGETS: dict[str, dict[str, tuple[float, float | None]]] = {
    "deepseek-r1": {"exact_match": (0.99 * 81.3582, None), "TOKENS_PER_SAMPLE": (0.9 * 3886.2274, 1.1 * 3886.2274)},
    "gpt-oss-120b": {"exact_match": (83.13 * 0.99, None)},
    "qwen3-vl-235b-a22b": {"F1_HIERARCHICAL": (0.7903 * 0.99, None)},
    "wan-2.2-t2v-a14b": {"vbench_score": (70.48 * 0.99, None)},
}
#: the accuracy metric an endpoints "score" stands for, per benchmark (accuracy-target's first metric)
_SCORE_METRIC = {"deepseek-r1": "exact_match", "gpt-oss-120b": "exact_match", "qwen3-vl-235b-a22b": "F1_HIERARCHICAL",
                 "wan-2.2-t2v-a14b": "vbench_score"}  # fmt: skip
#: SPECIAL_UNIT_DICT: benchmarks whose official metric is tokens/s
_TOKENS = ("llama2-70b", "llama3.1-8b", "llama3.1-405b", "mixtral-8x7b", "deepseek-r1", "gpt-oss-120b")


def _base(benchmark: str | None) -> str:
    """``llama2-70b-99.9`` -> ``llama2-70b``; ``llama2-70b-interactive-99`` -> ``llama2-70b`` (lower case)."""
    name = (benchmark or "").lower()
    name = re.sub(r"-99(\.9)?$", "", name)
    return re.sub(r"-interactive$", "", name)


def latency_limits(benchmark: str | None, scenario: str) -> dict[str, float]:
    """``{"ttft": ns, "tpot": ns}`` (LLMs) or ``{"latency": ns}`` for a Server/Interactive run; ``{}`` otherwise."""
    base = _base(benchmark)
    if base in _LLM_LIMITS:
        return dict(_LLM_LIMITS[base].get(scenario, {}))
    if scenario == "Server" and base in _SERVER_LATENCY:
        return {"latency": _SERVER_LATENCY[base]}
    return {}


def accuracy_metric(benchmark: str | None) -> str:
    """The name of the figure an endpoints accuracy score is (``score`` when the benchmark is unknown here)."""
    return _SCORE_METRIC.get(_base(benchmark), "score")


def accuracy_target(benchmark: str | None, metric: str) -> tuple[float, float | None] | None:
    """(lower, upper or None) target of ``metric`` for ``benchmark``, or None if unknown."""
    return _TARGETS.get(_base(benchmark), {}).get(metric)


def reports_tokens(benchmark: str | None) -> bool:
    """Whether the benchmark's official metric is tokens/s."""
    return _base(benchmark) in _TOKENS
