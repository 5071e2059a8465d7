"""Naming places in JSON documents: ``Actions[1].Parameters.Model``, ``bert["Server.target_qps"]``.

Shared by profile loading (every ProfileError names the file and the JSON path) and parameter
overrides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )


def format_loc(loc: Sequence[str | int], prefix: str = "") -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = key_path(out, part)
    return out


def key_path(prefix: str, key: str) -> str:
    """``prefix.key``, or ``prefix["key"]`` when the key is not a plain name (``bert.Server.target_qps``)."""
    if key.isidentifier():
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{json.dumps(key)}]"
