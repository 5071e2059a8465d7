"""A harness round's spec: the data file ``round.json`` of its folder, read and checked in one place.

Every round of NVIDIA's harness is one folder below ``workload/mlperf/rounds/`` (``v6_1/``): ``round.json`` says
what the round *is* (its versions and markers, benchmarks and scenarios, config-file layout, make target and
variables, results root, gpuconfigs table, tuning rule, clients), each value with the upstream file it was read from
(``sources``); the folder's ``__init__.py`` composes the round's behaviour from the shared strategies and names it
``ADAPTER``. This module knows no round: it reads whichever folders it is given.

Pure: reads the data files, imports nothing that touches a host. A damaged file is a ProfileError naming the file and
the key (these files ship with the package; a round folder given by a test is checked the same way).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from workload.errors import ProfileError
from workload.mlperf.harness import HarnessVersion

#: The data file that makes a folder a round.
SPEC_FILE = "round.json"
#: The folder of the rounds that ship with the package.
BUILTIN = Path(__file__).resolve().parent / "rounds"


class GpuConfigsRef(BaseModel):
    """The round's gpuconfigs table: its folder below ``gpuconfigs/`` and the form of its files."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: ``""``: ``gpuconfigs/`` itself (the files written before rounds had folders).
    folder: str
    #: ``entries``: one SKU's registered config classes/files per file (:mod:`workload.mlperf.gpuconfigs`);
    #: ``parts``: several files per (system, benchmark, scenario) (v6.1's layout).
    form: Literal["entries", "parts"]
    #: The regular expression NVIDIA's config file paths of this round match (``entries`` tables check each entry).
    file_pattern: str | None = None
    #: What one entry is called in messages: ``class`` (registered Python config classes) or ``config`` (a file).
    entry_kind: Literal["class", "config"] = "config"
    #: ``parts`` tables: each benchmark's config folder (``configs/<folder>/<SYSTEM>/...``) and the scenarios.
    benchmark_folders: dict[str, str] = Field(default_factory=dict)
    scenarios: tuple[str, ...] = ()


#: How a round's harness is made to run a machine it does not know: ``registered`` (a custom system registered with
#: the harness, config classes per scenario: v4.1, v5.0), ``by id`` (the check prints a system id; a custom system is
#: ``SYSTEM_NAME`` with its own config folder: v5.1), ``generated files`` (as ``by id``, its config files generated
#: from the round's gpuconfigs table by the round's ``systems`` module: v6.0, v6.1).
SystemSupportKind = Literal["registered", "by id", "generated files"]


class RoundData(BaseModel):
    """The schema of ``round.json`` (unknown keys refused: a misspelt key must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    round: str = Field(pattern=r"^v\d+\.\d+$")
    #: What the round is, in one line (shown by nothing; for the reader of the file).
    summary: str = ""
    #: The ``closed/NVIDIA/VERSION`` values this round runs.
    versions: tuple[str, ...] = Field(min_length=1)
    #: Planned for when nothing is known of the checkout (exactly one round says so).
    default: bool = False
    #: Paths (relative to closed/NVIDIA) whose presence tells this round's layout apart.
    markers: tuple[str, ...] = ()
    #: NVIDIA's ``--benchmarks`` names of the round, as its config files spell them.
    benchmarks: tuple[str, ...] = ()
    #: Whether a benchmark outside :attr:`benchmarks` is refused up front (False: the round's own check decides).
    restrict_benchmarks: bool = True
    #: The round's scenarios; empty: every scenario is kept (the round checks them itself).
    scenarios: tuple[str, ...] = ()
    #: The make target built once per harness commit after the setup stages; null: none (setup is the stages).
    build_target: str | None = None
    #: The harness's short-run flag (the ``Quick`` parameter); ``quick_flag_up_to``: VERSION -> the flag of that
    #: VERSION and older ones (v4.0 and before: ``--fast``; a checkout older than every round runs as the default).
    quick_flag: str = "--test_run"
    quick_flag_up_to: dict[str, str] = Field(default_factory=dict)
    #: The VERSION from which a config class's ``gpu_batch_size`` is a dict per benchmark (older: one int); null:
    #: always a dict (the rounds with registered config classes, ``"system_support": "registered"``).
    batch_size_per_benchmark_from: str | None = None
    #: ``make`` variables every harness target of the round gets.
    make_variables: dict[str, str] = Field(default_factory=dict)
    #: The folder (relative to closed/NVIDIA) every run's results directory is directly in.
    results_root: str = "build/logs"
    #: The ``Client`` values the round runs.
    clients: tuple[str, ...] = ("harness",)
    gpuconfigs: GpuConfigsRef | None = None
    system_support: SystemSupportKind = "registered"
    #: Where a round's untuned values come from for a GPU its table lacks (null: nowhere, decided at run time).
    untuned_from: Literal["last tuned round", "same architecture", "nearest"] | None = None
    #: GPU families whose last tuning NVIDIA published in this round (Hopper: v5.0).
    last_tuning_of: tuple[str, ...] = ()
    #: key of this file -> the upstream file (and lines) its value was read from.
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("versions")
    @classmethod
    def _versions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            HarnessVersion.parse(text)  # ValueError naming the text
        return value

    @field_validator("quick_flag_up_to")
    @classmethod
    def _up_to(cls, value: dict[str, str]) -> dict[str, str]:
        for text in value:
            HarnessVersion.parse(text)  # ValueError naming the text
        return value


@dataclass(frozen=True)
class RoundSpec:
    """One round's data, read from its folder."""

    folder: Path
    data: RoundData

    @property
    def name(self) -> str:
        return self.data.round

    @property
    def versions(self) -> tuple[HarnessVersion, ...]:
        return tuple(HarnessVersion.parse(v) for v in self.data.versions)

    @property
    def newest(self) -> HarnessVersion:
        return max(self.versions)

    def accepts(self, name: str) -> bool:
        """Whether ``name`` (``v4.1``, ``4.1``, ``v4.0``: any version it runs) names this round."""
        wanted = name.strip().lower().removeprefix("v")
        return wanted in {str(v).removeprefix("v") for v in self.versions} | {self.name.removeprefix("v")}


def read_spec(folder: Path | str) -> RoundSpec:
    """The spec in ``folder`` (a round's folder, or any file in it: ``read_spec(__file__)``)."""
    path = Path(folder)
    if path.is_file():
        path = path.parent
    return _read(path.resolve())


@cache
def _read(folder: Path) -> RoundSpec:
    file = folder / SPEC_FILE
    label = f"{folder.name}/{SPEC_FILE}"
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ProfileError(label, f"cannot read the round's data file: {exc}") from None
    try:
        return RoundSpec(folder, RoundData.model_validate(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ProfileError(f"{label}: {where}", str(first["msg"])) from None


def round_folders(*places: Path) -> list[Path]:
    """The round folders (those holding a ``round.json``) directly in the package's folder and in ``places``."""
    found: list[Path] = []
    for place in (BUILTIN, *places):
        found += sorted(p for p in place.iterdir() if p.is_dir() and (p / SPEC_FILE).is_file())
    return found


def newest_first(specs: Iterable[RoundSpec]) -> list[RoundSpec]:
    """``specs`` ordered newest round first (detection takes the first that recognises a checkout)."""
    return sorted(specs, key=lambda spec: spec.newest, reverse=True)


def builtin_specs() -> tuple[RoundSpec, ...]:
    """The specs of the rounds that ship with the package, newest first."""
    return tuple(newest_first(read_spec(folder) for folder in round_folders()))


def spec_named(name: str, specs: Iterable[RoundSpec] | None = None) -> RoundSpec:
    """The round ``name`` names (any version it runs); ValueError naming the known rounds when none does."""
    known = tuple(specs) if specs is not None else builtin_specs()
    for spec in known:
        if spec.accepts(name):
            return spec
    raise ValueError(f"unknown harness round {name!r} (known: {known_versions(known)})")


def known_versions(specs: Iterable[RoundSpec]) -> str:
    """Every VERSION some round runs, oldest first (``v4.0, v4.1, v5.0, ...``): what refusals name."""
    return ", ".join(str(v) for v in sorted({v for spec in specs for v in spec.versions}))
