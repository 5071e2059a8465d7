"""Stand-in for PyTorch's CUDA build (the GPU runtime): v5.1 code/common/utils.py line 42; imported at module level
only, never called by the config steps the conformance tests run.
"""

from _anything import Anything


def __getattr__(name: str) -> Anything:
    return Anything()
