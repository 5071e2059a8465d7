"""The harness's command line: make targets, RUN_ARGS, the per-run LOG_DIR, and LoadGen overrides as RUN_ARGS.

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

    def __str__(self) -> str:
        return f"v{self.major}.{self.minor}"


def run_args(
    *,
    model: str,
    scenarios: Sequence[str],
    config_version: str,
    test_mode: str | None = None,
    quick_flag: str | None = None,
    fields: Sequence[tuple[str, str]] = (),
) -> str:
    """The ``RUN_ARGS`` value of one ``make generate_engines`` / ``make run_harness``, e.g.

    ``--benchmarks=bert --scenarios=Offline,Server --config_ver=default --test_mode=PerformanceOnly --test_run``,
    then config field overrides (``--min_duration=60000``) from :func:`run_groups`.
    """
    parts = [
        f"--benchmarks={model}",
        f"--scenarios={','.join(scenarios)}",
        f"--config_ver={config_version}",
    ]
    if test_mode:
        parts.append(f"--test_mode={test_mode}")
    if quick_flag:  # a quick run: the round's short-run flag (HarnessRound.quick_flag)
        parts.append(quick_flag)
    parts += [f"--{name}={value}" for name, value in fields]
    return " ".join(parts)


def make_argv(target: str, variables: Mapping[str, str] | None = None) -> list[str]:
    """``make <target> NAME=value ...`` as argv (make reads command-line variables, no shell)."""
    argv = ["make", target]
    for name, value in (variables or {}).items():
        argv.append(f"{name}={value}")
    return argv


def log_dir(run_id: str, model: str, test_mode: str, group: int = 1) -> str:
    """The per-run LOG_DIR (relative to closed/NVIDIA) so results of this run are found by path, not by age.

    ``group``: which ``make run_harness`` of this test mode (scenarios split by their overrides, see
    :func:`run_groups`); the first has no suffix.
    """
    mode = {"PerformanceOnly": "perf", "AccuracyOnly": "acc"}.get(test_mode, test_mode.lower())
    suffix = f"-g{group}" if group > 1 else ""
    return f"{log_dir_prefix(run_id, model)}{mode}{suffix}"


def log_dir_prefix(run_id: str, model: str) -> str:
    """What every LOG_DIR of one run of one model starts with (a run id is free when none exists)."""
    return f"build/logs/workload-{run_id}-{model}-"


# -- LoadGen overrides -------------------------------------------------------------------------
# NVIDIA's harness writes its own user.conf per (benchmark, scenario) from the config's fields
# (code/common/submission.py, generate_user_conf and options_map) and hands LoadGen that file
# unless ``--user_conf_path`` is given. A user.conf of ours passed that way REPLACES the generated
# one, so LoadGen would fall back to mlperf.conf's defaults for everything we did not repeat
# (target_qps 1.0: an INVALID run). Overrides therefore go in as RUN_ARGS config fields, which the
# harness takes over its config values and writes into the user.conf it generates.


@dataclass(frozen=True)
class OverrideKey:
    """How one LoadGen key reaches the harness: the RUN_ARGS field per scenario."""

    #: Scenario -> field; ``"*"``: the same field for every scenario.
    fields: Mapping[str, str]
    #: The harness field's unit is ns where LoadGen's key is in ms (``target_latency``).
    ms_to_ns: bool = False
    #: LoadGen reads the key as an integer (durations, counts).
    integer: bool = False

    def field_for(self, scenario: str) -> str | None:
        return self.fields.get(scenario) or self.fields.get("*")


#: The LoadGen keys an override may set (notes §2.2 and §3.2: submission.py options_map).
OVERRIDE_KEYS: dict[str, OverrideKey] = {
    "target_qps": OverrideKey({"Offline": "offline_expected_qps", "Server": "server_target_qps"}),
    "target_latency": OverrideKey(
        {
            "SingleStream": "single_stream_expected_latency_ns",
            "MultiStream": "multi_stream_expected_latency_ns",
            "Server": "server_target_latency_ns",
        },
        ms_to_ns=True,
    ),
    "target_latency_percentile": OverrideKey(
        {
            "SingleStream": "single_stream_target_latency_percentile",
            "MultiStream": "multi_stream_target_latency_percentile",
            "Server": "server_target_latency_percentile",
        }
    ),
    "samples_per_query": OverrideKey({"MultiStream": "multi_stream_samples_per_query"}, integer=True),
    **{
        key: OverrideKey({"*": key}, integer=True)
        for key in (
            "min_duration",
            "max_duration",
            "min_query_count",
            "max_query_count",
            "performance_sample_count_override",
        )
    },
}


def supported_keys() -> str:
    """The override keys, for messages: ``target_qps (Offline, Server), min_duration, ...``."""
    parts = []
    for key, spec in OVERRIDE_KEYS.items():
        scopes = [s for s in spec.fields if s != "*"]
        parts.append(f"{key} ({', '.join(scopes)})" if scopes else key)
    return ", ".join(parts)


@dataclass(frozen=True)
class LoadGenOverride:
    """One ``<model>.<Scenario>.<key> = <value>`` override (model and scenario may be ``*``)."""

    model: str
    scenario: str
    key: str
    value: int | float

    @property
    def name(self) -> str:
        return f"{self.model}.{self.scenario}.{self.key}"

    def line(self) -> str:
        return f"{self.name} = {self.value}"

    def applies_to(self, model: str, scenario: str) -> bool:
        """Whether LoadGen would read this override for ``model`` in ``scenario``."""
        return (
            self.model in ("*", model)
            and self.scenario in ("*", scenario)
            and OVERRIDE_KEYS[self.key].field_for(scenario) is not None
        )

    def field_value(self) -> str:
        """The RUN_ARGS value in the harness field's unit (``target_latency`` ms -> ns)."""
        spec = OVERRIDE_KEYS[self.key]
        if spec.ms_to_ns:
            return str(round(self.value * 1_000_000))
        return str(self.value)


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
    spec = OVERRIDE_KEYS.get(key)
    if spec is None:
        raise ValueError(
            f"{name}: NVIDIA's harness cannot take {key!r} from us (it writes LoadGen's user.conf itself, "
            f"from RUN_ARGS fields); supported keys: {supported_keys()}"
        )
    if scenario != "*" and spec.field_for(scenario) is None:
        raise ValueError(f"{name}: {key!r} applies only to {', '.join(s for s in spec.fields if s != '*')}")
    number = _number(value)
    if number is None:
        raise ValueError(f"{name}: value {value!r} is not an integer or a decimal number (LoadGen reads only numbers)")
    if spec.integer:
        if number != int(number) or number < 0:
            raise ValueError(f"{name}: {key} is a whole number of at least 0, not {value!r}")
        number = int(number)
    elif number <= 0:
        raise ValueError(f"{name}: {key} must be greater than 0, not {value!r}")
    if key == "target_latency_percentile" and number > 100:
        raise ValueError(f"{name}: a percentile is at most 100 (LoadGen reads percent: 99 = p99), not {value!r}")
    return LoadGenOverride(model, scenario, key, number)


def _number(value: object) -> int | float | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
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


def scenario_fields(model: str, scenario: str, overrides: Sequence[LoadGenOverride]) -> dict[str, str]:
    """The RUN_ARGS fields the overrides give ``model`` in ``scenario`` (field -> value).

    When several overrides set one key, the most specific wins, as in LoadGen:
    ``model.Scenario`` > ``*.Scenario`` > ``model.*`` > ``*.*``.
    """

    def rank(o: LoadGenOverride) -> int:
        return (2 if o.scenario != "*" else 0) + (1 if o.model != "*" else 0)

    chosen: dict[str, LoadGenOverride] = {}
    for override in overrides:
        if not override.applies_to(model, scenario):
            continue
        current = chosen.get(override.key)
        if current is None or rank(override) >= rank(current):
            chosen[override.key] = override
    fields: dict[str, str] = {}
    for key, override in chosen.items():
        field = OVERRIDE_KEYS[key].field_for(scenario)
        assert field is not None  # applies_to checked it
        fields[field] = override.field_value()
    return fields


@dataclass(frozen=True)
class RunGroup:
    """Scenarios that share one ``make run_harness``, and the RUN_ARGS fields of that run."""

    scenarios: tuple[str, ...]
    fields: tuple[tuple[str, str], ...]


def _shared_field(field: str) -> bool:
    """A field every scenario of a run reads (``min_duration``...), unlike ``server_target_qps``."""
    return any(spec.fields.get("*") == field for spec in OVERRIDE_KEYS.values())


def run_groups(model: str, scenarios: Sequence[str], overrides: Sequence[LoadGenOverride]) -> list[RunGroup]:
    """Split ``scenarios`` into the fewest ``make run_harness`` calls that give each its own overrides.

    RUN_ARGS reach every scenario of one call, so scenarios whose shared fields differ
    (``bert.Offline.min_duration`` but not Server) run separately. Scenario-specific fields
    (``--server_target_qps``) are read only by their scenario, so they never force a split.
    Groups keep the order of ``scenarios``.
    """
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    specific: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for scenario in scenarios:
        fields = scenario_fields(model, scenario, overrides)
        shared = tuple(sorted((k, v) for k, v in fields.items() if _shared_field(k)))
        groups.setdefault(shared, []).append(scenario)
        specific.setdefault(shared, {}).update({k: v for k, v in fields.items() if not _shared_field(k)})
    return [
        RunGroup(tuple(members), tuple(sorted(specific[shared].items())) + shared) for shared, members in groups.items()
    ]
