"""Stand-in of NVIDIA's cuda-python (the CUDA driver API), as nvmitten ``nvidia/cupy.py`` lines 111-127 import it:
``from cuda.bindings import driver as cuda, runtime as cudart, nvrtc``. It reports the GPUs a test describes in the
environment variable ``STANDIN_CUDA_GPUS`` (a JSON list of ``{"name", "total_mem", "sm": [major, minor],
"integrated"}``; none when unset), so that nvmitten's ``GPU.detect`` (``nvidia/accelerator.py``) and NVIDIA's
``system_list.py`` matching run on them. Every call returns ``(CUresult, value...)`` as cuda-python does."""
