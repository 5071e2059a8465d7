"""Stand-in of ``cuda.bindings.nvrtc``: only the result enum nvmitten ``cupy.py`` wraps at import (line 125)."""

from cuda.bindings._errors import error_string, result_enum

nvrtcResult = result_enum("nvrtcResult", "NVRTC_SUCCESS", "NVRTC_ERROR_INTERNAL_ERROR")
nvrtcGetErrorString = error_string(nvrtcResult)
