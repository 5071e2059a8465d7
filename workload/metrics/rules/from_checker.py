"""A round's rules file (``vX.Y.json``) made from MLCommons' submission checker, read without running it.

The checker (``mlcommons/inference`` ``tools/submission/submission_checker/``) keeps its rules as Python literals:
``constants.py`` (``MODEL_CONFIG[round]``, ``RESULT_FIELD_NEW``, ``RESULT_FIELD_ENDPOINTS``,
``RESULT_FIELD_BENCHMARK_OVERWRITE``, ``LLM_LATENCY_LIMITS``, ``ACC_PATTERN``, ``SPECIAL_UNIT_DICT``, ``UNIT_DICT``,
``TEST_DURATION_MS``, ``ENDPOINTS_ALLOWED_MODELS``) and ``configuration/configuration.py`` (``get_llm_models``). This
module reads them from the source text (:mod:`ast`, nothing of the checker is imported or run) and lays out one round
as :mod:`workload.metrics.rules` reads it; an accuracy target written ``reference * factor`` keeps both numbers.

Used to regenerate a rules file (``python -m workload.metrics.rules.from_checker UPSTREAM_ROOT v6.1 > v6.1.json``,
``UPSTREAM_ROOT`` holding ``mlcommons-inference/tools/submission``) and by the tests that check every round's file
against the checker. The few rules the checker writes as code, not tables, are named here with their line.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workload.errors import UsageError

#: the checker package below an upstream root (``../shared/upstream``)
CHECKER = Path("mlcommons-inference/tools/submission/submission_checker")
_SCENARIO_KEYS = (
    "required-scenarios-datacenter",
    "optional-scenarios-datacenter",
    "required-scenarios-edge",
    "optional-scenarios-edge",
    "required-scenarios-datacenter-edge",
    "optional-scenarios-datacenter-edge",
)
#: ``checks/compliance_check.py`` ``endpoint_audit_file_required``: of the compliance tests, only TEST04's audit file
#: must be there (for the endpoints models in ``models_TEST04``); the others are judged when present
ENDPOINTS_AUDITS_REQUIRED = ("TEST04",)
_SCENARIO_ORDER = ("SingleStream", "MultiStream", "Offline", "Server", "Interactive")
#: ``checks/accuracy_check.py`` ``accuracy_result_check``: of the endpoints results, only this model's score is
#: compared with its target (``if self.model == "qwen3-vl-235b-a22b"``); the others pass when a score is there
ENDPOINTS_ACCURACY_COMPARED = ("qwen3-vl-235b-a22b",)


class CheckerSourceError(UsageError):
    """The checker's source is missing or holds something this reader does not understand."""


def _value(node: ast.expr) -> Any:
    """The value of a literal expression, products and sums included (``76.46 * 0.99``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Div)):
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        return left / right
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e) for e in node.elts]
    return ast.literal_eval(node)


def _factors(node: ast.expr) -> dict[str, float]:
    """``reference``/``factor`` of a target written ``a * b`` (the smaller number is the factor), else ``reference``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        a, b = _value(node.left), _value(node.right)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            reference, factor = (a, b) if abs(b) <= 1.5 else (b, a)
            return {"reference": reference, "factor": factor}
    value = _value(node)
    return {"reference": value}


def _assignments(path: Path) -> dict[str, ast.expr]:
    """The top-level ``NAME = <expr>`` of a module (a later one replaces an earlier one, as Python does)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise CheckerSourceError(f"{path}: cannot be read as Python ({exc})") from exc
    found: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = statement.value
    return found


def _llm_models(path: Path) -> list[str]:
    """``Config.get_llm_models()``'s list (``configuration/configuration.py``)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise CheckerSourceError(f"{path}: cannot be read as Python ({exc})") from exc
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_llm_models":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and isinstance(inner.value, ast.List):
                    return [str(v) for v in _value(inner.value)]
    raise CheckerSourceError(f"{path}: no get_llm_models() returning a list")


def _dict_node(node: ast.expr, key: str) -> ast.expr | None:
    """The value node of ``key`` in a dict literal ``node``."""
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    return None


def _pairs(node: ast.expr) -> list[tuple[str, ast.expr]]:
    """``("F1", 90.874 * 0.99, "ROUGE1", ...)`` as (metric, value node) pairs."""
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else []
    return [(str(_value(elts[i])), elts[i + 1]) for i in range(0, len(elts) - 1, 2)]


def _targets(node: ast.expr) -> list[dict[str, Any]]:
    return [{"metric": metric, "target": _value(v), **_factors(v)} for metric, v in _pairs(node)]


def _limits(node: ast.expr) -> list[dict[str, Any]]:
    return [{"metric": metric, "limit": _value(v), **_factors(v)} for metric, v in _pairs(node)]


def _commit(upstream: Path) -> str | None:
    """The checker's commit as ``mlcommons-inference/SOURCES.txt`` names it (``... @ <40 hex digits>``)."""
    try:
        text = (upstream / "mlcommons-inference" / "SOURCES.txt").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"tools/submission\S*\s.*?@\s*([0-9a-f]{40})", text)
    return match.group(1) if match else None


def round_rules(upstream: Path, round_name: str) -> dict[str, Any]:
    """Round ``round_name``'s rules as the checker under ``upstream`` (``UPSTREAM_ROOT``) states them."""
    package = upstream / CHECKER
    constants = _assignments(package / "constants.py")
    model_config = constants.get("MODEL_CONFIG")
    node = _dict_node(model_config, round_name) if model_config is not None else None
    if node is None:
        raise CheckerSourceError(f"{package / 'constants.py'}: MODEL_CONFIG has no round {round_name!r}")
    config: dict[str, Any] = _value(node)

    def table(name: str) -> Any:
        if name not in constants:
            raise CheckerSourceError(f"{package / 'constants.py'}: no {name}")
        return _value(constants[name])

    overwrite = table("RESULT_FIELD_BENCHMARK_OVERWRITE").get(round_name, {})
    special_units = table("SPECIAL_UNIT_DICT")
    llm_limits = table("LLM_LATENCY_LIMITS")
    target_nodes = _dict_node(node, "accuracy-target")
    limit_nodes = _dict_node(node, "accuracy-upper-limit")
    benchmarks: dict[str, dict[str, Any]] = {}
    for name in config["models"]:
        named = {scenario for key in _SCENARIO_KEYS for scenario in config.get(key, {}).get(name, [])}
        entry: dict[str, Any] = {
            "scenarios": [s for s in _SCENARIO_ORDER if s in named] + sorted(named - set(_SCENARIO_ORDER))
        }
        target_node = _dict_node(target_nodes, name) if target_nodes is not None else None
        if isinstance(target_node, ast.Dict):  # per scenario (qwen3-vl: Interactive scores an 8k subset)
            pairs = zip(target_node.keys, target_node.values, strict=True)
            by_scenario = {str(_value(k)): _targets(v) for k, v in pairs if k is not None}
            entry["accuracy"] = by_scenario.get("Offline") or next(iter(by_scenario.values()))
            entry["accuracy_by_scenario"] = by_scenario
        elif target_node is not None:
            entry["accuracy"] = _targets(target_node)
        limit_node = _dict_node(limit_nodes, name) if limit_nodes is not None else None
        if limit_node is not None:
            entry["upper_limits"] = _limits(limit_node)
        for source, key in (
            ("latency-constraint", "server_latency_ns"),
            ("min-queries", "min_queries"),
            ("performance-sample-count", "performance_sample_count"),
            ("accuracy-sample-count", "accuracy_sample_count"),
            ("dataset-size", "dataset_size"),
        ):
            if name in config.get(source, {}):
                entry[key] = config[source][name]
        token_limits = {  # LLM_LATENCY_LIMITS is one table for all rounds: the round's scenarios of the benchmark
            scenario: {"ttft_ns": limits["ttft"], "tpot_ns": limits["tpot"]}
            for scenario, limits in llm_limits.get(name, {}).items()
            if scenario in named
        }
        if token_limits:
            entry["token_latency_limits"] = token_limits
        if name in overwrite:
            entry["headline"] = overwrite[name]
        units = {s: u for s, u in special_units.get(name, {}).items() if s[:1].isupper()}
        if units:
            entry["unit"] = units
        benchmarks[name] = entry
    seeds = config.get("seeds", {})
    version = round_name.lstrip("v")
    endpoints_fields = table("RESULT_FIELD_ENDPOINTS").get(round_name)
    rules: dict[str, Any] = {
        "round": round_name,
        "source": {
            "repository": "mlcommons/inference",
            "path": "tools/submission/submission_checker/constants.py",
            "commit": _commit(upstream),
            "note": "made by workload/metrics/rules/from_checker.py from MODEL_CONFIG[round], RESULT_FIELD_NEW, "
            "RESULT_FIELD_ENDPOINTS, RESULT_FIELD_BENCHMARK_OVERWRITE, LLM_LATENCY_LIMITS, ACC_PATTERN, "
            "SPECIAL_UNIT_DICT, UNIT_DICT, TEST_DURATION_MS, ENDPOINTS_ALLOWED_MODELS and "
            "configuration/configuration.py get_llm_models()",
        },
        "loadgen_versions": [version],
        "qsl_rng_seed": seeds.get("qsl_rng_seed"),
        "seeds": seeds,
        "min_duration_ms": table("TEST_DURATION_MS"),
        "result_fields": table("RESULT_FIELD_NEW").get(round_name, table("RESULT_FIELD")),
        "units": {s: u for s, u in table("UNIT_DICT").items() if s[:1].isupper()},
        "model_mapping": config.get("model_mapping", {}),
        "accuracy_patterns": table("ACC_PATTERN"),
        "llm_models": _llm_models(package / "configuration" / "configuration.py"),
        # models_TEST0x: the models each compliance test applies to
        "compliance_models": {k.removeprefix("models_"): v for k, v in config.items() if k.startswith("models_TEST")},
        "benchmarks": benchmarks,
    }
    if endpoints_fields is not None:
        rules["endpoints"] = {
            "allowed_models": table("ENDPOINTS_ALLOWED_MODELS"),
            "result_fields": endpoints_fields,
            # the whole RESULT_FIELD_BENCHMARK_OVERWRITE[round]: the checker looks a model up there by its name
            # even when the round's model list no longer holds it (v6.1's llama2-70b-99)
            "headline_overrides": overwrite,
            "accuracy_compared": list(ENDPOINTS_ACCURACY_COMPARED),
            # ENDPOINTS_COMPLIANCE_MAPPING: test -> <name> of the result's audit/audit_<name>.json
            "compliance_files": table("ENDPOINTS_COMPLIANCE_MAPPING"),
            "audits_required": list(ENDPOINTS_AUDITS_REQUIRED),
            # compliance_endpoints_check: a TEST09 model's mean output length within TEST09_LOW..TEST09_HIGH
            "test09_output_tokens": [table("TEST09_LOW"), table("TEST09_HIGH")],
        }
    return rules


def merged(generated: Mapping[str, Any], kept: Mapping[str, Any]) -> dict[str, Any]:
    """``generated`` with what a rules file states beyond the checker (the LoadGen versions of the round, the
    ``*_source`` and ``note`` entries) taken from the file ``kept``."""
    out = dict(generated)
    for key, value in kept.items():
        if key.endswith("_source") or key in ("note", "loadgen_versions"):
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    """``from_checker UPSTREAM_ROOT ROUND [KEEP_FILE]``: the round's rules as JSON on stdout."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        print("usage: python -m workload.metrics.rules.from_checker UPSTREAM_ROOT vX.Y [CURRENT_FILE]", file=sys.stderr)
        return 2
    rules = round_rules(Path(args[0]), args[1])
    if len(args) == 3:
        rules = merged(rules, json.loads(Path(args[2]).read_text(encoding="utf-8")))
    print(json.dumps(rules, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
