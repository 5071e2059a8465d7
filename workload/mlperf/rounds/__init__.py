"""The harness rounds, found by listing their folders, and the one place that chooses among them.

Each round of NVIDIA's harness is one folder of this package (``v6_1/``): its data file ``round.json``
(:mod:`~workload.mlperf.round_spec`) and an ``__init__.py`` naming its adapter ``ADAPTER``. :func:`discover` lists the
folders (and any extra folder of rounds it is given: a round kept outside the package, as the tests' fake round) and
orders the adapters newest first; nothing else names a round.

Contract: :func:`choose_round` is called by the MLPerf action at ``plan`` and at ``apply`` with
what it read of the checkout (:class:`~workload.mlperf.rounds.base.Checkout`) and the step's
``HarnessRound`` parameter. A parameter value names a round (``v4.1``, ``4.1``) and overrides
detection; otherwise the first adapter (newest first) that
:meth:`~workload.mlperf.rounds.base.HarnessRound.recognises` the checkout is used. A checkout whose
VERSION is newer than every adapter's is refused (ProfileError naming the rounds this runner knows):
its layout, targets and config format are unknown, and guessing an older round's would run the
wrong commands. Any other checkout no adapter recognises (no VERSION yet, or an older round) gets
the default round (the one whose ``round.json`` says ``"default": true``), with a note when it has a VERSION.

Adding a round: a folder beside the others (see ``base.py`` and ARCHITECTURE.md, "Adding a harness round").
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from workload.errors import ProfileError
from workload.mlperf.round_spec import BUILTIN, known_versions, round_folders, spec_named
from workload.mlperf.rounds.base import Checkout, HarnessRound, PlanInputs

__all__ = [
    "DEFAULT",
    "ROUNDS",
    "Checkout",
    "Chosen",
    "HarnessRound",
    "PlanInputs",
    "choose_round",
    "default_round",
    "discover",
    "round_named",
]

Rounds = Sequence[type[HarnessRound]]


def _import_outside(folder: Path) -> ModuleType:
    """The round package in ``folder`` (outside this package), imported as a package of its own under a name unique
    to the folder, so that its relative imports find its own files and two copies never share modules."""
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    name = f"_workload_round_{digest}_{folder.name}"
    if name in sys.modules:
        return sys.modules[name]
    init = folder / "__init__.py"
    found = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
    if not init.is_file() or found is None or found.loader is None:
        raise ProfileError(f"{folder.name}/__init__.py", "missing: a round folder holds its adapter there")
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]  # a half-run module must not be found by the next discovery
        raise
    return module


def _load(folder: Path) -> type[HarnessRound]:
    """The ``ADAPTER`` of the round package in ``folder`` (a folder of this package is imported by its dotted name)."""
    inside = folder.parent == BUILTIN
    module = importlib.import_module(f"{__name__}.{folder.name}") if inside else _import_outside(folder)
    adapter = getattr(module, "ADAPTER", None)
    if not (isinstance(adapter, type) and issubclass(adapter, HarnessRound)) or "spec" not in vars(adapter):
        raise ProfileError(f"{folder.name}/__init__.py", "names no ADAPTER: a HarnessRound class with its own spec")
    return adapter


def discover(*places: Path) -> tuple[type[HarnessRound], ...]:
    """Every round: the folders of this package, then those directly in ``places``, newest first. Two folders
    claiming one VERSION are refused (detection would depend on the order folders are listed in)."""
    adapters = sorted((_load(folder) for folder in round_folders(*places)), key=lambda a: max(a.versions), reverse=True)
    seen: dict[str, str] = {}
    for adapter in adapters:
        for version in adapter.versions:
            if str(version) in seen:
                raise ProfileError(
                    f"{adapter.spec.folder.name}/round.json: versions",
                    f"{version} is also run by the round {seen[str(version)]}",
                )
            seen[str(version)] = adapter.name
    return tuple(adapters)


#: Every adapter shipped with the package, newest first (detection takes the first that recognises a checkout).
ROUNDS: tuple[type[HarnessRound], ...] = discover()


def default_round(rounds: Rounds = ROUNDS) -> type[HarnessRound]:
    """The round planned for when nothing is known of the checkout yet (``"default": true`` in its data file)."""
    defaults = [adapter for adapter in rounds if adapter.spec.data.default]
    if len(defaults) != 1:
        raise ProfileError("round.json: default", f"exactly one round must be the default, found {len(defaults)}")
    return defaults[0]


#: The round planned for when nothing is known of the checkout yet.
DEFAULT: type[HarnessRound] = default_round()


@dataclass(frozen=True)
class Chosen:
    """The round chosen and, when it was not recognised from the checkout, why (shown as a note)."""

    round: HarnessRound
    note: str | None = None


def round_named(name: str, rounds: Rounds = ROUNDS) -> type[HarnessRound]:
    """The adapter named ``name`` (``v4.1``, ``4.1``, ``v4.0``: any version it runs); ValueError if none."""
    spec = spec_named(name, [adapter.spec for adapter in rounds])
    return next(adapter for adapter in rounds if adapter.spec is spec)


def known_rounds(rounds: Rounds = ROUNDS) -> str:
    """Every VERSION some adapter runs, oldest first (``v4.0, v4.1, v5.0, ...``): what refusals name."""
    return known_versions(adapter.spec for adapter in rounds)


def choose_round(checkout: Checkout, requested: str | None = None, rounds: Rounds = ROUNDS) -> Chosen:
    """The round to plan and run with (see the module docstring for the rule); ``rounds``: :func:`discover`'s."""
    if requested:
        return Chosen(round_named(requested, rounds)())
    for adapter in rounds:
        if adapter.recognises(checkout):
            return Chosen(adapter())
    default = default_round(rounds)
    if checkout.version is None:
        return Chosen(default())
    newest = max(v for adapter in rounds for v in adapter.versions)
    if checkout.version > newest:
        raise ProfileError(
            "closed/NVIDIA/VERSION",
            f"the checkout is NVIDIA's harness {checkout.version}, newer than every round this runner knows "
            f"({known_rounds(rounds)})",
            hint="check out a round it knows (ResultsRepoUri/ResultsRepoCommit), or set the parameter HarnessRound "
            "to run this checkout as one of them",
        )
    return Chosen(
        default(),
        note=f"harness version {checkout.version} has no adapter; running it as {default.name} "
        "(set the parameter HarnessRound to choose one)",
    )


def markers(rounds: Rounds = ROUNDS) -> tuple[str, ...]:
    """Every path some adapter's detection looks at (read-only, relative to closed/NVIDIA)."""
    return tuple(dict.fromkeys(m for adapter in rounds for m in adapter.markers))
