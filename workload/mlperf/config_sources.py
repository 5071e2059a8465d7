"""Which config values each result of an MLPerf action runs with, recorded for the metrics (issue 18).

The system support of each round decides, per (scenario, benchmark), whether the harness runs NVIDIA's config for
the system it detected, one workload generated from ``gpuconfigs/`` (NVIDIA's values for this GPU, or another GPU's
or round's: *untuned*), or one the user registered. It records that here as a
:class:`~workload.metrics.config_source.ConfigSource` per (scenario, benchmark) (:data:`Sources`); the interpreter
writes it next to every result folder it keeps (:func:`write_sidecar`), from where the metrics layer puts it into
each metric's metadata. The functions here are pure but :func:`write_sidecar`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from workload.metrics.config_source import SIDECAR, ConfigSource
from workload.mlperf.catalog import benchmark_full
from workload.safefile import atomic_write_text

#: (scenario, benchmark) -> where that result's config values come from.
Sources = dict[tuple[str, str], ConfigSource]


def nvidia(
    scenarios: Iterable[str],
    benchmarks: Iterable[str],
    system: str,
    *,
    blocked: Mapping[tuple[str, str], str] | None = None,
    user: Iterable[tuple[str, str]] = (),
) -> Sources:
    """Every (scenario, benchmark) not ``blocked`` runs the harness's own config for ``system``.

    ``user``: the pairs whose config is one the user registered (not NVIDIA's), marked ``user``.
    """
    mine = set(user)
    out: Sources = {}
    for scenario in scenarios:
        for benchmark in benchmarks:
            key = (scenario, benchmark)
            if blocked and key in blocked:
                continue
            out[key] = (
                ConfigSource("user", system=system)
                if key in mine
                else ConfigSource("nvidia", system=system, tuned=True)
            )
    return out


def generated(system: str, origins: Sequence[str], untuned: str | None = None) -> ConfigSource:
    """Values workload wrote from gpuconfigs (``origins``: NVIDIA's files/classes); untuned with ``untuned``'s why."""
    return ConfigSource(
        "generated",
        system=system,
        tuned=not untuned,
        untuned_reason=untuned or None,
        origin=" + ".join(dict.fromkeys(o for o in origins if o)) or None,
    )


def user(system: str) -> ConfigSource:
    """Config files the user put under ``system`` themselves (workload wrote none of them)."""
    return ConfigSource("user", system=system)


def benchmark_of(model: str, accuracy: str) -> str:
    """The result benchmark (``llama2-70b-99.9``) of an accuracy target (``k_99``/``k_99_9``)."""
    return benchmark_full(model, "high_accuracy" if accuracy == "k_99_9" else "default")


def write_sidecar(folder: Path, benchmark: str, scenario: str, source: ConfigSource) -> Path:
    """Write ``source`` into the kept result folder ``folder`` (a local path); OSError when it cannot."""
    return atomic_write_text(folder / SIDECAR, source.to_json(benchmark, scenario))
