"""A gpuconfigs table of the ``parts`` form (``"form": "parts"`` in a round's ``round.json``; v6.1's): NVIDIA's
published values, file by file, and how a custom system's come from it.

v6.1 splits one (system, benchmark, scenario) over several files in ``configs/<model>/<SYSTEM>/<BACKEND>/<Scenario>/``
(``harness.py``, ``server.py``, the ``trtllm-serve`` options YAML, ``server-topology.json``), so an entry of
``gpuconfigs/v6.1/<SKU>.json`` is a list of *parts*, each with its kind, repository, commit, file and values::

    {"sku": "B300_SXM_270GB", "round": "v6.1", "system_prefix": "B300-SXM-270GB", "gpu_names": [...],
     "gpu_memory_gib": 270, "source": "...",
     "configs": {"llama2-70b": {"Offline": {"k_99": {"8": {"backend": "TRTLLM", "parts": [
         {"kind": "topology", "repo": "...", "commit": "...", "file": "closed/NVIDIA/configs/llama2_70b/...",
          "values": {"dp_multiplicity": 8, "gpus_per_dp_rank": 1, ...}}]}}}}}}

:meth:`PartsTable.resolve` gives every part a custom system needs for ``count`` GPUs of one kind: the GPU's own part
(nearest published count, throughput scaled: *tuned*), else the same part of the GPU with the nearest memory size
(*untuned*, source named), else nothing for that part (the caller fills the harness's defaults and says so).
Files are validated at load: an unknown benchmark, scenario, accuracy target, part kind, a file that is not the
entry's benchmark, scenario and backend, or values not in the form NVIDIA's files have (GPU counts and ports, env
YAMLs of strings, vLLM flags as words, an endpoints run type) is a ProfileError naming the file and key.

Kinds :func:`workload.mlperf.rounds.v6_1.systems.v61_files` does not write yet (``sflow``, ``endpoint``,
``visual_gen``: the VLLM and visual_gen backends of qwen3-vl and wan2.2, nv-sflow/Slurm runs in v6.1; whisper's
harness.py) are NVIDIA's values kept and validated for the runs that will use them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from workload.mlperf.gpuconfigs import read_table_folder
from workload.mlperf.round_spec import builtin_specs


def parts_round() -> str:
    """The round whose gpuconfigs table has the ``parts`` form (its ``round.json``)."""
    return next(s.name for s in builtin_specs() if s.data.gpuconfigs is not None and s.data.gpuconfigs.form == "parts")


def table_facts(harness_round: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """(benchmark -> its config folder, scenarios) of ``harness_round``'s parts table (``gpuconfigs`` of its
    ``round.json``); ValueError for a round without one."""
    for spec in builtin_specs():
        ref = spec.data.gpuconfigs
        if spec.name == harness_round and ref is not None and ref.form == "parts":
            return dict(ref.benchmark_folders), ref.scenarios
    raise ValueError(f"round: {harness_round!r} has no gpuconfigs table of the parts form")


#: The parts round's benchmarks (``--benchmarks`` names) and their config folder, and its scenarios (v6.1's).
BENCHMARKS, SCENARIOS = table_facts(parts_round())
#: What each part is: ``harness.py`` / ``server.py`` (EXPORTS dicts), the ``trtllm-serve`` options YAML and its env
#: YAML (``serve_env``), the IFB topology of ``server-topology.json`` or an nv-sflow IFB config (``topology``), the
#: variables of another nv-sflow config (``sflow``: qwen3vl_config.yaml, wan22_config.yaml), an MLCommons endpoints
#: client config (``endpoint``: endpoint*.yaml) and TRT-LLM's VisualGenArgs (``visual_gen``: visual_gen.yaml).
PART_KINDS = ("harness", "server", "trtllm_serve", "serve_env", "topology", "sflow", "endpoint", "visual_gen")
PartKind = Literal["harness", "server", "trtllm_serve", "serve_env", "topology", "sflow", "endpoint", "visual_gen"]
#: Backend folders of v6.1's configs (``configs/<model>/<SYSTEM>/<BACKEND>/<Scenario>/``).
BACKENDS = ("TRTLLM", "DYNAMO", "VLLM", "visual_gen")
#: Part values that count GPUs or ports: whole numbers of at least 1 wherever a part has them.
_POSITIVE_INTS = (
    "total_gpus",
    "gpus_per_node",
    "gpus_per_worker",
    "gpus_per_server",
    "num_servers",
    "dp_multiplicity",
    "gpus_per_dp_rank",
    "base_port",
)
#: Harness fields that scale with the GPU count (throughput).
THROUGHPUT = ("offline_expected_qps", "server_target_qps")
_FILE = re.compile(r"^closed/NVIDIA/configs/(?P<model>[^/]+)/[^/]+/(?P<backend>[^/]+)/(?P<scenario>[A-Za-z]+)/[^/]+$")


class Part(BaseModel):
    """One of NVIDIA's files and the values read from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: PartKind
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    file: str
    #: The dict ``EXPORTS`` maps the setting to (harness.py, server.py), when NVIDIA names it.
    export: str | None = None
    #: Values NVIDIA writes as ``paths.<BASE> / '<rel>'`` (nv_mlpinf.common.paths): value name -> BASE; the value
    #: holds ``<rel>``.
    paths: dict[str, str] | None = None
    values: dict[str, Any] = Field(min_length=1)

    @model_validator(mode="after")
    def _typed_values(self) -> Part:
        for name, base in (self.paths or {}).items():
            if name not in self.values:
                raise ValueError(f"paths.{name}: not one of the part's values")
            if not re.fullmatch(r"[A-Z][A-Z_]*", base):
                raise ValueError(f"paths.{name}: {base!r} is not a nv_mlpinf.common.paths name")
        for name in _POSITIVE_INTS:
            value = self.values.get(name)
            if name in self.values and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ValueError(f"values.{name}: {value!r} is not a whole number of at least 1")
        if self.kind == "serve_env" and not all(isinstance(v, str) for v in self.values.values()):
            raise ValueError("values: an env YAML maps names to strings")
        flags = self.values.get("vllm_flags")
        if flags is not None and not (isinstance(flags, list) and all(isinstance(f, str) for f in flags)):
            raise ValueError("values.vllm_flags: the vLLM command-line words, a list of strings")
        if self.kind == "endpoint":
            if self.values.get("type") not in ("offline", "online"):
                kind = self.values.get("type")
                raise ValueError(f"values.type: {kind!r} is not an endpoints run type (offline, online)")
            if not isinstance(self.values.get("settings"), dict):
                raise ValueError("values.settings: an endpoints config has a settings mapping")
        return self

    def source(self) -> str:
        return f"{self.repo}@{self.commit[:10]} {self.file}" + (f" ({self.export})" if self.export else "")


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["TRTLLM", "DYNAMO", "VLLM", "visual_gen"]
    parts: list[Part] = Field(min_length=1)


class PartsSku(BaseModel):
    """One file: a GPU SKU's published v6.1 configs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sku: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$")
    round: str
    #: NVIDIA's system id without the count (``B300-SXM-270GB`` -> ``B300-SXM-270GBx8``).
    system_prefix: str
    gpu_names: list[str] = Field(min_length=1)
    gpu_memory_gib: int = Field(gt=0)
    source: str
    configs: dict[str, dict[str, dict[str, dict[int, Entry]]]]
    unpublished: dict[str, dict[str, str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_keys(self) -> PartsSku:
        folders, known_scenarios = table_facts(self.round)
        for model, scenarios in self.configs.items():
            if model not in folders:
                raise ValueError(f"configs.{model}: not a {self.round} benchmark (known: {', '.join(folders)})")
            for scenario, targets in scenarios.items():
                if scenario not in known_scenarios:
                    known = ", ".join(known_scenarios)
                    raise ValueError(f"configs.{model}.{scenario}: unknown scenario (known: {known})")
                for accuracy, counts in targets.items():
                    where = f"configs.{model}.{scenario}.{accuracy}"
                    if accuracy not in ("k_99", "k_99_9"):
                        raise ValueError(f"{where}: unknown accuracy target (known: k_99, k_99_9)")
                    for count, entry in counts.items():
                        if count < 1:
                            raise ValueError(f"{where}.{count}: a GPU count is 1 or more")
                        for index, part in enumerate(entry.parts):
                            found = _FILE.match(part.file)
                            if not found or (found["model"], found["scenario"]) != (folders[model], scenario):
                                raise ValueError(
                                    f"{where}.{count}.parts.{index}.file: not configs/{folders[model]}/<SYSTEM>/"
                                    f"<BACKEND>/{scenario}/..."
                                )
                            if found["backend"] != entry.backend:
                                raise ValueError(
                                    f"{where}.{count}.parts.{index}.file: a {found['backend']} config in a "
                                    f"{entry.backend} entry"
                                )
        return self


@dataclass(frozen=True)
class ResolvedPart:
    """A part for this machine: values (throughput scaled to its count) and where they come from."""

    kind: str
    values: dict[str, Any]
    source: str
    tuned: bool
    note: str = ""
    #: The SKU whose entry the part is.
    sku: str = ""


@dataclass(frozen=True)
class ResolvedParts:
    sku: str
    model: str
    scenario: str
    gpu_count: int
    parts: dict[str, ResolvedPart] = field(default_factory=dict)

    @property
    def tuned(self) -> bool:
        return bool(self.parts) and all(p.tuned for p in self.parts.values())

    def sources(self) -> tuple[str, ...]:
        return tuple(f"{p.kind}: {p.source}{' ' + p.note if p.note else ''}" for p in self.parts.values())


@dataclass(frozen=True)
class PartsTable:
    tables: dict[str, PartsSku]
    folder: Path

    #: Parts are resolved one by one for a config (:meth:`resolve`): the GPU's own SKU is its values, each part
    #: taken from the nearest GPU where its own lacks it. The table interface :mod:`workload.mlperf.tuning` asks.
    per_config: ClassVar[bool] = False

    def own_sku(self, gpu_name: str) -> str | None:
        own = self.sku_for_gpu(gpu_name)
        return own.sku if own else None

    def sku_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.tables))

    def gpu_names_of(self, sku: str) -> Sequence[str]:
        return self.tables[sku].gpu_names

    def configs_of(self, sku: str) -> Mapping[str, Mapping[str, Mapping[str, Mapping[int, object]]]]:
        return self.tables[sku].configs

    def nearest_skus(self, gpu_memory_mib: int) -> list[str]:
        return [t.sku for t in self.nearest(gpu_memory_mib)]

    def sku_for_gpu(self, gpu_name: str) -> PartsSku | None:
        wanted = gpu_name.strip().lower()
        for table in self.tables.values():
            if any(name.lower() == wanted for name in table.gpu_names):
                return table
        return None

    def nearest(self, gpu_memory_mib: int) -> list[PartsSku]:
        """Every SKU, the one nearest in memory to ``gpu_memory_mib`` first (ties: by name)."""
        return sorted(self.tables.values(), key=lambda t: (abs(t.gpu_memory_gib * 1024 - gpu_memory_mib), t.sku))

    def resolve(
        self, gpu_name: str, gpu_memory_mib: int, count: int, model: str, scenario: str, accuracy: str = "k_99"
    ) -> ResolvedParts:
        """Every part published for (model, scenario, accuracy): this GPU's first, then the nearest GPU's."""
        own = self.sku_for_gpu(gpu_name)
        order = ([own] if own else []) + [t for t in self.nearest(gpu_memory_mib) if t is not own]
        parts: dict[str, ResolvedPart] = {}
        for table in order:
            counts = table.configs.get(model, {}).get(scenario, {}).get(accuracy)
            if not counts:
                continue
            # The nearest published count first: the machine's own, else the largest below, else the smallest above.
            for published in sorted(counts, key=lambda c: (c != count, c > count, -c if c < count else c)):
                for part in counts[published].parts:
                    if part.kind in parts:
                        continue
                    values = dict(part.values)
                    note = ""
                    if published != count:
                        for name in THROUGHPUT:
                            if name in values:
                                values[name] = round(values[name] * count / published, 6)
                        note = f"(scaled from x{published} to x{count})"
                    tuned = table is own
                    parts[part.kind] = ResolvedPart(part.kind, values, part.source(), tuned, note, table.sku)
        sku = own.sku if own else "(no v6.1 table)"
        return ResolvedParts(sku=sku, model=model, scenario=scenario, gpu_count=count, parts=parts)


def load_parts_table(folder: Path | None = None, harness_round: str | None = None) -> PartsTable:
    """Load and validate every ``*.json`` of a ``parts`` table (default: the shipped ``gpuconfigs/<round>/`` of the
    round whose table has that form); a file of another round is a ProfileError naming it."""
    harness_round = harness_round or parts_round()
    if folder is None:
        from workload.resources import gpuconfig_dir

        folder = gpuconfig_dir() / harness_round
    tables = read_table_folder(Path(folder), f"gpuconfigs/{harness_round}/", PartsSku, harness_round)
    return PartsTable(tables=tables, folder=Path(folder))
