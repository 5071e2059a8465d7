"""NVIDIA harness ``metadata.json`` (perf and accuracy mode), one per ``<system>/<benchmark>/<Scenario>``.

The headline value is read from ``result[result["scenario_key"]]`` - never from ``summary_string``
(VirtualClient split that display string). Every ``accuracy[]`` entry is kept with its
``upper_limit``; ``accuracy_pass`` is the harness's overall verdict. ``satisfies_query_constraint``
is NVIDIA's own heuristic (false for most Server/SingleStream runs) and is reported, never used
as a validity signal.
"""

from __future__ import annotations

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import NOT_JSON, PRIO_METADATA, RawResult, finite_float

_IDENT = {
    "benchmark_short": "model",
    "benchmark_full": "benchmark_full",
    "scenario": "scenario",
    "test_mode": "test_mode",
    "system_name": "system",
    "config_name": "config_name",
}
#: keys copied into the RawResult, with the JSON type each must have (None: absent; any other type: an issue)
_COPIED: dict[str, tuple[type, ...]] = {
    "result_validity": (str,),
    "early_stopping_met": (bool,),
    "effective_min_duration_ms": (int, float),
    "effective_min_query_count": (int, float),
    "effective_samples_per_query": (int, float),
    "satisfies_query_constraint": (bool,),
    "tensorrt_version": (str,),
    "scenario_key": (str,),
    "result_samples_per_second": (int, float),
}
_TYPE_NAMES = {str: "a string", bool: "true or false", int: "a number", float: "a number"}


def _expected(types: tuple[type, ...]) -> str:
    return " or ".join(dict.fromkeys(_TYPE_NAMES[t] for t in types))


def _is(value: object, types: tuple[type, ...]) -> bool:
    """``isinstance`` where a bool is not a number (JSON ``true`` is no count)."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def _entry_number(entry: dict[str, object], key: str, where: str, problems: list[str]) -> float | None:
    """``entry[key]`` as a finite float; None when absent/null, and a problem when it is something else."""
    value = entry.get(key)
    if value is None:
        return None
    number = finite_float(value)
    if number is None:
        problems.append(f"{where}.{key} is {value!r}, not a finite number")
    return number


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read a metadata.json ``text`` (from ``path``) into ``raw``.

    Values of the wrong JSON type (``"accuracy_pass": "yes"``, a string accuracy value, a number
    for ``result_validity``) are issues naming the key; the rest of the file is still read.
    """
    data = raw.load_json(path, text)
    if data is NOT_JSON:
        return
    if not isinstance(data, dict):
        raw.issue(path, f"expected a JSON object, found {type(data).__name__}")
        return
    problems: list[str] = []
    for src, dst in _IDENT.items():
        value = data.get(src)
        if value is not None and not isinstance(value, str):
            problems.append(f"{src} is {value!r}, not a string")
        raw.put_ident(dst, value, PRIO_METADATA + 10)
    scenario_key = data.get("scenario_key")
    for key, types in _COPIED.items():
        value = data.get(key)
        if value is None or key == scenario_key:  # the headline value is read (and checked) below
            continue
        if not _is(value, types):
            problems.append(f"{key} is {value!r}, not {_expected(types)}")
        elif key == "result_validity" and value not in ("VALID", "INVALID"):
            problems.append(f"result_validity is {value!r}, not 'VALID' or 'INVALID'")
        else:
            raw.put(key, value, PRIO_METADATA, path)
    if isinstance(scenario_key, str) and scenario_key in data:
        value = finite_float(data[scenario_key])
        if value is None:
            problems.append(f"{scenario_key} (the scenario_key) is {data[scenario_key]!r}, not a finite number")
        else:
            raw.put(scenario_key, value, PRIO_METADATA, path)
    elif data.get("test_mode") != "AccuracyOnly" and isinstance(scenario_key, str):
        problems.append(f"scenario_key {scenario_key!r} has no value in the file")
    accuracy = data.get("accuracy")
    if accuracy is not None:
        if not isinstance(accuracy, list):
            problems.append("'accuracy' is not a list")
        else:
            for i, entry in enumerate(accuracy):
                where = f"accuracy[{i}]"
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    problems.append(f"{where} has no name")
                    continue
                passed = entry.get("pass")
                if passed is not None and not isinstance(passed, bool):
                    problems.append(f"{where}.pass is {passed!r}, not true or false")
                raw.add_accuracy(
                    AccuracyCheck(
                        name=entry["name"],
                        value=_entry_number(entry, "value", where, problems),
                        threshold=_entry_number(entry, "threshold", where, problems),
                        upper_limit=_entry_number(entry, "upper_limit", where, problems),
                        passed=passed if isinstance(passed, bool) else None,
                    )
                )
    accuracy_pass = data.get("accuracy_pass")
    if isinstance(accuracy_pass, bool):
        raw.accuracy_pass = accuracy_pass
    elif accuracy_pass is not None:
        problems.append(f"accuracy_pass is {accuracy_pass!r}, not true or false")
    for problem in problems:
        raw.issue(path, problem)
    if not any(k in data for k in (*_IDENT, "accuracy", "result_validity")):
        raw.issue(path, "no NVIDIA harness fields (benchmark_full, scenario, result_validity ...) found")
        return
    raw.files.append(path)
