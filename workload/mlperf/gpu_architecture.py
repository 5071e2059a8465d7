"""GPU architectures, and what values borrowed across them may keep (pure data and one merge).

When NVIDIA publishes no config of a round for a GPU (or for one of its benchmarks/scenarios), the untuned values come
from the nearest GPU *of the same architecture* (:func:`workload.mlperf.tuning.decide`): a Hopper never runs
Blackwell's FP4 (FP4 tensor cores came with Blackwell; every Hopper config NVIDIA published, up to v5.0's, is fp8).
When the same-architecture values are an older round's, they lack fields the later round's files carry (v5.1 and v6.0
files name their generation config, preprocessed data and run length): :func:`borrowed_fields` takes those from
the round's nearest published file and keeps every value of the same-architecture config.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: nvidia-smi name patterns per architecture (word match, case-insensitive).
ARCHITECTURES: dict[str, tuple[str, ...]] = {
    "Ampere": ("A100", "A30", "A10", "A40"),
    "Hopper": ("GH200", "H100", "H200", "H800", "H20"),
    "Blackwell": ("GB300", "GB200", "B300", "B200"),
}
#: Precisions the architecture's tensor cores run (Hopper added FP8, Blackwell FP4).
PRECISIONS: dict[str, tuple[str, ...]] = {
    "Ampere": ("fp32", "fp16", "int8"),
    "Hopper": ("fp32", "fp16", "int8", "fp8"),
    "Blackwell": ("fp32", "fp16", "int8", "fp8", "fp4"),
}
#: Every precision name a config may write (NVIDIA's ``Precision`` members, lower-cased).
_ALL_PRECISIONS = frozenset(p for names in PRECISIONS.values() for p in names) | {"nvfp4"}
#: Fields of a config that are the run's throughput or its engines' numeric format: always the borrowed config's.
_OWN_ONLY = ("offline_expected_qps", "server_target_qps", "precision", "gpu_batch_size")


def architecture(gpu_name: str) -> str | None:
    """``NVIDIA H200`` -> ``Hopper``; ``NVIDIA B300 SXM6 AC`` -> ``Blackwell``; None for a GPU not listed."""
    for arch, names in ARCHITECTURES.items():
        if any(re.search(rf"\b{name}\b", gpu_name, re.I) for name in names):
            return arch
    return None


def runs_precision(arch: str | None, value: Any) -> bool:
    """Whether ``value`` (a flag's value) is either no precision name or one the architecture runs."""
    if arch is None or not isinstance(value, str) or value.lower() not in _ALL_PRECISIONS:
        return True
    return value.lower() in PRECISIONS[arch]


def _merge(frame: Mapping[str, Any], own: Mapping[str, Any], arch: str | None) -> dict[str, Any]:
    merged = {k: v for k, v in frame.items() if runs_precision(arch, v)}
    for key, value in own.items():
        old = merged.get(key)
        merged[key] = _merge(old, value, arch) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def borrowed_fields(frame: Mapping[str, Any], own: Mapping[str, Any], arch: str | None) -> dict[str, Any]:
    """``own`` (a same-architecture config of an older round) completed from ``frame`` (the round's nearest published
    file for another GPU): every field and flag ``own`` sets is kept as is, dict flags merged key by key; from the
    frame only what ``own`` lacks, never its throughput, precision or batch size (one engine's batch size is keyed
    as the frame keys it), and no flag whose value is a precision ``arch``
    does not run (a Blackwell frame's ``gemm_plugin: fp4`` on Hopper)."""
    base = {k: v for k, v in frame.items() if k not in _OWN_ONLY}
    merged = _merge(base, own, arch)
    # the batch size is per engine, keyed by the round's name for it (v5.0's llama2-70b-interactive is v6.0's
    # llama2-70b Interactive): one engine's size goes under the frame's key
    batch, frame_batch = own.get("gpu_batch_size"), frame.get("gpu_batch_size")
    if isinstance(frame_batch, dict) and len(frame_batch) == 1:
        sizes = list(batch.values()) if isinstance(batch, dict) else [batch] if isinstance(batch, int) else []
        if len(sizes) == 1:
            merged["gpu_batch_size"] = {next(iter(frame_batch)): sizes[0]}
    return merged
