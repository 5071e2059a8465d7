"""The MLPerf submission tree around a result folder: its system description and the shared encoder.

A published submission (``mlcommons/inference_results_vX.Y``) is laid out as the submission checker
expects (``tools/submission/submission_checker/constants.py``, ``SYSTEM_PATH`` and friends)::

    <division>/<submitter>/systems/<system>.json
    <division>/<submitter>/results/<system>/<benchmark>/<scenario>/{performance/run_1,accuracy}/...
    <division>/<submitter>/compliance/<system>/<benchmark>/<scenario>/TEST0x/...      (up to v5.1)
    <division>/<submitter>/results/<system>/<benchmark>/<scenario>/TEST0x/...         (v6.0 on)
    <division>/<submitter>/measurements/<system>/<benchmark>/<scenario>/...           (up to v5.1)

:func:`system_description` finds ``systems/<system>.json`` for any folder below ``results``,
``compliance`` or ``measurements`` and returns the fields that go into every metric's metadata.
:func:`result` builds a result that is not made from LoadGen keys (compliance verdicts).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from workload.metrics.model import BenchmarkResult, Categorization, MetadataValue, Metric, ParseIssue, Relativity
from workload.safefile import TooLarge, read_regular

#: the tree folders under which ``<system>`` is the next path component (submission checker layout)
_TREE_DIRS = ("results", "compliance", "measurements")
#: system-description fields copied into metric metadata (``SYSTEM_DESC_REQUIRED_FIELDS`` of the checker)
SYSTEM_FIELDS = (
    "submitter",
    "division",
    "system_name",
    "system_type",
    "status",
    "accelerator_model_name",
    "accelerators_per_node",
    "number_of_nodes",
)
#: the largest systems/<system>.json read (real ones are ~2 kB)
_MAX_SYSTEM_JSON = 1 << 20
#: measurement-description fields copied into metric metadata (``SYSTEM_IMP_REQUIRED_FILES`` of the checker)
MEASUREMENT_FIELDS = ("input_data_types", "weight_data_types", "weight_transformations", "retraining",
                      "starting_weights_filename")  # fmt: skip
#: (path, mtime, size) -> what _load_system gave: read once per process for all results of a system
_CACHE: dict[tuple[str, int, int], tuple[dict[str, MetadataValue] | None, str | None]] = {}
_SCENARIO_TAIL = ("performance", "accuracy", "ranging")


def system_json_path(directory: str) -> str | None:
    """``<root>/systems/<system>.json`` for a folder below ``<root>/{results,compliance,measurements}/<system>``."""
    parts = directory.replace("\\", "/").rstrip("/").split("/")
    for index in range(len(parts) - 2, -1, -1):
        if parts[index] in _TREE_DIRS and parts[index + 1]:
            root = "/".join(parts[:index]) or ("/" if directory.startswith("/") else ".")
            return os.path.join(root, "systems", parts[index + 1] + ".json")
    return None


#: the divisions of a submission tree (``VALID_DIVISIONS`` of the checker)
DIVISIONS = ("closed", "open", "network")


def division_of(directory: str) -> str | None:
    """The division (``closed``, ``open``, ``network``) of a folder of ``<division>/<submitter>/results/...``.

    Also for ``compliance`` and ``measurements``; None for a folder that is not in a submission tree.
    """
    parts = directory.replace("\\", "/").rstrip("/").split("/")
    for index in range(len(parts) - 2, 1, -1):
        if parts[index] in _TREE_DIRS and parts[index + 1]:
            division = parts[index - 2].lower()
            return division if division in DIVISIONS else None
    return None


def _load_system(
    path: str, wanted: tuple[str, ...] = SYSTEM_FIELDS
) -> tuple[dict[str, MetadataValue] | None, str | None]:
    """(the ``wanted`` fields, None) or (None, the problem); (None, None) when the file does not exist."""
    try:
        data = read_regular(path, _MAX_SYSTEM_JSON)
    except FileNotFoundError:
        return None, None
    except TooLarge:
        return None, f"larger than any system description ({_MAX_SYSTEM_JSON} bytes), not read"
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    try:
        parsed: Any = json.loads(data.decode("utf-8", errors="replace"))
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"
    if not isinstance(parsed, dict):
        return None, "expected a JSON object"
    fields: dict[str, MetadataValue] = {}
    for key in wanted:
        value = parsed.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str):
            if value.strip():
                fields[key] = value.strip()
        elif isinstance(value, int | float) and value == value and abs(value) < 1e300:
            fields[key] = value
    return fields, None


def system_description(directory: str) -> tuple[dict[str, MetadataValue] | None, ParseIssue | None]:
    """The system description of the submission ``directory`` belongs to, or None (not in a tree, no file).

    A file that exists but cannot be read is an issue naming it; it is returned the first time only
    (per process), so that the hundred results of one system do not repeat it.
    """
    return _described(system_json_path(directory), SYSTEM_FIELDS)


def _described(path: str | None, wanted: tuple[str, ...]) -> tuple[dict[str, MetadataValue] | None, ParseIssue | None]:
    """:func:`_load_system` of ``path``, cached by its path, time and size (so an edited file is read again)."""
    if path is None:
        return None, None
    try:
        stat = os.stat(path)
    except OSError:
        return None, None  # no such file: not part of a submission tree
    key = (path, stat.st_mtime_ns, stat.st_size)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached[0], None
    fields, problem = _load_system(path, wanted)
    if len(_CACHE) < 4096:
        _CACHE[key] = (fields, problem)
    return fields, (ParseIssue(path=path, problem=problem) if problem else None)


def measurements_json_path(directory: str) -> str | None:
    """The measurement description of a result folder of a submission tree, or None.

    v6.0 on: ``results/<system>/<benchmark>/<scenario>/measurements.json``; up to v5.1:
    ``measurements/<system>/<benchmark>/<scenario>/<system>_<implementation>_<scenario>.json`` (the one
    ``.json`` there; ``MEASUREMENTS_PATH`` of the checker).
    """
    parts = directory.replace("\\", "/").rstrip("/").split("/")
    while parts and (parts[-1] in _SCENARIO_TAIL or parts[-1].startswith("run_") or parts[-1].startswith("TEST")):
        parts.pop()
    if len(parts) < 4 or parts[-4] not in ("results", "compliance"):
        return None
    scenario_dir = "/".join(parts) or "/"
    inline = os.path.join(scenario_dir, "measurements.json")
    if parts[-4] == "results" and os.path.isfile(inline):
        return inline
    old_dir = "/".join([*parts[:-4], "measurements", *parts[-3:]])
    try:
        names = sorted(n for n in os.listdir(old_dir) if n.endswith(".json"))
    except OSError:
        return None
    return os.path.join(old_dir, names[0]) if names else None


def measurement_description(directory: str) -> tuple[dict[str, MetadataValue] | None, ParseIssue | None]:
    """The measurement description's fields for ``directory`` (see :func:`system_description` for issues)."""
    return _described(measurements_json_path(directory), MEASUREMENT_FIELDS)


#: name, value, unit, relativity, categorization, verbosity, description
MetricSpec = tuple[str, float, str, str, str, int, str]


def result(
    *,
    identity: dict[str, str | None],
    validity: str | None,
    accuracy_pass: bool | None,
    reasons: list[str],
    notes: list[str],
    directory: str,
    files: list[str],
    host: str | None,
    metadata: dict[str, MetadataValue],
    metrics: list[MetricSpec],
    extra_metadata: Mapping[str, MetadataValue] | None = None,
) -> BenchmarkResult:
    """A result (no headline, no accuracy checks), every metric sharing one metadata dict: the identity,
    ``metadata``, then ``extra_metadata`` under the keys not set yet (as :func:`workload.metrics.build.build`)."""
    model = identity.get("model")
    benchmark = identity.get("benchmark_full")
    meta: dict[str, MetadataValue] = {
        "model": model,
        "benchmark_full": benchmark,
        "scenario": identity.get("scenario"),
        "test_mode": identity.get("test_mode"),
        "system": identity.get("system"),
        "validity": validity,
        "host": host,
        "source": directory,
    }
    meta.update(metadata)
    meta = {k: v for k, v in meta.items() if v is not None}
    for key, value in (extra_metadata or {}).items():
        meta.setdefault(key, value)
    name = model or benchmark or os.path.basename(directory.rstrip("/"))
    context = {"tool_name": "MLPerf", "tool_version": None, "scenario_name": name, "start_time": None,
               "end_time": None, "host": host, "metadata": meta}  # fmt: skip
    made = [
        Metric.trusted({"name": n, "value": v, "unit": u, "relativity": Relativity(r),
                        "categorization": Categorization(c), "description": d, "verbosity": verb, **context})
        for n, v, u, r, c, verb, d in metrics
    ]  # fmt: skip
    return BenchmarkResult(
        model=model,
        benchmark_full=benchmark,
        scenario=identity.get("scenario"),
        test_mode=identity.get("test_mode"),
        system=identity.get("system"),
        validity=validity,
        accuracy_pass=accuracy_pass,
        invalid_reasons=reasons,
        notes=notes,
        metrics=made,
        source=directory,
        files=files,
        host=host,
    )
