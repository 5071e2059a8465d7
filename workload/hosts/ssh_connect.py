"""Opening one SSH connection: host-key checking, authentication, and readable errors.

:func:`open_client` makes one attempt and turns every paramiko/socket exception into a
:class:`~workload.errors.ConnectError` (:func:`connect_error`); the transient ones (refused, reset,
timeout, EOF before the banner, unreachable) are :class:`TransientConnectError`, the only kind
:class:`~workload.hosts.ssh.SshHost` retries. Host keys: known_hosts files are loaded, an unknown
key is refused with a hint (or, with ``accept_new_host_keys``, recorded), a changed key is refused.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shlex
import socket
from collections.abc import Callable
from dataclasses import dataclass

import paramiko

from workload.errors import ConnectError
from workload.hosts.options import ConnectOptions

log = logging.getLogger(__name__)
# paramiko logs the exceptions of its transport thread (with tracebacks) before re-raising them
# here; with no handler configured, Python's last-resort handler printed them on the console. Every
# one of them comes back as one ConnectError with a readable message instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class SshTarget:
    """Where to connect: ``name`` is the ``[name]`` used in messages."""

    name: str
    hostname: str
    port: int
    user: str


class TransientConnectError(ConnectError):
    """A connect attempt failed for a reason that may go away (the only kind that is retried)."""


def open_client(
    target: SshTarget, options: ConnectOptions, client_factory: Callable[[], paramiko.SSHClient]
) -> paramiko.SSHClient:
    """One connect attempt: a connected, authenticated client, or the ConnectError describing why not."""
    opts = options
    client = client_factory()
    try:
        revoked = load_host_keys(client, target, options)
        client.set_missing_host_key_policy(HostKeyPolicy(target, options, revoked))
        client.connect(
            target.hostname,
            port=target.port,
            username=target.user,
            password=opts.password.value if opts.password else None,
            key_filename=opts.key_filename,
            allow_agent=opts.use_agent,
            look_for_keys=opts.look_for_keys,
            timeout=opts.connect_timeout_s,
            banner_timeout=opts.connect_timeout_s,
            auth_timeout=opts.connect_timeout_s,
        )
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(opts.keepalive_s)
            # Each command is a few small packets; without TCP_NODELAY, Nagle's algorithm and
            # delayed ACKs add ~40 ms per command (a no-op re-run of a profile is 3x slower).
            with contextlib.suppress(OSError, AttributeError):
                transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # type: ignore[union-attr]
        return client
    except BaseException as exc:
        with contextlib.suppress(Exception):
            client.close()
        if isinstance(exc, ConnectError):
            raise
        if isinstance(exc, Exception):
            raise connect_error(exc, target, options) from exc
        raise


def load_host_keys(client: paramiko.SSHClient, target: SshTarget, options: ConnectOptions) -> dict[str, str]:
    """Load ~/.ssh/known_hosts (unless disabled) and the ``known_hosts`` option's file into ``client``.

    Read line by line as OpenSSH does (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): ``@revoked``
    keys are returned (``"type base64" -> "file:line"``) so that a server offering one is refused;
    ``@cert-authority`` lines (host certificates, which paramiko cannot check) are skipped, so
    such hosts need a plain key line too. A line that is not a known_hosts entry is named
    (file:line) instead of paramiko's "Incorrect padding".
    """
    files = []
    if options.use_system_known_hosts:
        files.append(os.path.expanduser("~/.ssh/known_hosts"))
    if options.known_hosts:
        files.append(options.known_hosts)
    revoked: dict[str, str] = {}
    hint = "fix or remove the broken line (ssh-keygen -F HOST -f FILE shows the entries for a host)"
    for path in files:
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError as e:
            raise ConnectError(target.name, f"cannot read the known_hosts file {path}: {e.strerror or e}") from e
        keys = client.get_host_keys()
        for lineno, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            marker = ""
            if line.startswith("@"):
                marker, _, line = line.partition(" ")
                if marker not in ("@revoked", "@cert-authority"):
                    raise ConnectError(
                        target.name,
                        f"cannot read the known_hosts file {path}:{lineno}: unknown marker {marker!r}",
                        hint=hint,
                    )
            if marker == "@cert-authority":
                continue  # host certificates are not checked by paramiko: this line cannot vouch for a host
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line.strip(), lineno)
            except (paramiko.SSHException, ValueError, paramiko.hostkeys.InvalidHostKey) as e:
                raise ConnectError(
                    target.name,
                    f"cannot read the known_hosts file {path}:{lineno}: not a known_hosts entry ({_first_line(e)})",
                    hint=hint,
                ) from e
            if entry is None or entry.key is None:
                continue  # too few fields or a key type paramiko does not know: skipped, as paramiko does
            if marker == "@revoked":
                revoked[f"{entry.key.get_name()} {entry.key.get_base64()}"] = f"{path}:{lineno}"
                continue
            for name in entry.hostnames:
                keys.add(name, entry.key.get_name(), entry.key)
    return revoked


def connect_error(exc: Exception, target: SshTarget, options: ConnectOptions) -> ConnectError:
    """The one ConnectError for an exception of paramiko or the socket layer."""
    where = f"{target.user}@{target.hostname}:{target.port}"
    hint_net = "check the host name and port, and that sshd runs there (the machine may still be booting)"
    if isinstance(exc, paramiko.BadHostKeyException):
        return ConnectError(
            target.name,
            f"the host key of {_key_name(target.hostname, target.port)} has CHANGED: the server offers "
            f"{exc.key.get_name()} {exc.key.fingerprint}, known_hosts has {exc.expected_key.fingerprint} "
            "(the machine was reinstalled, or someone is intercepting the connection)",
            hint=f"if the machine was reinstalled, remove the old key with: ssh-keygen -R "
            f"{shlex.quote(_key_name(target.hostname, target.port))}" + _known_hosts_flag(options),
        )
    if isinstance(exc, paramiko.PasswordRequiredException):
        return ConnectError(
            target.name,
            f"the private key {options.key_filename or '(from ~/.ssh)'} is encrypted and needs a passphrase",
            hint="load it into an SSH agent (ssh-add KEY) and connect with the agent",
        )
    if isinstance(exc, paramiko.BadAuthenticationType):
        allowed = list(exc.allowed_types)
        ways = ["a key (-i/--identity KEYFILE, or key= in the inventory)", "an SSH agent"]
        if "password" in allowed:
            ways.append("a password (--ssh-password-env VAR, or password_env= in the inventory)")
        return ConnectError(
            target.name,
            f"{where}: the server does not accept this authentication method "
            f"(it allows: {', '.join(allowed) or 'nothing'})",
            hint="use " + ", ".join(ways[:-1]) + " or " + ways[-1],
        )
    if isinstance(exc, paramiko.AuthenticationException):
        if options.password is not None:
            hint = "check the user name and the password (the variable named by --ssh-password-env / password_env)"
        else:
            hint = "check the user name and that the key's public half is in the user's ~/.ssh/authorized_keys"
        return ConnectError(
            target.name, f"authentication failed for {where} (tried: {_auth_methods(options)})", hint=hint
        )
    if isinstance(exc, socket.gaierror):
        return ConnectError(target.name, f"cannot resolve the host name {target.hostname!r}: {exc.strerror}")
    if isinstance(exc, (paramiko.ssh_exception.NoValidConnectionsError, ConnectionRefusedError)):
        return TransientConnectError(
            target.name, f"connection refused by {target.hostname}:{target.port}", hint=hint_net
        )
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return TransientConnectError(
            target.name,
            f"timed out connecting to {target.hostname}:{target.port} after {options.connect_timeout_s:g}s",
            hint=hint_net,
        )
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return TransientConnectError(target.name, f"the connection to {target.hostname}:{target.port} was reset")
    not_ssh = _not_ssh(exc, target, options)
    if not_ssh is not None:
        return ConnectError(
            target.name,
            f"{target.hostname}:{target.port} does not speak SSH ({not_ssh})",
            hint="check the port: sshd listens on 22 unless its config says otherwise (ssh://user@host:PORT)",
        )
    if isinstance(exc, EOFError) or (
        isinstance(exc, paramiko.SSHException)
        and any(s in str(exc) for s in ("Error reading SSH protocol banner", "Negotiation failed", MAX_STARTUPS))
    ):
        return TransientConnectError(
            target.name,
            f"{target.hostname}:{target.port} closed the connection before the SSH handshake completed",
            hint="sshd may be starting up or refusing connections (MaxStartups); check that this port speaks SSH",
        )
    if isinstance(exc, FileNotFoundError):
        return ConnectError(target.name, f"the key file {exc.filename or options.key_filename} does not exist")
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        return TransientConnectError(target.name, f"{target.hostname} is unreachable: {exc.strerror}", hint=hint_net)
    if isinstance(exc, OSError):
        return ConnectError(target.name, f"cannot connect to {target.hostname}:{target.port}: {exc.strerror or exc}")
    if isinstance(exc, paramiko.SSHException) and str(exc) == "No existing session":
        return TransientConnectError(
            target.name,
            f"{target.hostname}:{target.port} did not complete the SSH handshake within {options.connect_timeout_s:g}s",
            hint="the host may be overloaded or still booting",
        )
    if isinstance(exc, paramiko.SSHException):
        return ConnectError(target.name, f"SSH error talking to {where}: {exc}")
    return ConnectError(target.name, f"unexpected error connecting to {where}: {type(exc).__name__}: {exc}")


#: What OpenSSH's sshd writes, instead of its banner, to a connection it drops at its MaxStartups
#: limit (sshd.c, ``drop_connection``): sshd itself, busy with unauthenticated connections.
MAX_STARTUPS = "Exceeded MaxStartups"


def _not_ssh(exc: Exception, target: SshTarget, options: ConnectOptions) -> str | None:
    """Why the peer is evidently not an SSH server, or None (then the error may be transient).

    An SSH server sends its ``SSH-2.0-...`` banner at once, before it reads anything. paramiko
    says only "Error reading SSH protocol banner" both for a peer of another protocol (an HTTP
    server answers paramiko's own banner with a 400 page and closes) and for an sshd dropping
    connections at MaxStartups, so on that error the port is probed once, sending nothing: text
    that is not an SSH banner, or silence until the timeout, is another protocol; a closed
    connection stays transient.
    """
    if not isinstance(exc, paramiko.SSHException):
        return None
    text = str(exc)
    if text.startswith("Indecipherable protocol version"):
        said = text.partition('"')[2].rstrip('"').strip()
        if said.startswith(MAX_STARTUPS):
            return None  # sshd itself, refusing for now: transient (many connections at once)
        return f"it said {said[:60]!r}" if said else "it sent no SSH banner"
    # "No existing session": the banner wait ran out while connect() went on to authenticate.
    if not text.startswith(("Error reading SSH protocol banner", "No existing session")):
        return None
    timeout = min(options.connect_timeout_s, 5.0)
    try:
        with socket.create_connection((target.hostname, target.port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            try:
                first = sock.recv(256)
            except TimeoutError:
                return f"it sent no SSH banner within {timeout:g}s"
    except OSError:
        return None
    if not first or first.startswith((b"SSH-", MAX_STARTUPS.encode())):
        return None
    said = first.decode("ascii", errors="replace").splitlines()[0].strip()
    return f"it said {said[:60]!r} instead of an SSH banner"


def _auth_methods(options: ConnectOptions) -> str:
    methods = []
    if options.key_filename:
        methods.append(f"key {options.key_filename}")
    if options.use_agent:
        methods.append("SSH agent")
    if options.look_for_keys:
        methods.append("~/.ssh/id_*")
    if options.password:
        methods.append("password")
    return ", ".join(methods) or "nothing: no key, agent or password was given"


def _known_hosts_flag(options: ConnectOptions) -> str:
    return f" -f {shlex.quote(options.known_hosts)}" if options.known_hosts else ""


class HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown host keys, or accept and record them when the options say so."""

    def __init__(self, target: SshTarget, options: ConnectOptions, revoked: dict[str, str] | None = None) -> None:
        self.target = target
        self.options = options
        self.revoked = revoked or {}

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        opts = self.options
        where = self.revoked.get(f"{key.get_name()} {key.get_base64()}")
        if where is not None:
            raise ConnectError(
                self.target.name,
                f"the host key of {hostname} ({key.get_name()} {key.fingerprint}) is marked @revoked in {where}; "
                "refusing to connect",
            )
        path = opts.known_hosts or os.path.expanduser("~/.ssh/known_hosts")
        if not opts.accept_new_host_keys:
            raise ConnectError(
                self.target.name,
                f"the host key of {hostname} is not known ({key.get_name()} {key.fingerprint}); "
                "refusing to connect to an unverified host",
                hint=f"check the fingerprint, then re-run with --accept-new-host-key to record it in {path} "
                f"(or add it yourself: ssh-keyscan -p {self.target.port} {self.target.hostname} >> {path})",
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        try:
            _append_known_host(path, f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as e:
            raise ConnectError(
                self.target.name, f"cannot record the new host key of {hostname} in {path}: {e.strerror or e}"
            ) from e
        log.warning("[%s] recorded new host key %s %s in %s", self.target.name, key.get_name(), key.fingerprint, path)


def _append_known_host(path: str, line: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="ascii") as f:
        if f.tell() > 0:
            with open(path, "rb") as existing:
                existing.seek(-1, os.SEEK_END)
                if existing.read(1) != b"\n":
                    f.write("\n")
        f.write(line)


def _first_line(error: Exception) -> str:
    text = str(error.args[-1] if isinstance(error, paramiko.hostkeys.InvalidHostKey) else error)
    return text.splitlines()[0] if text else type(error).__name__


def _key_name(hostname: str, port: int) -> str:
    """How known_hosts names a host (``[host]:port`` unless the port is 22)."""
    return hostname if port == 22 else f"[{hostname}]:{port}"
