"""``accuracy.json`` written by the embedded LoadGen-on-CPU benchmark next to its LoadGen logs.

Shape: ``{"metric": "cosine_similarity_min", "value": 0.9991, "threshold": 0.999, "pass": true,
"samples": 1024, "mean": 0.9998}``; optional ``model`` and ``scenario`` name the result.
``mean`` is the mean of the same per-sample figure whose minimum is ``value``.
"""

from __future__ import annotations

import json
import math

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import PRIO_METADATA, RawResult


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        return None
    return float(value)


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read the accuracy.json ``text`` (from ``path``) into ``raw``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raw.issue(path, f"not valid JSON ({exc})")
        return
    if not isinstance(data, dict) or not isinstance(data.get("metric"), str) or not data["metric"]:
        raw.issue(path, 'expected an object with "metric", "value", "threshold", "pass"')
        return
    name = data["metric"]
    value = _num(data.get("value"))
    if value is None:
        raw.issue(path, f'"value" is not a number: {data.get("value")!r}')
        return
    passed = data.get("pass")
    check = AccuracyCheck(
        name=name,
        value=value,
        threshold=_num(data.get("threshold")),
        passed=passed if isinstance(passed, bool) else None,
    )
    raw.add_accuracy(check)
    if isinstance(passed, bool):
        raw.accuracy_pass = passed if raw.accuracy_pass is None else (raw.accuracy_pass and passed)
    mean = _num(data.get("mean"))
    if mean is not None:
        mean_name = name[: -len("_min")] + "_mean" if name.endswith("_min") else f"{name}_mean"
        raw.add_accuracy(AccuracyCheck(name=mean_name, value=mean))
    samples = _num(data.get("samples"))
    if samples is not None:
        raw.put("accuracy_samples", int(samples), PRIO_METADATA)
    for key, ident in (("model", "model"), ("scenario", "scenario")):
        raw.put_ident(ident, data.get(key), PRIO_METADATA)
    raw.files.append(path)
