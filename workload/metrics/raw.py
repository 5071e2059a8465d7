"""The parse accumulator: what the file parsers read from one result directory, before naming.

Every parser writes into one :class:`RawResult` using the LoadGen detail-log key space
(``result_validity``, ``result_samples_per_second``, ``effective_min_duration_ms`` ...), so a value
seen in several files (metadata.json and mlperf_log_detail.txt) lands on the same key and becomes one
metric. ``priority`` decides who wins: the detail log beats metadata.json beats the summary.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from workload.metrics.model import AccuracyCheck, ParseIssue

Scalar = str | int | float | bool

# Source priorities: a higher number overwrites a lower one for the same key.
PRIO_SUMMARY = 1
PRIO_METADATA = 2
PRIO_DETAIL = 3
_FLOAT_MAX = sys.float_info.max
#: :attr:`RawResult.runner` of a result written by ``workload.loadgen.runner`` (the LoadGenExecutor)
RUNNER_LOADGEN = "workload.loadgen.runner"
#: What :meth:`RawResult.load_json` returns for text that is not JSON (``None`` is JSON's null).
NOT_JSON: Any = object()


def finite(value: Scalar) -> bool:
    """Whether ``value`` is usable as a metric value: text, a bool, or a number that is a finite float.

    NaN and infinities (``nan`` in a summary, ``NaN``/``Infinity``/``1e999`` in JSON) and integers
    too large for a float would crash the arithmetic that explains a result, so they never get in.
    """
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -_FLOAT_MAX <= value <= _FLOAT_MAX
    return True


def finite_float(value: object) -> float | None:
    """``value`` as a finite float when it is a JSON number (not a bool), else None (NaN, inf, huge, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


@dataclass
class RawResult:
    """Mutable per-directory accumulator, filled by the parsers and read by :mod:`.build`."""

    directory: str
    values: dict[str, Scalar] = field(default_factory=dict)
    _prio: dict[str, int] = field(default_factory=dict)
    #: identity fields from file contents: model, benchmark_full, scenario, test_mode, system, config_name
    ident: dict[str, str] = field(default_factory=dict)
    _ident_prio: dict[str, int] = field(default_factory=dict)
    accuracy: list[AccuracyCheck] = field(default_factory=list)
    accuracy_pass: bool | None = None
    #: LoadGen's own words: "Recommendations:" lines, error and warning messages
    recommendations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: True when a summary printed "Scheduled samples per second" as the Server headline (LoadGen <= 4.0)
    scheduled_headline: bool = False
    files: list[str] = field(default_factory=list)
    #: a detail log was read: the summary then only refines the headline figures (its head section)
    detail_ok: bool = False
    issues: list[ParseIssue] = field(default_factory=list)
    #: what wrote the result: :data:`RUNNER_LOADGEN` when our LoadGen runner's ``effective_settings.json``
    #: is next to the logs (fixes then name profile parameters); None for anything else (NVIDIA harness ...)
    runner: str | None = None
    #: why an accuracy check failed besides its figure (accuracy.json ``problems``: unanswered samples ...)
    accuracy_problems: list[str] = field(default_factory=list)
    #: what to do about a failed check, in the checker's own words (accuracy.json ``fixes``); replaces the
    #: generic advice, which is about a model's numbers (the GPU qualification's checks are about GPUs)
    accuracy_fixes: list[str] = field(default_factory=list)
    #: (path, lines) of each accuracy.txt: read into figures once the round is known (``accuracy_txt.read_figures``)
    accuracy_texts: list[tuple[str, list[str]]] = field(default_factory=list)

    def put(self, key: str, value: Scalar, prio: int, path: str) -> None:
        """Set ``key`` (read from ``path``) unless a higher-priority source already set it.

        A number that is not finite (see :func:`finite`) is refused and recorded as an issue of ``path``.
        """
        if not finite(value):
            self._refuse(key, value, path)
            return
        if self._prio.get(key, -1) <= prio:
            self.values[key] = value
            self._prio[key] = prio
            return
        self._refine(key, value)

    def put_all(self, pairs: Iterable[tuple[str, Scalar]], prio: int, path: str) -> None:
        """:meth:`put` of each ``(key, value)`` in turn, with the same outcome.

        For the detail log's ~50 records per file: one call, and :func:`finite` inlined (a float is
        finite when ``x - x == 0``; an int when a float can hold it): the two calls per record were ~15 % of
        the serial parse time of bench/bench_results.py.
        """
        values, prios = self.values, self._prio
        for key, value in pairs:
            if isinstance(value, float):
                refused = value - value != 0.0  # NaN and infinities
            else:
                refused = isinstance(value, int) and not -_FLOAT_MAX <= value <= _FLOAT_MAX
            if refused:
                self._refuse(key, value, path)
            elif prios.get(key, -1) <= prio:
                values[key] = value
                prios[key] = prio
            else:
                self._refine(key, value)

    def _refuse(self, key: str, value: Scalar, path: str) -> None:
        text = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        self.issue(path, f"{key} is {text}, not a finite number; the value was ignored")

    def _refine(self, key: str, value: Scalar) -> None:
        """A lower-priority ``value`` for a key already set: kept only where it is the same number, more precise.

        The detail log prints doubles to 6 significant digits (57609.3) where the summary prints
        2 decimals (57609.27): keep the more precise figure when both say the same number.
        """
        old = self.values[key]
        if (
            isinstance(value, float)
            and isinstance(old, int | float)
            and not isinstance(old, bool)
            and f"{value:.6g}" == f"{float(old):.6g}"
        ):
            self.values[key] = value

    def put_ident(self, key: str, value: object, prio: int) -> None:
        """Set an identity field (ignores empty and non-string values)."""
        if isinstance(value, str) and value.strip() and self._ident_prio.get(key, -1) <= prio:
            self.ident[key] = value.strip()
            self._ident_prio[key] = prio

    def add_accuracy(self, check: AccuracyCheck) -> None:
        """Add an accuracy figure unless one with the same (case-insensitive) name is already there."""
        if all(c.name.lower() != check.name.lower() for c in self.accuracy):
            self.accuracy.append(check)

    def issue(self, path: str, problem: str) -> None:
        self.issues.append(ParseIssue(path=path, problem=problem))

    def load_json(self, path: str, text: str) -> Any:
        """``text`` (from ``path``) as JSON; :data:`NOT_JSON` after an issue saying it is not."""
        try:
            return json.loads(text)
        except ValueError as exc:
            self.issue(path, f"not valid JSON ({exc})")
            return NOT_JSON

    @property
    def has_data(self) -> bool:
        """Whether any parser produced something a result can be built from."""
        return bool(self.values or self.accuracy or self.ident or self.accuracy_pass is not None or self.accuracy_texts)
