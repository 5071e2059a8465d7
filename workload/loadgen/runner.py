"""Run ONE LoadGen test (one scenario, one mode) in this process, then exit.

Usage::

    python -m workload.loadgen.runner --scenario Offline --mode PerformanceOnly \\
        --out DIR --settings settings.json

Why one process per test: LoadGen applies its built-in ``mlperf.conf`` (official RNG seeds, rule
defaults) only on the FIRST ``TestSettings.FromConfig`` call of a process; a second call in the
same process gets seed 0 and logs ``error_invalid_config: "Multiple conf files are used"``.

What lands in ``DIR``:

* ``user.conf`` - our overrides, applied on top of the built-in mlperf.conf;
* ``mlperf_log_summary.txt``, ``mlperf_log_detail.txt``, ``mlperf_log_accuracy.json``,
  ``mlperf_log_trace.json`` (written empty: tracing is off) - LoadGen's standard logs;
* ``effective_settings.json`` - what was asked (after find-performance) and what LoadGen says it
  used (the detail log's ``requested_*`` / ``effective_*`` values);
* AccuracyOnly: ``reference_embeddings.npy`` and ``accuracy.json`` (see :mod:`.accuracy`).

Exit status: 0 when the test ran, VALID or not and whatever the accuracy verdict (the result files
say); 2 for bad input (settings, model file); 1 when the test could not run. Errors are one
message on stderr, never a traceback (set ``WORKLOAD_DEBUG=1`` to see one for internal errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from workload.errors import EXIT_USAGE, BenchmarkFailed, UsageError, WorkloadError
from workload.loadgen import accuracy as acc
from workload.loadgen.findperf import FindPerfResult, apply_found, find_performance
from workload.loadgen.logs import ACCURACY_LOG, DETAIL_LOG, SUMMARY_LOG, detail_values, loadgen_settings
from workload.loadgen.model import Embedder, EmbeddingModel, TokenBatch, synthetic_tokens
from workload.loadgen.settings import (
    CONF_MODEL,
    EFFECTIVE_SETTINGS,
    MODES,
    SCENARIOS,
    Mode,
    RunSettings,
    Scenario,
    load_settings,
    render_user_conf,
    user_conf_values,
)
from workload.loadgen.sut import SUT, loadgen_responder, make_sut, model_threads
from workload.safefile import atomic_write_text

USER_CONF = "user.conf"
PROG = "workload.loadgen.runner"


def _say(message: str) -> None:
    print(message, flush=True)


def _needs_find_performance(scenario: Scenario, mode: Mode, settings: RunSettings) -> bool:
    """Whether a find-performance pass would fill in anything this test uses."""
    if not settings.find_peak_performance:
        return False
    if mode == "AccuracyOnly":
        # Only the Server schedule depends on a target in accuracy mode (queries arrive at target_qps).
        return scenario == "Server" and settings.server_target_qps is None
    wanted = {
        "Offline": settings.offline_target_qps,
        "Server": settings.server_target_qps if settings.server_target_latency_ms is not None else None,
        "SingleStream": settings.single_stream_target_latency_ms,
        "MultiStream": settings.multi_stream_target_latency_ms,
    }[scenario]
    return wanted is None


def _test_settings(scenario: Scenario, mode: Mode, conf_path: Path) -> Any:
    """LoadGen TestSettings: built-in mlperf.conf (first FromConfig of this process), then user.conf."""
    import mlperf_loadgen as lg

    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, scenario)
    ts.mode = getattr(lg.TestMode, mode)
    rc = ts.FromConfig(str(conf_path), CONF_MODEL, scenario)
    if rc != 0:
        raise BenchmarkFailed(f"{conf_path}: LoadGen rejected the conf file (FromConfig returned {rc})")
    return ts


def _run_loadgen(scenario: Scenario, ts: Any, sut: SUT, data_len: int, out: Path) -> float:
    """Construct SUT/QSL, run the test with logs into ``out``, destroy them; return wall seconds."""
    import mlperf_loadgen as lg

    log_output = lg.LogOutputSettings()
    log_output.outdir = str(out)
    log_output.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = log_output
    # Per-sample tracing costs time in the measured loop and megabytes on disk; the detail log has the results.
    log_settings.enable_trace = False

    def _noop(_indices: list[int]) -> None:
        """All samples live in memory for the whole test: nothing to load or unload."""

    lg_sut = lg.ConstructSUT(sut.issue, sut.flush)
    qsl = lg.ConstructQSL(data_len, data_len, _noop, _noop)
    started = time.perf_counter()
    try:
        lg.StartTestWithLogSettings(lg_sut, qsl, ts, log_settings)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(lg_sut)
        sut.close()
    return time.perf_counter() - started


def load_model(settings: RunSettings, threads: int) -> Embedder:
    """The ONNX model, or a GPU qualification encoder (imported only when one is asked for)."""
    if settings.model_kind == "onnx":
        return EmbeddingModel(Path(settings.model_path) if settings.model_path else None, threads=threads)
    from workload.loadgen.encoders import make_model

    return make_model(settings.model_kind, precision=settings.precision)


def run(scenario: Scenario, mode: Mode, out: Path, settings: RunSettings) -> dict[str, Any]:
    """Run one test into ``out``; return the effective-settings record (also written to disk)."""
    out.mkdir(parents=True, exist_ok=True)
    data: TokenBatch = synthetic_tokens(settings.sample_count, settings.sequence_length, settings.data_seed)
    threads = model_threads(scenario, settings, os.cpu_count() or 1)
    model = load_model(settings, threads)

    asked = settings.model_dump()
    found: FindPerfResult | None = None
    applied: dict[str, float] = {}
    if _needs_find_performance(scenario, mode, settings):
        found = find_performance(scenario, model, data, settings)
        settings, applied = apply_found(settings, found)
        _say(f"find-performance ({found.seconds:.1f}s): measured {found.measured}, applied {applied or 'nothing'}")

    conf_path = out / USER_CONF
    atomic_write_text(conf_path, render_user_conf(settings, scenario))
    ts = _test_settings(scenario, mode, conf_path)

    if mode == "AccuracyOnly":
        started = time.perf_counter()
        reference = acc.compute_reference(model, data)
        acc.save_reference(out, reference)
        _say(
            f"reference outputs: {reference.shape[0]} samples x {reference.shape[1]} in "
            f"{time.perf_counter() - started:.1f}s (outside LoadGen)"
        )

    sut = make_sut(scenario, model, data, settings, loadgen_responder())
    _say(f"LoadGen {scenario} {mode}: {len(data)} samples, user.conf {user_conf_values(settings, scenario)}")
    wall = _run_loadgen(scenario, ts, sut, len(data), out)

    values = detail_values(out / DETAIL_LOG)
    record: dict[str, Any] = {
        "scenario": scenario,
        "mode": mode,
        "conf_model": CONF_MODEL,
        "asked": asked,
        "user_conf": user_conf_values(settings, scenario),
        "find_performance": found.as_dict() | {"applied": applied} if found else None,
        "model": model.describe() | {"intra_op_threads": threads},
        # the GPU this process was pinned to (GpuQualifyExecutor); None when not pinned
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "loadgen": loadgen_settings(values) | {"version": values.get("loadgen_version")},
        "wall_seconds": round(wall, 3),
    }
    atomic_write_text(out / EFFECTIVE_SETTINGS, json.dumps(record, indent=2, default=str) + "\n")
    if sut.error is not None:
        raise BenchmarkFailed(f"the model failed during the LoadGen test: {sut.error}")

    line = f"{scenario} {mode}: {values.get('result_validity', 'no result')} in {wall:.1f}s"
    if mode == "AccuracyOnly":
        result = acc.check_accuracy(out / ACCURACY_LOG, reference, settings.accuracy_threshold)
        acc.write_accuracy(out, result, model=CONF_MODEL, scenario=scenario)
        verdict = "PASS" if result.passed else "FAIL"
        line = (
            f"{scenario} AccuracyOnly: {verdict} cosine min {result.value:.6f} mean {result.mean:.6f} "
            f"(threshold {result.threshold}, {result.samples} samples)"
        )
        for problem in result.problems:
            _say(f"accuracy: {problem}")
    elif (out / SUMMARY_LOG).exists():
        line += _perf_numbers(scenario, values)
    _say(line)
    return record


def _perf_numbers(scenario: Scenario, values: dict[str, Any]) -> str:
    """The headline number of a performance result, for the one-line report."""
    if scenario == "Offline" and "result_samples_per_second" in values:
        return f", {float(values['result_samples_per_second']):.1f} samples/s"
    if scenario == "Server" and "result_completed_samples_per_sec" in values:
        return f", {float(values['result_completed_samples_per_sec']):.1f} samples/s completed"
    pct = "90.00" if scenario == "SingleStream" else "99.00"
    key = f"result_{pct}_percentile_latency_ns"
    if key in values:
        return f", p{pct[:2]} latency {float(values[key]) / 1e6:.2f} ms"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description="Run one MLPerf LoadGen test.")
    parser.add_argument("--scenario", required=True, choices=SCENARIOS)
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument("--out", required=True, type=Path, help="result folder (created)")
    parser.add_argument("--settings", required=True, type=Path, help="settings.json (see workload.loadgen.settings)")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.settings)
        run(args.scenario, args.mode, args.out, settings)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WorkloadError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line unless asked for the traceback
        if os.environ.get("WORKLOAD_DEBUG"):
            raise
        print(
            f"{PROG}: internal error: {type(exc).__name__}: {exc} (set WORKLOAD_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
