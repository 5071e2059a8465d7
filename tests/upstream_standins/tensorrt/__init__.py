"""Stand-in of TensorRT's Python module: only what nvmitten imports at module level (``nvidia/constants.py`` lines
19 and 25: ``trt.Logger(trt.Logger.INFO)``). TensorRT needs a GPU; no config step calls it."""


class Logger:
    """``tensorrt.Logger``: constructed with a severity, never asked to log here."""

    INFO = 3

    def __init__(self, min_severity: int = INFO) -> None:
        self.min_severity = min_severity
