"""The result enums and error-string function shared by the stand-in driver, runtime and NVRTC modules."""

from __future__ import annotations

import enum
from typing import Any


def result_enum(name: str, success: str, failure: str) -> Any:
    """A cuda-python style result enum: value 0 is success (nvmitten ``cupy.py`` ``_ModuleWrapper`` relies on it)."""
    return enum.IntEnum(name, {success: 0, failure: 100})


def error_string(results: Any) -> Any:
    def describe(err: Any) -> tuple[Any, bytes]:
        return (results(0), f"stand-in {err.name}".encode())

    return describe
