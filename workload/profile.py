"""Profiles: load VirtualClient-format JSON, resolve ``$.Parameters.X``, validate every step.

Everything here happens before any host is touched. Every problem becomes one
:class:`~workload.errors.ProfileError` that names the file and the JSON path, for example
``PERF-GPU-MLPERF.json: Actions[1].Parameters.Model: unknown model 'rnnt'``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workload.commands import Secrets
from workload.errors import ProfileError, UsageError
from workload.jsonloc import format_loc, json_type, key_path
from workload.numbers import load_json, unbounded_numbers
from workload.params import CaseInsensitiveDict, display_parameters, display_tree, secret_values
from workload.resources import profile_dir, shipped_profiles
from workload.safefile import read_regular_text
from workload.steps import Step, StepKind, StepParameters, unknown_parameter_problem
from workload.timespan import MAX_TIMESPAN_DAYS, format_timespan, parse_timespan

# Moved by job (issue 14): JSON locations (jsonloc.py) and .NET timespans (timespan.py); importable from here.
__all__ = ["MAX_TIMESPAN_DAYS", "format_timespan", "key_path", "parse_timespan"]

REFERENCE_PREFIX = "$.parameters."
#: the largest profile read (the shipped ones are a few KiB)
_MAX_PROFILE_BYTES = 16 * 1024 * 1024
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
    #: Problems that do not stop the run (a --parameters key nothing uses, a --scenarios name
    #: that matches nothing); the CLI prints them.
    warnings: list[str] = field(default_factory=list)
    #: VirtualClient's ``MinimumExecutionInterval``, in seconds: the least time from the start of
    #: one round of actions to the start of the next (0: no spacing).
    minimum_interval_s: float = 0.0
    #: The profile's ``Monitors`` (e.g. ``NvidiaSmiMonitor``): they set how telemetry is sampled.
    monitors: list[Step] = field(default_factory=list)
    #: The secret values of this profile (secret-looking parameters, URL passwords, also in the
    #: Description and Metadata): the run masks them in everything it displays or logs.
    secrets: Secrets = field(default_factory=Secrets)

    @property
    def shown_description(self) -> str:
        """The description as it may be printed (URL passwords and known secrets masked)."""
        return str(display_tree(self.description, "Description", self.secrets))

    @property
    def dependencies(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "dependency"]

    @property
    def actions(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "action"]

    def to_json(self) -> dict[str, Any]:
        """The resolved profile as written to the run folder (same format, references inlined).

        Secrets are masked (:func:`workload.params.display_value`): the file is a record to read
        and share, not a way to hand credentials on.
        """

        def shown(parameters: dict[str, Any]) -> dict[str, Any]:
            return display_parameters(parameters, self.secrets)

        def section(kind: StepKind) -> list[dict[str, Any]]:
            return [
                {"Type": s.type_name, "Parameters": shown(s.params.model_dump(exclude_none=True))}
                for s in self.steps
                if s.kind == kind
            ]

        document: dict[str, Any] = {"Description": display_tree(self.description, "Description", self.secrets)}
        if self.minimum_interval_s:
            document["MinimumExecutionInterval"] = format_timespan(self.minimum_interval_s)
        return document | {
            "Metadata": display_tree(self.metadata, secrets=self.secrets),
            "Parameters": shown(self.parameters),
            "Dependencies": section("dependency"),
            "Actions": section("action"),
        } | ({"Monitors": [
            {"Type": m.type_name, "Parameters": shown(m.params.model_dump(exclude_none=True))}
            for m in self.monitors
        ]} if self.monitors else {})  # fmt: skip


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
        text = read_regular_text(path, _MAX_PROFILE_BYTES)
    except OSError as exc:
        raise ProfileError(label, f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ProfileError(label, "is not UTF-8 text") from None
    if not text.strip():
        raise ProfileError(label, "the file is empty", hint="a profile is a JSON object with Description and steps")
    from workload.jsonkeys import DuplicateKeyError, refuse_duplicate_keys

    try:
        raw = load_json(text, object_pairs_hook=refuse_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{label}: line {exc.lineno} column {exc.colno}", f"invalid JSON: {exc.msg}") from None
    except DuplicateKeyError as exc:
        raise ProfileError(label, str(exc)) from None
    except RecursionError:
        raise ProfileError(label, "invalid JSON: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ProfileError(label, f"the top level must be a JSON object, not {json_type(raw)}")
    for loc, why in unbounded_numbers(raw):
        # Python's json reads 1e999 as inf (and NaN/Infinity literals) and crashes on 5,000 digits
        raise ProfileError(f"{label}: {format_loc(loc)}", why)
    try:
        document = ProfileDocument.model_validate(raw)
    except ValidationError as exc:
        raise _profile_error_from_validation(label, "", exc) from None
    return LoadedProfile(name=path.stem, path=path, document=document)


def _profile_error_from_validation(label: str, prefix: str, exc: ValidationError) -> ProfileError:
    """The first validation problem, as 'file: JSON.path: message' (plus a count of the others)."""
    errors = exc.errors()
    first = errors[0]
    loc = [p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    path = format_loc(loc, prefix)
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
    Scenario parameter), ``-name`` excludes actions or dependencies. An include list that
    matches no action is a :class:`UsageError` listing the profile's scenarios; a name that
    matches nothing while others do, and an override no step can see (not a profile parameter
    and not referenced), become :attr:`ResolvedProfile.warnings`.

    The values of secret-looking parameters and URL passwords are the resolved profile's
    :attr:`ResolvedProfile.secrets`, which the run masks in every log and display.
    """
    doc = loaded.document
    label = loaded.path.name
    if doc.ParametersOn:
        raise ProfileError(f"{label}: ParametersOn", "conditional parameters are not supported by this runner yet")
    params = CaseInsensitiveDict(doc.Parameters)
    for key, value in (overrides or {}).items():
        params[key] = value
    lookup = {"parameters": {k.lower(): v for k, v in params.to_dict().items()}}

    all_steps: list[Step] = []
    taken: set[str] = set()
    retired: list[tuple[str, str, str]] = []
    for section, kind in SECTIONS:
        for index, element in enumerate(getattr(doc, section)):
            try:
                step, took = _build_step(label, f"{section}[{index}]", kind, element, lookup, overrides or {}, retired)
            except ProfileError as exc:
                raise _with_current_form(exc, loaded.path, retired) from None
            all_steps.append(step)
            taken |= took
    warnings = _retired_warnings(label, retired)
    warnings += _unused_overrides(doc, {k: v for k, v in (overrides or {}).items() if k.lower() not in taken})
    # Monitors run in the background around the actions (workload.monitors), not as engine steps.
    monitors = [s for s in all_steps if s.kind == "monitor"]
    all_steps = [s for s in all_steps if s.kind != "monitor"]
    try:
        steps = _filter_scenarios(all_steps, scenarios, warnings)
    except UsageError as exc:
        asked = [s.strip() for s in scenarios if s.strip() and not s.strip().startswith("-")]
        meant = _scenarios_parameter_hint(doc, params, [s for s in all_steps if s.kind == "action"], asked)
        if meant is None:
            raise
        raise UsageError(exc.problem, hint=f"{exc.hint}; {meant}") from None
    secrets = _secrets_of(params.to_dict(), all_steps)
    secrets.add(*secret_values({"Description": doc.Description, "Metadata": doc.Metadata}))
    interval = 0.0
    if doc.MinimumExecutionInterval:
        try:
            interval = parse_timespan(doc.MinimumExecutionInterval)
        except ValueError as exc:
            raise ProfileError(f"{label}: MinimumExecutionInterval", str(exc)) from None
    return ResolvedProfile(
        name=loaded.name,
        path=loaded.path,
        description=doc.Description,
        metadata=dict(doc.Metadata),
        parameters=params.to_dict(),
        steps=steps,
        warnings=warnings,
        minimum_interval_s=interval,
        monitors=monitors,
        secrets=secrets,
    )


def _filter_scenarios(steps: list[Step], scenarios: Sequence[str], warnings: list[str]) -> list[Step]:
    """VirtualClient's ``--scenarios``: include actions by Scenario; ``-name`` excludes any step."""
    include = [s.strip() for s in scenarios if s.strip() and not s.strip().startswith("-")]
    exclude = [s.strip()[1:] for s in scenarios if s.strip().startswith("-") and s.strip()[1:]]
    if not include and not exclude:
        return steps
    action_scenarios = [s.params.Scenario for s in steps if s.kind == "action" and s.params.Scenario]
    all_scenarios = [s.params.Scenario for s in steps if s.params.Scenario]
    known = {name.lower() for name in all_scenarios}
    for name in exclude:
        if name.lower() not in known:
            warnings.append(
                f"--scenarios -{name}: no step has Scenario {name!r}, so nothing is excluded "
                f"(scenarios: {', '.join(all_scenarios) or 'none'})"
            )
    wanted = {name.lower() for name in include}
    unwanted = {name.lower() for name in exclude}
    kept: list[Step] = []
    for step in steps:
        scenario = (step.params.Scenario or "").lower()
        if scenario and scenario in unwanted:
            continue
        if step.kind == "action" and wanted and scenario not in wanted:
            continue
        kept.append(step)
    if include:
        action_known = {name.lower() for name in action_scenarios}
        missing = [name for name in include if name.lower() not in action_known]
        if len(missing) == len(include):
            raise UsageError(
                f"--scenarios {','.join(include)}: no action has "
                + ("this Scenario" if len(include) == 1 else "any of these Scenarios"),
                hint="the actions' scenarios are: " + (", ".join(action_scenarios) or "(none: no action has one)"),
            )
        for name in missing:
            warnings.append(
                f"--scenarios {name}: no action has Scenario {name!r} (actions: {', '.join(action_scenarios)})"
            )
    return kept


def _retired_warnings(label: str, retired: Sequence[tuple[str, str, str]]) -> list[str]:
    """One warning per retired parameter name, naming every place it was given."""
    places: dict[str, list[str]] = {}
    why: dict[str, str] = {}
    for name, where, reason in retired:
        places.setdefault(name, []).append(where)
        why[name] = reason
    return [f"{label}: {', '.join(where)}: {name} is ignored: {why[name]}" for name, where in places.items()]


def _with_current_form(exc: ProfileError, path: Path, retired: Sequence[tuple[str, str, str]]) -> ProfileError:
    """``exc``, and where the profile is an older VirtualClient form (it has retired parameters) that a
    shipped profile of the same name replaces, the one change that makes it current: that profile."""
    current = path.stem if path.stem in shipped_profiles() else None
    if not retired or current is None or path.resolve() == (profile_dir() / path.name).resolve():
        return exc
    names = ", ".join(sorted({name for name, _where, _why in retired}))
    note = (
        f"{path.name} is an older VirtualClient form of this profile ({names}); its current form ships "
        f"with workload: --profile {current}"
    )
    return ProfileError(exc.location, exc.problem, hint=f"{exc.hint}; {note}" if exc.hint else note)


def _scenarios_parameter_hint(
    doc: ProfileDocument, params: CaseInsensitiveDict, actions: Sequence[Step], names: Sequence[str]
) -> str | None:
    """What to pass instead when ``--scenarios`` names what the actions' ``Scenarios`` parameter lists.

    ``--scenarios`` picks actions by their VirtualClient ``Scenario``; the MLPerf/LoadGen scenarios
    (Offline, Server, ...) an action runs are its ``Scenarios`` parameter. When the names given are
    items of that parameter, the hint says how to keep just those: ``-p`` with one pair per global
    parameter the actions refer to (``-p "BertScenarios=Offline"``), or, where the value is written
    in the step itself, the actions whose ``Scenarios`` to set. None when no action lists them (an
    action that leaves ``Scenarios`` at its default, its model's scenarios, gets no hint).
    """
    wanted = {name.lower() for name in names if name}
    declared = {key.lower(): key for key in params.to_dict()}
    pairs: dict[str, str] = {}
    literal: list[str] = []
    for step in actions:
        value = getattr(step.params, "Scenarios", None)
        if not isinstance(value, str):
            continue
        kept = [item.strip() for item in value.split(",") if item.strip().lower() in wanted]
        if not kept:
            continue
        index = int(step.location.removeprefix("Actions[").rstrip("]"))
        raw = CaseInsensitiveDict(doc.Actions[index].Parameters).get("Scenarios")
        if isinstance(raw, str) and raw.lower().startswith(REFERENCE_PREFIX):
            source = raw[len(REFERENCE_PREFIX) :]
            pairs[declared.get(source.lower(), source)] = ",".join(kept)
        else:
            literal.append(step.location)
    if not pairs and not literal:
        return None
    shown = ",".join(names)
    text = f"{shown}: an MLPerf scenario of the actions' Scenarios parameter; to run only {shown}, "
    if pairs:
        joined = ",,,".join(f"{key}={value}" for key, value in pairs.items())
        text += f'pass -p "{joined}"' + (" and " if literal else "")
    if literal:
        text += f'set "Scenarios": "{shown}" in the Parameters of {", ".join(literal)}'
    return text


def _unused_overrides(doc: ProfileDocument, overrides: Mapping[str, str]) -> list[str]:
    """A warning for each ``--parameters`` key that is not a profile parameter and that no step refers to.

    VirtualClient adds such keys to the profile's Parameters without a word; they only reach a
    step through a ``$.Parameters.X`` reference, so one that nothing refers to changes nothing
    (usually a typo).
    """
    declared = {key.lower(): key for key in doc.Parameters}
    referenced = {
        value[len(REFERENCE_PREFIX) :].lower()
        for section, _ in SECTIONS
        for element in getattr(doc, section)
        for value in element.Parameters.values()
        if isinstance(value, str) and value.lower().startswith(REFERENCE_PREFIX)
    }
    warnings = []
    for key in overrides:
        if key.lower() in declared or key.lower() in referenced:
            continue
        close = difflib.get_close_matches(key.lower(), list(declared), n=1, cutoff=0.75)
        suggestion = f" (did you mean {declared[close[0]]!r}?)" if close else ""
        known = ", ".join(doc.Parameters) or "none"
        warnings.append(
            f"--parameters {key}: the profile has no parameter {key!r} and no step refers to it, "
            f"so it changes nothing{suggestion} (profile parameters: {known})"
        )
    return warnings


def _secrets_of(parameters: Mapping[str, Any], steps: Sequence[Step]) -> Secrets:
    """The secret-looking values and URL passwords of the parameters and steps, for logs and displays to mask."""
    values = [(key, value) for key, value in parameters.items()]
    for step in steps:
        values += list(step.params.model_dump(exclude_none=True).items())
    secrets = Secrets()
    for key, value in values:
        secrets.add(*secret_values(value, key))
    return secrets


def kind_count(steps: Sequence[Step], kind: StepKind) -> int:
    return sum(1 for s in steps if s.kind == kind)


_SECTION_OF: dict[str, str] = {"dependency": "Dependencies", "action": "Actions", "monitor": "Monitors"}
_ARTICLE = {"action": "an action", "dependency": "a dependency", "monitor": "a monitor"}


def _global_keys_taken(params: type[StepParameters], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``--parameters`` a step takes as its own: LoadGen keys (``bert.Server.target_qps``) for a step that
    accepts them as parameters named like the key (``StepParameters.accepts_extra``).

    VirtualClient hands ``--parameters`` only to the profile's global Parameters; a LoadGen key there
    would reach no step (no profile refers to ``$.Parameters.bert.Server.target_qps``), so such keys
    also go to every step that reads them; each step applies only those for its own model and scenario.
    """
    return {key: value for key, value in overrides.items() if key.count(".") == 2 and params.accepts_extra(key)}


def _build_step(
    label: str,
    location: str,
    kind: StepKind,
    element: ProfileElement,
    lookup: dict[str, Any],
    overrides: Mapping[str, Any] | None = None,
    retired: list[tuple[str, str, str]] | None = None,
) -> tuple[Step, set[str]]:
    """The step, and the (lower-cased) ``--parameters`` keys it took as its own parameters.

    A parameter the step's model lists as ``RETIRED`` is left out; ``(its name, JSON path, why)``
    is added to ``retired`` for the warning.
    """
    from workload.registry import canonical_name, step_class, step_kind

    type_name = canonical_name(element.Type, location=f"{label}: {location}.Type")
    belongs = step_kind(type_name)
    if belongs is not None and kind in _SECTION_OF and belongs != kind:
        article = _ARTICLE[belongs]
        raise ProfileError(
            f"{label}: {location}.Type",
            f"{type_name} is {article}: it belongs under {_SECTION_OF[belongs]}, not {_SECTION_OF[kind]}",
        )
    if element.Components:
        raise ProfileError(
            f"{label}: {location}.Components",
            "composite components (Components) are not supported by this runner",
        )
    prefix = f"{location}.Parameters"
    cls = step_class(type_name, location=f"{label}: {location}.Type")
    resolved = CaseInsensitiveDict()
    old_names = {name.lower(): (name, why) for name, why in cls.Parameters.RETIRED.items()}
    for key, value in element.Parameters.items():
        where = f"{label}: {key_path(prefix, key)}"
        if key in resolved:
            raise ProfileError(where, "parameter given twice (names ignore case)")
        if key.lower() in old_names and retired is not None:
            name, why = old_names[key.lower()]
            retired.append((name, key_path(prefix, key), why))
            continue
        problem = unknown_parameter_problem(cls.Parameters, key)
        if problem is not None:
            raise ProfileError(
                where,
                f"{problem} for {type_name}",
                hint=f"{type_name} parameters: " + ", ".join(_declared_parameters(cls.Parameters)),
            )
        resolved[key] = _resolve_value(value, lookup, where)
    taken = _global_keys_taken(cls.Parameters, overrides or {})
    for key, value in taken.items():
        resolved[key] = value  # the command line wins over the step's own value, as for global parameters
    for key, value in resolved.to_dict().items():
        _refuse_option_like(f"{label}: {key_path(prefix, key)}", value, element.Parameters.get(key))
    fields = {name.lower(): name for name in cls.Parameters.model_fields}
    data = {fields.get(k.lower(), k): v for k, v in resolved.to_dict().items()}
    try:
        params = cls.Parameters.model_validate(data)
        cls.check_parameters(params)
    except ValidationError as exc:
        raise _profile_error_from_validation(label, prefix, exc) from None
    except ValueError as exc:
        # check_parameters raises ValueError("Param: problem"); name the parameter in the path.
        param, sep, problem = str(exc).partition(": ")
        if sep and param.lower() in {key.lower() for key in taken}:
            raise ProfileError(f"--parameters {param} (for {label}: {location})", problem) from None
        if sep and (param.isidentifier() or param in resolved):
            raise ProfileError(f"{label}: {key_path(prefix, param)}", problem) from None
        raise ProfileError(f"{label}: {prefix}", str(exc)) from None
    return cls(params, location=location, kind=kind), {key.lower() for key in taken}


_NUMBER = re.compile(r"-\d+(\.\d*)?([eE][+-]?\d+)?")


def _refuse_option_like(location: str, value: Any, given: Any) -> None:
    """Refuse a text value that starts with ``-`` (a negative number is fine).

    Step parameters end up as arguments of git, curl, mkfs...; a value such as
    ``--upload-pack=...`` or ``-o/etc/passwd`` would be read there as an option. Commands also put
    ``--`` before their positional arguments, but no parameter of any step has a reason to start
    with ``-``, so it is refused here, before any host is touched.
    """
    if not isinstance(value, str) or not value.lstrip().startswith("-") or _NUMBER.fullmatch(value.strip()):
        return
    source = f" (from {given})" if isinstance(given, str) and given.lower().startswith(REFERENCE_PREFIX) else ""
    raise ProfileError(
        location,
        f"value starts with '-'{source}: a command would read it as an option, so it is refused",
        hint="give a URL, path or name that does not start with '-' (for a relative path write ./-name)",
    )


def _declared_parameters(params: type[StepParameters]) -> list[str]:
    """A step's own parameter names (the generic ones every step has come last, not at all here)."""
    generic = set(StepParameters.model_fields) - {"Scenario"}
    return [name for name in params.model_fields if name not in generic]


def _resolve_value(value: Any, lookup: dict[str, Any], location: str) -> Any:
    """Inline a whole-value ``$.Parameters.Name`` reference (case-insensitive), using jsonpath-ng."""
    if not isinstance(value, str) or not value.lower().startswith(REFERENCE_PREFIX):
        if isinstance(value, (dict, list)):
            raise ProfileError(location, f"must be a string, number or boolean, not {json_type(value)}")
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
