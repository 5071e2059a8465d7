"""Custom systems registered with the harness (``"system_support": "registered"``: v4.1, v5.0): a marked block in
``code/common/systems/custom_list.py`` and a ``configs/<model>/<Scenario>/custom.py`` of config classes
(:mod:`workload.mlperf.custom_system`, run by :mod:`workload.mlperf.system_support`)."""

from __future__ import annotations

from collections.abc import Sequence

from workload.mlperf import custom_system
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.gpuconfigs import ResolvedConfig, SkuTable
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.rounds.base import HarnessRound
from workload.mlperf.system import HostSystem


class RegisteredConfigClasses(HarnessRound):
    """The custom-system files of a round whose harness registers systems and config classes (v4.1's format)."""

    def batch_size_per_benchmark(self, version: HarnessVersion) -> bool:
        """Whether the checkout's config classes spell ``gpu_batch_size`` as a dict per benchmark
        (``batch_size_per_benchmark_from`` of ``round.json``; older checkouts: one int)."""
        since = self.spec.data.batch_size_per_benchmark_from
        return since is None or version >= HarnessVersion.parse(since)

    def custom_config_path(self, model: str, scenario: str) -> str:
        return custom_system.custom_config_path(model, scenario)

    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        return custom_system.custom_list_block(system, sku)

    def custom_config(
        self,
        model: str,
        scenario: str,
        member: str,
        class_base: str,
        classes: Sequence[tuple[WorkloadSetting, ResolvedConfig]],
        version: HarnessVersion,
    ) -> custom_system.GeneratedFile:
        per_benchmark = self.batch_size_per_benchmark(version)
        return custom_system.custom_config(model, scenario, member, class_base, classes, per_benchmark)
