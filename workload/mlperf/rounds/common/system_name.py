"""The per-system config layout's run rules (rounds whose ``system_support`` is ``by id`` or ``generated files``).

* A custom system is named by ``SYSTEM_NAME`` (NVIDIA's ``code/fields/general.py`` from v5.1 on): decided by the
  system check, so ``plan`` shows :data:`SYSTEM_PLACEHOLDER` where it goes.
* One ``--accuracy_target`` a harness run (``code/fields/meta.py``): the config versions asked for, one run per
  distinct target (:func:`targets`).
"""

from __future__ import annotations

from workload.mlperf.catalog import accuracy_target
from workload.mlperf.rounds.base import PlanInputs

#: What ``plan`` shows for SYSTEM_NAME before the system check decided it.
SYSTEM_PLACEHOLDER = "<system id from the system check>"


def system_variables(inputs: PlanInputs) -> dict[str, str]:
    """``SYSTEM_NAME`` for a custom system (RequireCustomSystemSupport), else nothing (NVIDIA's detection names it)."""
    if not inputs.params.RequireCustomSystemSupport:
        return {}
    return {"SYSTEM_NAME": inputs.system_name or SYSTEM_PLACEHOLDER}


def targets(inputs: PlanInputs) -> list[tuple[str, str]]:
    """(accuracy target, config version) per harness run: one ``--accuracy_target`` a run."""
    seen: dict[str, str] = {}
    for version in inputs.settings.config_versions:
        seen.setdefault(accuracy_target(version), version)
    return list(seen.items())
