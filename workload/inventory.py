"""Inventory files: many target hosts in one file (``--inventory FILE``).

Text format, one host per line; ``#`` starts a comment at the start of a line or after
whitespace (a ``#`` inside a value, as in ``rack=r#12``, is part of the value)::

    # spec                              options (key=value), any order
    ssh://azureuser@10.0.0.4            key=~/.ssh/mlperf_ed25519  sku=ND96isr_H100_v5  rack=r12
    azureuser@10.0.0.5:2222             key=~/.ssh/mlperf_ed25519  name=vm-05
    ssh://ubuntu@10.0.0.6               password_env=VM06_PASSWORD
    local://

Known options: ``key`` (private key file), ``user``, ``port`` (1-65535), ``name`` (display name
used in logs and result files), ``password_env`` (the name of an environment variable holding the
SSH password; a password itself never belongs in a file); every other ``key=value`` is a label
copied into each metric's metadata.

A ``.json`` file may instead hold ``{"hosts": [{"host": "...", "user": "...", "port": 22,
"key": "...", "name": "...", "password_env": "...", "labels": {...}}]}``.

Every error names the file and the line (text) or the entry (``hosts[3]``, JSON). Each host spec
records that place in :attr:`HostSpec.source`, so later checks (a key file that does not exist)
can name it too.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from workload.errors import UsageError
from workload.hosts.base import HostSpec, parse_host_spec
from workload.jsonloc import format_loc
from workload.numbers import NumberProblem, load_json, parse_int, unbounded_numbers
from workload.safefile import read_regular

_KNOWN = {"key", "user", "port", "name", "password_env"}
#: an inventory of thousands of hosts is a few hundred KiB; more is not an inventory
_MAX_INVENTORY_BYTES = 16 * 1024 * 1024
_JSON_KEYS = _KNOWN | {"host", "labels"}


def load_inventory(path: Path) -> list[HostSpec]:
    """Parse an inventory file; errors name the file and line."""
    try:
        data = read_regular(path, _MAX_INVENTORY_BYTES)
        text = data.decode("utf-8-sig")
    except OSError as exc:
        raise UsageError(f"--inventory {path}: cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = text_line_of(data, exc.start)
        raise UsageError(
            f"--inventory {path}:{line}: the file is not UTF-8 text (byte {exc.object[exc.start]:#04x})",
            hint="save the inventory as UTF-8",
        ) from None
    specs = _from_json(path, text) if path.suffix == ".json" else _from_text(path, text)
    if not specs:
        raise UsageError(f"--inventory {path}: no hosts in the file")
    first_seen: dict[str, str] = {}
    for spec in specs:
        if spec.name in first_seen:
            raise UsageError(
                f"{spec.source}: host {spec.name} is listed twice (first at {first_seen[spec.name]})",
                hint="give each a distinct name= (e.g. two accounts on one machine)",
            )
        first_seen[spec.name] = spec.source or str(path)
    return specs


def text_line_of(data: bytes, offset: int) -> int:
    """The 1-based line number of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1


def _apply(spec: HostSpec, options: dict[str, Any], where: str) -> HostSpec:
    spec.source = where
    for key, value in options.items():
        if key == "key":
            spec.key_filename = str(Path(_text(value, where, key)).expanduser())
        elif key == "user":
            spec.user = _text(value, where, key)
        elif key == "port":
            spec.port = _port(value, where)
        elif key == "name":
            spec.alias = _text(value, where, key)
        elif key == "password_env":
            from workload.hosts.options import secret_from_env

            spec.password = secret_from_env(
                _text(value, where, key),
                what=f"{where}: password_env",
                hint=f"export {value}=... before the run (the inventory names the variable, never the password)",
            )
        elif key == "password":
            raise UsageError(
                f"{where}: password=: a password does not belong in an inventory file",
                hint="put it in an environment variable and write password_env=VARIABLE_NAME",
            )
        else:
            if isinstance(value, (dict, list)) or value is None:
                raise UsageError(f"{where}: label {key!r} must be a text, number or boolean")
            spec.labels[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return spec


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where}: {key} must be a non-empty text, not {json.dumps(value)}")
    return value


def _port(value: Any, where: str) -> int:
    # ASCII digits only: int() would also read "２２" (fullwidth) and " 22 " as 22.
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    try:
        if not isinstance(text, str) or not text.isascii() or text != text.strip():
            raise NumberProblem("not a whole number")
        return parse_int(text, minimum=1, maximum=65535)
    except NumberProblem:
        shown = repr(value) if len(str(text)) <= 20 else f"{str(text)[:20]!r}..."
        raise UsageError(f"{where}: port {shown} is not a number between 1 and 65535") from None


def strip_comment(line: str) -> str:
    """``line`` without its comment: a ``#`` that starts a word (line start or after unescaped
    whitespace), outside quotes, as in a POSIX shell."""
    quote: str | None = None
    escaped = False
    word_start = True
    for index, char in enumerate(line):
        starts_word = word_start
        word_start = False
        if escaped:
            escaped = False
        elif quote is not None:
            if char == quote:
                quote = None
            elif char == "\\" and quote == '"':
                escaped = True
        elif char == "\\":
            escaped = True
        elif char in "'\"":
            quote = char
        elif char.isspace():
            word_start = True
        elif char == "#" and starts_word:
            return line[:index]
    return line


def _from_text(path: Path, text: str) -> list[HostSpec]:
    specs: list[HostSpec] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = strip_comment(raw).strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        try:
            tokens = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"{where}: {exc}") from None
        try:
            spec = parse_host_spec(tokens[0], option=where)
        except UsageError as exc:
            raise UsageError(exc.message, hint=exc.hint) from None
        options: dict[str, Any] = {}
        for token in tokens[1:]:
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise UsageError(f"{where}: {token!r} is not key=value")
            if key in options:
                raise UsageError(f"{where}: {key}= is given twice")
            options[key] = value
        specs.append(_apply(spec, options, where))
    return specs


def _from_json(path: Path, text: str) -> list[HostSpec]:
    from workload.jsonkeys import DuplicateKeyError, refuse_duplicate_keys

    try:
        data = load_json(text, object_pairs_hook=refuse_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: column {exc.colno}: invalid JSON: {exc.msg}") from None
    except DuplicateKeyError as exc:
        raise UsageError(f"{path}: {exc}") from None
    except RecursionError:
        raise UsageError(f"{path}: invalid JSON: nested too deeply") from None
    for loc, why in unbounded_numbers(data):
        raise UsageError(f"{path}: {format_loc(loc)}: {why}")
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, list):
        raise UsageError(f'{path}: expected an object with a "hosts" array')
    specs: list[HostSpec] = []
    for index, item in enumerate(hosts):
        where = f"{path}: hosts[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("host"), str):
            raise UsageError(f'{where}: each host needs a "host" string')
        unknown = sorted(set(item) - _JSON_KEYS)
        if unknown:
            raise UsageError(
                f"{where}.{unknown[0]}: unknown key (expected: {', '.join(sorted(_JSON_KEYS))}; "
                'other values go in "labels")'
            )
        labels = item.get("labels", {})
        if not isinstance(labels, dict):
            raise UsageError(f"{where}.labels: must be an object")
        options = {k: v for k, v in item.items() if k in _KNOWN}
        for key, value in labels.items():
            if key in _KNOWN:
                raise UsageError(f"{where}.labels.{key}: {key!r} is a host option, not a label")
            options[str(key)] = value
        try:
            spec = parse_host_spec(item["host"], option=f"{where}.host")
        except UsageError as exc:
            raise UsageError(exc.message, hint=exc.hint) from None
        specs.append(_apply(spec, options, where))
    return specs
