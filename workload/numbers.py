"""The one parser of numbers that come from outside: profiles, inventories, options, result files, run folders.

Python reads numbers without bounds where it can and crashes where it cannot: ``int()`` of a
5,000-digit text raises an undocumented ``ValueError`` (the 4,300-digit guard of CPython), ``json``
reads ``1e999`` and ``Infinity`` as ``inf`` (which then overflows a chart's axis or a
``timedelta``), and a 20-digit ``--limit`` overflows SQLite's integers. Everything that reads a
number from outside goes through here instead, and gets back a finite number within its bounds or
a :class:`NumberProblem` saying why in words, which the caller turns into its own error naming the
place (a file and a JSON path, an option, a line):

* :func:`parse_int` / :func:`parse_float`: one text (an option, a field of a line format);
* :func:`load_json`: a JSON document whose numbers are bounded as they are read: a number with too
  many digits or none that is finite is kept as an :class:`UnboundedNumber` (its text), so that
  :func:`unbounded_numbers` can name where it stands in the document.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

N = TypeVar("N", int, float)

#: digits of the longest number literal read (mantissa and exponent together): every count, size,
#: port, duration and measured value fits with room to spare; more is an error, never a crash
MAX_DIGITS = 64
#: the largest integer any count/size/limit option may hold (SQLite and PostgreSQL's BIGINT: 2**63-1)
MAX_INT = 2**63 - 1


class NumberProblem(ValueError):
    """A number from outside that cannot be used: the message says why (the caller names the place)."""


class UnboundedNumber(str):
    """The text of a JSON number :func:`load_json` refused (too many digits, not finite)."""

    __slots__ = ()


def _digits(text: str) -> int:
    return sum(c.isdigit() for c in text)


def parse_int(text: str, *, minimum: int | None = None, maximum: int | None = MAX_INT) -> int:
    """``text`` (ASCII digits, an optional sign, surrounding blanks) as an int within the bounds."""
    value = text.strip()
    body = value[1:] if value[:1] in "+-" else value
    if not (body.isascii() and body.isdigit()):
        raise NumberProblem(f"{text!r} is not a whole number")
    if len(body) > MAX_DIGITS:
        raise NumberProblem(f"a number of {len(body)} digits is out of range")
    return _bounded(int(value), minimum, maximum, text)


def parse_float(text: str, *, minimum: float | None = None, maximum: float | None = None) -> float:
    """``text`` as a finite float within the bounds (``nan``, ``inf`` and overflowing values refused)."""
    value = text.strip()
    if not value.isascii() or _digits(value) > MAX_DIGITS:
        raise NumberProblem(f"{text[:40]!r} is not a number in range")
    try:
        number = float(value)
    except ValueError:
        raise NumberProblem(f"{text!r} is not a number") from None
    if not math.isfinite(number):
        raise NumberProblem(f"{text!r} is not a finite number")
    return _bounded(number, minimum, maximum, text)


def _bounded(number: N, minimum: N | None, maximum: N | None, text: str) -> N:
    if minimum is not None and number < minimum:
        raise NumberProblem(f"{text.strip()} is below the smallest allowed value, {minimum}")
    if maximum is not None and number > maximum:
        raise NumberProblem(f"{text.strip()} is above the largest allowed value, {maximum}")
    return number


def _json_int(text: str) -> int | UnboundedNumber:
    return UnboundedNumber(text) if len(text) > MAX_DIGITS else int(text)


def _json_float(text: str) -> float | UnboundedNumber:
    if _digits(text) > MAX_DIGITS:
        return UnboundedNumber(text)
    number = float(text)
    return number if math.isfinite(number) else UnboundedNumber(text)


def load_json(text: str | bytes, *, object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads`` whose numbers are bounded: refused ones are :class:`UnboundedNumber` (see the module).

    Raises ``ValueError`` (``json.JSONDecodeError``) for text that is not JSON, like ``json.loads``.
    """
    return json.loads(
        text,
        parse_int=_json_int,
        parse_float=_json_float,
        parse_constant=UnboundedNumber,  # NaN, Infinity, -Infinity
        object_pairs_hook=object_pairs_hook,
    )


def unbounded_numbers(value: Any, loc: list[str | int] | None = None) -> Iterator[tuple[list[str | int], str]]:
    """Every number :func:`load_json` refused (and every non-finite float), with its JSON path and why."""
    loc = [] if loc is None else loc
    if isinstance(value, UnboundedNumber):
        yield loc, _why(value)
    elif isinstance(value, float) and not math.isfinite(value):
        yield loc, f"{value!r} is not a finite number"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from unbounded_numbers(item, [*loc, str(key)])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from unbounded_numbers(item, [*loc, index])


def _why(text: UnboundedNumber) -> str:
    digits = _digits(text)
    if digits > MAX_DIGITS:
        return f"a number of {digits} digits is out of range"
    return f"{str(text)!r} is not a finite number"
