"""The import rules of ARCHITECTURE.md, checked on the source tree (no imports executed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FOUNDATIONS = {
    "workload",
    "workload.commands",
    "workload.errors",
    "workload.exit_codes",
    "workload.params",
    "workload.resources",
    "workload.rundir",
    "workload.safefile",
    "workload.jsonkeys",
    "workload.numbers",
    "workload.jsonshape",
    "workload.jsonloc",
}

#: package prefix -> prefixes it must not import (ARCHITECTURE.md, "Import rules")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "workload.commands": (
        "workload.hosts",
        "workload.steps",
        "workload.engine",
        "workload.installers",
        "workload.metrics",
    ),
    "workload.errors": (
        "workload.hosts",
        "workload.steps",
        "workload.engine",
        "workload.installers",
        "workload.metrics",
    ),
    "workload.hosts": (
        "workload.steps",
        "workload.registry",
        "workload.engine",
        "workload.profile",
        "workload.actions",
        "workload.installers",
        "workload.metrics",
        "workload.history",
        "workload.report",
        "workload.facts",
        "workload.doctor",
    ),
    # The facts library sits on the transports and is shared by installers, actions and doctor:
    # it reads hosts and knows nothing of who reads it.
    "workload.facts": (
        "workload.steps",
        "workload.registry",
        "workload.engine",
        "workload.profile",
        "workload.actions",
        "workload.installers",
        "workload.mlperf",
        "workload.loadgen",
        "workload.metrics",
        "workload.history",
        "workload.report",
        "workload.doctor",
    ),
    "workload.doctor": ("workload.engine", "workload.profile", "workload.actions", "workload.metrics"),
    "workload.steps": (
        "workload.engine",
        "workload.profile",
        "workload.actions",
        "workload.installers",
        "workload.metrics",
    ),
    "workload.registry": ("workload.engine", "workload.profile", "workload.metrics"),
    "workload.installers": (
        "workload.engine",
        "workload.profile",
        "workload.actions",
        "workload.mlperf",
        "workload.loadgen",
        "workload.metrics",
        "workload.history",
        "workload.report",
        "workload.doctor",
    ),
    "workload.metrics": (
        "workload.hosts",
        "workload.steps",
        "workload.engine",
        "workload.profile",
        "workload.actions",
        "workload.installers",
        "workload.mlperf",
        "workload.facts",
    ),
    # Actions read what installers publish through declared exports (Step.exports), never their modules.
    "workload.actions": ("workload.installers", "workload.engine"),
    # The MLPerf harness support (rounds, ops, planner, interpreter) is below the actions that use it.
    "workload.mlperf": ("workload.actions", "workload.engine", "workload.profile", "workload.registry"),
    # A round adapter is pure: values in, ops out (the interpreter runs them).
    "workload.mlperf.rounds": (
        "workload.hosts",
        "workload.engine",
        "workload.actions",
        "workload.mlperf.interpreter",
        "workload.mlperf.image",
        "workload.mlperf.system_support",
        "workload.installers",
    ),
    "workload.history": (
        "workload.hosts",
        "workload.steps",
        "workload.engine",
        "workload.actions",
        "workload.installers",
    ),
    "workload.report": (
        "workload.hosts",
        "workload.steps",
        "workload.engine",
        "workload.actions",
        "workload.installers",
    ),
}

#: Split out of workload.engine (issue 14): forbidden wherever the engine is.
ENGINE_PARTS = ("workload.outcomes", "workload.stepdrive", "workload.interrupts")
for _prefix, _banned in FORBIDDEN.items():
    if "workload.engine" in _banned:
        FORBIDDEN[_prefix] = (*_banned, *ENGINE_PARTS)


def _module_name(path: Path) -> str:
    """The dotted name ``path`` installs as (``installers/x.py`` is ``workload.installers.x``, pyproject.toml)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "installers":
        parts.insert(0, "workload")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module of ours that ``path`` imports, at any depth of the file (lazy imports count)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "workload"}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


# workload/installers is a symlink to the top-level installers/ folder (pyproject maps it into the package);
# rglob does not follow it, so each file is read once, from installers/.
SOURCES = sorted([*ROOT.joinpath("workload").rglob("*.py"), *ROOT.joinpath("installers").rglob("*.py")])


def test_the_rules_name_packages_that_exist() -> None:
    modules = {_module_name(p) for p in SOURCES}
    for prefix in [*FORBIDDEN, *(p for targets in FORBIDDEN.values() for p in targets)]:
        assert any(_under(m, prefix) for m in modules), f"ARCHITECTURE.md rule names a missing package {prefix}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path) -> None:
    module = _module_name(path)
    imported = _imports(path)
    broken = [
        f"{module} imports {name} ({prefix} may not import {target})"
        for prefix, targets in FORBIDDEN.items()
        if _under(module, prefix)
        for name in imported
        for target in targets
        if _under(name, target)
    ]
    if module not in ("workload.__main__",) and not _under(module, "workload.cli"):
        broken += [f"{module} imports the CLI ({name})" for name in imported if _under(name, "workload.cli")]
    loadgen_allowed = FOUNDATIONS | {"workload.loadgen"}
    if _under(module, "workload.loadgen"):
        broken += [
            f"{module} imports {name} (loadgen runs standalone: foundations only)"
            for name in imported
            if name != "workload" and not any(_under(name, allowed) for allowed in loadgen_allowed - {"workload"})
        ]
    assert not broken, "\n".join(broken)
