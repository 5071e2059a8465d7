"""Hosts: where commands run. ``open_host(spec, options)`` gives a :class:`Host` for a ``--host`` value.

Public API::

    spec = parse_host_spec("ssh://ubuntu@10.0.0.5:22")        # or "local://"
    host = open_host(spec, ConnectOptions(key_filename="~/.ssh/id_ed25519"))
    host.check(cmd("apt-get", "update", sudo=True))            # raises CommandFailed on non-zero exit
    result = host.run(cmd("nvidia-smi"))                       # never raises for a non-zero exit

Connections are opened lazily (``host.connect()`` to open one now) and re-opened after a loss.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from workload.errors import UsageError
from workload.hosts.base import (
    CommandResult,
    ConnectionLost,
    FileTransferError,
    Host,
    HostSpec,
    OutputCollector,
    parse_host_spec,
    raise_for_result,
)
from workload.hosts.local import LocalHost
from workload.hosts.options import ConnectOptions, secret_from_env

if TYPE_CHECKING:
    from workload.hosts.ssh import SshHost

__all__ = [
    "CommandResult",
    "ConnectOptions",
    "ConnectionLost",
    "FileTransferError",
    "Host",
    "HostSpec",
    "LocalHost",
    "OutputCollector",
    "SshHost",
    "open_host",
    "parse_host_spec",
    "raise_for_result",
    "secret_from_env",
]


def __getattr__(name: str) -> Any:
    # SshHost is imported on first use: paramiko (and its crypto) is slow to import, and local-only
    # runs (and `workload --help`) should not pay for it.
    if name == "SshHost":
        from workload.hosts.ssh import SshHost

        return SshHost
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_host(spec: HostSpec, options: ConnectOptions | None = None) -> Host:
    """The Host for ``spec``; nothing is connected yet.

    A key file or password in ``spec`` (from an inventory entry) wins over the one in ``options``
    (from the command line), so one run can reach hosts with different credentials.
    """
    options = options or ConnectOptions()
    if spec.scheme == "local":
        return LocalHost(spec.name, sudo_password=options.sudo_password)
    if spec.scheme == "ssh":
        from dataclasses import replace

        from workload.hosts.ssh import SshHost

        key = spec.key_filename or options.key_filename
        if key is not None:
            key = os.path.expanduser(key)
            if not os.path.isfile(key):
                where = spec.source if spec.key_filename else "-i/--identity"
                raise UsageError(f"{where}: the key file {key} does not exist (host {spec.name})")
        merged = replace(options, key_filename=key, password=spec.password or options.password)
        return SshHost(spec.hostname, port=spec.port, user=spec.user, options=merged, name=spec.name)
    raise UsageError(f"--host {spec.name}: unknown scheme {spec.scheme!r}", hint="use local:// or ssh://user@host:port")
