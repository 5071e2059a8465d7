"""Stand-in for cuda-python's ``cuda.bindings.nvrtc`` (needs a GPU): the success code and its description, which
nvmitten's ``nvidia/cupy.py`` (lines 111-127) wraps at import; any call raises."""

import enum


class nvrtcResult(enum.IntEnum):
    NVRTC_SUCCESS = 0


def nvrtcGetErrorString(err):
    return (nvrtcResult.NVRTC_SUCCESS, b"stand-in")


def __getattr__(name):
    def _call(*args, **kwargs):
        raise RuntimeError(f"cuda.bindings.nvrtc.{name}: no GPU in this stand-in")

    return _call
