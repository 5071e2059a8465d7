"""Stand-in of ``cuda.bindings.driver``: the calls nvmitten's ``GPU.detect`` makes (``nvidia/accelerator.py``
lines 61-85: ``cuInit``, ``cuDeviceGetCount``, ``cuDeviceGetName``, ``cuDeviceTotalMem``, ``cuDeviceGetAttribute``
for the compute capability and ``INTEGRATED``), answered from ``STANDIN_CUDA_GPUS``."""

from __future__ import annotations

import enum
import json
import os
from typing import Any

from cuda.bindings._errors import error_string, result_enum

CUresult = result_enum("CUresult", "CUDA_SUCCESS", "CUDA_ERROR_NO_DEVICE")
cuGetErrorString = error_string(CUresult)


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134


def _gpus() -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = json.loads(os.environ.get("STANDIN_CUDA_GPUS", "[]"))
    return gpus


def cuInit(flags: int) -> tuple[Any]:
    return (CUresult.CUDA_SUCCESS,)


def cuDeviceGetCount() -> tuple[Any, int]:
    return (CUresult.CUDA_SUCCESS, len(_gpus()))


def cuDeviceGetName(length: int, index: int) -> tuple[Any, bytes]:
    return (CUresult.CUDA_SUCCESS, _gpus()[index]["name"].encode()[:length])


def cuDeviceTotalMem(index: int) -> tuple[Any, int]:
    return (CUresult.CUDA_SUCCESS, int(_gpus()[index]["total_mem"]))


def cuDeviceGetAttribute(attribute: CUdevice_attribute, index: int) -> tuple[Any, int]:
    gpu = _gpus()[index]
    values = {
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: gpu["sm"][0],
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: gpu["sm"][1],
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_INTEGRATED: int(gpu.get("integrated", False)),
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: -1,
    }
    return (CUresult.CUDA_SUCCESS, values[attribute])
