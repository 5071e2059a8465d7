"""Stand-in of ``cuda.bindings.runtime``: only the result enum nvmitten ``cupy.py`` wraps at import (line 121)."""

from cuda.bindings._errors import error_string, result_enum

cudaError_t = result_enum("cudaError_t", "cudaSuccess", "cudaErrorNoDevice")
cudaGetErrorString = error_string(cudaError_t)
