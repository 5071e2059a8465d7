"""Which configs the harness has registered, read from its config files without importing them.

NVIDIA's configs are classes in ``configs/<model>/<Scenario>/__init__.py`` (and ``custom.py``), each
registered by a decorator and naming its system directly or through the class it inherits from::

    @ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99, PowerSetting.MaxP)
    class A100_SXM4_40GBx8(A100_SXM4_40GBx1):
        system = KnownSystem.A100_SXM4_40GBx8

    @ConfigRegistry.register(HarnessType.Custom, AccuracyTarget.k_99_9, PowerSetting.MaxP)
    class A100_SXM4_40GBx8_HighAccuracy(A100_SXM4_40GBx8):
        precision = "fp16"

The files are parsed (``ast``), not imported: that needs no harness runtime and does not depend on
the registry's Python API, which changes between releases; the decorator and ``system = KnownSystem.X``
convention is what every release and NVIDIA's own add_custom_system script use. Pure functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from workload.mlperf.catalog import WorkloadSetting


@dataclass(frozen=True)
class Registration:
    """One registered config: the ``KnownSystem`` member and the (harness, accuracy, power) setting."""

    system: str
    setting: WorkloadSetting


@dataclass
class _ClassInfo:
    bases: list[str]
    system: str | None
    setting: WorkloadSetting | None


def registrations(sources: Iterable[tuple[str, str]]) -> set[Registration]:
    """Registrations in config files given as (label, text), in import order (``__init__.py`` first).

    A class without its own ``system`` takes its base class's (looked up by name in the files given,
    later files seeing earlier ones, as ``from . import *`` makes them). ValueError naming the file
    when one is not valid Python.
    """
    classes: dict[str, _ClassInfo] = {}
    for label, text in sources:
        try:
            tree = ast.parse(text, filename=label)
        except SyntaxError as exc:
            raise ValueError(f"{label}: not valid Python (line {exc.lineno}: {exc.msg})") from None
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = _ClassInfo(
                    bases=[b.id for b in node.bases if isinstance(b, ast.Name)],
                    system=_own_system(node),
                    setting=_setting(node),
                )
    found: set[Registration] = set()
    for info in classes.values():
        if info.setting is None:
            continue
        system = _system(info, classes)
        if system is not None:
            found.add(Registration(system, info.setting))
    return found


def _system(info: _ClassInfo, classes: dict[str, _ClassInfo]) -> str | None:
    seen: set[int] = set()
    current: _ClassInfo | None = info
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if current.system is not None:
            return current.system
        current = classes.get(current.bases[0]) if len(current.bases) == 1 else None
    return None


def _own_system(node: ast.ClassDef) -> str | None:
    """``system = KnownSystem.X`` (or ``system: ... = KnownSystem.X``) in the class body."""
    for statement in node.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "system" for t in targets) and _is_member(value, "KnownSystem"):
            assert isinstance(value, ast.Attribute)
            return value.attr
    return None


def _setting(node: ast.ClassDef) -> WorkloadSetting | None:
    """The setting of an ``@ConfigRegistry.register(HarnessType.X, AccuracyTarget.Y, PowerSetting.Z)`` class."""
    for decorator in node.decorator_list:
        if not (
            isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "register"
            and isinstance(decorator.func.value, ast.Name)
            and decorator.func.value.id == "ConfigRegistry"
            and len(decorator.args) == 3
        ):
            continue
        harness, accuracy, power = decorator.args
        if (
            _is_member(harness, "HarnessType")
            and _is_member(accuracy, "AccuracyTarget")
            and _is_member(power, "PowerSetting")
        ):
            assert isinstance(harness, ast.Attribute)
            assert isinstance(accuracy, ast.Attribute)
            assert isinstance(power, ast.Attribute)
            return WorkloadSetting(harness.attr, accuracy.attr, power.attr)
    return None


def _is_member(node: ast.expr, enum: str) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == enum
