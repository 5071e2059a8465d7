"""One way to mangle a real result file for the parser fuzz tests (hypothesis), shared by all of them.

Each kind of damage is one a real file meets: cut short, flipped bytes, lost lines, broken JSON,
numbers no metric may hold, values of the wrong type, or something else entirely.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

#: words of the collector's last-resort handlers: a parser or builder bug, never a clear message
INTERNAL_ERRORS = ("could not be parsed (", "could not build")

_NUMBER = rb"(: ?)-?\d+(?:\.\d+)?(?=[,\s}])"
#: numbers no metric may hold (NaN/Infinity in JSON and detail logs, nan/inf in summaries, overflowing
#: literals) and numbers that are wrong only where a sign or a zero matters
_BAD_NUMBERS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"nan", b"inf", b"9" * 400, b"-1", b"0"]
_BAD_VALUES = [b'"x"', b"null", b"[]", b"{}", b"1", b'"1"', b'"true"']


def mangle(draw: st.DrawFn, original: bytes) -> bytes:
    """``original`` damaged in one way that ``draw`` picks."""
    data = bytearray(original)
    how = draw(
        st.sampled_from(
            ["truncate", "flip", "drop_lines", "bad_json", "bad_number", "bad_literal", "bad_value", "garbage"]
        )
    )
    if how == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif how == "flip":
        for _ in range(draw(st.integers(1, 20))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif how == "drop_lines":
        lines = bytes(data).split(b"\n")
        keep = draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
        data = bytearray(b"\n".join(line for line, k in zip(lines, keep, strict=True) if k))
    elif how == "bad_json":
        text = bytes(data).replace(b'"', b"'", draw(st.integers(0, 5))).replace(b"{", b"[", 1)
        data = bytearray(text.replace(b"true", b"tru", 1).replace(b": 1", b": NaN", 1))
    elif how == "bad_number":
        bad = draw(st.sampled_from(_BAD_NUMBERS))
        data = bytearray(re.sub(_NUMBER, lambda m: m.group(1) + bad, bytes(data), count=draw(st.integers(1, 50))))
    elif how == "bad_literal":  # a literal swapped for a value of another type
        swap = draw(st.sampled_from(_BAD_VALUES))
        data = bytearray(bytes(data).replace(draw(st.sampled_from([b"true", b"false", b": 1"])), swap))
    elif how == "bad_value":  # the values of "key: value" lines swapped for values of another type
        swap = draw(st.sampled_from(_BAD_VALUES))
        data = bytearray(re.sub(rb"(: ?)[^\s,{\[]+(?=,?\n)", lambda m: m.group(1) + swap, bytes(data),
                                count=draw(st.integers(1, 40))))  # fmt: skip
    else:
        data = bytearray(draw(st.binary(max_size=300)))
    return bytes(data)
