"""The parse accumulator: what the file parsers read from one result directory, before naming.

Every parser writes into one :class:`RawResult` using the LoadGen detail-log key space
(``result_validity``, ``result_samples_per_second``, ``effective_min_duration_ms`` ...), so a value
seen in several files (metadata.json and mlperf_log_detail.txt) lands on the same key and becomes one
metric. ``priority`` decides who wins: the detail log beats metadata.json beats the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workload.metrics.model import AccuracyCheck, ParseIssue

Scalar = str | int | float | bool

# Source priorities: a higher number overwrites a lower one for the same key.
PRIO_SUMMARY = 1
PRIO_METADATA = 2
PRIO_DETAIL = 3


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

    def put(self, key: str, value: Scalar, prio: int) -> None:
        """Set ``key`` unless a higher-priority source already set it."""
        if self._prio.get(key, -1) <= prio:
            self.values[key] = value
            self._prio[key] = prio
            return
        # The detail log prints doubles to 6 significant digits (57609.3) where the summary prints
        # 2 decimals (57609.27): keep the more precise figure when both say the same number.
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

    @property
    def has_data(self) -> bool:
        """Whether any parser produced something a result can be built from."""
        return bool(self.values or self.accuracy or self.ident or self.accuracy_pass is not None)
