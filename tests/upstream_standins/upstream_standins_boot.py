"""Stand-ins for the modules NVIDIA's harness imports that need a GPU, TensorRT or NVIDIA's container.

Imported by ``tests/upstream_nvidia_driver.py`` before any NVIDIA module. Each entry names the upstream import it
satisfies; none of them takes part in finding, loading, validating or resolving config files:

* ``tensorrt`` (``tensorrt/__init__.py``): nvmitten ``nvidia/constants.py`` line 19 ``import tensorrt as trt`` and
  line 25 ``trt.Logger(trt.Logger.INFO)`` (TensorRT is GPU software).
* ``nvtx`` (``nvtx/__init__.py``): ``code/common/utils.py`` line 40 (CUDA profiling ranges, ``nvtx_scope``).
* ``code.ops`` (an absent package, as below): ``code/main.py`` line 54 ``import code.ops as Ops``, ``code/llmlib/
  __init__.py`` lines 29-30: NVIDIA's engine-build and benchmark-run
  operations (``LoadgenConfFilesOp``, ``EngineBuilderOp``, ``BenchmarkHarnessOp``, ``MPS``...), GPU work the
  published trees we hold do not include. Any use raises (with ``STANDIN_GPU_WORK=1``: ``standin_gpu_work.py``).
* Absent at import, failing on use (:class:`_Absent`): ``torch`` (``code/common/utils.py`` line 42: CUDA tensors),
  ``scipy`` (line 41) and ``matplotlib`` (``code/llmlib/utils.py`` line 26): imported at module level by NVIDIA's
  utilities, used only by GPU-run statistics and plots, installed in NVIDIA's container, not on this test machine
  (an installed copy is not used either); ``onnx`` and ``onnx_graphsurgeon`` (nvmitten ``nvidia/builder.py`` lines
  26-27: the engine builders' input format). Every attribute they are asked for is recorded in :data:`USED` (the
  driver reports them).

Not stand-ins, installed here too: :mod:`class_source_memo` (``inspect.findsource`` remembered per class; NVIDIA's
code gets the real call's answer, once parsed instead of thousands of times) and :mod:`frame_info_memo`
(``inspect.getframeinfo`` remembered per code object and instruction, for nvmitten's ``inspect.stack()`` per field).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Any

import class_source_memo
import frame_info_memo

#: Top-level module names stood in by :class:`_Absent` modules.
ABSENT = ("torch", "scipy", "matplotlib", "onnx", "onnx_graphsurgeon")
#: ``STANDIN_GPU_WORK=1``: a whole ``workload run`` (tests/test_upstream_nvidia_run.py): ``code.ops`` is the staged
#: tree's stand-in of NVIDIA's operations (``standin_gpu_work.py``), not an absent module.
GPU_WORK = os.environ.get("STANDIN_GPU_WORK") == "1"
#: "module.attribute" names NVIDIA's code asked an absent module for.
USED: list[str] = []


class StandinUsed(RuntimeError):
    """NVIDIA's code called into something this test stands in: the test would no longer judge NVIDIA's code."""


class _Absent:
    """An attribute of an absent module: may be named at import time (``from scipy import stats``), never called."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> _Absent:
        if attr.startswith("__"):
            raise AttributeError(attr)
        USED.append(f"{self._name}.{attr}")
        return _Absent(f"{self._name}.{attr}")

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        # NVIDIA subclasses some of them at import (``class LLMHarnessOp(PyHarnessOp)``): an empty base class.
        return (type(self._name.rsplit(".", 1)[-1], (), {"__doc__": f"stand-in of {self._name}"}),)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise StandinUsed(f"{self._name} is a stand-in (not installed here): NVIDIA's code called it")


class _AbsentModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        USED.append(f"{self.__name__}.{attr}")
        return _Absent(f"{self.__name__}.{attr}")


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        ops = fullname == "code.ops" or fullname.startswith("code.ops.")
        if ops and GPU_WORK:
            return None  # the staged tree's code/ops/ (tests/upstream_nvidia.py stage_gpu_work)
        if fullname.split(".")[0] not in ABSENT and not ops:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _AbsentModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


sys.meta_path.insert(0, _AbsentFinder())
class_source_memo.install()
frame_info_memo.install()
