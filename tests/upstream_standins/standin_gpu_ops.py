"""The stand-in operations of NVIDIA's ``code.ops`` that import nothing of NVIDIA's (``code/llmlib/__init__.py``
imports ``code.ops.harness.PyHarnessOp`` and ``code.ops.loadgen.LoadgenConfFilesOp`` while ``code.ops`` itself is
being imported by ``standin_gpu_work``): see ``standin_gpu_work.py`` for the whole set and when it is used."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nvmitten.pipeline import Operation


def record(op: str, **what: Any) -> None:
    """One line of ``$MLPERF_SCRATCH_PATH/standin_gpu_work.jsonl`` (what a stand-in op was asked to do)."""
    scratch = Path(os.environ.get("MLPERF_SCRATCH_PATH", "."))
    with (scratch / "standin_gpu_work.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps({"op": op, **what}, default=str) + "\n")


class MPS:
    """``code/main.py`` ``Ops.MPS().disable()`` (CUDA's multi-process service: nothing to disable without a GPU)."""

    def disable(self) -> None:
        record("MPS.disable")


class _Recorded(Operation):
    @classmethod
    def immediate_dependencies(cls) -> None:
        return None

    def run(self, scratch_space: Any, dependency_outputs: Any) -> dict[str, Any]:
        record(type(self).__name__)
        return {}


class LoadgenConfFilesOp(_Recorded):
    """Writes LoadGen's mlperf.conf/user.conf in NVIDIA's code; the stand-in harness takes the settings itself."""


class CalibrateEngineOp(_Recorded):
    """TensorRT calibration (GPU work)."""


class PyHarnessOp(_Recorded):
    """NVIDIA's Python harness base (``code/llmlib/__init__.py`` ``class LLMHarnessOp(PyHarnessOp)``): never run
    here (the stand-in harness ops of ``standin_gpu_work`` run instead)."""
