"""Stand-in for cuda-python (CUDA needs a GPU): nvmitten's ``nvidia/cupy.py`` line 111 imports it and takes
``cuda.bindings.driver``/``runtime``/``nvrtc`` (line 113); v5.1's ``code/common/lwis_ops.py`` line 21 ``cudart``."""
