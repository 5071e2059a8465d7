"""What NVIDIA's config registry accepts per system: fields its ``fields.py`` restricts to a list of its own systems.

NVIDIA's ``ConfigRegistry.validate`` (``configs/configuration.py``) rejects a config class that declares
a field not applicable to the class's system (``ConfigFieldInvalidError`` at import of the file, which
stops every config of that benchmark and scenario). Most fields apply to every GPU system; a few are
applicable only to the systems a ``SystemClassifications`` predicate lists by name (``code/common/
fields.py``: ``start_from_device`` -> ``start_from_device_enabled``, ``end_on_device`` ->
``end_on_device_enabled``; ``code/common/systems/system_list.py``). A custom system is never in those
lists, so a generated class for one must not set them, whatever NVIDIA's class for the same GPU does.
Pure data and functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# SystemClassifications.start_from_device_enabled / end_on_device_enabled (NVIDIA code/common/systems/
# system_list.py, v4.0 layout kept in v4.1): NVIDIA's A100 SXM systems and their MIG slices. GH200_96GB_ARMx1
# is added because NVIDIA's own v4.1 3d-unet Offline class for it sets both fields, which its registry
# would refuse otherwise.
_DEVICE_IO_SYSTEMS = frozenset(
    {
        "A100_SXM_80GBx1",
        "A100_SXM_80GBx8",
        "A100_SXM_80GB_MIG_1x1g_10gb",
        "A100_SXM4_40GBx1",
        "A100_SXM4_40GBx8",
        "A100_SXM4_40GB_MIG_1x1g_5gb",
        "A100_SXM_80GB_ARMx1",
        "A100_SXM_80GB_ARMx8",
        "GH200_96GB_ARMx1",
    }
)

#: field -> the KnownSystem members NVIDIA's fields.py allows it for.
SYSTEM_RESTRICTED_FIELDS: Mapping[str, frozenset[str]] = {
    "start_from_device": _DEVICE_IO_SYSTEMS,
    "end_on_device": _DEVICE_IO_SYSTEMS,
}


def disallowed_fields(fields: Mapping[str, Any], member: str) -> list[str]:
    """The fields of ``fields`` NVIDIA's registry would refuse for ``KnownSystem.<member>`` (in order)."""
    return [
        name for name in fields if name in SYSTEM_RESTRICTED_FIELDS and member not in SYSTEM_RESTRICTED_FIELDS[name]
    ]


def allowed(fields: Mapping[str, Any], member: str) -> tuple[dict[str, Any], list[str]]:
    """``fields`` without the ones the registry refuses for ``member``, and the names dropped."""
    dropped = disallowed_fields(fields, member)
    return {k: v for k, v in fields.items() if k not in dropped}, dropped
