"""Whether NVIDIA's configs of a harness round tune this machine's GPU, and what a run does when they do not.

One rule (issue 18), asked by the planner (``plan`` shows its answer; ``apply`` plans with it too) and by the system
support at run time (``values_for`` of :mod:`~workload.mlperf.rounds.v5_1`,
:mod:`~workload.mlperf.system_support_by_id`, :mod:`~workload.mlperf.system_support_files`, the rounds' ``systems``
modules), so ``plan`` says what the run does:

* the round's gpuconfigs table has the GPU (nvidia-smi's name among a SKU's ``gpu_names``): NVIDIA's values for it,
  *tuned*;
* it has not, in a round whose harness runs only per-system configs (v5.1 on: a system without them runs NVIDIA's
  minimal settings or nothing), another table's values, *untuned*: v5.1 takes the last round that tunes the GPU
  (v5.0 for Hopper: ``rounds/v5_1/``); v6.0 the GPUs of its own table of the same architecture, the nearest in
  memory first, else the last round that tunes the GPU (Hopper: v5.0's fp8 values, never Blackwell's FP4;
  ``rounds/v6_0/systems.py``, :mod:`~workload.mlperf.gpu_architecture`); v6.1 the GPUs of its own table, nearest first.
  Only with ``RequireCustomSystemSupport=true``, and the generated files and the metrics metadata say so
  (``config_tuned=false``); without it the run is refused (:meth:`Tuning.refusal`), naming the last round that tunes
  the GPU. The user chooses; nothing untuned runs silently;
* v4.1 and v5.0 take nothing from elsewhere: a GPU their table lacks has no values (decided at run time).

Pure: the tables are read from ``gpuconfigs/`` (or given); nothing here touches a host.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from workload.errors import ProfileError
from workload.mlperf.gpu_architecture import architecture
from workload.mlperf.gpuconfigs import (
    GpuConfigTable,
    ResolvedConfig,
    gpu_count_problem,
    load_table,
    sku_memory_gib,
    spelled_as_in,
)
from workload.mlperf.gpuconfigs_parts import PartsTable, load_parts_table
from workload.mlperf.round_spec import builtin_specs
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import NotTuned, SystemFiles

#: GPUs NVIDIA stopped tuning, and the last round whose configs tune them (issue 18): ``last_tuning_of`` of the rounds'
#: data files, the newest round naming a family winning (v5.0's configs are the last with Hopper classes).
LAST_TUNED: dict[str, str] = {
    family: spec.name for spec in reversed(builtin_specs()) for family in spec.data.last_tuning_of
}
#: Where a round's untuned values come from for a GPU its table lacks (``untuned_from`` of its data file): the last
#: round that tunes the GPU (v5.1's Hopper fallback), the GPU of the round's own table of the same architecture nearest
#: in memory, else the last round that tunes the GPU (v6.0: a Hopper never gets Blackwell's values,
#: :mod:`~workload.mlperf.gpu_architecture`), or its own table's GPU nearest in memory (v6.1). Rounds not named take
#: nothing.
UNTUNED_FROM: dict[str, str] = {spec.name: spec.data.untuned_from for spec in builtin_specs() if spec.data.untuned_from}

Table = GpuConfigTable | PartsTable


def gpu_family(gpu_name: str) -> str | None:
    """``NVIDIA H200`` -> ``H200``; ``NVIDIA H100 80GB HBM3`` -> ``H100``; ``NVIDIA GH200 ...`` -> ``GH200``."""
    found = re.search(r"\b(GH200|H100|H200|H800|H20)\b", gpu_name, re.I)
    return found.group(1).upper() if found else None


def last_tuned_round(gpu_name: str) -> str | None:
    """The last round NVIDIA tuned this GPU in, when it is a GPU it no longer tunes (Hopper); else None."""
    family = gpu_family(gpu_name)
    return LAST_TUNED.get(family) if family else None


def nearest_by_memory(table: GpuConfigTable, gpu_memory_mib: int) -> list[str]:
    """The table's SKUs, the one nearest in memory to ``gpu_memory_mib`` first (ties: by name)."""
    return table.nearest_skus(gpu_memory_mib)


def load(harness_round: str) -> Table:
    """The shipped gpuconfigs table of ``harness_round``, read in the form its data file names (ProfileError for a
    round without one)."""
    ref = next((spec.data.gpuconfigs for spec in builtin_specs() if spec.name == harness_round), None)
    if ref is not None and ref.form == "parts":
        return load_parts_table(harness_round=harness_round)
    return load_table(harness_round=harness_round)


def has_table(harness_round: str) -> bool:
    """Whether the round's data file names a gpuconfigs table."""
    return any(spec.name == harness_round and spec.data.gpuconfigs is not None for spec in builtin_specs())


def same_architecture(table: Table, gpu_name: str, gpu_memory_mib: int) -> list[str]:
    """The table's SKUs of ``gpu_name``'s architecture, the nearest in memory first (none for an unknown GPU)."""
    arch = architecture(gpu_name)
    if arch is None:
        return []
    return [s for s in table.nearest_skus(gpu_memory_mib) if architecture(table.gpu_names_of(s)[0]) == arch]


def published_counts(table: Table, sku: str, model: str, scenario: str, accuracy: str) -> tuple[int, ...]:
    """The GPU counts NVIDIA publishes ``sku``'s (model, scenario, accuracy) config for in ``table`` (none: ())."""
    configs = table.configs_of(sku)
    counts = configs.get(spelled_as_in(configs, model), {}).get(scenario, {}).get(accuracy, {})
    return tuple(sorted(counts))


@dataclass(frozen=True)
class Tuning:
    """The rule's answer for one GPU in one round (see the module docstring)."""

    harness_round: str
    gpu_name: str
    #: The round's table has this GPU: NVIDIA's values for it.
    tuned: bool
    #: The round whose table gives the values (this round, or the last that tunes the GPU); None: no table has any.
    values_round: str | None
    #: The SKU whose values they are: this GPU's, or (v6.x, untuned) the one nearest in memory.
    sku: str | None
    #: The last round NVIDIA tunes the GPU in, for a GPU it no longer tunes.
    last_tuned: str | None
    #: The SKUs the round's table has (the GPUs its configs tune).
    round_skus: tuple[str, ...] = ()
    #: The (model, scenario, accuracy) asked about, when the GPU is tuned but NVIDIA publishes no such config for it.
    config: tuple[str, str, str] | None = None

    @property
    def refuses(self) -> bool:
        """Whether a run without RequireCustomSystemSupport is refused: only untuned values exist for the GPU."""
        return not self.tuned and self.values_round is not None

    def _untuned_values(self) -> str:
        if self.config is not None:
            return f"the values of NVIDIA's {self.sku} config of the same architecture"
        if self.values_round != self.harness_round:
            return f"{self.values_round}'s values for {self.gpu_name}"
        return f"the {self.harness_round} values of the GPUs it tunes, the nearest in memory first"

    def refusal(self) -> ProfileError:
        """The refusal of a run without RequireCustomSystemSupport (:attr:`refuses`), at ``plan`` and at run time."""
        if self.config is not None:
            model, scenario, accuracy = self.config
            return ProfileError(
                f"HarnessRound {self.harness_round}",
                f"NVIDIA's {self.harness_round} harness has no {model} {scenario} ({accuracy}) config for "
                f"{self.gpu_name}",
                hint=f"set RequireCustomSystemSupport=true to run it with {self._untuned_values()}, marked untuned",
            )
        problem = f"NVIDIA's {self.harness_round} harness has no tuned configs for {self.gpu_name}"
        if self.round_skus:
            problem += f" (its configs tune {', '.join(self.round_skus)})"
        if self.last_tuned:
            problem += f"; {self.last_tuned} is the last round that tunes it"
        last = (
            f"run a {self.last_tuned} checkout (parameter HarnessRound={self.last_tuned}), or "
            if self.last_tuned
            else ""
        )
        hint = (
            f"{last}set RequireCustomSystemSupport=true to run {self.harness_round} with configs generated from "
            f"{self._untuned_values()}, marked untuned"
        )
        return ProfileError(f"HarnessRound {self.harness_round}", problem, hint=hint)


def decide(
    harness_round: str,
    gpu_name: str,
    gpu_memory_mib: int = 0,
    *,
    tables: Mapping[str, Table] | None = None,
    config: tuple[str, str, str] | None = None,
) -> Tuning | None:
    """The rule for ``gpu_name`` in ``harness_round`` (None: the round has no gpuconfigs table).

    ``tables``: round -> table to use instead of the shipped one (tests, callers that hold one already).
    ``config``: (model, scenario, accuracy target) a run needs. For a GPU the round tunes but for which NVIDIA
    publishes no such config (v4.1: no A100_SXM4_40GB bert Server class), the same rule as for a GPU it does not
    tune: the values of the nearest GPU of the same architecture that has the config, untuned, only with
    RequireCustomSystemSupport (:attr:`Tuning.refuses`); none when no GPU of the architecture has it.
    """
    if not has_table(harness_round):
        return None
    given = dict(tables or {})

    def table_of(name: str) -> Table:
        if name not in given:
            given[name] = load(name)
        return given[name]

    table = table_of(harness_round)
    skus = table.sku_names()
    last = last_tuned_round(gpu_name)
    own = table.own_sku(gpu_name)
    if own is not None and (config is None or not table.per_config or published_counts(table, own, *config)):
        return Tuning(harness_round, gpu_name, True, harness_round, own, last, skus)
    if own is not None and config is not None:
        kin = [s for s in same_architecture(table, gpu_name, gpu_memory_mib) if published_counts(table, s, *config)]
        donor = kin[0] if kin else None
        return Tuning(harness_round, gpu_name, False, harness_round if donor else None, donor, last, skus, config)
    rule = UNTUNED_FROM.get(harness_round)
    if rule == "same architecture":
        kin = same_architecture(table, gpu_name, gpu_memory_mib)
        if kin:
            return Tuning(harness_round, gpu_name, False, harness_round, kin[0], last, skus)
        rule = "last tuned round"
    if rule == "nearest":
        nearest = table.nearest_skus(gpu_memory_mib)
        return Tuning(
            harness_round, gpu_name, False, harness_round if nearest else None, next(iter(nearest), None), last, skus
        )
    if rule == "last tuned round" and last is not None and has_table(last):
        older = table_of(last).own_sku(gpu_name)
        if older is not None:
            return Tuning(harness_round, gpu_name, False, last, older, last, skus)
    return Tuning(harness_round, gpu_name, False, None, None, last, skus)


def untuned_config(
    harness_round: str, table: GpuConfigTable, gpus: tuple[str, int, int], model: str, scenario: str, accuracy: str
) -> ResolvedConfig | None:
    """The config :func:`decide` gives a GPU the round tunes but publishes no (model, scenario, accuracy) config for:
    the nearest same-architecture GPU's, for this machine's GPU count (throughput scaled), with why it is untuned.
    ``gpus``: (nvidia-smi name, MiB, count). None when no GPU of the architecture has one (nothing is guessed)."""
    gpu_name, gpu_memory_mib, gpu_count = gpus
    tuning = decide(
        harness_round, gpu_name, gpu_memory_mib, tables={harness_round: table}, config=(model, scenario, accuracy)
    )
    if tuning is None or tuning.tuned or tuning.config is None or tuning.sku is None:
        return None
    donor = table.skus[tuning.sku]
    resolved = table.resolve(donor.gpu_names[0], gpu_count, model, scenario, high_accuracy=accuracy == "k_99_9")
    why = (
        f"NVIDIA's {harness_round} configs have no {model} {scenario} ({accuracy}) config for {gpu_name}; "
        f"values of {donor.sku} ({architecture(gpu_name)}, the nearest GPU of its architecture that has one: "
        f"{resolved.source()})"
    )
    return replace(resolved, untuned=why)


def untuned_reason(system: HostSystem, round_name: str, donor: str) -> str:
    """Why a generated config's values are untuned: the GPU has none in ``round_name``, these are ``donor``'s."""
    last = last_tuned_round(system.gpu_name)
    why = f"NVIDIA publishes no {system.gpu_name} config in {round_name}"
    if last:
        why += f" (the last round NVIDIA tunes it in is {last})"
    return f"{why}; values of {donor}, scaled to {system.gpu_count} GPUs"


def refuse_untuned(system: HostSystem, round_name: str, table: Table | None = None, what: str = "") -> NotTuned:
    """Untuned values were needed but not allowed: the round's refusal for a GPU it does not tune
    (:meth:`workload.mlperf.tuning.Tuning.refusal`, the one ``plan`` and the system check give), else (a GPU it tunes,
    lacking ``what``) why that config would be another GPU's."""
    tuning = decide(round_name, system.gpu_name, system.gpu_memory_mib, tables={round_name: table} if table else None)
    if tuning is not None and tuning.refuses:
        refusal = tuning.refusal()
        return NotTuned(f"{refusal.problem}: {refusal.hint}")
    return NotTuned(
        f"NVIDIA's {round_name} configs have no {system.gpu_name} {what} config".replace("  ", " ")
        + ": set RequireCustomSystemSupport=true to run it with another GPU's values, marked untuned"
    )


# ---- what plan shows -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScenarioValues:
    """Where one scenario's generated config takes its values from: gpuconfigs SKUs (none: no config for it)."""

    scenario: str
    skus: tuple[str, ...]
    tuned: bool
    scaled: bool = False


class SystemFilesMaker(Protocol):
    """A v6.x round's custom-system generator (``HarnessRound.system_files``): what the run writes, pure."""

    def __call__(
        self,
        system: HostSystem,
        model: str,
        scenarios: Sequence[str],
        accuracies: Sequence[str],
        *,
        allow_untuned: bool,
    ) -> SystemFiles: ...


@dataclass(frozen=True)
class PlannedValues:
    """What ``plan`` shows about the values: a phrase for the system check, a note when untuned, or the refusal."""

    values: str
    note: str | None = None
    refusal: ProfileError | None = None


def scenario_values(
    tuning: Tuning,
    system: HostSystem,
    model: str,
    scenarios: Sequence[str],
    accuracies: Sequence[str],
    *,
    generate: SystemFilesMaker | None = None,
    tables: Mapping[str, Table] | None = None,
) -> tuple[ScenarioValues, ...] | None:
    """Per scenario, whose values a generated config of this machine holds: what the run generates, by the same
    functions (``generate``: a v6.x round's ``system_files``; else the table's ``resolve``, as the v4.1-v5.1 system
    support does). None when the generator refuses the model (the run says why)."""
    if generate is not None:
        try:
            files = generate(system, model, scenarios, accuracies, allow_untuned=True)
        except ValueError:
            return None
        written = {scenario: provenance for scenario, _, provenance in files.provenance}
        return tuple(
            ScenarioValues(s, written[s].skus, written[s].tuned, written[s].scaled)
            if s in written
            else ScenarioValues(s, (), False)
            for s in scenarios
        )
    if tuning.values_round is None or tuning.sku is None:
        return tuple(ScenarioValues(s, (), False) for s in scenarios)
    table = dict(tables or {}).get(tuning.values_round) or load(tuning.values_round)
    assert isinstance(table, GpuConfigTable)
    out = []
    gpus = (system.gpu_name, system.gpu_memory_mib, system.gpu_count)
    for scenario in scenarios:
        resolved = []
        for accuracy in accuracies:
            high = accuracy == "k_99_9"
            if table.entry_problem(system.gpu_name, model, scenario, high_accuracy=high) is None:
                config: ResolvedConfig | None = table.resolve(
                    system.gpu_name, system.gpu_count, model, scenario, high_accuracy=high
                )
            else:  # the same rule as the run's (system_support, rounds/v5_1): another GPU's config, untuned
                config = untuned_config(tuning.values_round, table, gpus, model, scenario, accuracy)
            if config is not None and gpu_count_problem(config) is None:
                resolved.append(config)
        out.append(
            ScenarioValues(
                scenario,
                tuple(dict.fromkeys(c.sku for c in resolved)),
                tuning.tuned and not any(c.untuned for c in resolved),
                any(c.scaled_from for c in resolved),
            )
            if len(resolved) == len(accuracies)
            else ScenarioValues(scenario, (), False)
        )
    return tuple(out)


def _gpus(count: int) -> str:
    return f"{count} GPU" + ("" if count == 1 else "s")


def _phrase(values_round: str, group: Sequence[ScenarioValues], gpu_count: int) -> str:
    """One group of scenarios with the same source: ``NVIDIA's v6.0 B200_SXM_180GB values for Interactive, scaled
    to 8 GPUs`` (throughput scaled from the nearest published count, as the generated configs are)."""
    first = group[0]
    names = ", ".join(v.scenario for v in group)
    if not first.skus:
        return f"no values for {names}"
    skus = " + ".join(first.skus)
    whose = f"NVIDIA's {values_round} {skus} values" if first.tuned else f"{values_round}'s {skus} values"
    how = f"scaled to {_gpus(gpu_count)}" if any(v.scaled for v in group) else f"as published for {_gpus(gpu_count)}"
    return f"{whose} for {names}, {how}" + ("" if first.tuned else ", untuned")


def _own_configs(table: Table, tuning: Tuning, model: str, scenarios: Sequence[str], accuracies: Sequence[str]) -> str:
    """Without RequireCustomSystemSupport the harness runs its own configs: NVIDIA's for this GPU, where it has them
    (gpuconfigs/ holds NVIDIA's published values, so it says which scenarios and GPU counts those are)."""
    assert tuning.sku is not None
    counts = {
        s: sorted({c for a in accuracies for c in published_counts(table, tuning.sku, model, s, a)}) for s in scenarios
    }
    mine = [s for s in scenarios if counts[s]]
    rest = [s for s in scenarios if not counts[s]]
    text = f"the harness's own configs for this system; gpuconfigs/{tuning.harness_round} holds NVIDIA's {tuning.sku} "
    if mine:
        shown = ", ".join(f"x{c}" for c in sorted({c for s in mine for c in counts[s]}))
        text += f"{model} values for {', '.join(mine)} ({shown})" + (f", none for {', '.join(rest)}" if rest else "")
    else:
        text += f"{model} values for none of {', '.join(rest)}"
    return text


def plan_values(
    harness_round: str,
    system: HostSystem | None,
    model: str,
    scenarios: Sequence[str],
    accuracies: Sequence[str],
    *,
    custom: bool,
    generate: SystemFilesMaker | None = None,
    tables: Mapping[str, Table] | None = None,
) -> PlannedValues | None:
    """What ``plan`` shows about the config values of this machine (None: nothing known before the run).

    Nothing for a machine whose GPUs are unknown or absent, a round without a table, or a GPU no table has values
    for (the run decides). Otherwise :class:`PlannedValues`: without ``custom`` (RequireCustomSystemSupport) the
    configs NVIDIA publishes for the GPU, or, for a GPU the round does not tune, the refusal the run gives
    (:meth:`Tuning.refusal`); with it, whose values each scenario's generated config holds (``generate``: a v6.x
    round's ``system_files``, what the run writes) and, where they are not NVIDIA's for this GPU, a note saying they
    are marked untuned.
    """
    if system is None or system.gpu_count < 1 or not system.gpu_name:
        return None
    tuning = decide(harness_round, system.gpu_name, system.gpu_memory_mib, tables=tables)
    if tuning is None or tuning.values_round is None:
        return None
    if tuning.refuses and not custom:
        return PlannedValues("", refusal=tuning.refusal())
    if not custom:
        table = dict(tables or {}).get(harness_round) or load(harness_round)
        return PlannedValues(_own_configs(table, tuning, model, scenarios, accuracies))
    per = scenario_values(tuning, system, model, scenarios, accuracies, generate=generate, tables=tables)
    if per is None:
        return None
    groups: dict[tuple[tuple[str, ...], bool], list[ScenarioValues]] = {}
    for item in per:
        groups.setdefault((item.skus, item.tuned), []).append(item)
    values = "; ".join(_phrase(tuning.values_round, g, system.gpu_count) for g in groups.values())
    untuned = [v for v in per if v.skus and not v.tuned]
    if not untuned:
        return PlannedValues(values)
    donors = ", ".join(dict.fromkeys(sku for v in untuned for sku in v.skus))
    if tuning.tuned:
        why = f"NVIDIA's {harness_round} configs tune {system.gpu_name}, but gpuconfigs/{harness_round} has no "
        why += f"complete {tuning.sku} config of {model} " + ", ".join(v.scenario for v in untuned)
        source = f"{tuning.values_round}'s values of {donors}"
    else:
        why = f"NVIDIA's {harness_round} configs do not tune {system.gpu_name}"
        if tuning.last_tuned:
            why += f" ({tuning.last_tuned} is the last round that tunes it)"
        source = f"{tuning.values_round}'s values for " + (
            f"{system.gpu_name} ({donors})" if tuning.values_round != harness_round else donors
        )
    note = (
        f"{why}: the configs will be generated from {source} and marked untuned, in the files and in the metrics "
        "metadata (config_tuned=false)"
    )
    return PlannedValues(values, note=note)


__all__ = [
    "LAST_TUNED",
    "UNTUNED_FROM",
    "PlannedValues",
    "ScenarioValues",
    "SystemFilesMaker",
    "Tuning",
    "decide",
    "gpu_family",
    "last_tuned_round",
    "nearest_by_memory",
    "plan_values",
    "published_counts",
    "refuse_untuned",
    "same_architecture",
    "scenario_values",
    "sku_memory_gib",
    "untuned_config",
    "untuned_reason",
]
