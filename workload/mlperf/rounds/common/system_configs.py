"""Custom systems with their own config folder (``"system_support"`` ``by id`` or ``generated files``: v5.1, v6.0):
nothing is registered, the system is ``SYSTEM_NAME`` and its ``configs/<SYSTEM>/<Scenario>/<benchmark>.py`` EXPORTS
files (:mod:`workload.mlperf.exports_config`); a run NVIDIA's ``code/main.py`` logs as falling back to
``configs/minimal`` is refused (:func:`minimal_fallback`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.custom_system import GeneratedFile
from workload.mlperf.exports_config import Provenance, config_path, render
from workload.mlperf.gpuconfigs import ResolvedConfig, SkuTable
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.rounds.base import HarnessRound
from workload.mlperf.rounds.common.system_name import SYSTEM_PLACEHOLDER
from workload.mlperf.system import HostSystem

#: Lines NVIDIA's v5.1 ``code/main.py`` logs when a run falls back to ``configs/minimal`` (or runs unregistered).
FALLBACK_MARKS = (
    "Loading minimal configs as default",
    "Attempting to load minimal config",
    "Runtime system not found in built-ins",
)


def minimal_fallback(output: str) -> list[str]:
    """The harness's own lines saying it ran (or would run) minimal settings instead of this system's configs."""
    return [line.strip() for line in output.splitlines() if any(mark in line for mark in FALLBACK_MARKS)]


class PerSystemConfigs(HarnessRound):
    """The custom-system files and run refusal of a round that keeps one config folder per system."""

    creates_config_dirs: ClassVar[bool] = True

    def refused_output(self, output: str) -> str | None:
        fallback = minimal_fallback(output)
        if not fallback:
            return None
        return f"the harness ran its minimal settings instead of this system's configs ({fallback[0]})"

    def custom_config_path(self, model: str, scenario: str) -> str:
        return config_path(SYSTEM_PLACEHOLDER, model, scenario)

    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        """Nothing is registered: the system is named by SYSTEM_NAME and its config folder."""
        return ""

    def custom_config(
        self,
        model: str,
        scenario: str,
        member: str,
        class_base: str,
        classes: Sequence[tuple[WorkloadSetting, ResolvedConfig]],
        version: HarnessVersion,
    ) -> GeneratedFile:
        return render(member, model, scenario, [(s, c, Provenance(c.source())) for s, c in classes])
