"""``accuracy.json`` written by the embedded LoadGen-on-CPU benchmark next to its LoadGen logs.

Shape: ``{"metric": "cosine_similarity_min", "value": 0.9991, "threshold": 0.999, "pass": true,
"samples": 1024, "mean": 0.9998, "problems": []}``; optional ``model`` and ``scenario`` name the result.
``mean`` is the mean of the same per-sample figure whose minimum is ``value``. ``problems`` says why
the check failed besides the figure (samples without an answer, malformed answers); files written
before it existed lack it. An optional ``fixes`` list says what to do when it failed, replacing the
generic advice (the GPU qualification's checks, workload/qualify/verdicts.py, name boards to inspect).
Values of the wrong type are issues naming the key.
"""

from __future__ import annotations

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import NOT_JSON, PRIO_METADATA, RawResult, finite_float


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read the accuracy.json ``text`` (from ``path``) into ``raw``."""
    data = raw.load_json(path, text)
    if data is NOT_JSON:
        return
    if not isinstance(data, dict) or not isinstance(data.get("metric"), str) or not data["metric"]:
        raw.issue(path, 'expected an object with "metric", "value", "threshold", "pass"')
        return
    name = data["metric"]
    value = finite_float(data.get("value"))
    if value is None:
        raw.issue(path, f'"value" is not a number: {data.get("value")!r}')
        return
    passed = data.get("pass")
    if passed is not None and not isinstance(passed, bool):
        raw.issue(path, f'"pass" is {passed!r}, not true or false')
    threshold = finite_float(data.get("threshold"))
    if threshold is None and data.get("threshold") is not None:
        raw.issue(path, f'"threshold" is not a number: {data.get("threshold")!r}')
    problems = data.get("problems")
    if isinstance(problems, list) and all(isinstance(p, str) for p in problems):
        raw.accuracy_problems.extend(p for p in problems if p.strip())
    elif problems is not None:
        raw.issue(path, f'"problems" is not a list of strings (found {type(problems).__name__})')
    fixes = data.get("fixes")
    if isinstance(fixes, list) and all(isinstance(f, str) for f in fixes):
        raw.accuracy_fixes.extend(f for f in fixes if f.strip())
    elif fixes is not None:
        raw.issue(path, f'"fixes" is not a list of strings (found {type(fixes).__name__})')
    check = AccuracyCheck(
        name=name,
        value=value,
        threshold=threshold,
        passed=passed if isinstance(passed, bool) else None,
    )
    raw.add_accuracy(check)
    if isinstance(passed, bool):
        raw.accuracy_pass = passed if raw.accuracy_pass is None else (raw.accuracy_pass and passed)
    mean = finite_float(data.get("mean"))
    if mean is not None:
        mean_name = name[: -len("_min")] + "_mean" if name.endswith("_min") else f"{name}_mean"
        raw.add_accuracy(AccuracyCheck(name=mean_name, value=mean))
    samples = finite_float(data.get("samples"))
    if samples is not None:
        raw.put("accuracy_samples", int(samples), PRIO_METADATA, path)
    for key, ident in (("model", "model"), ("scenario", "scenario")):
        raw.put_ident(ident, data.get(key), PRIO_METADATA)
    raw.files.append(path)
