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


# workload/installers is a symlink to the top-level installers/ folder (pyproject maps it into the package);
# rglob does not follow it, so each file is read once, from installers/.
SOURCES = sorted([*ROOT.joinpath("workload").rglob("*.py"), *ROOT.joinpath("installers").rglob("*.py")])
MODULES = {_module_name(p) for p in SOURCES}


def _imports(path: Path) -> set[str]:
    """Every module of ours that ``path`` imports, at any depth of the file (lazy and TYPE_CHECKING imports
    count: they are dependencies of the design). ``from package import module`` names the module itself, not
    the package (whose ``__init__`` Python runs for any of its modules: that edge would make every package
    that re-exports its modules a circle)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "workload"}


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _banned(name: str, target: str) -> bool:
    """A ban on ``target`` covers it, its submodules and its round-named siblings: a ban on
    ``workload.mlperf.system_support`` also holds for ``system_support_v6`` and ``system_support_v51``."""
    return _under(name, target) or name.startswith(target + "_")


def test_the_rules_name_packages_that_exist() -> None:
    for prefix in [*FORBIDDEN, *(p for targets in FORBIDDEN.values() for p in targets)]:
        assert any(_under(m, prefix) for m in MODULES), f"ARCHITECTURE.md rule names a missing package {prefix}"


def test_a_ban_covers_submodules_and_round_named_siblings_only() -> None:
    ban = "workload.mlperf.system_support"
    assert _banned("workload.mlperf.system_support_v6", ban) and _banned("workload.mlperf.system_support_v51", ban)
    assert _banned("workload.mlperf.system_support", ban) and _banned("workload.mlperf.system_support.x", ban)
    assert not _banned("workload.mlperf.system", ban) and not _banned("workload.mlperf.systems", ban)
    assert not _banned("workload.hoststate", "workload.hosts")


def test_from_package_import_module_names_the_module(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from workload.mlperf import system_support_v6\nfrom workload import DISTRIBUTION\n")
    assert _imports(source) == {"workload.mlperf.system_support_v6", "workload"}


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
        if _banned(name, target)
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


# -- import circles ----------------------------------------------------------------------------------
#: The circles still in the package (issue 28 asks for none), each named by two of its modules and the
#: work that removes it. All three sit in workload/mlperf/, reshaped by issue 28 item 1 (a round = one
#: folder of data and small strategies). A circle not listed here fails the test; so does a listed one
#: that is gone, so the list can only shrink.
KNOWN_CIRCLES: dict[tuple[str, str], str] = {
    ("workload.mlperf.system_support", "workload.mlperf.system_support_v51"): (
        "issue 28 item 1: system_support imports the v5.1 strategy (prepare_by_id, lazily) that extends it"
    ),
}


def _import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (any depth, as :func:`_imports`), itself left out."""
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        module = _module_name(path)
        graph[module] = {name for name in _imports(path) if name in MODULES and name != module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circle_finder_finds_a_circle_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_but_the_known_ones() -> None:
    circles = _circles(_import_graph())
    unknown = [sorted(c) for c in circles if not any(a in c and b in c for a, b in KNOWN_CIRCLES)]
    gone = [pair for pair in KNOWN_CIRCLES if not any(pair[0] in c and pair[1] in c for c in circles)]
    assert not unknown, f"new import circles (break them; the test counts lazy and TYPE_CHECKING imports): {unknown}"
    assert not gone, f"these circles are gone: remove them from KNOWN_CIRCLES: {gone}"
    assert len(circles) == len(KNOWN_CIRCLES), [sorted(c) for c in circles]
