"""Stand-in of NVIDIA's v4.1 ``code/common/cuda_python.py`` (published in ``closed/NVIDIA``, not among the files we
hold): the two names ``code/common/systems/accelerator.py`` lines 219-223 ``get_compute_sm`` take from it.
``CUASSERT`` returns a cuda-python call's value(s) after checking its ``CUresult``; ``CUDAPythonScopedContext(index)``
gives ``.device`` (the real one creates and destroys a CUDA context on that device). Staged as
``code/common/cuda_python.py`` by tests/upstream_nvidia.py ``stage_v41_harness``."""

from cuda import cuda


def CUASSERT(answer):
    status, *values = answer
    if status != cuda.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA call failed: {status}")
    return values[0] if len(values) == 1 else tuple(values) or None


class CUDAPythonScopedContext:
    def __init__(self, device_index):
        CUASSERT(cuda.cuInit(0))
        self.device = device_index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
