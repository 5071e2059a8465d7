"""JSON objects with a key given twice are refused, not silently cut to the last value.

Python's ``json`` keeps the last of duplicate keys, so a profile or inventory whose author wrote
``"Model"`` twice runs with whichever came last, without a word. Pass
:func:`refuse_duplicate_keys` as ``object_pairs_hook``; the loader turns
:class:`DuplicateKeyError` into its own error naming the file.
"""

from __future__ import annotations

from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object had ``key`` more than once."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one object (JSON would keep only the last)")
        self.key = key


def refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads`: a dict, or DuplicateKeyError on a repeated key."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result
