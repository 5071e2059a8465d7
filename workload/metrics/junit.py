"""JUnit XML, the report format every CI system shows natively (Jenkins, GitLab, GitHub, Azure).

One ``<testcase>`` per (host, benchmark, scenario, test mode): ``classname`` is
``host.benchmark`` (``benchmark`` alone without a host), ``name`` is ``Scenario Mode``. A result
that fails (INVALID, accuracy failed or could not be judged) is a ``<failure>`` whose text is its
INVALID reasons and fixes; iterations of the same case are one test case (failed if any failed).
A result file that could not be read is an ``<error>`` case named after the file; a host whose
steps failed is an ``<error>`` case ``host.steps``. The schema is the one Jenkins' JUnit plugin
and ``junit-xml`` tooling read (``testsuites/testsuite/testcase/failure|error``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workload.metrics.model import BenchmarkResult, ParseIssue
from workload.metrics.units import readable
from workload.safefile import atomic_write_text

#: characters XML 1.0 cannot carry (control characters from a log line would make the file unreadable)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


@dataclass
class Case:
    """One JUnit test case: ``failures`` and ``errors`` are texts (none: it passed)."""

    classname: str
    name: str
    time_s: float = 0.0
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)


def case_key(result: BenchmarkResult) -> tuple[str, str]:
    """(classname, name) of the case a result belongs to."""
    bench = result.benchmark_full or result.model or "?"
    classname = f"{result.host}.{bench}" if result.host else bench
    return classname, f"{result.scenario or '?'} {result.test_mode or '?'}"


def _why(result: BenchmarkResult) -> list[str]:
    lines = [f"why: {r}" for r in result.invalid_reasons]
    lines += [f"fix: {f}" for f in result.fixes]
    if not lines:
        if result.accuracy_pass is False:
            lines.append("why: accuracy check failed")
        elif result.is_performance and result.validity != "VALID":
            lines.append(f"why: validity {result.validity or 'unknown'} (LoadGen did not report VALID)")
        else:
            lines.append("why: accuracy could not be judged (no figure or no target)")
    return lines


def result_cases(results: Iterable[BenchmarkResult], issues: Sequence[ParseIssue] = ()) -> list[Case]:
    """The cases of a run's results (see the module docstring)."""
    cases: dict[tuple[str, str], Case] = {}
    for result in results:
        key = case_key(result)
        case = cases.setdefault(key, Case(*key))
        if result.metrics and result.metrics[0].start_time and result.metrics[0].end_time:
            case.time_s += (result.metrics[0].end_time - result.metrics[0].start_time).total_seconds()
        if result.headline is not None:
            case.output.append(f"{result.headline.name} = {readable(result.headline.value, result.headline.unit)}")
        if result.failed:
            case.failures.append("\n".join([f"{result.label} ({result.source})", *_why(result)]))
    out = list(cases.values())
    out += [Case("results", issue.path, errors=[issue.problem]) for issue in issues]
    return out


def to_xml(cases: Sequence[Case], *, suite: str) -> str:
    """The JUnit XML document of ``cases`` in one test suite named ``suite``."""
    failures = sum(1 for c in cases if c.failures)
    errors = sum(1 for c in cases if c.errors and not c.failures)
    total_time = sum(c.time_s for c in cases)
    attrs = {"name": _clean(suite), "tests": str(len(cases)), "failures": str(failures), "errors": str(errors)}
    root = ET.Element("testsuites", {**attrs, "time": f"{total_time:.3f}"})
    suite_el = ET.SubElement(root, "testsuite", {**attrs, "skipped": "0", "time": f"{total_time:.3f}"})
    for case in cases:
        el = ET.SubElement(
            suite_el,
            "testcase",
            {"classname": _clean(case.classname), "name": _clean(case.name), "time": f"{case.time_s:.3f}"},
        )
        if case.failures:
            first = case.failures[0].splitlines()
            message = next((line[5:] for line in first if line.startswith("why: ")), first[0] if first else "failed")
            failure = ET.SubElement(el, "failure", {"message": _clean(message), "type": "failure"})
            failure.text = _clean("\n\n".join(case.failures))
        elif case.errors:
            first_error = (case.errors[0].splitlines() or ["error"])[0]
            error = ET.SubElement(el, "error", {"message": _clean(first_error), "type": "error"})
            error.text = _clean("\n".join(case.errors))
        if case.output:
            ET.SubElement(el, "system-out").text = _clean("\n".join(case.output))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(path: Path, cases: Sequence[Case], *, suite: str) -> Path:
    """Write the document to ``path`` (its folder is created) with the safe writer; returns the path.

    ``--junit`` often names a file in a folder others can write (a shared CI workspace): a symbolic
    link planted at ``path`` is replaced, never written through (:mod:`workload.safefile`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, to_xml(cases, suite=suite))
