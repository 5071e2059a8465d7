"""v5.0 custom systems: an entry of ``code/common/systems/custom_list.json`` (nvmitten's JSON of a ``Description``).

NVIDIA's v5.0 ``code/common/systems/system_list.py`` loads that file when it exists (``nvmitten.json_utils.load``),
refuses a key that names a built-in system (``KeyError: SystemEnum member <k> already exists``), gives each entry
``extras = {"id": <key>, "tags": {"custom"}}`` and appends it after NVIDIA's systems; ``KnownSystem.<key>`` is then
what a ``configs/<model>/<Scenario>/custom.py`` class names. The entry format is the one
``scripts/custom_systems/add_custom_system.py`` writes (a real one: ``ntuhpc/mlperf_inference_results_v5.0``
``closed/NVIDIA/code/common/systems/custom_list.json``): a ``System`` Description with ``cpu`` (architecture,
vendor), ``host_memory`` (capacity), ``accelerators`` (a ClassKeyedDict of GPU Descriptions and no DLA) and
``extras``.

Our entry matches on what the host facts give: CPU architecture and vendor, host memory and each GPU's name and
memory within 5 % (``NumericRange`` with ``rel_tol``, as the real entries give VRAM); upstream's entries also carry
the GPU's PCI id and power limit, which the facts do not have. Other entries of the file are kept as they are;
ours (key starting ``WL_``) is replaced. Pure text in, text out.
"""

from __future__ import annotations

import json
from typing import Any

from workload.mlperf.custom_system import SYSTEM_ID_PREFIX, CustomSystemError
from workload.mlperf.gpuconfigs import SkuTable
from workload.mlperf.system import HostSystem

CUSTOM_LIST_JSON = "code/common/systems/custom_list.json"
_DESCRIPTION = "<class 'nvmitten.system.component.Description'>"
_TOLERANCE = 0.05


def _description(module: str, classname: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "__obj_class__": _DESCRIPTION,
        "data": {
            "_component_module": module,
            "_component_classname": classname,
            "_match_ignore_fields": [],
            "fields": fields,
        },
    }


def _memory(num_bytes: int, base: int) -> dict[str, Any]:
    unit, div = ("GiB", 1024**3) if base == 1024 else ("GB", 1000**3)
    return {
        "__obj_class__": "<class 'nvmitten.memory.Memory'>",
        "data": {"num_bytes": num_bytes, "base": base, "human_readable_UNUSED": f"{num_bytes / div:.2f} {unit}"},
    }


def _around(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "__obj_class__": "<class 'nvmitten.interval.NumericRange'>",
        "data": {"start": value, "rel_tol": _TOLERANCE},
    }


def _vendor(cpu_model: str) -> str | None:
    if "AMD" in cpu_model:
        return "AuthenticAMD"
    if "Intel" in cpu_model:
        return "GenuineIntel"
    return None


def entry(system: HostSystem, sku: SkuTable) -> tuple[str, dict[str, Any]]:
    """(our key, the Description JSON) for this host: ``WL_<SKU>x<count>``."""
    key = f"{SYSTEM_ID_PREFIX}{sku.sku}x{system.gpu_count}"
    arch = "aarch64" if system.architecture in ("aarch64", "arm64") else "x86_64"
    cpu: dict[str, Any] = {"architecture": {"__ENUM__": ["nvmitten.constants", "CPUArchitecture"], "name": arch}}
    vendor = _vendor(system.cpu_model)
    if vendor:
        cpu["vendor"] = vendor
    gpu = _description(
        "nvmitten.nvidia.accelerator",
        "GPU",
        {
            "name": system.gpu_name,
            "vram": _around(_memory(system.gpu_memory_mib * 1024 * 1024, 1024)),
            "is_integrated": False,
        },
    )
    accelerators = {
        "__obj_class__": "<class 'nvmitten.json_utils.ClassKeyedDict'>",
        "data": [
            {"key.module": "nvmitten.nvidia.accelerator", "key.name": "GPU", "value": [gpu] * system.gpu_count},
            {"key.module": "nvmitten.nvidia.accelerator", "key.name": "DLA", "value": []},
        ],
    }
    description = _description(
        "nvmitten.system.system",
        "System",
        {
            "cpu": _description("nvmitten.system.cpu", "CPU", cpu),
            "host_memory": _description(
                "nvmitten.system.memory", "HostMemory", {"capacity": _around(_memory(system.memory_bytes, 1000))}
            ),
            "accelerators": accelerators,
            "extras": {},
        },
    )
    return key, description


def merge(existing: str | None, key: str, description: dict[str, Any]) -> str:
    """custom_list.json with our entry set; every other entry kept. CustomSystemError for a file we cannot read."""
    entries: dict[str, Any] = {}
    if existing is not None and existing.strip():
        try:
            loaded = json.loads(existing)
        except json.JSONDecodeError as exc:
            raise CustomSystemError(
                f"{CUSTOM_LIST_JSON} is not JSON (line {exc.lineno}: {exc.msg}); not changing it"
            ) from None
        if not isinstance(loaded, dict):
            raise CustomSystemError(f"{CUSTOM_LIST_JSON} is not a JSON object of systems; not changing it")
        entries = loaded
    entries[key] = description
    return json.dumps(entries, indent=2) + "\n"
