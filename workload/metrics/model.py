"""The metric data model: :class:`Metric`, :class:`AccuracyCheck`, :class:`BenchmarkResult`, :class:`ParseIssue`.

A ``Metric`` is one number with everything VirtualClient puts on a metric record (name, value, unit,
relativity, categorization, tool, scenario name, times, host) plus ``metadata`` carrying what VC loses:
the MLPerf scenario, the test mode, the config name, the source file. Models are frozen: once parsed,
a result is a value.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_serializer

MetadataValue = str | int | float | bool | None
Metadata = dict[str, MetadataValue]


class Relativity(StrEnum):
    """Which direction is better (VirtualClient's ``MetricRelativity``)."""

    HIGHER_IS_BETTER = "HigherIsBetter"
    LOWER_IS_BETTER = "LowerIsBetter"
    UNDEFINED = "Undefined"


class Categorization(StrEnum):
    """VirtualClient's ``metricCategorization`` for MLPerf: which test mode produced the metric."""

    PERFORMANCE = "PerformanceMode"
    ACCURACY = "AccuracyMode"


class Metric(BaseModel):
    """One measured or derived value.

    ``value`` is always a float: booleans are 1.0/0.0 with unit ``VALID/INVALID`` or ``PASS/FAIL``.
    ``verbosity`` follows VC (1 = headline, 3 = detail, 5 = diagnostic/settings).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value: float
    unit: str = ""
    relativity: Relativity = Relativity.UNDEFINED
    categorization: Categorization = Categorization.PERFORMANCE
    description: str = ""
    verbosity: int = 5
    tool_name: str = "MLPerf"
    tool_version: str | None = None
    scenario_name: str = ""
    start_time: datetime | None = None
    end_time: datetime | None = None
    host: str | None = None
    metadata: Metadata = Field(default_factory=dict)

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> Metric:
        """Build from ``values`` holding every field, already of the right type, without validation.

        For the parsers' hot loop only (pydantic's ``model_construct`` costs ~10x more); anything
        read from outside goes through normal validation (``model_validate_json`` in ``load_run``).
        """
        return _trusted_all(cls, (values,), _fields_of(cls))[0]

    @classmethod
    def trusted_all(cls, values: Iterable[dict[str, Any]]) -> list[Metric]:
        """:meth:`trusted` of each of ``values``, in one call: the output files of a large archive make
        hundreds of thousands of metrics, and two calls per metric were a measurable share of that."""
        return _trusted_all(cls, values, _fields_of(cls))


def _trusted_all(
    cls: type[_M], values: Iterable[dict[str, Any]], fields_set: set[str], _new: Any = object.__new__
) -> list[_M]:
    """Instances of ``cls`` whose ``__dict__`` is each of ``values`` (every field, right types), unvalidated.

    Sets the same four slots pydantic's own ``model_construct`` sets; ``fields_set`` is shared (never mutated).
    """
    made: list[_M] = []
    add, set_ = made.append, _set
    for each in values:
        instance = _new(cls)
        set_(instance, "__dict__", each)
        set_(instance, "__pydantic_fields_set__", fields_set)
        set_(instance, "__pydantic_extra__", None)
        set_(instance, "__pydantic_private__", None)
        add(instance)
    return made


_set = object.__setattr__


class AccuracyCheck(BaseModel):
    """One accuracy figure with its target: pass means ``threshold <= value (<= upper_limit)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    value: float | None
    threshold: float | None = None
    upper_limit: float | None = None
    passed: bool | None = None

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> AccuracyCheck:
        """Like :meth:`Metric.trusted`: every field in ``values``, already valid."""
        return _trusted_all(cls, (values,), _fields_of(cls))[0]


class BenchmarkResult(BaseModel):
    """One result: the files of one directory (metadata.json, LoadGen logs, accuracy files) merged.

    ``validity`` is ``VALID``/``INVALID`` for performance runs and None where LoadGen reports none
    (AccuracyOnly). ``accuracy_pass`` is None when no accuracy was measured or no target is known.
    ``headline`` is the official metric of the scenario (it is also in ``metrics``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    benchmark_full: str | None = None
    scenario: str | None = None
    test_mode: str | None = None
    system: str | None = None
    config_name: str | None = None
    validity: str | None = None
    accuracy_pass: bool | None = None
    accuracy_checks: list[AccuracyCheck] = Field(default_factory=list)
    headline: Metric | None = None
    invalid_reasons: list[str] = Field(default_factory=list)
    fixes: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    metrics: list[Metric] = Field(default_factory=list)
    source: str = ""
    files: list[str] = Field(default_factory=list)
    host: str | None = None
    loadgen_version: str | None = None

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> BenchmarkResult:
        """Like :meth:`Metric.trusted`: every field in ``values``, already valid (models inside too)."""
        return _trusted_all(cls, (values,), _fields_of(cls))[0]

    @field_serializer("metrics", mode="wrap")
    def _metrics_listed(self, value: list[Metric], handler: SerializerFunctionWrapHandler) -> Any:
        # a wire.LazyMetrics holds rows, not list items, which pydantic's serializer would read: give it the items
        return handler(value if type(value) is list else list(value))

    @property
    def label(self) -> str:
        """Short human name: ``[host] bert-99 Server PerformanceOnly``."""
        name = self.benchmark_full or self.model or PurePosixPath(self.source.replace("\\", "/")).name or "?"
        parts = [name, self.scenario or "?", self.test_mode or "?"]
        text = " ".join(parts)
        return f"[{self.host}] {text}" if self.host else text

    @property
    def is_performance(self) -> bool:
        """True for runs that measure performance (everything except AccuracyOnly)."""
        return self.test_mode != "AccuracyOnly"

    @property
    def failed(self) -> bool:
        """INVALID, unknown validity on a performance run, a failed accuracy check, or an AccuracyOnly
        run whose accuracy is unknown (no figure, or no target to judge it by)."""
        if self.accuracy_pass is False:
            return True
        if not self.is_performance:
            return self.accuracy_pass is None  # an accuracy run that could not be judged is not a pass
        # a performance run whose validity could not be read is not a pass
        return self.validity != "VALID"


_M = TypeVar("_M", bound=BaseModel)


@functools.cache
def _fields_of(cls: type[BaseModel]) -> set[str]:
    return set(cls.model_fields)


class ParseIssue(BaseModel):
    """A file that could not be (fully) parsed: ``path`` and the problem in words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"
