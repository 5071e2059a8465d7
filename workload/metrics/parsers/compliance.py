"""Compliance folders ``TEST0x/`` of a submission tree: their verdict, read as MLPerf's submission checker reads it.

Reproduces ``ComplianceCheck`` of ``mlcommons/inference`` ``tools/submission/submission_checker/checks/
compliance_check.py`` (``accuracy_check`` and ``compliance_performance_check``) on the files a
published tree holds:

* ``verify_performance.txt`` (TEST01, TEST04, TEST05): passes when a line contains ``TEST PASS``;
  its ``reference score = x`` / ``test score = y`` lines are reported as figures.
* ``verify_accuracy.txt``: TEST01 and TEST08 pass on a line that is ``TEST PASS`` (stripped); TEST06 needs
  the lines ``First token check pass: True`` (or ``Skipped``), ``EOS check pass: True`` and
  ``Sample length check pass: True``; TEST07 and other tests pass when the text contains ``TEST PASS``.
  TEST01 without ``TEST PASS`` falls back, as the checker does, to the non-deterministic check: the
  figures of ``accuracy/baseline_accuracy.txt`` and ``accuracy/compliance_accuracy.txt`` may differ by at
  most 1 % (0.1 % for a ``-99.9`` benchmark; ``Config.get_delta_perc``).
* ``verify_output_len.txt`` (TEST09): passes when the text contains ``TEST PASS``.
* ``audit/audit_<test>.json`` of an endpoints result (``compliance_endpoints_check``): passes when it is
  an object whose ``test`` is ``<test>`` and whose ``passed`` is true.

Everything else in a TEST0x folder (``accuracy/accuracy.txt`` holding only ``hash=...``, the compliance
run's LoadGen logs under ``performance/run_1``, ``mlperf_log_accuracy.json``) is what those verify files
were computed from: the collector does not read it as a result of its own.

The verdict is one result per TEST0x folder: identity from the path (``<system>/<benchmark>/<scenario>/
TEST0x``), test mode ``TEST0x``, ``validity`` VALID when every verify file passed (INVALID otherwise),
and the metrics ``compliance_pass`` (PASS/FAIL) plus one per verify file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from workload.metrics import rules, submission, thresholds
from workload.metrics.build import layout_identity
from workload.metrics.model import BenchmarkResult, Categorization, MetadataValue, ParseIssue, Relativity
from workload.metrics.parsers import accuracy_txt
from workload.metrics.raw import RawResult
from workload.safefile import TooLarge, read_regular

VERIFY_FILES = ("verify_performance.txt", "verify_accuracy.txt", "verify_output_len.txt")
TEST_DIR = re.compile(r"^TEST\d\d$")
#: endpoints results' compliance (``compliance_endpoints_check``): ``<scenario>/audit/audit_<test>.json``
AUDIT_DIR = "audit"
AUDIT_FILE = re.compile(r"^audit_(.+)\.json$")
#: the largest verify file read (real ones are < 1 kB; an accuracy baseline a few kB)
_MAX_BYTES = 1 << 20
# verify scripts print "reference score = x" (TEST04 of v6.0) or "Reference score = x" (TEST01 of v5.1, v6.0)
_SCORE = re.compile(
    r"^(reference|test) score = ([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*$", re.MULTILINE | re.IGNORECASE
)
_TEST06_LINES = (
    ("First token check pass: True", "First token check pass: Skipped"),
    ("EOS check pass: True",),
    ("Sample length check pass: True",),
)
_HOW = {
    "verify_performance.txt": "a line containing 'TEST PASS'",
    "verify_output_len.txt": "'TEST PASS' in the text",
}
_PASS = "PASS/FAIL"


def _read(path: str) -> str:
    try:
        data = read_regular(path, _MAX_BYTES)
    except TooLarge:
        raise ValueError(f"larger than any verification file ({_MAX_BYTES} bytes), not read") from None
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def _accuracy_passed(test: str, text: str) -> tuple[bool, str]:
    """(passed, how it was judged) for ``verify_accuracy.txt`` of ``test`` (compliance_check.accuracy_check)."""
    lines = {line.strip() for line in text.split("\n")}
    if test == "TEST06":
        missing = [alts[0] for alts in _TEST06_LINES if not any(a in lines for a in alts)]
        if missing:
            return False, "lines " + ", ".join(repr(m) for m in missing) + " missing"
        return True, "TEST06 checks"
    if test in ("TEST01", "TEST08"):
        return "TEST PASS" in lines, "a line 'TEST PASS'"
    return "TEST PASS" in text, "'TEST PASS' in the text"


def _delta_check(test_dir: str, benchmark: str | None) -> tuple[bool, str]:
    """TEST01's non-deterministic check (compliance_check.py): baseline vs compliance accuracy figures."""
    acc_dir = os.path.join(test_dir, "accuracy")
    figures: list[dict[str, float]] = []
    # the figures are read with the patterns of the result's round, as the checker of that round does
    round_name, _how = rules.detect_round(path=test_dir, benchmark=benchmark)
    round_rules = rules.rules_for(round_name)
    known = round_rules.benchmark(benchmark)
    for name in ("baseline_accuracy.txt", "compliance_accuracy.txt"):
        raw = RawResult(directory=acc_dir)
        try:
            accuracy_txt.parse(os.path.join(acc_dir, name), _read(os.path.join(acc_dir, name)), raw)
        except (OSError, ValueError) as exc:
            return False, f"accuracy/{name} cannot be read ({exc})"
        accuracy_txt.read_figures(raw, round_rules, [t.metric for t in known.targets] if known else ())
        figures.append({c.name: c.value for c in raw.accuracy if c.value})
    baseline, compliance = figures
    names = [n for n in baseline if n in compliance]
    judged = [n for n in names if thresholds.target(benchmark, n) is not None] or names
    if not judged:
        return False, "no accuracy figure in both accuracy/baseline_accuracy.txt and accuracy/compliance_accuracy.txt"
    limit = 0.1 if benchmark and "99.9" in benchmark else 1.0
    for name in judged:
        delta = abs(1 - baseline[name] / compliance[name]) * 100
        if delta > limit:
            figures_text = f"baseline {baseline[name]:g} vs compliance {compliance[name]:g}"
            return False, f"{name} {figures_text}: {delta:.3f} % > {limit:g} %"
    return True, f"baseline and compliance accuracy within {limit:g} % ({', '.join(judged)})"


def build(
    directory: str, names: list[str], host: str | None, extra_metadata: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], BenchmarkResult | None]:
    """The compliance verdict of the TEST0x folder ``directory`` from its verify files ``names``."""
    test = os.path.basename(directory.rstrip("/"))
    identity: dict[str, str | None] = dict(layout_identity(directory))
    benchmark = identity.get("benchmark_full")
    identity["model"] = re.sub(r"-99(\.9)?$", "", benchmark) if benchmark else None
    identity["test_mode"] = test
    issues: list[ParseIssue] = []
    metrics: list[submission.MetricSpec] = []
    verdicts: dict[str, bool] = {}
    reasons: list[str] = []
    files: list[str] = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            text = _read(path)
        except (OSError, ValueError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            issues.append(ParseIssue(path=path, problem=f"cannot read: {problem}"))
            continue
        files.append(name)
        if name == "verify_accuracy.txt":
            passed, how = _accuracy_passed(test, text)
            if not passed and test == "TEST01":
                passed, how = _delta_check(directory, benchmark)
                how = "deterministic check failed (no 'TEST PASS'); non-deterministic check: " + how
        else:
            passed = "TEST PASS" in text
            how = _HOW[name]
        kind = name[len("verify_") : -len(".txt")]
        verdicts[kind] = passed
        if not passed:
            reasons.append(f"{test} {name}: failed ({how})")
        metrics.append(
            (
                f"compliance_{kind}_pass",
                1.0 if passed else 0.0,
                _PASS,
                Relativity.HIGHER_IS_BETTER,
                Categorization.PERFORMANCE,
                3,
                f"{test} {name} verdict (MLPerf submission checker)",
            )
        )
        if name == "verify_performance.txt":
            for which, value in _SCORE.findall(text):
                metrics.append(
                    (
                        f"compliance_{which.lower()}_score",
                        float(value),
                        "",
                        Relativity.UNDEFINED,
                        Categorization.PERFORMANCE,
                        3,
                        f"{test} {which} score (verify_performance.txt)",
                    )
                )
    if not verdicts:
        return issues, None
    overall = all(verdicts.values())
    metrics.insert(
        0,
        (
            "compliance_pass",
            1.0 if overall else 0.0,
            _PASS,
            Relativity.HIGHER_IS_BETTER,
            Categorization.PERFORMANCE,
            1,
            f"{test} compliance verdict (MLPerf submission checker)",
        ),
    )
    metadata: dict[str, MetadataValue] = {
        "compliance_test": test,
        "compliance_verdict": "PASS" if overall else "FAIL",
        "validity_rule": "compliance verdict of the verify files, as compliance_check.py of the submission checker",
    }
    encoded = submission.result(
        identity=identity,
        validity="VALID" if overall else "INVALID",
        accuracy_pass=None,
        reasons=reasons,
        notes=[],
        directory=directory,
        files=files,
        host=host,
        metadata=metadata,
        metrics=metrics,
        extra_metadata=extra_metadata,
    )
    return issues, encoded


def build_audit(
    directory: str, names: list[str], host: str | None, extra_metadata: Mapping[str, MetadataValue] | None = None
) -> tuple[list[ParseIssue], BenchmarkResult | None]:
    """The compliance verdict of an endpoints result's ``audit`` folder from its ``audit_<test>.json`` files."""
    identity: dict[str, str | None] = dict(layout_identity(os.path.dirname(directory.rstrip("/"))))
    benchmark = identity.get("benchmark_full")
    identity["model"] = re.sub(r"-99(\.9)?$", "", benchmark) if benchmark else None
    identity["test_mode"] = AUDIT_DIR
    issues: list[ParseIssue] = []
    metrics: list[submission.MetricSpec] = []
    reasons: list[str] = []
    files: list[str] = []
    verdicts: list[bool] = []
    for name in names:
        path = os.path.join(directory, name)
        match = AUDIT_FILE.match(name)
        test = match.group(1) if match else name
        try:
            data = json.loads(_read(path))
        except (OSError, ValueError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            issues.append(ParseIssue(path=path, problem=f"cannot be read as JSON: {problem}"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
            issues.append(ParseIssue(path=path, problem='expected an object with "test" and "passed" (true/false)'))
            continue
        files.append(name)
        passed = data["passed"] and data.get("test") == test
        if not passed:
            why = "passed is false" if not data["passed"] else f"its test is {data.get('test')!r}, not {test!r}"
            reasons.append(f"audit {name}: failed ({why})")
        verdicts.append(passed)
        metrics.append((f"compliance_{test}_pass", 1.0 if passed else 0.0, _PASS, Relativity.HIGHER_IS_BETTER,
                        Categorization.PERFORMANCE, 3, f"{name} verdict (MLPerf submission checker)"))  # fmt: skip
    if not verdicts:
        return issues, None
    overall = all(verdicts)
    what = "audit compliance verdict (MLPerf submission checker)"
    metrics.insert(0, ("compliance_pass", 1.0 if overall else 0.0, _PASS, Relativity.HIGHER_IS_BETTER,
                       Categorization.PERFORMANCE, 1, what))  # fmt: skip
    metadata: dict[str, MetadataValue] = {
        "compliance_test": ",".join(f[len("audit_") : -len(".json")] for f in files),
        "compliance_verdict": "PASS" if overall else "FAIL",
        "validity_rule": "compliance verdict of the audit files, as compliance_check.py of the submission checker",
    }
    encoded = submission.result(identity=identity, validity="VALID" if overall else "INVALID", accuracy_pass=None,
                                reasons=reasons, notes=[], directory=directory, files=files, host=host,
                                metadata=metadata, metrics=metrics, extra_metadata=extra_metadata)  # fmt: skip
    return issues, encoded
