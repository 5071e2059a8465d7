"""Stand-in of MLCommons' submission checker as of the round's own clone of mlcommons/inference.

NVIDIA's harness imports the checker from its clone of mlcommons/inference (v5.1: ``make clone_loadgen`` checks out
``INFERENCE_HASH`` into ``build/inference``, ``Makefile.build`` lines 32-37 and 231-239, and ``code/common/mlcommons/
loadgen.py`` lines 43-49 import ``tools/submission/submission_checker.py``; v6.0: the README's ``git clone --depth 1``
into ``3rdparty/mlc-inference``, and ``loadgen.py`` lines 43-52 import ``tools/submission/submission_checker/
constants.py``), and takes the newest ``MODEL_CONFIG`` key as its round. Cloning needs the network, and today's
checker lacks entries the round's code reads (v6.1 has no ``llama3.1-405b``: ``loadgen.py`` line 74 raises KeyError).
This module is MLCommons' REAL checker file (``WORKLOAD_CHECKER_FILE``: ``submission_checker_old.py`` for v5.1,
``submission_checker/constants.py`` for v6.0, from the upstream folder) with ``MODEL_CONFIG`` cut to the rounds up to
``WORKLOAD_CHECKER_ROUND``, as the checker was when the round was its newest (for v6.0: as at the commit the runner
pins its clone to, ``workload.mlperf.rounds.v6_0.MLC_INFERENCE_COMMIT``). Copied by ``tests/upstream_nvidia.py`` into
a staged tree under the name NVIDIA's code imports.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

_file = Path(os.environ["WORKLOAD_CHECKER_FILE"])
sys.path.insert(0, str(_file.parent))  # the single-file checker imports its sibling log_parser.py
_spec = importlib.util.spec_from_file_location("submission_checker_real", _file)
assert _spec is not None and _spec.loader is not None
_real = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_real)


def _version(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.removeprefix("v").split("."))


_round = _version(os.environ["WORKLOAD_CHECKER_ROUND"])
MODEL_CONFIG = {k: v for k, v in _real.MODEL_CONFIG.items() if _version(k) <= _round}


def __getattr__(name: str) -> Any:
    return getattr(_real, name)
