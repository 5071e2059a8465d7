"""The shape a JSON document must have before code walks it, declared as data and checked in one place.

A reader that does ``summary.get("results", [])`` and then ``entry["headline"]["value"]`` trusts
the file; a damaged or hand-edited one (``"results": 5``, ``"controller": [1]``) then ends in a
``TypeError`` far from the file. Readers of files from outside declare the shape they walk with
these values and call :func:`shape_problem` first: the first place that does not fit comes back as
(JSON path, what was expected), for an error naming the file and that path.

Shapes are permissive where readers are: a field of an object that is absent or ``null`` fits
(readers use their defaults); fields not declared are not checked. An item of an array or a value
of a map must have its shape (readers walk them: a ``null`` there is damage).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from workload.jsonloc import format_loc, json_type


@dataclass(frozen=True)
class Shape:
    """What a JSON value must be; build with the module's constants and functions."""

    kind: str  # "object", "map", "list", "number", "text", "scalar", "any"
    fields: Mapping[str, Shape] = field(default_factory=dict)
    item: Shape | None = None
    required: frozenset[str] = frozenset()
    #: null fits also as an item of an array or a value of a map
    nullable: bool = False


ANY = Shape("any")
#: a finite number (a boolean is not one)
NUMBER = Shape("number")
TEXT = Shape("text")
#: a text, number or boolean (shown as text)
SCALAR = Shape("scalar")
#: a text, number, boolean or null, wherever it stands
SCALAR_OR_NULL = Shape("scalar", nullable=True)


def obj(**fields: Shape) -> Shape:
    """An object whose named ``fields`` have these shapes (each may be absent or null)."""
    return Shape("object", fields=fields)


def needs(shape: Shape, *names: str) -> Shape:
    """``shape`` (an :func:`obj`) whose fields ``names`` must be present and not null."""
    return Shape(shape.kind, fields=shape.fields, item=shape.item, required=shape.required | frozenset(names))


def mapping(value: Shape) -> Shape:
    """An object of any keys whose every value has the shape ``value``."""
    return Shape("map", item=value)


def array(item: Shape) -> Shape:
    """A list whose every item has the shape ``item``."""
    return Shape("list", item=item)


_EXPECTED = {
    "object": "an object",
    "map": "an object",
    "list": "an array",
    "number": "a finite number",
    "text": "a string",
    "scalar": "a string, number or boolean",
}


def shape_problem(value: Any, shape: Shape) -> str | None:
    """``JSON.path: expected X, not Y`` for the first place of ``value`` that does not fit, or None."""
    for loc, problem in _problems(value, shape, []):
        return f"{format_loc(loc) or '(top level)'}: {problem}"
    return None


def _fits(value: Any, kind: str) -> bool:
    if kind == "object" or kind == "map":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "text":
        return isinstance(value, str)
    if kind == "scalar":
        return isinstance(value, str | int | float) and (not isinstance(value, float) or math.isfinite(value))
    return True


def _problems(
    value: Any, shape: Shape, loc: list[str | int], *, null_fits: bool = True
) -> Iterator[tuple[list[str | int], str]]:
    if (value is None and (null_fits or shape.nullable)) or shape.kind == "any":
        return
    if not _fits(value, shape.kind):
        yield loc, f"expected {_EXPECTED[shape.kind]}, not {json_type(value)}"
        return
    if shape.kind == "object":
        for name in sorted(shape.required):
            if value.get(name) is None:
                yield [*loc, name], "missing"
                return
        for name, sub in shape.fields.items():
            yield from _problems(value.get(name), sub, [*loc, name])
    elif shape.kind == "map" and shape.item is not None:
        for key, item in value.items():
            yield from _problems(item, shape.item, [*loc, str(key)], null_fits=False)
    elif shape.kind == "list" and shape.item is not None:
        for index, item in enumerate(value):
            yield from _problems(item, shape.item, [*loc, index], null_fits=False)
