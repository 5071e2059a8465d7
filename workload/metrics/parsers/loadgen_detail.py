"""LoadGen ``mlperf_log_detail.txt``: one ``:::MLLOG {json}`` record per line; the primary source.

Records are matched by one regular expression over the whole text, for the wanted keys only, so
records such as ``loaded_qsl_set`` (tens of kB of sample indices) are skipped by the regex engine;
values are decoded from the matched slice. Records flagged ``is_error``/``is_warning`` are decoded in
full. Lines that are not well-formed records are counted and reported as one issue.
Repeated keys: the last value wins (LoadGen logs some twice in AccuracyOnly).
"""

from __future__ import annotations

import json
import re

from workload.metrics.raw import PRIO_DETAIL, RawResult, Scalar

_PREFIX = ":::MLLOG "
_ERROR_FLAG = '"is_error": true'
_WARNING_FLAG = '"is_warning": true'
_LITERALS: dict[str, bool] = {"true": True, "false": False}

# the keys the metrics layer uses; exact names end at the closing quote (lookahead)
_WANTED_RE = (
    r"(?:result_|early_stopping|requested_server_t|error_|warning_|(?:loadgen_version|test_datetime|sut_name"
    r"|power_begin|power_end|num_errors|effective_(?:scenario|test_mode|samples_per_query|target_qps"
    r"|target_latency_ns|target_latency_percentile|min_duration_ms|min_query_count|qsl_rng_seed))(?=\"))"
)
# One wanted, well-formed record per match; the regex engine skips the rest (loaded_qsl_set ...) in C.
# No ^/re.M: a pattern that starts with a literal lets the engine jump between record prefixes.
_RECORD = re.compile(r':::MLLOG \{"key": "(' + _WANTED_RE + r'[^"]*)", "value": ([^\n]*?), "time_ms": ')
_RECORD_B = re.compile(_RECORD.pattern.encode())
_PREFIX_B = b":::MLLOG {"
_JOIN_B = b"}}\n" + _PREFIX_B
_ERROR_FLAG_B = _ERROR_FLAG.encode()
_WARNING_FLAG_B = _WARNING_FLAG.encode()
_LITERALS_B: dict[bytes, bool] = {b"true": True, b"false": False}
_WELL_FORMED = re.compile(r"^:::MLLOG \{.*\}\}$", re.M)
_FLAGGED = re.compile(r'^:::MLLOG .*"is_(?:error|warning)": true.*$', re.M)


def _decode(text: str) -> object:
    if text in _LITERALS:
        return _LITERALS[text]
    if text[:1] == '"':
        return json.loads(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_bytes(path: str, data: bytes, raw: RawResult) -> None:
    """Read the detail log ``data`` (the bytes of ``path``) into ``raw``.

    The common file (ASCII, ``\\n`` line ends, no error/warning records) is read without decoding it:
    the wanted records are matched in the bytes, and well-formedness is checked by counting line
    starts and ends. Anything else is decoded and read by :func:`parse`, with the same outcome.
    """
    if b"\r" in data or not data.isascii() or _ERROR_FLAG_B in data or _WARNING_FLAG_B in data:
        parse(path, data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n"), raw)
        return
    # Every line is a record (starts with the prefix, ends with "}}") when the file does and every
    # line break joins two records: two passes over the bytes (line breaks, joins), not three.
    breaks = data.count(b"\n") - data.endswith(b"\n")
    well_formed = data.startswith(_PREFIX_B) and data.endswith((b"}}", b"}}\n")) and data.count(_JOIN_B) == breaks
    if not well_formed:  # a blank or malformed line: the careful path finds and reports it
        parse(path, data.decode("ascii"), raw)
        return
    decode = _decode_bytes
    pairs: list[tuple[str, Scalar]] = []
    add = pairs.append
    for key, text in _RECORD_B.findall(data):
        try:
            value = decode(text)
        except ValueError:
            continue
        if isinstance(value, bool | int | float | str):
            add((key.decode(), value))
    raw.put_all(pairs, PRIO_DETAIL, path)
    _finish(raw, path)


def _decode_bytes(text: bytes) -> object:
    if text in _LITERALS_B:
        return _LITERALS_B[text]
    if text[:1] == b'"':
        inner = text[1:-1]
        # a plain string (the common case) needs no JSON decoder: no escapes, no quotes, no control bytes
        if (
            len(text) > 1
            and text[-1:] == b'"'
            and b"\\" not in inner
            and b'"' not in inner
            and inner.isascii()
            and min(inner, default=32) >= 32
        ):
            return inner.decode()
        return json.loads(text)
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read the detail log ``text`` (from ``path``) into ``raw``."""
    records = 0
    for match in _RECORD.finditer(text):
        key = match.group(1)
        try:
            value = _decode(match.group(2))
        except ValueError:
            continue
        records += 1
        if isinstance(value, bool | int | float | str):
            raw.put(key, value, PRIO_DETAIL, path)
    if _ERROR_FLAG in text or _WARNING_FLAG in text:
        for match in _FLAGGED.finditer(text):
            try:
                record = json.loads(match.group(0)[len(_PREFIX) :])
                key, value, meta = record["key"], record["value"], record["metadata"]
            except (ValueError, KeyError, TypeError):
                continue
            if isinstance(meta, dict) and meta.get("is_error") is True:
                raw.errors.append(f"{key}: {value}")
            elif isinstance(meta, dict) and meta.get("is_warning") is True:
                raw.warnings.append(f"{key}: {value}")
    good = len(_WELL_FORMED.findall(text))
    if good == 0:
        raw.issue(path, "no :::MLLOG records (not a LoadGen detail log, or empty)")
        return
    # fast path: every line is a well-formed record (counting newlines is much cheaper than splitting)
    lines: list[str] = []
    if good != text.count("\n") + (0 if text.endswith("\n") else 1):
        lines = [line for line in text.splitlines() if line.strip()]
    if good < len(lines):
        # rare: find the first bad line for the message (a torn last line, a flipped byte ...)
        first = next(
            (n for n, line in enumerate(lines, 1) if not _WELL_FORMED.match(line) or not _is_json(line)), len(lines)
        )
        raw.issue(path, f"{len(lines) - good} malformed line(s), first at line {first}; the rest was read")
    _finish(raw, path)


def _finish(raw: RawResult, path: str) -> None:
    """What every readable detail log adds: the file, the warning count, scenario and mode as identity."""
    raw.files.append(path)
    raw.detail_ok = True
    raw.put("num_warnings", len(raw.warnings), PRIO_DETAIL, path)
    scenario = raw.values.get("effective_scenario")
    if isinstance(scenario, str):
        raw.put_ident("scenario", scenario, PRIO_DETAIL)
    mode = raw.values.get("effective_test_mode")
    if isinstance(mode, str):
        raw.put_ident("test_mode", mode, PRIO_DETAIL)


def _is_json(line: str) -> bool:
    try:
        json.loads(line[len(_PREFIX) :])
    except ValueError:
        return False
    return True
