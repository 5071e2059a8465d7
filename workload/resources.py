"""Where the shipped data lives: ``profiles/`` and ``gpuconfigs/``.

In an installed wheel they are the packages ``workload.profiles`` and ``workload.gpuconfigs``
(pyproject maps the top-level folders there); in a source checkout they are the top-level folders.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent


def _data_dir(package: str, folder: str) -> Path:
    installed = Path(__file__).resolve().parent / folder
    if installed.is_dir():
        return installed
    checkout = _REPO_ROOT / folder
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"shipped data folder {folder!r} not found (package {package})")


@cache
def profile_dir() -> Path:
    return _data_dir("workload.profiles", "profiles")


@cache
def gpuconfig_dir() -> Path:
    return _data_dir("workload.gpuconfigs", "gpuconfigs")


def shipped_profiles() -> list[str]:
    """Names (without ``.json``) of the profiles shipped with the package."""
    return sorted(p.stem for p in profile_dir().glob("*.json"))
