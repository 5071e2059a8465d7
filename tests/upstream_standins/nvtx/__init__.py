"""Stand-in of NVIDIA's NVTX Python module (CUDA profiling ranges): ``code/common/utils.py`` line 40 imports it;
``nvtx_scope`` calls ``start_range``/``end_range`` only when ``--verbose_nvtx`` is set, which no config step does."""

from __future__ import annotations


def start_range(message: str = "", color: str | None = None) -> object:
    raise RuntimeError("nvtx is a stand-in: NVIDIA's code opened an NVTX range (--verbose_nvtx)")


def end_range(marker: object) -> None:
    raise RuntimeError("nvtx is a stand-in: NVIDIA's code closed an NVTX range (--verbose_nvtx)")
