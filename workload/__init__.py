"""workload: a VirtualClient-style runner for MLPerf Inference on NVIDIA GPU machines.

The package is kept import-light: importing :mod:`workload` pulls in nothing heavier than the
standard library, so ``workload --help`` starts fast. Heavy dependencies (docker, paramiko,
rich, pydantic) are imported by the modules that need them, when they need them.
"""

__version__ = "0.1.0"
