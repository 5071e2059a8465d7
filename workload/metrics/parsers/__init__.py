"""File parsers. Each module reads one file type into a :class:`~workload.metrics.raw.RawResult`.

``PARSERS`` maps the standard file name to its parser, which takes the file's bytes. A parser never
raises for bad content; it records a :class:`~workload.metrics.model.ParseIssue` on the RawResult and
keeps what it could read.
"""

from __future__ import annotations

from collections.abc import Callable

from workload.metrics.parsers import (
    accuracy_json,
    accuracy_txt,
    effective_settings,
    loadgen_detail,
    loadgen_summary,
    nvidia_metadata,
)
from workload.metrics.raw import RawResult

Parser = Callable[[str, bytes, RawResult], None]
TextParser = Callable[[str, str, RawResult], None]


def _text(parse: TextParser) -> Parser:
    """A parser of bytes from one of text: decoded as UTF-8 (bad bytes replaced), newlines as text mode reads them."""

    def parse_bytes(path: str, data: bytes, raw: RawResult) -> None:
        text = data.decode("utf-8", errors="replace")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        parse(path, text, raw)

    return parse_bytes


#: file name -> parser(path, bytes, raw). Order matters only for readability: priorities decide merges.
#: The detail log (~90 kB, most of the bytes) is matched as bytes; the small files are decoded first.
PARSERS: dict[str, Parser] = {
    "metadata.json": _text(nvidia_metadata.parse),
    "mlperf_log_detail.txt": loadgen_detail.parse_bytes,
    "mlperf_log_summary.txt": _text(loadgen_summary.parse),
    "accuracy.txt": _text(accuracy_txt.parse),
    "accuracy.json": _text(accuracy_json.parse),
    # not a result file: marks the folder as our LoadGen runner's (see the module)
    "effective_settings.json": _text(effective_settings.parse),
}
