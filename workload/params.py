"""Parameters: VirtualClient's ``--parameters`` syntax, a case-insensitive parameter map, and
which parameters hold secrets."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from workload.commands import MASK, Secrets, mask_text
from workload.errors import UsageError

#: Words that make a parameter name a secret's name (``GitHubToken``, ``SshPassword``, ``api_key``).
SECRET_WORDS = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "token",
        "tokens",
        "secret",
        "secrets",
        "credential",
        "credentials",
        "apikey",
    }
)
#: ``Key`` names a secret too, unless the value is a URL (``ToolkitRepositoryKey``: where a public
#: signing key is downloaded from).
KEY_WORDS = frozenset({"key", "keys"})
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_NUMBER = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?")


#: Secret words whose parameters may hold plain counts (``MaxTokens: 1024``, ``KeySize: 4096``): a
#: number there is not a secret. A number under any other secret word is (``SudoPassword: 123456``).
COUNTED_WORDS = frozenset({"token", "tokens", "key", "keys"})


def is_secret(name: str, value: Any) -> bool:
    """Whether a parameter's value is a secret, judged by its name and value.

    Names are split into words (PascalCase, ``snake_case``, dots); a word like Password, Token,
    Secret, Credential (any case) makes it secret; so does Key unless the value is a URL. Only
    non-empty values count; a number (JSON number or numeric text) is a secret under a Password,
    Passphrase, Secret, Credential or ApiKey name, not under Token or Key alone (``MaxTokens: 1024``).
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return False
    text = str(value).strip()
    if not text:
        return False
    words = {w.lower() for w in _WORDS.findall(name)}
    if not isinstance(value, str) or _NUMBER.fullmatch(text):
        return bool(words & (SECRET_WORDS - COUNTED_WORDS))
    if words & SECRET_WORDS:
        return True
    return bool(words & KEY_WORDS) and "://" not in value


def display_value(name: str, value: Any, secrets: Secrets | None = None) -> Any:
    """A parameter value as it may be displayed or written to the run folder.

    ``***`` for a secret (:func:`is_secret`); texts with URL passwords and the run's ``secrets`` masked.
    """
    if is_secret(name, value):
        return MASK
    if isinstance(value, str):
        return mask_text(value, secrets)
    return value


def display_parameters(parameters: Mapping[str, Any], secrets: Secrets | None = None) -> dict[str, Any]:
    """:func:`display_value` of each parameter."""
    return {key: display_value(key, value, secrets) for key, value in parameters.items()}


def display_tree(value: Any, name: str = "", secrets: Secrets | None = None) -> Any:
    """A JSON value (a profile's ``Metadata``, ``Description``) as it may be shown or written.

    Objects are masked key by key (:func:`display_value`, recursively), lists item by item, texts
    with :func:`~workload.commands.mask_text`.
    """
    if isinstance(value, Mapping):
        return {key: display_tree(item, str(key), secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [display_tree(item, name, secrets) for item in value]
    return display_value(name, value, secrets)


def secret_values(value: Any, name: str = "") -> Iterator[str]:
    """Every secret text in a JSON value, by the rules of :func:`display_tree` (for a run's ``Secrets``)."""
    from workload.commands import url_passwords

    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from secret_values(item, str(key))
    elif isinstance(value, list):
        for item in value:
            yield from secret_values(item, name)
    else:
        if is_secret(name, value):
            yield str(value).strip()
        if isinstance(value, str):
            yield from url_passwords(value)


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
        previous: str | None = None
        for number, pair in enumerate(pairs, 1):
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                # The text is not echoed: it may be a piece of a value cut at a comma (a password).
                after = f" (after the value of {previous!r})" if previous else ""
                raise UsageError(
                    f"--parameters: item {number}{after} is not key=value",
                    hint="a value that contains ',' or ';' needs ',,,' between the pairs, e.g. "
                    '--parameters "Username=azureuser,,,DiskFilter=SizeGreaterThan:500gb"',
                )
            previous = key.strip()
            merged[key.strip()] = value.strip()
    return {str(k): str(v) for k, v in merged.to_dict().items()}
