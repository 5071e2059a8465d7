"""Parameters: VirtualClient's ``--parameters`` syntax and a case-insensitive parameter map."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from workload.errors import UsageError


class CaseInsensitiveDict(Mapping[str, Any]):
    """A read-mostly mapping whose keys match case-insensitively and keep their first spelling."""

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        self._data: dict[str, tuple[str, Any]] = {}
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self[key] = value

    def __setitem__(self, key: str, value: Any) -> None:
        lower = key.lower()
        spelling = self._data[lower][0] if lower in self._data else key
        self._data[lower] = (spelling, value)

    def __getitem__(self, key: str) -> Any:
        return self._data[key.lower()][1]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._data

    def __iter__(self) -> Iterator[str]:
        return (spelling for spelling, _ in self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def to_dict(self) -> dict[str, Any]:
        return {spelling: value for spelling, value in self._data.values()}


def parse_parameters(texts: Iterable[str]) -> dict[str, str]:
    """Parse ``--parameters`` values the way VirtualClient does.

    Each text holds ``key=value`` pairs. The delimiter is ``,,,`` if the text contains it, else
    ``;`` if it contains one, else ``,``. The key is the text before the first ``=`` (values may
    contain ``=``). Keys are case-insensitive; a later value replaces an earlier one.
    """
    merged = CaseInsensitiveDict()
    for text in texts:
        if ",,," in text:
            pairs = text.split(",,,")
        elif ";" in text:
            pairs = text.split(";")
        else:
            pairs = text.split(",")
        for pair in pairs:
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(
                    f"--parameters: {pair.strip()!r} is not key=value",
                    hint='example: --parameters "Username=azureuser,,,DiskFilter=SizeGreaterThan:500gb"',
                )
            merged[key.strip()] = value.strip()
    return {str(k): str(v) for k, v in merged.to_dict().items()}
