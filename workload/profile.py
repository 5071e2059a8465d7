"""Profiles: load VirtualClient-format JSON, resolve ``$.Parameters.X``, validate every step.

Everything here happens before any host is touched. Every problem becomes one
:class:`~workload.errors.ProfileError` that names the file and the JSON path, for example
``PERF-GPU-MLPERF.json: Actions[1].Parameters.Model: unknown model 'rnnt'``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workload.errors import ProfileError
from workload.params import CaseInsensitiveDict
from workload.resources import profile_dir, shipped_profiles
from workload.steps import Step, StepKind

REFERENCE_PREFIX = "$.parameters."
SECTIONS: tuple[tuple[str, StepKind], ...] = (
    ("Dependencies", "dependency"),
    ("Actions", "action"),
    ("Monitors", "monitor"),
)


class ProfileElement(BaseModel):
    """One element of Actions/Dependencies/Monitors: a component Type and its Parameters."""

    model_config = ConfigDict(extra="allow")

    Type: str = Field(min_length=1)
    Parameters: dict[str, Any] = Field(default_factory=dict)
    Metadata: dict[str, Any] = Field(default_factory=dict)
    Components: list[ProfileElement] = Field(default_factory=list)


class ProfileDocument(BaseModel):
    """The top level of a VirtualClient profile (``ExecutionProfile``)."""

    model_config = ConfigDict(extra="forbid")

    Description: str
    MinimumExecutionInterval: str | None = None
    Metadata: dict[str, Any] = Field(default_factory=dict)
    Parameters: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    ParametersOn: list[dict[str, Any]] = Field(default_factory=list)
    Actions: list[ProfileElement] = Field(default_factory=list)
    Dependencies: list[ProfileElement] = Field(default_factory=list)
    Monitors: list[ProfileElement] = Field(default_factory=list)


@dataclass
class LoadedProfile:
    """A profile read and schema-checked, not yet resolved."""

    name: str
    path: Path
    document: ProfileDocument


@dataclass
class ResolvedProfile:
    """A profile with every reference resolved and every step's parameters validated."""

    name: str
    path: Path
    description: str
    metadata: dict[str, Any]
    parameters: dict[str, Any]
    steps: list[Step] = field(default_factory=list)

    @property
    def dependencies(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "dependency"]

    @property
    def actions(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "action"]

    def to_json(self) -> dict[str, Any]:
        """The resolved profile as written to the run folder (same format, references inlined)."""

        def section(kind: StepKind) -> list[dict[str, Any]]:
            return [
                {"Type": s.type_name, "Parameters": s.params.model_dump(exclude_none=True)}
                for s in self.steps
                if s.kind == kind
            ]

        return {
            "Description": self.description,
            "Metadata": self.metadata,
            "Parameters": self.parameters,
            "Dependencies": section("dependency"),
            "Actions": section("action"),
        }


# -- locating and reading ------------------------------------------------------------------------
def find_profile(ref: str) -> Path:
    """A profile path from a file path or a shipped name (with or without ``.json``, any case)."""
    candidate = Path(ref).expanduser()
    if candidate.is_file():
        return candidate
    wanted = ref.lower().removesuffix(".json")
    for name in shipped_profiles():
        if name.lower() == wanted:
            return profile_dir() / f"{name}.json"
    if candidate.exists():
        raise ProfileError(ref, "is not a file")
    looks_like_path = "/" in ref or ref.endswith(".json")
    raise ProfileError(
        ref,
        "no such file" if looks_like_path else "no such shipped profile",
        hint="shipped profiles: " + ", ".join(shipped_profiles()) + " (or give a path to a .json file)",
    )


def load_profile(ref: str) -> LoadedProfile:
    """Read and schema-check a profile; raise ProfileError naming the place of any problem."""
    path = find_profile(ref)
    label = path.name
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ProfileError(label, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ProfileError(label, "is not UTF-8 text") from None
    if not text.strip():
        raise ProfileError(label, "the file is empty", hint="a profile is a JSON object with Description and steps")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{label}: line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise ProfileError(label, "invalid JSON: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ProfileError(label, f"the top level must be a JSON object, not {_json_type(raw)}")
    try:
        document = ProfileDocument.model_validate(raw)
    except ValidationError as exc:
        raise _profile_error_from_validation(label, "", exc) from None
    return LoadedProfile(name=path.stem, path=path, document=document)


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def _format_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _profile_error_from_validation(label: str, prefix: str, exc: ValidationError) -> ProfileError:
    """The first validation problem, as 'file: JSON.path: message' (plus a count of the others)."""
    errors = exc.errors()
    first = errors[0]
    loc = [p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    where = _format_loc(loc)
    path = f"{prefix}.{where}" if prefix and where else (prefix or where)
    message = first["msg"]
    if first["type"] == "missing":
        message = "required field is missing"
    elif first["type"] == "extra_forbidden":
        message = "unknown key (expected one of: " + ", ".join(ProfileDocument.model_fields) + ")"
    elif "input" in first and first["type"] not in ("value_error",):
        message = f"{message} (got {json.dumps(first['input'], default=str)[:60]})"
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    location = f"{label}: {path}" if path else label
    return ProfileError(location, message + more)


# -- resolving -----------------------------------------------------------------------------------
def resolve_profile(
    loaded: LoadedProfile,
    overrides: Mapping[str, str] | None = None,
    *,
    scenarios: Sequence[str] = (),
) -> ResolvedProfile:
    """Apply ``--parameters``, inline every ``$.Parameters.X``, validate every step's parameters.

    ``scenarios`` is VirtualClient's ``--scenarios`` filter: names include actions (by their
    Scenario parameter), ``-name`` excludes actions or dependencies.
    """
    doc = loaded.document
    label = loaded.path.name
    if doc.ParametersOn:
        raise ProfileError(f"{label}: ParametersOn", "conditional parameters are not supported by this runner yet")
    params = CaseInsensitiveDict(doc.Parameters)
    for key, value in (overrides or {}).items():
        params[key] = value
    lookup = {"parameters": {k.lower(): v for k, v in params.to_dict().items()}}

    include = {s.lower() for s in scenarios if s and not s.startswith("-")}
    exclude = {s[1:].lower() for s in scenarios if s.startswith("-")}

    steps: list[Step] = []
    for section, kind in SECTIONS:
        for index, element in enumerate(getattr(doc, section)):
            location = f"{section}[{index}]"
            step = _build_step(label, location, kind, element, lookup)
            scenario = (step.params.Scenario or "").lower()
            if scenario and scenario in exclude:
                continue
            if kind == "action" and include and scenario not in include:
                continue
            steps.append(step)
    if kind_count(steps, "monitor"):
        first = next(s for s in steps if s.kind == "monitor")
        raise ProfileError(f"{label}: {first.location}", "monitors are not supported by this runner yet")
    return ResolvedProfile(
        name=loaded.name,
        path=loaded.path,
        description=doc.Description,
        metadata=dict(doc.Metadata),
        parameters=params.to_dict(),
        steps=steps,
    )


def kind_count(steps: Sequence[Step], kind: StepKind) -> int:
    return sum(1 for s in steps if s.kind == kind)


def _build_step(label: str, location: str, kind: StepKind, element: ProfileElement, lookup: dict[str, Any]) -> Step:
    from workload.registry import canonical_name, step_class

    type_name = canonical_name(element.Type, location=f"{label}: {location}.Type")
    if element.Components:
        raise ProfileError(
            f"{label}: {location}.Components",
            "composite components (Components) are not supported by this runner",
        )
    resolved = CaseInsensitiveDict()
    for key, value in element.Parameters.items():
        if key in resolved:
            raise ProfileError(f"{label}: {location}.Parameters.{key}", "parameter given twice (names ignore case)")
        resolved[key] = _resolve_value(value, lookup, f"{label}: {location}.Parameters.{key}")
    cls = step_class(type_name, location=f"{label}: {location}.Type")
    fields = {name.lower(): name for name in cls.Parameters.model_fields}
    data = {fields.get(k.lower(), k): v for k, v in resolved.to_dict().items()}
    prefix = f"{location}.Parameters"
    try:
        params = cls.Parameters.model_validate(data)
        cls.check_parameters(params)
    except ValidationError as exc:
        raise _profile_error_from_validation(label, prefix, exc) from None
    except ValueError as exc:
        # check_parameters raises ValueError("Param: problem"); name the parameter in the path.
        param, sep, problem = str(exc).partition(": ")
        if sep and param.isidentifier():
            raise ProfileError(f"{label}: {prefix}.{param}", problem) from None
        raise ProfileError(f"{label}: {prefix}", str(exc)) from None
    return cls(params, location=location, kind=kind)


def _resolve_value(value: Any, lookup: dict[str, Any], location: str) -> Any:
    """Inline a whole-value ``$.Parameters.Name`` reference (case-insensitive), using jsonpath-ng."""
    if not isinstance(value, str) or not value.lower().startswith(REFERENCE_PREFIX):
        if isinstance(value, (dict, list)):
            raise ProfileError(location, f"must be a string, number or boolean, not {_json_type(value)}")
        return value
    name = value[len(REFERENCE_PREFIX) :]
    if not name or not all(part.replace("_", "").replace("-", "").isalnum() for part in name.split(".")):
        raise ProfileError(location, f"malformed parameter reference {value!r}", hint="write $.Parameters.Name")
    from jsonpath_ng.parser import parse as jsonpath_parse

    try:
        expression = jsonpath_parse(f"$.parameters.{_quote_path(name.lower())}")
    except Exception as exc:  # jsonpath-ng raises JsonPathParserError, or plain Exceptions for some inputs
        raise ProfileError(location, f"malformed parameter reference {value!r}: {exc}") from None
    matches = expression.find(lookup)
    if not matches:
        raise ProfileError(
            location,
            f"unresolved reference {value!r}: the profile has no parameter {name!r}",
            hint=f"add {name!r} to the profile's Parameters or pass --parameters {name}=VALUE",
        )
    return matches[0].value


def _quote_path(name: str) -> str:
    # Quote each segment so names with '-' parse as field names, not operators.
    return ".".join(f'"{segment}"' for segment in name.split("."))
