"""File parsers. Each module reads one file type into a :class:`~workload.metrics.raw.RawResult`.

``PARSERS`` maps the standard file name to its parser. A parser never raises for bad content; it
records a :class:`~workload.metrics.model.ParseIssue` on the RawResult and keeps what it could read.
"""

from __future__ import annotations

from collections.abc import Callable

from workload.metrics.parsers import accuracy_json, accuracy_txt, loadgen_detail, loadgen_summary, nvidia_metadata
from workload.metrics.raw import RawResult

Parser = Callable[[str, str, RawResult], None]

#: file name -> parser(path, text, raw). Order matters only for readability: priorities decide merges.
PARSERS: dict[str, Parser] = {
    "metadata.json": nvidia_metadata.parse,
    "mlperf_log_detail.txt": loadgen_detail.parse,
    "mlperf_log_summary.txt": loadgen_summary.parse,
    "accuracy.txt": accuracy_txt.parse,
    "accuracy.json": accuracy_json.parse,
}
