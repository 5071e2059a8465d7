"""A memo of ``inspect.findsource`` for classes, installed in every process that runs NVIDIA's code here.

Not a stand-in: NVIDIA's code gets exactly what the real call returns (the same list object of the file's lines and
the same line number). Why it is worth having: NVIDIA's v4.1 ``configs/configuration.py`` calls
``inspect.getsourcelines`` for every class of every config's MRO (``_check_inheritance_constraints`` line 359 and
``FieldTrace.__init__`` line 535: 7,554 calls for the v4.1 registry of every system), and CPython before 3.13 finds
a class's source by parsing its whole module again on every call (``inspect.findsource``: ``ast.parse`` and
``_ClassFinder``; 3.13 reads ``__firstlineno__`` instead). One registry load took 29.5 CPU-s, 8.6 with this memo
(the same answer, byte for byte).

Contract: for a class, the first call runs the real ``findsource`` and later calls for the same class object return
its answer; an exception is never remembered (each call raises it again). Anything else goes to the real function.
Sound because the files do not change while the process runs: the tests write every file NVIDIA's code reads
before they start it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

_real_findsource: Callable[[Any], tuple[list[str], int]] = inspect.findsource
#: id(class) -> (the class, kept so its id is never reused while remembered; the real call's answer)
_ANSWERS: dict[int, tuple[type, tuple[list[str], int]]] = {}


def findsource(obj: Any) -> tuple[list[str], int]:
    """``inspect.findsource(obj)``, remembered per class object."""
    if not inspect.isclass(obj):
        return _real_findsource(obj)
    known = _ANSWERS.get(id(obj))
    if known is not None and known[0] is obj:
        return known[1]
    answer = _real_findsource(obj)
    _ANSWERS[id(obj)] = (obj, answer)
    return answer


def install() -> None:
    """Route ``inspect.findsource`` (which ``getsourcelines`` and ``getsource`` call) through :func:`findsource`."""
    inspect.findsource = findsource
