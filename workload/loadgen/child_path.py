"""The ``PYTHONPATH`` a local child Python gets so that it imports this very package.

The LoadGen runner and the qualification probe run as ``python -m workload...`` child processes. On
the local host they must import the same ``workload`` as this process, installed or not, so its
folder comes first. Whatever ``PYTHONPATH`` this process was given comes after it, unchanged: a
user whose dependencies live on ``PYTHONPATH`` (``pip install --target``, an air-gapped wheel
folder) would otherwise find the child unable to import pydantic or LoadGen while the parent can.
"""

from __future__ import annotations

import os
from pathlib import Path


def package_root() -> str:
    """The folder that holds this ``workload`` package."""
    import workload

    return str(Path(workload.__file__).resolve().parent.parent)


def child_pythonpath() -> str:
    """This package's folder, then this process's own ``PYTHONPATH`` entries (empty ones dropped)."""
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    root = package_root()
    return os.pathsep.join([root, *(entry for entry in inherited if entry != root)])
