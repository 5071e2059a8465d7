"""The harness's command line: make targets, RUN_ARGS, the per-run LOG_DIR, and user.conf overrides.

Everything here is pure: values in, argv/text out. The executor runs the argv inside the
container with ``docker exec`` (no shell), so no value is ever pasted into a shell line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workload.mlperf.catalog import MODELS, SCENARIOS, model_info

#: Where NVIDIA's launch_docker mounts ``closed/NVIDIA`` inside the container.
CONTAINER_WORKDIR = "/work"

#: Setup targets, in order; each runs with ``BENCHMARKS=<model>`` (Makefile.data).
SETUP_STAGES: tuple[str, ...] = ("download_data", "download_model", "preprocess_data")


@dataclass(frozen=True, order=True)
class HarnessVersion:
    """``closed/NVIDIA/VERSION`` (``v4.1``) as numbers."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> HarnessVersion:
        """``"v4.1\\n"`` -> ``HarnessVersion(4, 1)``; ValueError for anything else."""
        match = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.\d+)?\s*", text)
        if match is None:
            raise ValueError(f"not a harness version: {text.strip()[:40]!r} (expected e.g. v4.1)")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def quick_flag(self) -> str:
        """The harness's real short-run flag: ``--test_run`` from v4.1, ``--fast`` before (notes §0)."""
        return "--test_run" if self >= HarnessVersion(4, 1) else "--fast"

    @property
    def batch_size_is_dict(self) -> bool:
        """v4.1 configs spell ``gpu_batch_size = {'bert': 1280}``; v4.0 and older a plain int."""
        return self >= HarnessVersion(4, 1)

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}"


def run_args(
    *,
    model: str,
    scenarios: Sequence[str],
    config_version: str,
    test_mode: str,
    quick: bool,
    version: HarnessVersion,
    user_conf_path: str | None = None,
) -> str:
    """The ``RUN_ARGS`` value for one ``make run``, e.g.

    ``--benchmarks=bert --scenarios=Offline,Server --config_ver=default --test_mode=PerformanceOnly --test_run``.
    """
    parts = [
        f"--benchmarks={model}",
        f"--scenarios={','.join(scenarios)}",
        f"--config_ver={config_version}",
        f"--test_mode={test_mode}",
    ]
    if quick:
        parts.append(version.quick_flag)
    if user_conf_path:
        parts.append(f"--user_conf_path={user_conf_path}")
    return " ".join(parts)


def make_argv(target: str, variables: Mapping[str, str] | None = None) -> list[str]:
    """``make <target> NAME=value ...`` as argv (make reads command-line variables, no shell)."""
    argv = ["make", target]
    for name, value in (variables or {}).items():
        argv.append(f"{name}={value}")
    return argv


def log_dir(run_id: str, model: str, test_mode: str) -> str:
    """The per-run LOG_DIR (relative to closed/NVIDIA) so results of this run are found by path, not by age."""
    mode = {"PerformanceOnly": "perf", "AccuracyOnly": "acc"}.get(test_mode, test_mode.lower())
    return f"build/logs/workload-{run_id}-{model}-{mode}"


# -- user.conf ---------------------------------------------------------------------------------
#: LoadGen keys read by ``TestSettings::FromConfig`` (v4.1, notes §8): key -> scenarios it applies to
#: (empty: any scenario).
LOADGEN_KEYS: dict[str, tuple[str, ...]] = {
    **{
        k: ()
        for k in (
            "mode",
            "min_duration",
            "max_duration",
            "min_query_count",
            "max_query_count",
            "qsl_rng_seed",
            "sample_index_rng_seed",
            "schedule_rng_seed",
            "accuracy_log_rng_seed",
            "accuracy_log_probability",
            "accuracy_log_sampling_target",
            "print_timestamps",
            "performance_issue_unique",
            "performance_issue_same",
            "performance_issue_same_index",
            "performance_sample_count_override",
            "sample_concatenate_permutation",
            "test05",
            "test05_qsl_rng_seed",
            "test05_sample_index_rng_seed",
            "test05_schedule_rng_seed",
            "use_token_latencies",
            "infer_token_latencies",
            "token_latency_scaling_factor",
        )
    },
    "target_latency_percentile": ("SingleStream", "MultiStream", "Server"),
    "target_latency": ("SingleStream", "MultiStream", "Server"),
    "samples_per_query": ("MultiStream",),
    "target_qps": ("Server", "Offline"),
    "coalesce_queries": ("Server",),
    "max_async_queries": ("Server",),
    "ttft_latency": ("Server",),
    "tpot_latency": ("Server",),
}


@dataclass(frozen=True)
class LoadGenOverride:
    """One ``<model>.<Scenario>.<key> = <value>`` line (model and scenario may be ``*``)."""

    model: str
    scenario: str
    key: str
    value: int | float

    @property
    def name(self) -> str:
        return f"{self.model}.{self.scenario}.{self.key}"

    def line(self) -> str:
        # Spaces around '=' are required: LoadGen splits on whitespace (notes §8).
        return f"{self.name} = {self.value}"


def parse_override(name: str, value: object) -> LoadGenOverride:
    """Validate one override; ValueError ``"<name>: problem"`` naming what is wrong."""
    parts = name.strip().split(".")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{name}: a LoadGen key is <model>.<Scenario>.<key>, e.g. bert.Server.target_qps")
    model, scenario, key = parts
    if model != "*" and model.lower() not in MODELS:
        raise ValueError(f"{name}: unknown model {model!r} (known: *, {', '.join(MODELS)})")
    if model != "*":
        model = model_info(model).name
    if scenario != "*":
        by_lower = {s.lower(): s for s in SCENARIOS}
        if scenario.lower() not in by_lower:
            raise ValueError(f"{name}: unknown scenario {scenario!r} (known: *, {', '.join(SCENARIOS)})")
        scenario = by_lower[scenario.lower()]
    if key not in LOADGEN_KEYS:
        raise ValueError(f"{name}: unknown LoadGen key {key!r} (known: {', '.join(sorted(LOADGEN_KEYS))})")
    scopes = LOADGEN_KEYS[key]
    if scopes and scenario != "*" and scenario not in scopes:
        raise ValueError(f"{name}: LoadGen reads {key!r} only for {', '.join(scopes)}")
    number = _number(value)
    if number is None:
        raise ValueError(f"{name}: value {value!r} is not an integer or a decimal number (LoadGen reads only numbers)")
    return LoadGenOverride(model, scenario, key, number)


def _number(value: object) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def parse_override_list(text: str) -> list[LoadGenOverride]:
    """``LoadGenOverrides``: ``"bert.Server.target_qps=100;bert.Offline.min_duration=60000"``."""
    items: list[LoadGenOverride] = []
    separator = ",,," if ",,," in text else (";" if ";" in text else ",")
    for pair in text.split(separator):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"{pair.strip()}: expected <model>.<Scenario>.<key>=<number>")
        items.append(parse_override(key.strip(), value.strip()))
    return items


def render_user_conf(overrides: Sequence[LoadGenOverride], *, header: str) -> str:
    """The user.conf text: one ``key = value`` per line, comment lines start with ``#`` as a token."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [o.line() for o in overrides]
    return "\n".join(lines) + "\n"
