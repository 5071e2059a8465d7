"""Inventory files: many target hosts in one file (``--inventory FILE``).

Text format, one host per line; ``#`` starts a comment::

    # spec                              options (key=value), any order
    ssh://azureuser@10.0.0.4            key=~/.ssh/mlperf_ed25519  sku=ND96isr_H100_v5  rack=r12
    azureuser@10.0.0.5:2222             key=~/.ssh/mlperf_ed25519  name=vm-05
    local://

Known options: ``key`` (private key file), ``user``, ``port``, ``name`` (display name used in logs
and result files); every other ``key=value`` is a label copied into each metric's metadata.

A ``.json`` file may instead hold ``{"hosts": [{"host": "...", "user": "...", "port": 22,
"key": "...", "name": "...", "labels": {...}}]}``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from workload.errors import UsageError
from workload.hosts.base import HostSpec, parse_host_spec

_KNOWN = {"key", "user", "port", "name"}


def load_inventory(path: Path) -> list[HostSpec]:
    """Parse an inventory file; errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--inventory {path}: cannot read the file: {exc.strerror or exc}") from None
    specs = _from_json(path, text) if path.suffix == ".json" else _from_text(path, text)
    if not specs:
        raise UsageError(f"--inventory {path}: no hosts in the file")
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"--inventory {path}: host listed twice: {', '.join(duplicates)}", hint="give each a name=")
    return specs


def _apply(spec: HostSpec, options: dict[str, Any], where: str) -> HostSpec:
    for key, value in options.items():
        if key == "key":
            spec.key_filename = str(Path(str(value)).expanduser())
        elif key == "user":
            spec.user = str(value)
        elif key == "port":
            try:
                spec.port = int(value)
            except (TypeError, ValueError):
                raise UsageError(f"{where}: port {value!r} is not a number") from None
        elif key == "name":
            spec.alias = str(value)
        else:
            spec.labels[key] = str(value)
    return spec


def _from_text(path: Path, text: str) -> list[HostSpec]:
    specs: list[HostSpec] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        try:
            tokens = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"{where}: {exc}") from None
        try:
            spec = parse_host_spec(tokens[0])
        except UsageError as exc:
            raise UsageError(f"{where}: {exc.message}", hint=exc.hint) from None
        options: dict[str, Any] = {}
        for token in tokens[1:]:
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise UsageError(f"{where}: {token!r} is not key=value")
            options[key] = value
        specs.append(_apply(spec, options, where))
    return specs


def _from_json(path: Path, text: str) -> list[HostSpec]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}") from None
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, list):
        raise UsageError(f'{path}: expected an object with a "hosts" array')
    specs: list[HostSpec] = []
    for index, item in enumerate(hosts):
        where = f"{path}: hosts[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("host"), str):
            raise UsageError(f'{where}: each host needs a "host" string')
        labels = item.get("labels") or {}
        if not isinstance(labels, dict):
            raise UsageError(f"{where}.labels: must be an object")
        options = {k: v for k, v in item.items() if k in _KNOWN}
        options.update({str(k): v for k, v in labels.items()})
        try:
            spec = parse_host_spec(item["host"])
        except UsageError as exc:
            raise UsageError(f"{where}: {exc.message}", hint=exc.hint) from None
        specs.append(_apply(spec, options, where))
    return specs
