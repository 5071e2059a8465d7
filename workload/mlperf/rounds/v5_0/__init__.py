"""NVIDIA's v5.0 harness (``closed/NVIDIA`` of mlcommons/inference_results_v5.0).

The v4.1 layout (``make prebuild``/``build``/``generate_engines``/``run_harness``, Python config classes registered
with ``ConfigRegistry.register``, ``configs/<model>/<Scenario>/custom.py``, ``--config_ver``, ``--test_run``) with
one change this runner sees: custom systems are entries of ``code/common/systems/custom_list.json`` (nvmitten's
JSON, loaded by ``system_list.py``), no longer a Python ``custom_list.py``
(:mod:`workload.mlperf.custom_json`). New benchmarks (llama2-70b-interactive, llama3.1-405b, mixtral-8x7b, rgat)
and B200 systems; the last round whose configs tune Hopper. ``tests/fixtures/harness/rounds/v5.0/UPSTREAM.md`` names
the upstream file of each behaviour.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import ClassVar

from workload.mlperf import custom_json
from workload.mlperf.catalog import WorkloadSetting
from workload.mlperf.custom_system import CustomSystemError, GeneratedFile
from workload.mlperf.gpuconfigs import ResolvedConfig, SkuTable
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.common.config_version_runs import ConfigVersionRuns
from workload.mlperf.rounds.common.make_harness import HarnessSystemCheck, ImageFromRecipe, MakeSetup
from workload.mlperf.rounds.common.registered_classes import RegisteredConfigClasses
from workload.mlperf.rounds.common.results import LogDirResults
from workload.mlperf.system import HostSystem

#: The harness's own system detection (``scripts/get_system_id.py``, as v4.1's).
SYSTEM_ID_ARGV: tuple[str, ...] = ("python3", "-m", "scripts.get_system_id")


class V5_0Round(
    HarnessSystemCheck, ImageFromRecipe, MakeSetup, ConfigVersionRuns, RegisteredConfigClasses, LogDirResults
):
    """v5.0: v4.1's strategies (``rounds/common/``), custom systems in ``custom_list.json``."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)

    custom_list_path: ClassVar[str] = custom_json.CUSTOM_LIST_JSON
    system_id_argv: ClassVar[tuple[str, ...]] = SYSTEM_ID_ARGV
    registry: ClassVar[str | None] = "code/common/systems/custom_list.json, our entry"

    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        """Our entry as JSON text (``{"WL_<SKU>x<n>": <Description>}``); :meth:`merge_custom_list` puts it in."""
        key, description = custom_json.entry(system, sku)
        return json.dumps({key: description}, indent=2) + "\n"

    def custom_config(
        self,
        model: str,
        scenario: str,
        member: str,
        class_base: str,
        classes: Sequence[tuple[WorkloadSetting, ResolvedConfig]],
        version: HarnessVersion,
    ) -> GeneratedFile:
        """v4.1's ``custom.py`` (same registry and layout); its values name this round's table."""
        generated = super().custom_config(model, scenario, member, class_base, classes, version)
        text = generated.text.replace("# Values: gpuconfigs/", "# Values: gpuconfigs/v5.0/", 1)
        return GeneratedFile(generated.path, text)

    def merge_custom_list(self, existing: str | None, block: str) -> str:
        """custom_list.json with our entry of ``block`` set and every other entry kept."""
        try:
            ((key, description),) = json.loads(block).items()
        except (ValueError, AttributeError) as exc:
            raise CustomSystemError(f"not one custom_list.json entry: {exc}") from None
        return custom_json.merge(existing, key, description)


#: The adapter :func:`workload.mlperf.rounds.discover` finds in this folder.
ADAPTER = V5_0Round
