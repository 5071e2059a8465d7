"""The gpuconfigs table: NVIDIA's published config values per GPU SKU, model, scenario, accuracy target and GPU count.

One table per harness round (:data:`ROUNDS`): v4.1's files lie in ``gpuconfigs/`` itself, every later round's in
``gpuconfigs/<round>/`` (``gpuconfigs/v5.1/B200_SXM_180GB.json``); ``load_table(harness_round="v5.1")`` reads one round.
Each file names its round (``"round": "v5.1"``; absent = v4.1) and holds the values of that round's files only:
a GPU NVIDIA no longer tunes in a round has no file in it (the adapter decides what to do, never this module).

One JSON file per SKU in the round's folder (:func:`workload.resources.gpuconfig_dir`)::

    {"sku": "H100_SXM_80GB", "known_gpu": "H100_SXM_80GB", "gpu_names": ["NVIDIA H100 80GB HBM3"],
     "source": "...",
     "configs": {"bert": {"Server": {"k_99": {
         "1": {"file": "closed/NVIDIA/configs/bert/Server/__init__.py", "class": "H100_SXM_80GBx1",
               "fields": {"gpu_batch_size": 128, "server_target_qps": 7000, ...}},
         "8": {"file": "...", "class": "H100_SXM_80GBx8", "fields": {...}}}}}},
     "unpublished": {"gptj": {"SingleStream": "why NVIDIA has no such config"}}}

Every entry is one of NVIDIA's registered config classes of that round: ``fields`` are the values the
class sets itself or inherits from the classes between it and the scenario's ``<Scenario>GPUBaseConfig``
(which the generated class derives from, so it inherits the base values the same way). Throughput
(``offline_expected_qps``, ``server_target_qps``) is the class's own, for its GPU count.

From v6.0 an entry may be a harness-only config naming the ``atomic`` count whose config NVIDIA runs as its
servers (the atomic entry's fields lie under its own, :func:`entry_fields`), and ``not_used`` names NVIDIA's files of
the SKU the table does not carry (multi-node, one side of a disaggregated run, a benchmark not run here) with why.

A GPU count NVIDIA has no class for is derived from the nearest published count of the same accuracy
target (the largest below it, else the smallest above it): throughput scaled by the count ratio, every
other field as it is, and the result marked ``scaled_from``. A (model, scenario, accuracy) with no
published class at all has no values: the executor reports it and runs the rest. Every file is
validated at load: an unknown model, scenario, accuracy target or field is an error naming the file
and the key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, TypeVar

from pydantic import ValidationError

from workload.errors import ProfileError
from workload.mlperf.catalog import canonical_benchmark
from workload.mlperf.gpuconfig_rounds import (
    ACCURACY_TARGETS,
    DEFAULT_ROUND,
    ENTRY_KINDS,
    REQUIRED_BY_SCENARIO,
    ROUND_FILE_PATTERNS,
    ROUND_MODELS,
    ROUND_SCENARIOS,
    ROUNDS,
    THROUGHPUT_FIELDS,
)
from workload.mlperf.gpuconfigs_schema import (
    ConfigFields,
    Precision,
    PublishedConfig,
    SkuTable,
)

# The round facts and the file schema live in their own modules; they are named here too, where callers
# have always found them.
__all__ = [
    "ACCURACY_TARGETS",
    "DEFAULT_ROUND",
    "REQUIRED_BY_SCENARIO",
    "ROUNDS",
    "ROUND_FILE_PATTERNS",
    "ROUND_MODELS",
    "ROUND_SCENARIOS",
    "THROUGHPUT_FIELDS",
    "ConfigFields",
    "GpuConfigTable",
    "Precision",
    "PublishedConfig",
    "ResolvedConfig",
    "SkuTable",
    "TableModel",
    "deep_merge",
    "entry_fields",
    "entry_source",
    "gpu_count_problem",
    "load_table",
    "parallel_gpus",
    "read_table_file",
    "read_table_folder",
    "spelled_as_in",
]


class _TableFile(Protocol):
    """What a gpuconfigs file model has (the shipped tables' :class:`SkuTable` and the parts tables' ``PartsSku``)."""

    sku: str
    round: str

    @classmethod
    def model_validate(cls, obj: Any) -> Self: ...


#: A gpuconfigs file model (:func:`read_table_file`, :func:`read_table_folder`).
TableModel = TypeVar("TableModel", bound=_TableFile)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, dicts merged key by key (as NVIDIA's harness merges its override sections: v6.0
    ``code/main.py`` ``MainRunner._deep_merge``)."""
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        merged[key] = deep_merge(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def entry_fields(counts: dict[int, PublishedConfig], count: int) -> dict[str, Any]:
    """The fields of the entry for ``count``: its own, on top of its ``atomic`` entry's when it names one.

    A harness-only config (v6.0 GB200x4 Server llama2-70b) sets no engine values: NVIDIA runs it over servers of a
    smaller system's config (scaleout's atomic system), whose values lie under it here.
    """
    entry = counts[count]
    fields = entry.fields.set_fields()
    if entry.atomic is None:
        return fields
    return deep_merge(counts[entry.atomic].fields.set_fields(), fields)


def entry_source(counts: dict[int, PublishedConfig], count: int) -> str:
    """``<file> <class>`` of the entry for ``count``, with its atomic entry's file when it names one."""
    entry = counts[count]
    text = f"{entry.file} {entry.class_name}"
    if entry.exported:
        text += f" = {entry.exported}"
    if entry.atomic is not None:
        server = counts[entry.atomic]
        text += f", servers: {server.file} {server.class_name} (NVIDIA's atomic system, x{entry.atomic} each)"
    return text


@dataclass(frozen=True)
class ResolvedConfig:
    """The config fields for one system, and which of NVIDIA's classes they come from."""

    sku: str
    model: str
    scenario: str
    accuracy: str
    gpu_count: int
    fields: dict[str, Any]
    source_file: str
    source_class: str
    #: The GPU count of NVIDIA's class when this count has none of its own (throughput scaled).
    scaled_from: int | None = None
    #: The ``os.environ`` lines of NVIDIA's file (v5.1 deepseek-r1, v6.0), set before the harness reads the config.
    env: tuple[tuple[str, str], ...] = ()
    #: Fields NVIDIA writes as ``Precision`` members (:attr:`PublishedConfig.enums`).
    enums: tuple[str, ...] = ()
    #: Why these are another GPU's values (:func:`workload.mlperf.tuning.decide`); None: NVIDIA's for this GPU.
    untuned: str | None = None

    def source(self) -> str:
        """``closed/NVIDIA/configs/bert/Offline/__init__.py H100_SXM_80GBx8`` (+ ``scaled from x8``)."""
        text = f"{self.source_file} {self.source_class}"
        if self.scaled_from is not None:
            text += f" (scaled from x{self.scaled_from} to x{self.gpu_count}: throughput x{self.gpu_count}/"
            text += f"{self.scaled_from})"
        return text


def _parallelism(fields: dict[str, Any], name: str) -> int:
    """A parallelism field, plain (v4.1, v5.1) or inside ``trtllm_build_flags`` (v5.0); 1 when unset."""
    value = fields.get(name)
    if value is None:
        flags = fields.get("trtllm_build_flags") or {}
        value = flags.get(name)
    return int(value or 1)


def parallel_gpus(fields: dict[str, Any]) -> int:
    """GPUs one instance of the engine spans: tensor x pipeline parallelism (1 without either)."""
    return _parallelism(fields, "tensor_parallelism") * _parallelism(fields, "pipeline_parallelism")


def gpu_count_problem(config: ResolvedConfig) -> str | None:
    """Why ``config`` cannot run on its GPU count (an engine wider than the machine, or GPUs left over), or None."""
    width = parallel_gpus(config.fields)
    if width <= 1:
        return None
    tp = _parallelism(config.fields, "tensor_parallelism")
    pp = _parallelism(config.fields, "pipeline_parallelism")
    if config.gpu_count < width or config.gpu_count % width:
        return (
            f"{config.source()} needs a multiple of {width} GPUs (tensor_parallelism {tp} x pipeline_parallelism "
            f"{pp}); this machine has {config.gpu_count}"
        )
    return None


def sku_memory_gib(sku: str) -> int:
    """The memory a SKU's name says (``B200_SXM_180GB`` -> 180; 0 when it says none)."""
    found = re.search(r"(\d+)GB$", sku)
    return int(found.group(1)) if found else 0


@dataclass(frozen=True)
class GpuConfigTable:
    """All SKUs, by SKU name."""

    skus: dict[str, SkuTable]
    folder: Path
    #: The harness round of every file here (:data:`ROUNDS`).
    round: str = DEFAULT_ROUND

    def label(self, sku: str) -> str:
        """How messages name a SKU's file: ``gpuconfigs/H100_SXM_80GB.json``, ``gpuconfigs/v5.1/B200...json``."""
        sub = ROUNDS.get(self.round, "")
        return f"gpuconfigs/{sub + '/' if sub else ''}{sku}.json"

    #: One entry per (model, scenario, accuracy) config: a GPU the round tunes may lack one (another GPU of its
    #: architecture gives it, untuned). The table interface :mod:`workload.mlperf.tuning` asks (``parts`` tables too).
    per_config: ClassVar[bool] = True

    def own_sku(self, gpu_name: str) -> str | None:
        """The SKU of ``gpu_name`` in this table, or None."""
        return self.sku_for_gpu(gpu_name).sku if self.has_gpu(gpu_name) else None

    def sku_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.skus))

    def gpu_names_of(self, sku: str) -> Sequence[str]:
        return self.skus[sku].gpu_names

    def configs_of(self, sku: str) -> Mapping[str, Mapping[str, Mapping[str, Mapping[int, object]]]]:
        return self.skus[sku].configs

    def nearest_skus(self, gpu_memory_mib: int) -> list[str]:
        """The SKUs, the one nearest in memory to ``gpu_memory_mib`` first (by the memory its name says; ties: by
        name)."""
        return sorted(self.skus, key=lambda sku: (abs(sku_memory_gib(sku) - gpu_memory_mib / 1024), sku))

    def has_gpu(self, gpu_name: str) -> bool:
        """Whether any SKU of this round's table is the GPU named ``gpu_name`` (nvidia-smi's name)."""
        wanted = gpu_name.strip().lower()
        return any(name.lower() == wanted for t in self.skus.values() for name in t.gpu_names)

    def sku_for_gpu(self, gpu_name: str) -> SkuTable:
        """The SKU whose ``gpu_names`` holds ``gpu_name``; ProfileError listing SKUs and how to add one."""
        wanted = gpu_name.strip().lower()
        for table in self.skus.values():
            if any(name.lower() == wanted for name in table.gpu_names):
                return table
        raise ProfileError(
            "gpuconfigs" if self.round == DEFAULT_ROUND else f"gpuconfigs/{ROUNDS[self.round]}",
            f"no entry for the GPU {gpu_name!r} (SKUs in the table: {', '.join(sorted(self.skus)) or 'none'})",
            hint=(
                f"add a file {self.folder}/<SKU>.json with sku, known_gpu (the harness's KnownGPU name), "
                f"gpu_names ([{gpu_name!r}]), source and NVIDIA's configs per model, scenario, accuracy target "
                "and GPU count, each naming its file and class (see an existing file)"
            ),
        )

    def entry_problem(self, gpu_name: str, model: str, scenario: str, *, high_accuracy: bool = False) -> str | None:
        """Why the table has no values for this (GPU, model, scenario, accuracy target), or None when it has.

        The GPU itself must be in the table (:meth:`sku_for_gpu`).
        """
        table = self.sku_for_gpu(gpu_name)
        model = spelled_as_in(table.configs, model)
        accuracy = "k_99_9" if high_accuracy else "k_99"
        target = "99.9%" if high_accuracy else "99%"
        targets = table.configs.get(model, {}).get(scenario)
        if targets is None or accuracy not in targets:
            # spelled as the unpublished section spells it (a model with no entry at all is not in configs)
            why = table.unpublished.get(spelled_as_in(table.unpublished, model), {}).get(scenario)
            # Up to v5.0 a config is a registered class; from v5.1 an EXPORTS entry of a per-system file.
            kind = ENTRY_KINDS[self.round]
            return (
                f"NVIDIA's {self.round} configs have no {table.sku} {model} {scenario} {kind} for the {target} "
                f"target ({why or 'not published'}); {self.label(table.sku)} holds only NVIDIA's published values"
            )
        return None

    def resolve(
        self, gpu_name: str, gpu_count: int, model: str, scenario: str, *, high_accuracy: bool = False
    ) -> ResolvedConfig:
        """The fields for ``gpu_count`` GPUs of that SKU; ProfileError when the table has no such entry."""
        table = self.sku_for_gpu(gpu_name)
        problem = self.entry_problem(gpu_name, model, scenario, high_accuracy=high_accuracy)
        if problem is not None:
            raise ProfileError(self.label(table.sku), problem)
        accuracy = "k_99_9" if high_accuracy else "k_99"
        counts = table.configs[spelled_as_in(table.configs, model)][scenario][accuracy]
        base = _nearest_count(sorted(counts), gpu_count)
        entry = counts[base]
        fields = entry_fields(counts, base)
        if base != gpu_count:
            for name in THROUGHPUT_FIELDS:
                if name in fields:
                    fields[name] = round(fields[name] * gpu_count / base, 6)
        return ResolvedConfig(
            sku=table.sku,
            model=model,
            scenario=scenario,
            accuracy=accuracy,
            gpu_count=gpu_count,
            fields=fields,
            source_file=entry.file,
            source_class=entry_source(counts, base).removeprefix(f"{entry.file} "),
            scaled_from=None if base == gpu_count else base,
            env=tuple((entry.env or {}).items()),
            enums=tuple(entry.enums or ()),
        )


def spelled_as_in(configs: Mapping[str, Any], model: str) -> str:
    """``model`` as the round's files spell it: later rounds write ``llama3_1-8b`` for ``llama3.1-8b``."""
    if model in configs:
        return model
    canonical = canonical_benchmark(model)
    for key in configs:
        if canonical_benchmark(key) == canonical:
            return key
    return model


def _nearest_count(published: list[int], wanted: int) -> int:
    """The published count to derive ``wanted`` from: itself, else the largest below, else the smallest above."""
    if wanted in published:
        return wanted
    below = [c for c in published if c < wanted]
    return below[-1] if below else published[0]


def load_table(folder: Path | None = None, harness_round: str = DEFAULT_ROUND) -> GpuConfigTable:
    """Load and validate every ``*.json`` of one round's table.

    ``folder`` is the round's folder itself (default: the shipped ``gpuconfigs/`` plus the round's subfolder). A
    round this module has no table for, or a file of another round in the folder, is a ProfileError naming it.
    """
    if harness_round not in ROUNDS:
        raise ProfileError(
            "gpuconfigs", f"no table for the harness round {harness_round!r} (rounds: {', '.join(ROUNDS)})"
        )
    if folder is None:
        from workload.resources import gpuconfig_dir

        folder = gpuconfig_dir() / ROUNDS[harness_round] if ROUNDS[harness_round] else gpuconfig_dir()
    prefix = f"gpuconfigs/{ROUNDS[harness_round]}/" if ROUNDS[harness_round] else "gpuconfigs/"
    skus = read_table_folder(Path(folder), prefix, SkuTable, harness_round)
    return GpuConfigTable(skus=skus, folder=Path(folder), round=harness_round)


def read_table_folder(folder: Path, prefix: str, model: type[TableModel], harness_round: str) -> dict[str, TableModel]:
    """Every ``*.json`` of a round's table folder validated as ``model`` (:func:`read_table_file`), by SKU; a file
    whose ``sku`` is not its name or whose ``round`` is another round's is a ProfileError naming it (``prefix`` +
    the file name)."""
    tables: dict[str, TableModel] = {}
    for path in sorted(folder.glob("*.json")):
        label = f"{prefix}{path.name}"
        table = read_table_file(path, label, model)
        if table.sku != path.stem:
            raise ProfileError(f"{label}: sku", f"is {table.sku!r} but the file is named {path.stem!r}")
        if table.round != harness_round:
            raise ProfileError(f"{label}: round", f"is {table.round!r} but the file lies in the {harness_round} table")
        tables[table.sku] = table
    return tables


def read_table_file(path: Path, label: str, model: type[TableModel]) -> TableModel:
    """One ``gpuconfigs`` file validated as ``model``; ProfileError naming ``label`` (and the line or field)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(label, f"cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{label}: line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ProfileError(label, _first_problem(exc)) from None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown field"
    # Model-level validators put the key path in the message itself.
    return f"{where}: {message}" if where else message
