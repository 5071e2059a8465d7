"""MLPerf Inference's rules per round, kept as data: one ``vX.Y.json`` beside this module per round.

Each file holds, for one round, what MLCommons' submission checker of that round says (the file
names its source: repository, path, commit; v5.0-v6.1 are made by :mod:`.from_checker` from the
checker's own tables, the older rounds, which today's checker no longer holds, from the checker of
their time): the benchmarks with their scenarios, accuracy targets
(``reference x factor``, the 99 / 99.9 variants as benchmarks of their own) and upper limits, the
Server latency bound, the LLM TTFT/TPOT limits per scenario (Server, Interactive), the minimum query
counts, the headline key of each scenario (``result_fields`` plus per-benchmark ``headline``
overrides) with its unit, the model-name aliases, the minimum duration, and the ``accuracy_patterns``
(the checker's ``ACC_PATTERN``) that read ``accuracy.txt``. Adding a round is adding a file (and tests).

API (small on purpose; other modules read only this)::

    ROUNDS                                   # ("v3.1", ..., "v6.1"), oldest first
    rules_for("v4.1") -> RoundRules          # also "4.1"; unknown round: RulesError (a UsageError)
    RoundRules.benchmark("resnet50") -> Benchmark | None     # aliases and 99/99.9 variants resolved
    RoundRules.headline_key(benchmark, "Interactive") -> str # detail-log key of the official metric
    RoundRules.accuracy_figures(lines) -> dict[str, float]   # ACC_PATTERN over accuracy.txt lines
    Benchmark.targets (Target: metric, lower, upper), .target("F1", scenario), .targets_for(scenario), .scenarios
    Benchmark.token_limits("Interactive") -> (ttft_ns, tpot_ns) | None; .min_queries, .headline, .unit
    Benchmark.server_latency_ns, .latency_ns ({scenario: ns}: the checker's latency-constraint)
    RoundRules.seeds, .llm_models, .compliance_models, .endpoints (EndpointsRules: allowed_models, result_fields,
    headline_overrides, accuracy_compared, compliance_files, audits_required, test09_output_tokens)
    detect_round(loadgen_version=, qsl_rng_seed=, path=, benchmark=, scheduled_headline=) -> (round, how)
    known_anywhere("qwen3.6-27b") -> bool    # False: a benchmark no round knows (reported with a warning)
    override_round("v5.0")                   # context manager: the round `workload results --round` forces

Round detection (:func:`detect_round`), first that answers: the override; the round's ``qsl_rng_seed``
(every round has its own seeds, the checker requires them, and the summary prints them); the LoadGen
version in the detail log (``5.1.0 @ ...`` -> v5.1; it can lag the round); a path component naming a
round (``inference_results_v4.1``, ``.../v4.0/closed/...``); the LoadGen summary's own words (a Server
summary headed "Scheduled samples per second" is LoadGen <= 4.0); the newest round that knows the
benchmark; the newest round.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.errors import UsageError

_HERE = Path(__file__).resolve().parent


def round_key(name: str) -> tuple[int, ...]:
    """Sort key of a round name: ``v4.1`` -> ``(4, 1)`` (``v10.0`` after ``v9.9``)."""
    return tuple(int(x) for x in re.findall(r"\d+", name))


ROUNDS: tuple[str, ...] = tuple(sorted((p.stem for p in _HERE.glob("v*.json")), key=round_key))
#: the LoadGen scenario an MLPerf scenario is logged as (LoadGen runs Interactive as Server)
LOADGEN_SCENARIO = {"Interactive": "Server"}
_ROUND_IN_PATH = re.compile(r"(?:^|[/\\_-])v(\d+\.\d+)(?=$|[/\\_-])")
_VARIANT = re.compile(r"-(99(?:\.9)?)$")
# `np.float64(44.43)`: numpy >= 2 prints floats in dicts so; the figure is the number inside
_NP_FLOAT = re.compile(r"np\.float(?:32|64)\(([^()]*)\)")


class RulesError(UsageError):
    """An unknown round (``--round v9.9``) or a rules file that cannot be read."""


@dataclass(frozen=True)
class Target:
    """One accuracy figure's bounds: pass when ``lower <= value`` (and ``value <= upper`` if set).

    As in the checker, a figure with a lower bound must be in accuracy.txt; one with only an upper
    limit (gpt-oss-120b's tokens per sample) is checked where it is printed.
    """

    metric: str
    lower: float | None
    upper: float | None = None

    @property
    def required(self) -> bool:
        return self.lower is not None

    def passes(self, value: float) -> bool:
        return (self.lower is None or value >= self.lower) and (self.upper is None or value <= self.upper)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of one round (``bert-99.9`` and ``bert-99`` are two)."""

    name: str
    scenarios: tuple[str, ...]
    targets: tuple[Target, ...]
    server_latency_ns: int | None = None
    token_latency_ns: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    min_queries: Mapping[str, int] = field(default_factory=dict)
    headline: Mapping[str, str] = field(default_factory=dict)
    unit: Mapping[str, str] = field(default_factory=dict)
    #: the checker's ``latency-constraint`` per scenario (qwen3-vl: Server 12 s, Interactive 1.5 s)
    latency_ns: Mapping[str, int] = field(default_factory=dict)
    #: targets of a benchmark whose target depends on the scenario (qwen3-vl's Interactive scores an 8k subset)
    targets_by_scenario: Mapping[str, tuple[Target, ...]] = field(default_factory=dict)
    #: the samples an accuracy run scores: ``accuracy-sample-count`` by scenario ("" for every scenario)
    accuracy_sample_count: Mapping[str, int] = field(default_factory=dict)
    dataset_size: int | None = None

    def accuracy_samples(self, scenario: str | None) -> int | None:
        """How many samples an accuracy run of ``scenario`` scores (``get_accuracy_sample_count``: the
        benchmark's ``accuracy-sample-count``, per scenario where it has one, else ``dataset-size``)."""
        count = self.accuracy_sample_count
        return count.get(scenario or "", count.get("", self.dataset_size))

    def token_limits(self, scenario: str | None) -> tuple[int, int] | None:
        """(TTFT, TPOT) limits in ns for ``scenario`` (Server or Interactive), or None for non-LLM benchmarks."""
        return self.token_latency_ns.get(scenario or "")

    def targets_for(self, scenario: str | None) -> tuple[Target, ...]:
        """The targets that judge a ``scenario`` result (the scenario's own where the round sets them)."""
        return self.targets_by_scenario.get(scenario or "", self.targets)

    def target(self, metric: str, scenario: str | None = None) -> Target | None:
        """The bounds of ``metric`` (case-insensitive) for ``scenario``, or None when the round sets none."""
        low = metric.lower()
        return next((t for t in self.targets_for(scenario) if t.metric.lower() == low), None)


@dataclass(frozen=True)
class EndpointsRules:
    """How the checker judges results of MLCommons' endpoints client (v6.1+; ``is_endpoints_submission``).

    ``allowed_models``: ``ENDPOINTS_ALLOWED_MODELS`` (``endpoints_model_check``: another model is rejected);
    ``result_fields``: ``RESULT_FIELD_ENDPOINTS[round]``, the headline key per lower-case scenario, replaced by
    ``headline_overrides`` where the model has an entry for the scenario;
    ``accuracy_compared``: the models whose score ``accuracy_result_check`` compares with the target (the
    others pass when a score is there).
    """

    allowed_models: tuple[str, ...]
    result_fields: Mapping[str, str]
    accuracy_compared: tuple[str, ...]
    #: ``RESULT_FIELD_BENCHMARK_OVERWRITE[round]`` by model name and scenario (models the round dropped too)
    headline_overrides: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: ``ENDPOINTS_COMPLIANCE_MAPPING``: compliance test -> ``<name>`` of the result's ``audit/audit_<name>.json``
    compliance_files: Mapping[str, str] = field(default_factory=dict)
    #: the tests whose audit file must be there for the models the round applies them to (TEST04)
    audits_required: tuple[str, ...] = ()
    #: ``TEST09_LOW``, ``TEST09_HIGH``: the mean output length a TEST09 model's result must have
    test09_output_tokens: tuple[float, float] | None = None


@dataclass(frozen=True)
class RoundRules:
    """The rules of one round (see the module docstring)."""

    round: str
    source: Mapping[str, Any]
    loadgen_versions: tuple[str, ...]
    qsl_rng_seed: int | None
    min_duration_ms: int
    result_fields: Mapping[str, str]
    units: Mapping[str, str]
    model_mapping: Mapping[str, str]
    patterns: tuple[tuple[str, re.Pattern[str]], ...]
    benchmarks: Mapping[str, Benchmark]
    #: ``MODEL_CONFIG[round]["seeds"]``: qsl_rng_seed, sample_index_rng_seed, schedule_rng_seed
    seeds: Mapping[str, int] = field(default_factory=dict)
    #: ``Config.get_llm_models()``: the benchmarks judged by TTFT/TPOT
    llm_models: tuple[str, ...] = ()
    endpoints: EndpointsRules | None = None
    #: ``models_TEST0x``: compliance test -> the benchmarks it applies to
    compliance_models: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def benchmark(self, name: str | None) -> Benchmark | None:
        """The benchmark ``name`` means in this round, or None.

        Tried in turn: the name; the round's ``model_mapping`` (``resnet50`` -> ``resnet``); lower case
        with ``_`` read as ``.`` (``llama3_1-8b``); the name without a ``-99``/``-99.9`` suffix the round
        does not use (``mixtral-8x7b-99``); with ``-99`` added where the round only has the variants
        (``gptj`` -> ``gptj-99``); and the checker's own guess for image classifiers (``mobilenet``).
        """
        if not name:
            return None
        for candidate in _candidates(name):
            found = self.benchmarks.get(candidate) or self.benchmarks.get(self.model_mapping.get(candidate, ""))
            if found is not None:
                return found
        return None

    def headline_key(self, benchmark: Benchmark | None, scenario: str | None) -> str | None:
        """The detail-log key of the official metric (``result_fields`` with the benchmark's override)."""
        logged = LOADGEN_SCENARIO.get(scenario or "", scenario or "")
        if benchmark is not None and logged in benchmark.headline:
            return benchmark.headline[logged]
        return self.result_fields.get(logged)

    def unit(self, benchmark: Benchmark | None, scenario: str | None) -> str | None:
        """The checker's unit of the headline (``Tokens/s``, ``Latency (ms)`` ...).

        A benchmark whose headline is a tokens-per-second key is reported in ``Tokens/s`` even where the
        round's ``SPECIAL_UNIT_DICT`` does not list it (v5.0's ``llama2-70b-interactive-99`` Server): the
        checker's unit table and its ``RESULT_FIELD_BENCHMARK_OVERWRITE`` name the same LLM benchmarks.
        """
        if benchmark is not None and scenario in benchmark.unit:
            return benchmark.unit[scenario or ""]
        if "tokens_per_sec" in (self.headline_key(benchmark, scenario) or ""):
            return "Tokens/s"
        return self.units.get(scenario or "")

    def accuracy_figures(self, lines: Iterable[str], prefer: Iterable[str] = ()) -> dict[str, float]:
        """Every figure this round's ``ACC_PATTERN`` finds in ``lines``, by metric name.

        As the checker does: each pattern is matched (``re.match``) at the start of every line and the
        last match wins. ``np.float64(x)`` is read as ``x`` first. Where two patterns read the same number
        from the same line (bert's ``{"exact_match": .., "f1": x}`` is also qwen3-vl's ``{"f1": x}``), one
        figure is kept: the metric named in ``prefer`` (the benchmark's own), else the first pattern.
        """
        preferred = {m.lower() for m in prefer}
        order = sorted(self.patterns, key=lambda item: item[0].lower() not in preferred)
        found: dict[str, float] = {}
        for line in lines:
            if "np.float" in line:
                line = _NP_FLOAT.sub(r"\1", line)
            taken: set[float] = set()
            for metric, pattern in order:
                match = pattern.match(line)
                if not match:
                    continue
                try:
                    value = float(match.group(1))
                except (ValueError, OverflowError):
                    continue  # "1.2.3": the checker would crash on float(); not a figure
                if value in taken:
                    continue
                taken.add(value)
                found[metric] = value
        return found


def _candidates(name: str) -> Iterator[str]:
    yield name
    low = name.strip().lower()
    yield low
    dotted = low.replace("_", ".") if "llama3_1" in low else low
    yield dotted
    yield dotted.replace("llama3.1", "llama3_1")  # the mapping's own spelling
    base = _VARIANT.sub("", dotted)
    yield base
    yield f"{base}-99"
    if any(word in low for word in ("mobilenet", "efficientnet", "resnet50")):
        yield "resnet"


def _targets(accuracy: list[Mapping[str, Any]], upper_limits: list[Mapping[str, Any]]) -> tuple[Target, ...]:
    lower = {entry["metric"]: float(entry["target"]) for entry in accuracy}
    upper = {entry["metric"]: float(entry["limit"]) for entry in upper_limits}
    return tuple(Target(metric, lower.get(metric), upper.get(metric)) for metric in {**lower, **upper})


def _benchmark(name: str, data: Mapping[str, Any]) -> Benchmark:
    limits = {s: (int(v["ttft_ns"]), int(v["tpot_ns"])) for s, v in data.get("token_latency_limits", {}).items()}
    upper = data.get("upper_limits", [])
    latency = {s: int(v) for s, v in data.get("server_latency_ns", {}).items()}
    return Benchmark(
        name=name,
        scenarios=tuple(data.get("scenarios", ())),
        targets=_targets(data.get("accuracy", []), upper),
        server_latency_ns=latency.get("Server"),
        token_latency_ns=limits,
        min_queries=dict(data.get("min_queries", {})),
        headline=dict(data.get("headline", {})),
        unit=dict(data.get("unit", {})),
        latency_ns=latency,
        targets_by_scenario={s: _targets(t, upper) for s, t in data.get("accuracy_by_scenario", {}).items()},
        accuracy_sample_count=(
            {s: int(n) for s, n in counted.items()} if isinstance(counted, dict) else {"": int(counted)}
        )
        if (counted := data.get("accuracy_sample_count")) is not None
        else {},
        dataset_size=int(data["dataset_size"]) if "dataset_size" in data else None,
    )


def _endpoints(data: Mapping[str, Any] | None) -> EndpointsRules | None:
    if data is None:
        return None
    return EndpointsRules(
        allowed_models=tuple(data["allowed_models"]),
        result_fields=dict(data["result_fields"]),
        accuracy_compared=tuple(data.get("accuracy_compared", ())),
        headline_overrides={m: dict(by) for m, by in data.get("headline_overrides", {}).items()},
        compliance_files=dict(data.get("compliance_files", {})),
        audits_required=tuple(data.get("audits_required", ())),
        test09_output_tokens=(float(bounds[0]), float(bounds[1]))
        if (bounds := data.get("test09_output_tokens")) is not None
        else None,
    )


def normalize_round(text: str) -> str:
    """``"4.1"``, ``"V4.1"``, ``"v4.1"`` -> ``"v4.1"``."""
    text = text.strip().lower()
    return text if text.startswith("v") else f"v{text}"


def rules_for(round_name: str) -> RoundRules:
    """The rules of ``round_name`` (``v4.1`` or ``4.1``); :class:`RulesError` names the known rounds."""
    name = normalize_round(round_name)
    if name not in ROUNDS:
        raise RulesError(f"unknown MLPerf Inference round {round_name!r}; known: {', '.join(ROUNDS)}")
    return _load(name)


@functools.cache
def _load(name: str) -> RoundRules:
    """The rules file of round ``name`` (one of :data:`ROUNDS`), read once per process."""
    path = _HERE / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return RoundRules(
            round=name,
            source=data["source"],
            loadgen_versions=tuple(data["loadgen_versions"]),
            qsl_rng_seed=data.get("qsl_rng_seed"),
            min_duration_ms=int(data["min_duration_ms"]),
            result_fields=data["result_fields"],
            units=data["units"],
            model_mapping=data["model_mapping"],
            patterns=tuple((metric, re.compile(p)) for metric, p in data["accuracy_patterns"].items()),
            benchmarks={n: _benchmark(n, b) for n, b in data["benchmarks"].items()},
            seeds={k: int(v) for k, v in data.get("seeds", {}).items()},
            llm_models=tuple(data.get("llm_models", ())),
            endpoints=_endpoints(data.get("endpoints")),
            compliance_models={t: tuple(m) for t, m in data.get("compliance_models", {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, re.error) as exc:
        raise RulesError(f"{path}: not a readable rules file ({exc})") from exc


def known_anywhere(benchmark: str | None) -> bool:
    """Whether any round knows ``benchmark`` (under any of its names)."""
    return any(rules_for(r).benchmark(benchmark) is not None for r in ROUNDS)


_override: list[str] = []


@contextmanager
def override_round(round_name: str | None) -> Iterator[None]:
    """Within the block, :func:`detect_round` answers ``round_name`` (checked first); None changes nothing.

    Module state on purpose: the result parsers run in forked workers, which inherit it.
    """
    if round_name is None:
        yield
        return
    rules_for(round_name)  # an unknown round fails here, before anything is parsed
    _override.append(normalize_round(round_name))
    try:
        yield
    finally:
        _override.pop()


def _from_loadgen(version: str | None) -> str | None:
    match = re.match(r"\s*(\d+)\.(\d+)", version or "")
    if not match:
        return None
    short = f"{match.group(1)}.{match.group(2)}"
    return next((r for r in ROUNDS if short in rules_for(r).loadgen_versions), None)


def detect_round(
    *,
    loadgen_version: str | None = None,
    path: str | None = None,
    benchmark: str | None = None,
    scheduled_headline: bool = False,
    qsl_rng_seed: object = None,
) -> tuple[str, str]:
    """The round of a result and how it was found (``"LoadGen 4.1 @ 2ed9555be0"``, ``"path"`` ...)."""
    if _override:
        return _override[-1], "--round"
    # the seeds before the LoadGen version: the checker requires the round's own seeds, while LoadGen's
    # version lags the round (published v6.1 results were run with LoadGen 6.0.x carrying v6.1's seeds)
    if isinstance(qsl_rng_seed, int) and not isinstance(qsl_rng_seed, bool) and qsl_rng_seed:
        by_seed = next((r for r in ROUNDS if rules_for(r).qsl_rng_seed == qsl_rng_seed), None)
        if by_seed is not None:
            return by_seed, f"qsl_rng_seed {qsl_rng_seed} (the {by_seed} seed)"
    by_loadgen = _from_loadgen(loadgen_version)
    if by_loadgen is not None:
        return by_loadgen, f"LoadGen {loadgen_version}"
    if path:
        for match in reversed(list(_ROUND_IN_PATH.finditer(path))):
            name = f"v{match.group(1)}"
            if name in ROUNDS:
                return name, f"path ({name})"
    knowing = [r for r in ROUNDS if rules_for(r).benchmark(benchmark) is not None]
    if scheduled_headline:
        # the summary's Server headline was "Scheduled samples per second": LoadGen <= 4.0
        old = [r for r in (knowing or ROUNDS) if round_key(r) <= (4, 0)]
        if old:
            return old[-1], "LoadGen summary (scheduled samples headline: LoadGen <= 4.0)"
    if knowing:
        return knowing[-1], f"newest round knowing {benchmark}"
    return ROUNDS[-1], "newest round (nothing in the files names one)"
