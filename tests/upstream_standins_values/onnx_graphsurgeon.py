"""Stand-in for TensorRT's ONNX GraphSurgeon: nvmitten nvidia/builder.py line 27; imported at module level only, never
called by the config steps the conformance tests run.
"""

from _anything import Anything


def __getattr__(name: str) -> Anything:
    return Anything()
