"""cuda-python's older module name for the driver API, ``cuda.cuda`` (before ``cuda.bindings.driver``), as NVIDIA's
v4.1 ``code/common/systems/accelerator.py`` line 218 imports it (``from cuda import cuda``) to read each GPU's compute
capability: the same stand-in as ``cuda.bindings.driver`` (``STANDIN_CUDA_GPUS``)."""

from cuda.bindings.driver import *  # noqa: F403
