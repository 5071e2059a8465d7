"""The MLPerf rules the endpoints verdict needs (:mod:`.endpoints`), read from the per-round rules tables.

The endpoints client's results (v6.1) carry no validity, so :mod:`.endpoints` judges them as MLCommons' submission
checker does (``tools/submission/submission_checker/``, read at b66003e1); the rules come from
:mod:`workload.metrics.rules` (``vX.Y.json``, made from the checker's ``constants.py`` by
:mod:`workload.metrics.rules.from_checker`): ``ENDPOINTS_ALLOWED_MODELS``, ``RESULT_FIELD_ENDPOINTS`` and
``RESULT_FIELD_BENCHMARK_OVERWRITE`` (the headline), ``SPECIAL_UNIT_DICT``/``UNIT_DICT`` (its unit),
``LLM_LATENCY_LIMITS`` (TTFT/TPOT) and ``get_llm_models()``, ``latency-constraint`` (e2e latency of other models),
``accuracy-target`` (per scenario for qwen3-vl), ``accuracy-sample-count``/``dataset-size``, ``seeds`` and
``TEST_DURATION_MS``. The endpoints format exists from v6.1 on, so that round is the default; ``--round``
overrides it as for every result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workload.metrics import rules

#: the first round whose results may be in the endpoints format
ENDPOINTS_ROUND = "v6.1"
#: ``SCENARIO_MAPPING`` of the checker: lower-case scenario -> MLPerf scenario
_SCENARIOS = {s.lower(): s for s in ("SingleStream", "MultiStream", "Offline", "Server", "Interactive")}
#: the checker's ``MS_TO_NS`` and ``S_TO_MS`` (performance_check.py ``get_performance_metric_check``)
_MS_TO_NS = 1e6
_S_TO_MS = 1e3


def round_rules() -> rules.RoundRules:
    """The endpoints round's rules, or the round ``--round`` forces."""
    name, _how = rules.detect_round(path=f"/{ENDPOINTS_ROUND}/")
    return rules.rules_for(name)


def benchmark(name: str | None) -> rules.Benchmark | None:
    """The benchmark ``name`` means (``llama2-70b-interactive-99`` is ``llama2-70b-99`` judged as Interactive)."""
    return round_rules().benchmark(re.sub(r"-interactive(?=$|-)", "", (name or "").lower()))


def checker_scenario(folder: str, client_type: str | None) -> str:
    """The scenario the checker judges: ``map_endpoints_scenario`` (performance_check.py:64) of config.yaml's
    ``type`` (``offline``/``online``) and the folder's scenario: a SingleStream folder is SingleStream, an
    Interactive folder or type Interactive, ``online`` Server, anything else the type as written (lower case
    ``offline``: the checker does not capitalise it). Without a type, the folder's scenario."""
    if folder.lower() == "singlestream":
        return "SingleStream"
    if folder.lower() == "interactive" or (client_type or "").lower() == "interactive":
        return "Interactive"
    if client_type is None:
        return folder
    return "Server" if client_type.lower() == "online" else client_type


@dataclass(frozen=True)
class Headline:
    """The checker's performance metric of an endpoints result: which key, divided by what, in which unit.

    ``key`` is the LoadGen-style key the endpoints parser maps the client's field to; the checker prints the
    figure divided by ``divisor`` (ns -> ms for SingleStream/MultiStream, ms -> s for wan-2.2) and labels it
    ``checker_unit`` (``SPECIAL_UNIT_DICT`` of the model and folder scenario, else ``UNIT_DICT``).
    """

    key: str
    divisor: float
    checker_unit: str | None


def headline(name: str | None, folder: str, scenario: str) -> Headline | None:
    """The headline of a ``folder``-scenario result the checker judges as ``scenario`` (:func:`checker_scenario`).

    ``RESULT_FIELD_ENDPOINTS[round][scenario.lower()]``, replaced by ``RESULT_FIELD_BENCHMARK_OVERWRITE``
    where the model has an entry for ``scenario`` as spelt (performance_check.py:559-572: the checker looks up
    ``offline`` as written in config.yaml, so deepseek-r1's ``Offline`` tokens/s entry is not used and its
    Offline headline stays samples/s). None when the round has no endpoints table.
    """
    table = round_rules().endpoints
    if table is None:
        return None
    key = table.result_fields.get(scenario.lower())
    if key is None:
        return None
    known = benchmark(name)
    model = known.name if known is not None else round_rules().model_mapping.get(name or "", name or "")
    key = table.headline_overrides.get(model, {}).get(scenario, key)
    divisor = 1.0
    if scenario in ("SingleStream", "MultiStream"):
        divisor = _MS_TO_NS * (_S_TO_MS if known is not None and known.name == "wan-2.2-t2v-a14b" else 1.0)
    return Headline(key, divisor, checker_unit(name, folder))


def checker_unit(name: str | None, folder: str) -> str | None:
    """``results.py:122``: the unit the checker prints: the model's ``SPECIAL_UNIT_DICT`` entry for the folder's
    scenario, else ``UNIT_DICT``'s."""
    known = benchmark(name)
    scenario = _SCENARIOS.get(folder.lower(), folder)
    if known is not None and scenario in known.unit:
        return known.unit[scenario]
    return round_rules().units.get(scenario)


def allowed(name: str | None) -> bool:
    """Whether the benchmark is one the checker accepts in the endpoints format (``ENDPOINTS_ALLOWED_MODELS``)."""
    table = round_rules().endpoints
    known = benchmark(name)
    return table is not None and known is not None and known.name in table.allowed_models


def allowed_models() -> tuple[str, ...]:
    """``ENDPOINTS_ALLOWED_MODELS`` of the round (empty where the round has no endpoints table)."""
    table = round_rules().endpoints
    return table.allowed_models if table is not None else ()


def is_llm(name: str | None) -> bool:
    """Whether the checker judges the benchmark by TTFT/TPOT (``Config.get_llm_models()``)."""
    known = benchmark(name)
    return known is not None and known.name in round_rules().llm_models


def token_limits(name: str | None, scenario: str) -> tuple[float, float] | None:
    """(TTFT, TPOT) limits in ns of an LLM's Server/Interactive result (``LLM_LATENCY_LIMITS``)."""
    known = benchmark(name)
    limits = known.token_limits(scenario) if known is not None else None
    return (float(limits[0]), float(limits[1])) if limits is not None else None


def latency_limit(name: str | None, folder: str) -> float | None:
    """The 99th percentile e2e latency bound of a non-LLM result (``latency-constraint`` by folder scenario)."""
    known = benchmark(name)
    bound = known.latency_ns.get(_SCENARIOS.get(folder.lower(), folder)) if known is not None else None
    return float(bound) if bound is not None else None


def accuracy_compared(name: str | None) -> bool:
    """Whether the checker compares the model's endpoints score with its target (only qwen3-vl: accuracy_check.py
    line 116); the others pass when a score is there."""
    table = round_rules().endpoints
    known = benchmark(name)
    return table is not None and known is not None and known.name in table.accuracy_compared


def accuracy_metric(name: str | None, scenario: str | None = None) -> str:
    """The figure an endpoints accuracy score stands for: the benchmark's first required target (else ``score``)."""
    known = benchmark(name)
    required = [t.metric for t in known.targets_for(scenario) if t.required] if known else []
    return required[0] if required else "score"


def accuracy_target(name: str | None, metric: str, scenario: str | None = None) -> rules.Target | None:
    """The bounds of ``metric`` for ``name`` in ``scenario`` (the round's table), or None if it sets none."""
    known = benchmark(name)
    return known.target(metric, scenario) if known else None


def accuracy_samples(name: str | None, folder: str) -> int | None:
    """How many samples the accuracy run must score (``get_accuracy_sample_count``: ``accuracy-sample-count``,
    per scenario for qwen3-vl, else ``dataset-size``)."""
    known = benchmark(name)
    return known.accuracy_samples(_SCENARIOS.get(folder.lower(), folder)) if known is not None else None


def required_audits(name: str | None) -> dict[str, str]:
    """``{test: audit file name}`` of the compliance audits an endpoints result of ``name`` must hold
    (``endpoint_audit_file_required``, compliance_check.py:561-567: TEST04 for the endpoints models the round
    applies TEST04 to; the audit file is ``audit/audit_<ENDPOINTS_COMPLIANCE_MAPPING[test]>.json``)."""
    rules_now = round_rules()
    table = rules_now.endpoints
    known = benchmark(name)
    if table is None or known is None or known.name not in table.allowed_models:
        return {}
    return {
        test: f"audit_{table.compliance_files.get(test, test)}.json"
        for test in table.audits_required
        if known.name in rules_now.compliance_models.get(test, ())
    }


def output_token_range(name: str | None) -> tuple[float, float] | None:
    """TEST09's bounds of the mean output length for the models the round applies TEST09 to (gpt-oss-120b):
    ``compliance_endpoints_check`` compares the result's ``mean_output_tokens`` (``output_sequence_lengths.avg``)
    with ``TEST09_LOW``/``TEST09_HIGH``."""
    rules_now = round_rules()
    table = rules_now.endpoints
    known = benchmark(name)
    if table is None or table.test09_output_tokens is None or known is None:
        return None
    return table.test09_output_tokens if known.name in rules_now.compliance_models.get("TEST09", ()) else None


def seeds() -> dict[str, int]:
    """The round's ``seeds``: the endpoints client's dataloader and scheduler seeds must be
    ``sample_index_rng_seed`` and ``schedule_rng_seed`` (``seeds_check``; ``qsl_rng_seed`` is not checked)."""
    return dict(round_rules().seeds)


def min_duration_ms() -> int:
    """The round's minimum run duration (``TEST_DURATION_MS``)."""
    return round_rules().min_duration_ms
