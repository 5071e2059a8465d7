"""Naming a host: a ``--host`` value or an inventory line parsed into a :class:`HostSpec`.

Moved out of :mod:`workload.hosts.base` (which re-exports every name): parsing a host's URL is
input validation, apart from the :class:`~workload.hosts.base.Host` contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from workload.commands import Secret
from workload.errors import UsageError


@dataclass
class HostSpec:
    """A parsed ``--host`` value: ``local://`` or ``ssh://user@host:port`` plus options.

    ``source`` says where the spec came from (``--host`` or ``fleet.txt:3``), so that a later
    problem with it (a key file that does not exist) names the place to fix.
    """

    scheme: str
    hostname: str = "localhost"
    user: str | None = None
    port: int = 22
    key_filename: str | None = None
    password: Secret | None = None
    labels: dict[str, str] = field(default_factory=dict)
    alias: str | None = None
    source: str | None = None

    @property
    def name(self) -> str:
        if self.alias:
            return self.alias
        if self.scheme == "local":
            return "local"
        suffix = "" if self.port == 22 else f":{self.port}"
        return f"{self.hostname}{suffix}"


#: What a host name may hold (RFC 1123 labels; '_' too, as many internal DNS names have it).
_HOSTNAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})", re.ASCII)
#: A user name: POSIX's portable characters, plus a trailing '$' and '@' (directory users, as sshd allows).
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\$?", re.ASCII)


def _is_ip_literal(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _port_of(netloc: str) -> int | None:
    """The URL's port (22 when none is given), or None when it is not 1-65535 in ASCII digits.

    Parsed here rather than by urllib, which reads ``:0`` as "no port" and accepts non-ASCII digits.
    """
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        rest = hostport.partition("]")[2]
        if not rest:
            return 22
        if not rest.startswith(":"):
            return None
        text = rest[1:]
    else:
        _host, sep, text = hostport.partition(":")
        if not sep:
            return 22
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return None
    port = int(text)
    return port if 1 <= port <= 65535 else None


def parse_host_spec(text: str, *, option: str | None = None) -> HostSpec:
    """Parse ``local://``, ``local``, ``ssh://user@host:22`` or ``user@host`` into a HostSpec.

    Errors name ``--host`` and the value, or ``option`` (an inventory's ``file:line``) when given.
    A password in the URL is refused (it would sit in shell history and ``ps`` output) and masked
    in the message.
    """
    from urllib.parse import urlsplit

    from workload.commands import mask_url_passwords

    raw = text.strip()
    shown = mask_url_passwords(raw if "://" in raw or "@" not in raw else "ssh://" + raw)
    where = f"--host {shown!r}" if option is None else f"{option}: host {shown!r}"
    if raw in ("", "local", "local://", "localhost://"):
        return HostSpec(scheme="local", source=option or "--host")
    if "://" not in raw:
        raw = "ssh://" + raw
    usage = "use local:// or ssh://user@host:port"
    try:
        parts = urlsplit(raw)
    except ValueError as exc:  # "Invalid IPv6 URL", a port out of range...
        raise UsageError(f"{where}: not a valid host URL ({exc})", hint=usage) from None
    if parts.scheme == "local":
        if parts.netloc or parts.path.strip("/") or parts.query or parts.fragment:
            raise UsageError(f"{where}: local:// names this machine and takes nothing after it", hint=usage)
        return HostSpec(scheme="local", source=option or "--host")
    if parts.scheme != "ssh":
        raise UsageError(f"{where}: unknown scheme {parts.scheme!r}", hint=usage)
    # An ssh URL names a machine only: a path, query or fragment would be silently ignored.
    if parts.path not in ("", "/") or parts.query or parts.fragment or raw.endswith(("?", "#")):
        raise UsageError(f"{where}: an ssh host URL has no path, query or fragment", hint="use ssh://user@host:port")
    if not parts.hostname:
        raise UsageError(f"{where}: no host name", hint="use ssh://user@host:port")
    if not _HOSTNAME.fullmatch(parts.hostname) and not _is_ip_literal(parts.hostname):
        raise UsageError(
            f"{where}: {parts.hostname!r} is not a host name or IP address",
            hint="host names are ASCII letters, digits, '-', '.' and '_' (IPv6 goes in brackets: ssh://user@[::1]:22)",
        )
    port = _port_of(parts.netloc)
    if port is None:
        raise UsageError(f"{where}: the port is not a number between 1 and 65535")
    if parts.password is not None:
        hint = (
            "put the password in an environment variable and pass --ssh-password-env VARIABLE_NAME, "
            "or use key or agent authentication"
            if option is None
            else "put the password in an environment variable and write password_env=VARIABLE_NAME"
        )
        raise UsageError(f"{where}: a password in the host URL would end up in shell history", hint=hint)
    if parts.username is not None and not _USER.fullmatch(parts.username):
        problem = "the user name is empty" if not parts.username else f"{parts.username!r} is not a user name"
        raise UsageError(f"{where}: {problem}", hint="use ssh://user@host:port, or leave out 'user@'")
    return HostSpec(scheme="ssh", hostname=parts.hostname, user=parts.username, port=port, source=option or "--host")
