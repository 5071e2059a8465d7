"""MLPerf Inference v6.1 "endpoints" results: a scenario folder written by MLCommons' inference-endpoint client.

Layout (``mlcommons/inference_results_v6.1``, e.g. ``closed/NVIDIA/results/<system>/deepseek-r1/Server``;
read by the submission checker's ``parsers/endpoints_parser.py``)::

    config.yaml                         the client's run configuration (settings.runtime.min_duration_ms ...)
    performance/result_summary.json     n_samples_issued/completed/failed, duration_ns, state, complete,
                                        qps, tps, and ttft/tpot/latency/output_sequence_lengths series with
                                        percentiles and early_stopping_percentiles (ns); online (Poisson) runs
                                        also legacy_loadgen_window_duration_ns and run_config.load_pattern
                                        .target_qps (reported as effective_target_qps)
    accuracy/accuracy_results.json      accuracy_scores[]: dataset_name, score, dataset_type, response_counts ...
    report.txt, metrics/final_snapshot.json, measurements.json   human report, client metrics, measurement
                                        description (not needed for the verdict)

There is no validity field. :func:`build` computes one as MLCommons' submission checker judges an endpoints
result (``checks/performance_check.py``, ``accuracy_check.py``, ``compliance_check.py``; rules and their
source in :mod:`.endpoint_rules`) and says so in the metadata (``validity_rule``):

* the model is one of ``ENDPOINTS_ALLOWED_MODELS``; config.yaml's dataloader and scheduler seeds are the
  round's ``sample_index_rng_seed`` and ``schedule_rng_seed``; its ``min_duration_ms`` is at least
  ``TEST_DURATION_MS``; an LLM's (``get_llm_models``) Server/Interactive early-stopping p99 TTFT and TPOT are
  below ``LLM_LATENCY_LIMITS``, another model's early-stopping p99 latency below its ``latency-constraint`` for
  the folder's scenario; config.yaml's ``type`` is the folder's scenario (``online`` is Server, or
  Interactive in an Interactive folder: the checker infers no other); the audit files the round requires
  (TEST04 of wan-2.2) are there;
* the accuracy score (the first ``accuracy_scores`` entry) is there, is at qwen3-vl's target for the folder's
  scenario (the only model whose endpoints score the checker compares), and the accuracy run scored the
  benchmark's accuracy sample count;
* beyond the checker: the run completed, every issued sample completed and none failed (the checker lets
  failed samples pass unless run with ``--submission-exceptions``), and it lasted the minimum duration.

The headline is the checker's (``RESULT_FIELD_ENDPOINTS``, ``RESULT_FIELD_BENCHMARK_OVERWRITE``): Offline
samples/s inferred as issued samples / duration, Server and Interactive the client's ``qps`` (an LLM's Server
its ``tps``), SingleStream the mean latency. The figures go through the LoadGen key space
(``result_completed_tokens_per_second`` ...), as the checker maps them, so names and table are those of a
LoadGen result.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workload.metrics import build as build_mod
from workload.metrics import judge, submission
from workload.metrics.model import (
    AccuracyCheck,
    BenchmarkResult,
    Categorization,
    MetadataValue,
    ParseIssue,
    Relativity,
)
from workload.metrics.parsers import compliance, endpoint_rules
from workload.metrics.raw import PRIO_DETAIL, RawResult, finite_float
from workload.safefile import TooLarge, read_regular

SUMMARY = "performance/result_summary.json"
ACCURACY = "accuracy/accuracy_results.json"
CONFIG_FILES = ("config.yaml", "config.yml")
#: the largest file read (a result_summary.json is ~15 kB)
_MAX_BYTES = 16 << 20
_SERIES = {
    "latency": (
        "result_{}_percentile_latency_ns",
        "result_min_latency_ns",
        "result_max_latency_ns",
        "result_mean_latency_ns",
    ),
    "ttft": (
        "result_first_token_{}_percentile_latency_ns",
        "result_first_token_min_latency_ns",
        "result_first_token_max_latency_ns",
        "result_first_token_mean_latency_ns",
    ),
    "tpot": (
        "result_time_per_output_token_{}_percentile_ns",
        "result_time_to_output_token_min",
        "result_time_to_output_token_max",
        "result_time_to_output_token_mean",
    ),
}
_RULE = (
    "computed (endpoints results have no validity field), as the MLPerf submission checker judges an endpoints "
    "result: allowed model, seeds, minimum duration, early-stopping p99 TTFT/TPOT or latency within limits, "
    "scenario, required audits, accuracy score and sample count (qwen3-vl: at target); and complete, no failed samples"
)


def _load(path: str, raw: RawResult) -> Any:
    try:
        data = read_regular(path, _MAX_BYTES)
    except FileNotFoundError:
        return None
    except TooLarge:
        raw.issue(path, f"file is larger than any result file ({_MAX_BYTES} bytes), skipped")
        return None
    except OSError as exc:
        raw.issue(path, f"cannot read: {exc.strerror or exc}")
        return None
    if path.endswith((".yaml", ".yml")):
        return _yaml_scalars(data.decode("utf-8", errors="replace"))
    parsed = raw.load_json(path, data.decode("utf-8", errors="replace"))
    if parsed is not None and not isinstance(parsed, dict):
        raw.issue(path, "expected a JSON object")
        return None
    return parsed if isinstance(parsed, dict) else None


_YAML_LINE = re.compile(r"^( *)([A-Za-z_][\w.-]*):(?: +(.*?))?\s*$")


def _yaml_scalars(text: str) -> dict[str, str]:
    """``dotted.key -> scalar text`` of a block-style YAML mapping (list items and flow values skipped).

    The client writes config.yaml with a YAML dumper (block mappings, one key per line); only a few
    scalars are needed, so this avoids a YAML dependency.
    """
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.split("\n"):
        match = _YAML_LINE.match(line)
        if match is None:
            continue
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        if value:
            found[path] = value.strip("'\"")
        else:
            stack.append((indent, key))
    return found


def _number(value: object) -> float | None:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return finite_float(value)


def _pct_key(text: str) -> str | None:
    try:
        return f"{float(text):.2f}"
    except ValueError:
        return None


#: the percentiles the checker's ENDPOINTS_MAPPINGS takes, each from ``early_stopping_percentiles``
_MAPPED_PERCENTILES = ("50.00", "90.00", "95.00", "99.00", "99.90")


def _series(raw: RawResult, summary: dict[str, Any], path: str) -> dict[str, float]:
    """Put the latency series into ``raw`` in LoadGen keys as the checker maps them (``ENDPOINTS_MAPPINGS``: min,
    max, avg, and the 50/90/95/99/99.9th percentiles from ``early_stopping_percentiles``, so that
    ``result_90.00_percentile_latency_ns`` is the early-stopping estimate, as in a LoadGen log); return the
    early-stopping p99 of each series."""
    early: dict[str, float] = {}
    for name, (pct_key, min_key, max_key, mean_key) in _SERIES.items():
        series = summary.get(name)
        if not isinstance(series, dict):
            continue
        for key, field in ((min_key, "min"), (max_key, "max"), (mean_key, "avg")):
            number = _number(series.get(field))
            if number is not None:
                raw.put(key, number, PRIO_DETAIL, path)
        es = series.get("early_stopping_percentiles")
        if isinstance(es, dict):
            for pct, value in es.items():
                label, number = _pct_key(str(pct)), _number(value)
                if label in _MAPPED_PERCENTILES and number is not None:
                    raw.put(pct_key.format(label), number, PRIO_DETAIL, path)
                    if label == "99.00":
                        early[name] = number
    return early


def _accuracy(results: dict[str, Any], path: str, raw: RawResult) -> tuple[float | None, int | None, float | None, str]:
    """(score, samples scored, mean output tokens per sample, how the score was taken) from accuracy_results.json.

    As the checker's endpoints parser reads it (parsers/endpoints_parser.py): the score is the first
    ``accuracy_scores`` entry's ``score`` (``accuracy_score``: the first of the list); the samples scored are
    the sum of ``total_samples`` (else ``response_counts.issued``) of the entries of dataset_type accuracy
    (``_endpoint_accuracy_sample_count``).
    """
    scores = results.get("accuracy_scores")
    listed = [e for e in (scores if isinstance(scores, list) else []) if isinstance(e, dict)]
    with_score = [e for e in listed if e.get("score") is not None]
    if not with_score:
        raw.issue(path, 'no "accuracy_scores" entry with a "score"')
        return None, None, None, ""
    first = with_score[0]
    score = _number(first.get("score"))
    if score is None:
        raw.issue(path, '"score" of the first accuracy_scores entry is not a number')
        return None, None, None, ""
    accuracy_entries = [e for e in listed if e.get("dataset_type", "accuracy") == "accuracy"]
    counts: list[float] = []
    for entry in accuracy_entries:
        counted = _number(entry.get("total_samples"))
        response_counts = entry.get("response_counts")
        if counted is None and isinstance(response_counts, dict):
            counted = _number(response_counts.get("issued"))
        if counted is not None:
            counts.append(counted)
    samples = int(sum(counts)) if counts else None
    tokens: float | None = None
    lengths = [e.get("output_sequence_lengths") for e in accuracy_entries]
    totals = [_number(x.get("total")) for x in lengths if isinstance(x, dict)]
    if accuracy_entries and len(totals) == len(accuracy_entries) and all(t is not None for t in totals) and samples:
        tokens = sum(t for t in totals if t is not None) / samples
    name = first.get("dataset_name")
    how = f"score of {name if isinstance(name, str) else 'the first accuracy_scores entry'}"
    if len(with_score) > 1:
        how += f" (the first of {len(with_score)} scores, as the checker takes it)"
    return score, samples, tokens, how


#: the round's seeds the checker compares (seeds_check) <- the config.yaml key the endpoints parser maps to them
_SEEDS = (("sample_index_rng_seed", "dataloader_random_seed"), ("schedule_rng_seed", "scheduler_random_seed"))
_INFERABLE = {("singlestream", "multistream"), ("multistream", "offline"), ("singlestream", "offline")}


@dataclass
class _Run:
    """What :func:`_judge` needs of one endpoints result besides its files."""

    directory: str
    benchmark: str | None
    folder: str  # the scenario of the folder (Offline, Server, Interactive, SingleStream ...)
    checked: str  # the scenario the checker judges (endpoint_rules.checker_scenario)
    system_type: str


def _judge(
    summary: dict[str, Any], config: dict[str, str], early: dict[str, float], run: _Run
) -> tuple[list[str], list[str]]:
    """(reasons the run is not valid, notes) for the performance side, as the checker's performance checks judge
    an endpoints result (checks/performance_check.py), plus the run's own completeness."""
    reasons: list[str] = []
    notes: list[str] = []
    state = summary.get("state")
    if summary.get("complete") is not True or (isinstance(state, str) and state != "complete"):
        reasons.append(f"the run did not complete (complete={summary.get('complete')!r}, state={state!r})")
    issued, completed = _number(summary.get("n_samples_issued")), _number(summary.get("n_samples_completed"))
    failed = _number(summary.get("n_samples_failed"))
    if failed is None or failed != 0:
        # the checker maps n_samples_failed to num_errors, but loadgen_errors_check fails on errors only when
        # run with --submission-exceptions (performance_check.py:146-147): failed samples are not ignored here
        reasons.append(f"n_samples_failed is {summary.get('n_samples_failed')!r}: every sample must succeed")
    if issued is None or completed is None or completed < issued:
        reasons.append(f"{completed!r} of {issued!r} issued samples completed")
    if not endpoint_rules.allowed(run.benchmark):
        allowed = ", ".join(endpoint_rules.allowed_models()) or "none"
        reasons.append(f"{run.benchmark} is not a model the checker accepts in the endpoints format ({allowed})")
    for name, key in (
        ("sample_index_rng_seed", "dataloader_random_seed"),
        ("schedule_rng_seed", "scheduler_random_seed"),
    ):
        wanted = endpoint_rules.seeds().get(name)
        given = config.get(f"settings.runtime.{key}")
        if wanted is not None and given != str(wanted):
            reasons.append(f"config.yaml's settings.runtime.{key} is {given!r}, the round's {name} is {wanted}")
    minimum = endpoint_rules.min_duration_ms()
    configured = _number(config.get("settings.runtime.min_duration_ms"))
    if configured is None:
        reasons.append(f"config.yaml names no settings.runtime.min_duration_ms (the checker requires >= {minimum})")
    elif configured < minimum:
        reasons.append(f"min_duration_ms is {configured:g} in config.yaml (< {minimum} ms)")
    duration = _number(summary.get("duration_ns"))
    if duration is None or duration / 1e6 < minimum:
        reasons.append(f"the run lasted {duration!r} ns (< {minimum} ms)")
    elif configured is not None and duration / 1e6 < configured:
        notes.append(f"the run lasted {duration / 1e9:.1f} s, less than config.yaml's min_duration_ms {configured:g}")
    if endpoint_rules.is_llm(run.benchmark):
        limits = endpoint_rules.token_limits(run.benchmark, run.checked)
        if run.checked in ("Server", "Interactive"):
            if limits is None:
                reasons.append(f"no TTFT/TPOT limits for {run.benchmark} {run.checked} in the round's table")
            for series, limit in zip(("ttft", "tpot"), limits or (), strict=False):
                _within(early.get(series), limit, series, reasons)
    else:
        bound = endpoint_rules.latency_limit(run.benchmark, run.folder)
        if bound is not None:
            _within(early.get("latency"), bound, "latency", reasons)
        elif run.folder in ("Server", "Interactive"):
            notes.append(f"no {run.folder} latency limit for {run.benchmark} in the round's table: latency not judged")
    tokens_range = endpoint_rules.output_token_range(run.benchmark)
    lengths = summary.get("output_sequence_lengths")
    mean_tokens = _number(lengths.get("avg")) if isinstance(lengths, dict) else None
    if tokens_range is not None and (mean_tokens is None or not tokens_range[0] <= mean_tokens <= tokens_range[1]):
        reasons.append(
            f"TEST09: the mean output length {mean_tokens!r} tokens is not within "
            f"[{tokens_range[0]:g}, {tokens_range[1]:g}]"
        )
    for test, audit in endpoint_rules.required_audits(run.benchmark).items():
        if not os.path.isfile(os.path.join(run.directory, compliance.AUDIT_DIR, audit)):
            reasons.append(f"compliance: {compliance.AUDIT_DIR}/{audit} ({test}) is missing")
    pair = (run.checked.lower(), run.folder.lower())
    inferred = pair[0] != pair[1] and pair != ("server", "interactive")
    if inferred and ("edge" not in run.system_type.lower() or pair not in _INFERABLE):
        reasons.append(
            f"config.yaml's type makes this a {run.checked} run, from which the checker infers no {run.folder} "
            f"result on a {run.system_type or 'datacenter'} system"
        )
    return reasons, notes


def _within(value: float | None, limit: float, series: str, reasons: list[str]) -> None:
    """The checker's latency rule: the early-stopping 99th percentile is below ``limit`` (ns)."""
    if value is None:
        reasons.append(f"no early-stopping 99th percentile of {series} (insufficient samples)")
    elif not value < limit:
        reasons.append(f"early-stopping p99 {series} {value / 1e6:.2f} ms is not below the limit {limit / 1e6:g} ms")


def _judge_accuracy(
    raw: RawResult, score: float | None, samples: int | None, run: _Run, open_division: bool
) -> tuple[bool | None, list[str], list[str]]:
    """(accuracy pass, reasons, notes) as the checker's ``accuracy_result_check`` and ``dataset_check`` judge an
    endpoints score: the score must be there; only qwen3-vl's is compared with its target (the folder scenario's:
    Interactive scores an 8k subset); the accuracy run must score the benchmark's accuracy sample count; the open
    division takes any score."""
    reasons: list[str] = []
    notes: list[str] = []
    if score is None:
        return False, ["no accuracy score in accuracy_results.json"], notes
    metric = endpoint_rules.accuracy_metric(run.benchmark, run.folder)
    passed: bool | None = True
    if endpoint_rules.accuracy_compared(run.benchmark):
        target = endpoint_rules.accuracy_target(run.benchmark, metric, run.folder)
        passed = None if target is None else target.passes(score)
        low = target.lower if target is not None else None
        raw.add_accuracy(AccuracyCheck(name=metric, value=score, threshold=low, passed=passed))
        if passed is False:
            reasons.append("the accuracy is below its target")
    else:
        raw.add_accuracy(AccuracyCheck(name=metric, value=score, passed=True))
        target = endpoint_rules.accuracy_target(run.benchmark, metric, run.folder)
        if target is not None and target.lower is not None:
            notes.append(
                f"accuracy: taken when present, as the checker takes endpoints scores of {run.benchmark} "
                f"(checks/accuracy_check.py:108-130 compares only qwen3-vl's); accuracy.txt's target would be "
                f"{metric} >= {target.lower:.6g}"
            )
    expected = endpoint_rules.accuracy_samples(run.benchmark, run.folder)
    if expected is not None and samples is not None and samples != expected:
        passed = False
        reasons.append(f"the accuracy run scored {samples} samples, the benchmark's accuracy set has {expected}")
    if open_division and passed is False:
        notes.append("accuracy not at the closed target, taken for the open division (as the checker does)")
        return True, [], notes
    return passed, reasons, notes


def build(
    directory: str, names: list[str], host: str | None, extra_metadata: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], BenchmarkResult | None]:
    """The result of the endpoints scenario folder ``directory`` (``names``: its files found by the walk;
    ``extra_metadata`` as :func:`workload.metrics.build.build` takes it)."""
    raw = RawResult(directory=directory)
    ident = build_mod.layout_identity(directory)
    if not ident:  # Interactive (not a LoadGen scenario): the folder name is the truth, the layout the same
        parent, scenario = os.path.split(directory.rstrip("/"))
        if scenario.lower() == "interactive":
            ident = build_mod.layout_identity(os.path.join(parent, "Server"))
            ident["scenario"] = "Interactive"
    scenario = ident.get("scenario") or os.path.basename(directory.rstrip("/"))
    benchmark = ident.get("benchmark_full")
    for key in ("benchmark_full", "system"):
        raw.put_ident(key, ident.get(key), PRIO_DETAIL)
    config: dict[str, str] = {}
    for name in CONFIG_FILES:
        loaded = _load(os.path.join(directory, name), raw)
        if loaded is not None:
            config = loaded
            raw.files.append(os.path.join(directory, name))
            break
    summary_path = os.path.join(directory, SUMMARY)
    summary = _load(summary_path, raw) if SUMMARY in names else None
    accuracy_path = os.path.join(directory, ACCURACY)
    results = _load(accuracy_path, raw) if ACCURACY in names else None
    if summary is None and results is None:
        return raw.issues, None
    raw.put_ident("scenario", scenario, PRIO_DETAIL)
    raw.put_ident(
        "test_mode",
        "SubmissionRun"
        if summary is not None and results is not None
        else "PerformanceOnly"
        if summary is not None
        else "AccuracyOnly",
        PRIO_DETAIL,
    )
    reasons: list[str] = []
    notes: list[str] = []
    extra: list[submission.MetricSpec] = []
    system_type = (extra_metadata or {}).get("system_type")
    run = _Run(
        directory=directory,
        benchmark=benchmark,
        folder=scenario,
        checked=endpoint_rules.checker_scenario(scenario, config.get("type")),
        system_type=system_type if isinstance(system_type, str) else "",
    )
    if summary is not None:
        raw.files.append(summary_path)
        early = _series(raw, summary, summary_path)
        reasons, notes = _judge(summary, config, early, run)
        offline = run.checked.lower() == "offline"
        # the checker's field mapping (ENDPOINTS_MAPPINGS): qps -> result_completed_samples_per_sec, tps ->
        # result_completed_tokens_per_second (Offline's token rate keeps LoadGen's Offline name here); an
        # Offline result's samples/s is inferred as issued samples / duration (endpoints_parser.py "Infer QPS")
        qps, tps = _number(summary.get("qps")), _number(summary.get("tps"))
        if qps is not None:
            raw.put("result_completed_samples_per_sec", qps, PRIO_DETAIL, summary_path)
        issued, duration = _number(summary.get("n_samples_issued")), _number(summary.get("duration_ns"))
        if offline and issued and duration:
            raw.put("result_samples_per_second", issued / (duration / 1e9), PRIO_DETAIL, summary_path)
        if tps is not None:
            key = "result_tokens_per_second" if offline else "result_completed_tokens_per_second"
            raw.put(key, tps, PRIO_DETAIL, summary_path)
        headline = endpoint_rules.headline(benchmark, scenario, run.checked)
        if headline is not None:
            raw.put(judge.FORCED_HEADLINE, headline.key, PRIO_DETAIL, summary_path)
            if headline.checker_unit == "Tokens/s" and "token" not in headline.key:
                notes.append(
                    f"headline: the checker takes {headline.key} for {benchmark} {run.checked} "
                    "(checks/performance_check.py:559-572) but labels it Tokens/s (results.py:122, "
                    "SPECIAL_UNIT_DICT): the figure is samples per second and is reported as such"
                )
        configured = _number(config.get("settings.runtime.min_duration_ms"))
        if configured is not None:
            raw.put("effective_min_duration_ms", configured, PRIO_DETAIL, summary_path)
        # Server/Interactive: the Poisson rate asked for (run_config in the summary, else config.yaml), and the
        # window QPS/TPS were measured over when the client used LoadGen's Server definition (use_legacy_...).
        run_config = summary.get("run_config")
        pattern = run_config.get("load_pattern") if isinstance(run_config, dict) else None
        asked = _number(pattern.get("target_qps")) if isinstance(pattern, dict) else None
        if asked is None:
            asked = _number(config.get("settings.load_pattern.target_qps"))
        if asked is not None and not offline:
            raw.put("effective_target_qps", asked, PRIO_DETAIL, summary_path)
        window = _number(summary.get("legacy_loadgen_window_duration_ns"))
        if window is not None:
            notes.append(
                "qps/tps as LoadGen's Server 'completed' rate: (completed - 1) / window and tokens / window, the "
                "window from the first issue to the completion of the last-issued sample "
                "(use_legacy_loadgen_qps_metrics)"
            )
            extra.append(
                (
                    "legacy_loadgen_window_duration_ns",
                    window,
                    "ns",
                    Relativity.UNDEFINED,
                    Categorization.PERFORMANCE,
                    3,
                    "endpoints legacy_loadgen_window_duration_ns",
                )
            )
        for key, label, unit in (
            ("n_samples_issued", "samples_issued", "samples"),
            ("n_samples_completed", "samples_completed", "samples"),
            ("n_samples_failed", "samples_failed", "samples"),
            ("duration_ns", "duration_ns", "ns"),
        ):
            value = _number(summary.get(key))
            if value is not None:
                extra.append(
                    (label, value, unit, Relativity.UNDEFINED, Categorization.PERFORMANCE, 3, f"endpoints {key}")
                )
        for series, value in early.items():
            extra.append(
                (
                    f"{series}_p99_early_stopping_ns",
                    value,
                    "ns",
                    Relativity.LOWER_IS_BETTER,
                    Categorization.PERFORMANCE,
                    3,
                    f"early-stopping estimate of the 99th percentile {series}",
                )
            )
    accuracy_ok: bool | None = None
    if results is not None:
        raw.files.append(accuracy_path)
        score, samples, tokens, how = _accuracy(results, accuracy_path, raw)
        open_division = submission.division_of(directory) == "open"
        accuracy_ok, accuracy_reasons, accuracy_notes = _judge_accuracy(raw, score, samples, run, open_division)
        raw.accuracy_pass = accuracy_ok
        reasons += accuracy_reasons
        notes += accuracy_notes
        if how:
            notes.append(f"accuracy: {how}")
        for label, value, unit in (("accuracy_samples", samples, "samples"), ("tokens_per_sample", tokens, "tokens")):
            if value is not None:
                extra.append(
                    (label, float(value), unit, Relativity.UNDEFINED, Categorization.ACCURACY, 3, f"endpoints {label}")
                )
    if summary is not None:
        raw.put("result_validity", "VALID" if not reasons else "INVALID", PRIO_DETAIL, summary_path)
    meta: dict[str, MetadataValue] = {"validity_rule": _RULE, "result_format": "mlcommons-endpoints"}
    version = summary.get("version") if summary is not None else None
    if isinstance(version, str):
        meta["endpoints_version"] = version
    result = build_mod.build(raw, host=host, extra_metadata={**(extra_metadata or {}), **meta})
    if result is None:
        return raw.issues, None
    # the extra figures share the result's context (tool, scenario name, times, host, the one metadata dict)
    first = result.metrics[0].__dict__ if result.metrics else None
    context = (
        {k: first[k] for k in build_mod.CONTEXT_FIELDS}
        if first is not None
        else {
            "tool_name": "MLPerf",
            "tool_version": result.loadgen_version,
            "scenario_name": result.model or "",
            "start_time": None,
            "end_time": None,
            "host": host,
            "metadata": {},
        }
    )
    added = build_mod.metrics_of(
        ((n, v, u, Relativity(r), Categorization(c), d, verb) for n, v, u, r, c, verb, d in extra), context
    )
    return raw.issues, result.model_copy(
        update={
            "invalid_reasons": reasons,  # the checker's reasons replace LoadGen-based explanations
            "fixes": [],
            "notes": [*notes, *(n for n in result.notes if "min_duration" not in n)],
            "metrics": [*result.metrics, *added],
        }
    )


def is_endpoints_name(name: str) -> bool:
    """Whether a job file name is one of this format's (the walk names them relative to the scenario folder)."""
    return name in (SUMMARY, ACCURACY)
