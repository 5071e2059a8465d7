"""The import rules of ARCHITECTURE.md, checked on the source tree (no imports executed)."""

from __future__ import annotations

import ast
import re
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
    # A round is pure: data and values in, ops out (the interpreter runs them); neither the transports, the steps,
    # the containers, nor the system support that runs its system check (system_support* by the prefix rule).
    "workload.mlperf.rounds": (
        "workload.hosts",
        "workload.engine",
        "workload.actions",
        "workload.steps",
        "workload.installers",
        "workload.mlperf.interpreter",
        "workload.mlperf.image",
        "workload.mlperf.container",
        "workload.mlperf.docker_ssh",
        "workload.mlperf.system_support",
    ),
    # The round data reader knows no round and no adapter: the rounds, gpuconfigs and settings read it.
    "workload.mlperf.round_spec": ("workload.mlperf.rounds", "workload.mlperf.settings", "workload.mlperf.gpuconfigs"),
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
        if isinstance(node, ast.ImportFrom) and (node.module or node.level):
            module = _absolute(path, node.module, node.level)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                found.add(submodule if submodule in MODULES else module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] == "workload"}


def _absolute(path: Path, module: str | None, level: int) -> str:
    """The module a ``from <dots><module> import`` in ``path`` names (``from . import configgen`` in a round folder's
    ``__init__.py`` is that folder's ``configgen``): relative imports are dependencies too."""
    if not level:
        return module or ""
    name = _module_name(path).split(".")
    package = name if path.name == "__init__.py" else name[:-1]
    base = package[: len(package) - level + 1]
    return ".".join([*base, *([module] if module else [])])


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _banned(name: str, target: str) -> bool:
    """A ban on ``target`` covers it, its submodules and its round-named siblings: a ban on
    ``workload.mlperf.system_support`` also holds for ``system_support_files`` and ``system_support_by_id``."""
    return _under(name, target) or name.startswith(target + "_")


def test_the_rules_name_packages_that_exist() -> None:
    for prefix in [*FORBIDDEN, *(p for targets in FORBIDDEN.values() for p in targets)]:
        assert any(_under(m, prefix) for m in MODULES), f"ARCHITECTURE.md rule names a missing package {prefix}"


def test_a_ban_covers_submodules_and_round_named_siblings_only() -> None:
    ban = "workload.mlperf.system_support"
    assert _banned("workload.mlperf.system_support_files", ban) and _banned("workload.mlperf.system_support_by_id", ban)
    assert _banned("workload.mlperf.system_support", ban) and _banned("workload.mlperf.system_support.x", ban)
    assert not _banned("workload.mlperf.system", ban) and not _banned("workload.mlperf.systems", ban)
    assert not _banned("workload.hoststate", "workload.hosts")


def test_from_package_import_module_names_the_module(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from workload.mlperf import system_support_files\nfrom workload import DISTRIBUTION\n")
    assert _imports(source) == {"workload.mlperf.system_support_files", "workload"}


def test_relative_imports_name_the_modules_they_reach() -> None:
    folder = ROOT / "workload" / "mlperf" / "rounds" / "v6_0"
    assert "workload.mlperf.rounds.v6_0.configgen" in _imports(folder / "systems.py")
    assert {"workload.mlperf.rounds.v6_0.configgen", "workload.mlperf.rounds.v6_0.systems"} <= _imports(
        folder / "__init__.py"
    )


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
# None (issue 28 item 1 removed the last three: rounds <-> settings, system_support <-> its v5.1 strategy,
# tuning <-> v6_systems). Measured by the graph below: every import of every module at any depth (lazy and
# TYPE_CHECKING imports count; relative ones resolved), strongly connected components of more than one module.


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


def test_no_import_circles() -> None:
    circles = _circles(_import_graph())
    assert not circles, f"import circles (break them; the test counts lazy and TYPE_CHECKING imports): {circles}"


# -- rounds: one folder each ---------------------------------------------------------------------------------
#: A harness round's name as code spells it: ``v6.1``/``6.1`` in text, ``v6_1``/``v61`` in a module name.
ROUND_TEXT = re.compile(r"^v?\d+\.\d$")
ROUND_NAME = re.compile(r"(^|_)v\d")
#: ``workload/mlperf/rounds/<round>/``: the only place that may name a round or branch on one.
ROUND_FOLDER = re.compile(r"^workload\.mlperf\.rounds\.v\d+_\d+(\.|$)")
#: (file, literal) -> why a comparison with a round-like literal there is not about a round.
NOT_ROUNDS: dict[tuple[str, str], str] = {
    ("workload/metrics/parsers/compliance.py", "99.9"): "the -99.9 suffix of a high-accuracy benchmark's name",
}


def _round_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, literal) of every comparison (``==``, ``in``, ...) one of whose sides holds a round-like literal."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [
                    (node.lineno, n.value)
                    for n in ast.walk(side)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and ROUND_TEXT.match(n.value)
                ]
    return found


def test_round_comparisons_are_found() -> None:
    tree = ast.parse('if self.round in ("v4.1", "v5.0"):\n    pass\nok = name == "6.1"\nfine = x == "0.999"\n')
    assert _round_comparisons(tree) == [(1, "v4.1"), (1, "v5.0"), (3, "6.1")]


def test_no_module_outside_a_round_folder_is_named_after_a_round() -> None:
    named = [
        m for m in sorted(MODULES) if not ROUND_FOLDER.match(m) and any(ROUND_NAME.search(p) for p in m.split("."))
    ]
    assert not named, f"round knowledge belongs in workload/mlperf/rounds/<round>/: {named}"


def test_nothing_defined_outside_a_round_folder_is_named_after_a_round() -> None:
    # functions, classes and assigned names (nearest_v60, V61Table, V61_ROUND were): name them by what they do
    found = []
    for path in SOURCES:
        if ROUND_FOLDER.match(_module_name(path)):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if ROUND_NAME.search(n.lower())]
    assert not found, "round knowledge belongs in workload/mlperf/rounds/<round>/:\n" + "\n".join(found)


def test_no_module_outside_a_round_folder_branches_on_a_round() -> None:
    found = []
    for path in SOURCES:
        if ROUND_FOLDER.match(_module_name(path)):
            continue
        where = str(path.relative_to(ROOT))
        for line, literal in _round_comparisons(ast.parse(path.read_text(encoding="utf-8"))):
            if (where, literal) not in NOT_ROUNDS:
                found.append(f"{where}:{line} compares with {literal!r}")
    assert not found, "move the round's knowledge into its round.json or folder:\n" + "\n".join(found)


def test_the_round_exceptions_are_still_needed() -> None:
    for where, literal in NOT_ROUNDS:
        assert (ROOT / where).exists(), where
        assert any(lit == literal for _, lit in _round_comparisons(ast.parse((ROOT / where).read_text()))), where
