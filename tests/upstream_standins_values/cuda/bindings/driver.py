"""Stand-in for cuda-python's ``cuda.bindings.driver`` (the CUDA driver needs a GPU).

Answers the queries nvmitten's GPU detection makes (``nvmitten/nvidia/accelerator.py`` ``GPU.detect``: cuInit,
cuDeviceGetCount, cuDeviceGetName, cuDeviceTotalMem, cuDeviceGetAttribute) for the GPUs described by
``$WL_STANDIN_GPU`` (JSON: name, memory_bytes, count, sm [major, minor]), as cuda-python returns them: a tuple of
the result code and the value. Any other call raises.
"""

import enum
import json
import os


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
    CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID = 134


_GPU = json.loads(os.environ.get("WL_STANDIN_GPU", "{}"))
_OK = CUresult.CUDA_SUCCESS


def cuGetErrorString(err):
    return (_OK, b"stand-in")


def cuInit(flags):
    return (_OK,)


def cuDeviceGetCount():
    return (_OK, int(_GPU.get("count", 0)))


def cuDeviceGetName(length, index):
    return (_OK, _GPU["name"].encode())


def cuDeviceTotalMem(index):
    return (_OK, int(_GPU["memory_bytes"]))


def cuDeviceGetAttribute(attribute, index):
    values = {
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: _GPU["sm"][0],
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: _GPU["sm"][1],
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_INTEGRATED: 0,
        CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: -1,
    }
    return (_OK, values[attribute])


def __getattr__(name):
    def _call(*args, **kwargs):
        raise RuntimeError(f"cuda.bindings.driver.{name}: not answered by this stand-in")

    return _call
