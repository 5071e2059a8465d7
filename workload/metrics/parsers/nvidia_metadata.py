"""NVIDIA harness ``metadata.json`` (perf and accuracy mode), one per ``<system>/<benchmark>/<Scenario>``.

The headline value is read from ``result[result["scenario_key"]]`` - never from ``summary_string``
(VirtualClient split that display string). Every ``accuracy[]`` entry is kept with its
``upper_limit``; ``accuracy_pass`` is the harness's overall verdict. ``satisfies_query_constraint``
is NVIDIA's own heuristic (false for most Server/SingleStream runs) and is reported, never used
as a validity signal.
"""

from __future__ import annotations

import json
import math

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import PRIO_METADATA, RawResult

_IDENT = {
    "benchmark_short": "model",
    "benchmark_full": "benchmark_full",
    "scenario": "scenario",
    "test_mode": "test_mode",
    "system_name": "system",
    "config_name": "config_name",
}
_COPIED = (
    "result_validity",
    "early_stopping_met",
    "effective_min_duration_ms",
    "effective_min_query_count",
    "effective_samples_per_query",
    "satisfies_query_constraint",
    "tensorrt_version",
    "scenario_key",
    "result_samples_per_second",
)


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read a metadata.json ``text`` (from ``path``) into ``raw``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raw.issue(path, f"not valid JSON ({exc})")
        return
    if not isinstance(data, dict):
        raw.issue(path, f"expected a JSON object, found {type(data).__name__}")
        return
    for src, dst in _IDENT.items():
        raw.put_ident(dst, data.get(src), PRIO_METADATA + 10)
    for key in _COPIED:
        value = data.get(key)
        if isinstance(value, bool | int | float | str) and not (isinstance(value, float) and not math.isfinite(value)):
            raw.put(key, value, PRIO_METADATA)
    scenario_key = data.get("scenario_key")
    problems: list[str] = []
    if isinstance(scenario_key, str) and scenario_key in data:
        value = _num(data[scenario_key])
        if value is None:
            problems.append(f"{scenario_key} is not a number: {data[scenario_key]!r}")
        else:
            raw.put(scenario_key, value, PRIO_METADATA)
    elif data.get("test_mode") != "AccuracyOnly" and isinstance(scenario_key, str):
        problems.append(f"scenario_key {scenario_key!r} has no value in the file")
    accuracy = data.get("accuracy")
    if accuracy is not None:
        if not isinstance(accuracy, list):
            problems.append("'accuracy' is not a list")
        else:
            for i, entry in enumerate(accuracy):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    problems.append(f"accuracy[{i}] has no name")
                    continue
                passed = entry.get("pass")
                raw.add_accuracy(
                    AccuracyCheck(
                        name=entry["name"],
                        value=_num(entry.get("value")),
                        threshold=_num(entry.get("threshold")),
                        upper_limit=_num(entry.get("upper_limit")),
                        passed=passed if isinstance(passed, bool) else None,
                    )
                )
    if isinstance(data.get("accuracy_pass"), bool):
        raw.accuracy_pass = data["accuracy_pass"]
    for problem in problems:
        raw.issue(path, problem)
    if not any(k in data for k in (*_IDENT, "accuracy", "result_validity")):
        raw.issue(path, "no NVIDIA harness fields (benchmark_full, scenario, result_validity ...) found")
        return
    raw.files.append(path)
