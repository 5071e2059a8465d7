"""Stand-in for cuda-python's ``cuda.bindings.runtime`` (needs a GPU): the success code and its description, which
nvmitten's ``nvidia/cupy.py`` (lines 111-127) wraps at import; any call raises."""

import enum


class cudaError_t(enum.IntEnum):
    cudaSuccess = 0


def cudaGetErrorString(err):
    return (cudaError_t.cudaSuccess, b"stand-in")


def __getattr__(name):
    def _call(*args, **kwargs):
        raise RuntimeError(f"cuda.bindings.runtime.{name}: no GPU in this stand-in")

    return _call
