"""A memo of ``inspect.getframeinfo`` for frames, installed in every process that runs NVIDIA's code here.

Not a stand-in: NVIDIA's code gets exactly what the real call returns. Why it is worth having: nvmitten's
``Field.__post_init__`` (``configurator/fields.py`` line 77) calls ``inspect.stack()`` for every field it creates, to
read one file name. ``inspect.stack`` runs ``getframeinfo`` for every frame of the stack, most of them the import
machinery's (``<frozen importlib._bootstrap>``), and for a file that belongs to no module CPython 3.11's
``inspect.getmodule`` walks the whole of ``sys.modules`` on every call. The config driver's import of NVIDIA's v5.1
code (156 fields, 4,564 frames) took 1.64 CPU-s, 1.09 with this memo; the suite starts NVIDIA's code in well over a
hundred processes, and the seven test files that run it most took 145 busy CPU-s without the memo, 96 with it.

Contract: for a frame, the answer depends only on its code object, its current instruction (``f_lasti``), its line
and ``context``; the first call for that key runs the real ``getframeinfo`` and later calls with the same key
return its answer (the same ``Traceback`` tuple, whose ``code_context`` list is shared). An exception is never
remembered. A traceback object, or any other argument, goes to the real function. Sound for the same reason as
:mod:`class_source_memo`: the files do not change while the process runs, and a frame's file either belongs to a
module from its first frame on or never does (the import machinery's frozen modules).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

_real_getframeinfo: Callable[..., inspect.Traceback] = inspect.getframeinfo
#: (code object, instruction offset, line number, context) -> the real call's answer
_ANSWERS: dict[tuple[types.CodeType, int, int | None, int], inspect.Traceback] = {}


def getframeinfo(frame: Any, context: int = 1) -> inspect.Traceback:
    """``inspect.getframeinfo(frame, context)``, remembered per code object, instruction, line and context."""
    if not isinstance(frame, types.FrameType):
        return _real_getframeinfo(frame, context)
    key = (frame.f_code, frame.f_lasti, frame.f_lineno, context)
    known = _ANSWERS.get(key)
    if known is None:
        known = _ANSWERS[key] = _real_getframeinfo(frame, context)
    return known


def install() -> None:
    """Route ``inspect.getframeinfo`` (which ``stack``, ``getouterframes`` and ``trace`` call) through
    :func:`getframeinfo`."""
    inspect.getframeinfo = getframeinfo
