"""Profile ``Type`` name -> step class, imported lazily.

Step modules may import heavy libraries (docker, onnxruntime), so nothing here is imported until a
profile names the type. Names are matched case-insensitively, like VirtualClient's component
type cache; an unknown name lists the known ones.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from workload.errors import ProfileError

if TYPE_CHECKING:
    from workload.steps import Step, StepKind

#: Every step type this project ships: type name -> "module:Class".
STEP_TYPES: dict[str, str] = {
    # Dependencies (installers/).
    "FormatDisks": "workload.installers.disks:FormatDisks",
    "MountDisks": "workload.installers.disks:MountDisks",
    "GitRepoClone": "workload.installers.git_clone:GitRepoClone",
    "NvidiaCudaInstallation": "workload.installers.nvidia_cuda:NvidiaCudaInstallation",
    "DockerInstallation": "workload.installers.docker:DockerInstallation",
    "NvidiaContainerToolkitInstallation": (
        "workload.installers.nvidia_container_toolkit:NvidiaContainerToolkitInstallation"
    ),
    # Actions (workload/actions/).
    "MLPerfExecutor": "workload.actions.mlperf_executor:MLPerfExecutor",
    "LoadGenExecutor": "workload.actions.loadgen_executor:LoadGenExecutor",
    "GpuQualifyExecutor": "workload.actions.gpu_qualify:GpuQualifyExecutor",
    # Monitors (workload/monitors/): background telemetry while the actions run.
    "NvidiaSmiMonitor": "workload.monitors.step:NvidiaSmiMonitor",
}


#: Where each shipped type belongs in a profile (an installer under Dependencies, an executor under
#: Actions). Types not listed here (test steps) may appear in either section.
STEP_KINDS: dict[str, StepKind] = {
    "FormatDisks": "dependency",
    "MountDisks": "dependency",
    "GitRepoClone": "dependency",
    "NvidiaCudaInstallation": "dependency",
    "DockerInstallation": "dependency",
    "NvidiaContainerToolkitInstallation": "dependency",
    "MLPerfExecutor": "action",
    "LoadGenExecutor": "action",
    "GpuQualifyExecutor": "action",
    "NvidiaSmiMonitor": "monitor",
}


def known_types() -> list[str]:
    return sorted(STEP_TYPES)


def step_kind(type_name: str) -> StepKind | None:
    """Where a registered type belongs ("dependency" or "action"), or None when it may go anywhere."""
    return STEP_KINDS.get(type_name)


def canonical_name(type_name: str, *, location: str) -> str:
    """The registered spelling of ``type_name`` or a ProfileError listing the known types."""
    by_lower = {known.lower(): known for known in STEP_TYPES}
    name = by_lower.get(type_name.strip().lower())
    if name is None:
        import difflib

        close = difflib.get_close_matches(type_name.strip().lower(), list(by_lower), n=1, cutoff=0.75)
        suggestion = f" (did you mean {by_lower[close[0]]!r}?)" if close else ""
        raise ProfileError(
            location,
            f"unknown step type {type_name!r}{suggestion}",
            hint="known types: " + ", ".join(known_types()),
        )
    return name


def step_class(type_name: str, *, location: str = "") -> type[Step]:
    """Import and return the class registered for ``type_name``."""
    name = canonical_name(type_name, location=location)
    module_name, _, attr = STEP_TYPES[name].partition(":")
    module = importlib.import_module(module_name)
    cls: type[Step] = getattr(module, attr)
    return cls
