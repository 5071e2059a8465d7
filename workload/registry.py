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
    from workload.steps import Step

#: Every step type this project ships: type name -> "module:Class".
STEP_TYPES: dict[str, str] = {
    # Dependencies (installers/).
    "FormatDisks": "installers.disks:FormatDisks",
    "MountDisks": "installers.disks:MountDisks",
    "GitRepoClone": "installers.git_clone:GitRepoClone",
    "NvidiaCudaInstallation": "installers.nvidia_cuda:NvidiaCudaInstallation",
    "DockerInstallation": "installers.docker:DockerInstallation",
    "NvidiaContainerToolkitInstallation": "installers.nvidia_container_toolkit:NvidiaContainerToolkitInstallation",
    # Actions (workload/actions/).
    "MLPerfExecutor": "workload.actions.mlperf_executor:MLPerfExecutor",
    "LoadGenExecutor": "workload.actions.loadgen_executor:LoadGenExecutor",
}


def known_types() -> list[str]:
    return sorted(STEP_TYPES)


def canonical_name(type_name: str, *, location: str) -> str:
    """The registered spelling of ``type_name`` or a ProfileError listing the known types."""
    by_lower = {known.lower(): known for known in STEP_TYPES}
    name = by_lower.get(type_name.strip().lower())
    if name is None:
        raise ProfileError(
            location,
            f"unknown step type {type_name!r}",
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
