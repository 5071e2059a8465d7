"""The MLPerf rules the endpoints verdict needs (:mod:`.endpoints`), read from the per-round rules tables.

The endpoints client's results (v6.1) carry no validity, so :mod:`.endpoints` judges them as the
submission checker does; the limits come from :mod:`workload.metrics.rules` (``vX.Y.json``, from
``mlcommons/inference`` ``tools/submission/submission_checker/constants.py``): ``LLM_LATENCY_LIMITS``
(TTFT/TPOT), ``latency-constraint`` (Server latency), ``accuracy-target``/``accuracy-upper-limit``,
the tokens/s unit of ``SPECIAL_UNIT_DICT`` and ``TEST_DURATION_MS``. The endpoints format exists
from v6.1 on, so that round is the default; ``--round`` overrides it as for every result.
"""

from __future__ import annotations

import re

from workload.metrics import rules

#: the first round whose results may be in the endpoints format
ENDPOINTS_ROUND = "v6.1"


def _rules() -> rules.RoundRules:
    """The endpoints round's rules, or the round ``--round`` forces."""
    name, _how = rules.detect_round(path=f"/{ENDPOINTS_ROUND}/")
    return rules.rules_for(name)


def _benchmark(benchmark: str | None) -> rules.Benchmark | None:
    """``llama2-70b-interactive-99`` is ``llama2-70b-99`` judged as Interactive."""
    name = re.sub(r"-interactive(?=$|-)", "", (benchmark or "").lower())
    return _rules().benchmark(name)


def min_duration_ms() -> int:
    """The round's minimum run duration (``TEST_DURATION_MS``)."""
    return _rules().min_duration_ms


def latency_limits(benchmark: str | None, scenario: str) -> dict[str, float]:
    """``{"ttft": ns, "tpot": ns}`` (LLMs) or ``{"latency": ns}`` for a Server/Interactive run; ``{}`` otherwise."""
    known = _benchmark(benchmark)
    if known is None:
        return {}
    tokens = known.token_limits(scenario)
    if tokens is not None:
        return {"ttft": float(tokens[0]), "tpot": float(tokens[1])}
    if scenario == "Server" and known.server_latency_ns:
        return {"latency": float(known.server_latency_ns)}
    return {}


def accuracy_metric(benchmark: str | None) -> str:
    """The figure an endpoints accuracy score stands for: the benchmark's first required target (else ``score``)."""
    known = _benchmark(benchmark)
    required = [t.metric for t in known.targets if t.required] if known else []
    return required[0] if required else "score"


def accuracy_target(benchmark: str | None, metric: str) -> rules.Target | None:
    """The bounds of ``metric`` for ``benchmark`` in the round's table, or None if it sets none."""
    known = _benchmark(benchmark)
    return known.target(metric) if known else None


def reports_tokens(benchmark: str | None) -> bool:
    """Whether the benchmark's official metric is tokens/s (the checker's ``SPECIAL_UNIT_DICT``)."""
    known = _benchmark(benchmark)
    if known is None:
        return False
    return any("token" in unit.lower() for unit in known.unit.values()) or any(
        "token" in key for key in known.headline.values()
    )
