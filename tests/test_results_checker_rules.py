"""The rules files (workload/metrics/rules/vX.Y.json) against MLCommons' real submission checker (issue 31).

v5.0-v6.1 are what :mod:`workload.metrics.rules.from_checker` makes of the checker's own source
(``../shared/upstream/mlcommons-inference/tools/submission/submission_checker``, read at test time): a file that
differs from it is stale. The reader itself is checked against Python's own evaluation of the checker's tables
(``constants.py`` is data only: its literals are loaded here and compared figure by figure). The round-level
rules the endpoints verdict uses (``ENDPOINTS_ALLOWED_MODELS``, ``RESULT_FIELD_ENDPOINTS``, the LLM list, the
only model whose endpoints score is compared) are checked against the checker's source text.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.upstream import CHECKER_TOOLS, upstream_root
from workload.metrics.rules import rules_for
from workload.metrics.rules.from_checker import CheckerSourceError, merged, round_rules

RULES_DIR = Path(__file__).resolve().parent.parent / "workload" / "metrics" / "rules"
#: the rounds today's checker holds (MODEL_CONFIG); v3.1-v4.1 came from the checker of their time
CHECKER_ROUNDS = ("v5.0", "v5.1", "v6.0", "v6.1")


def constants() -> SimpleNamespace:
    """The checker's constants.py evaluated (pure data: literals and products, no imports), without writing
    bytecode into the upstream copy."""
    path = upstream_root() / CHECKER_TOOLS / "submission_checker" / "constants.py"
    namespace: dict[str, Any] = {}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return SimpleNamespace(**{k: v for k, v in namespace.items() if not k.startswith("__")})


@pytest.mark.parametrize("round_name", CHECKER_ROUNDS)
def test_the_rules_file_is_what_the_checker_states(round_name: str) -> None:
    kept = json.loads((RULES_DIR / f"{round_name}.json").read_text(encoding="utf-8"))
    made = merged(round_rules(upstream_root(), round_name), kept)
    assert json.loads(json.dumps(made)) == kept, f"{round_name}.json is stale: regenerate it with from_checker"


@pytest.mark.parametrize("round_name", CHECKER_ROUNDS)
def test_every_target_limit_and_count_is_the_checkers_own_figure(round_name: str) -> None:
    config: dict[str, Any] = constants().MODEL_CONFIG[round_name]
    rules = rules_for(round_name)
    assert sorted(rules.benchmarks) == sorted(config["models"])
    for name, bench in rules.benchmarks.items():
        raw_target = config["accuracy-target"].get(name)
        by_scenario = raw_target if isinstance(raw_target, dict) else {None: raw_target}
        for scenario, pairs in by_scenario.items():
            if pairs is None:
                continue
            for metric, value in zip(pairs[::2], pairs[1::2], strict=True):
                target = bench.target(metric, scenario)
                assert target is not None and target.lower == value, (name, scenario, metric)
        upper = config["accuracy-upper-limit"].get(name, ())
        for metric, value in zip(upper[::2], upper[1::2], strict=True):
            target = bench.target(metric)
            assert target is not None and target.upper == value, (name, metric)
        assert dict(bench.latency_ns) == config["latency-constraint"].get(name, {}), name
        assert dict(bench.min_queries) == config["min-queries"].get(name, {}), name
    assert rules.qsl_rng_seed == config["seeds"]["qsl_rng_seed"] and dict(rules.seeds) == config["seeds"]


def test_v61_endpoints_rules_are_the_checkers() -> None:
    module = constants()
    rules = rules_for("v6.1")
    assert rules.endpoints is not None
    assert rules.endpoints.allowed_models == tuple(module.ENDPOINTS_ALLOWED_MODELS)
    assert "qwen3.6-27b" in rules.endpoints.allowed_models and rules.benchmark("qwen3.6-27b") is not None
    assert dict(rules.endpoints.result_fields) == module.RESULT_FIELD_ENDPOINTS["v6.1"]
    assert rules.endpoints.result_fields["singlestream"] == "result_mean_latency_ns"
    assert dict(rules.endpoints.headline_overrides) == module.RESULT_FIELD_BENCHMARK_OVERWRITE["v6.1"]
    checks = upstream_root() / CHECKER_TOOLS / "submission_checker" / "checks" / "accuracy_check.py"
    compared = [m for m in rules.endpoints.accuracy_compared if f'self.model == "{m}"' in checks.read_text()]
    assert compared == ["qwen3-vl-235b-a22b"] == list(rules.endpoints.accuracy_compared)
    qwen = rules.benchmark("qwen3-vl-235b-a22b")
    assert qwen is not None and qwen.latency_ns == {"Server": 12_000_000_000, "Interactive": 1_500_000_000}
    assert qwen.accuracy_samples("Interactive") == 8000 and qwen.accuracy_samples("Offline") == 48289
    assert "deepseek-r1" in rules.llm_models and "qwen3-vl-235b-a22b" not in rules.llm_models


def test_a_round_the_checker_does_not_hold_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckerSourceError, match=r"MODEL_CONFIG has no round 'v9\.9'"):
        round_rules(upstream_root(), "v9.9")
    broken = tmp_path / CHECKER_TOOLS / "submission_checker"
    broken.mkdir(parents=True)
    (broken / "constants.py").write_text("MODEL_CONFIG = {\n")
    with pytest.raises(CheckerSourceError, match="cannot be read as Python"):
        round_rules(tmp_path, "v6.1")


@pytest.mark.parametrize(("scenario", "passed"), [("Interactive", True), ("Offline", False), ("Server", False)])
def test_qwen3_vl_accuracy_is_judged_by_its_scenarios_target(tmp_path: Path, scenario: str, passed: bool) -> None:
    """MODEL_CONFIG["v6.1"]["accuracy-target"]["qwen3-vl-235b-a22b"] is per scenario: Interactive scores an 8k
    subset against 0.7878 x 0.99 = 0.779922, Offline and Server the full set against 0.7903 x 0.99 = 0.782397."""
    from workload.metrics.collection import collect

    folder = tmp_path / "v6.1/closed/X/results/sys/qwen3-vl-235b-a22b" / scenario / "accuracy"
    folder.mkdir(parents=True)
    (folder / "accuracy.txt").write_text('{"f1": 0.7805, "precision": 0.79}\nhash=0123abcd\n')
    (result,) = collect(tmp_path).results
    (check,) = [c for c in result.accuracy_checks if c.name == "F1_HIERARCHICAL"]
    assert check.value == 0.7805 and check.passed is passed and result.accuracy_pass is passed
    assert check.threshold == (0.7878 * 0.99 if scenario == "Interactive" else 0.7903 * 0.99)
