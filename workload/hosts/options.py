"""How to connect to hosts: the options the CLI (or a test) gives to :func:`workload.hosts.open_host`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from workload.commands import Secret
from workload.errors import UsageError


@dataclass(frozen=True)
class ConnectOptions:
    """Connection settings shared by every host of a run.

    Authentication (SSH) is tried in paramiko's order: ``key_filename``, then the SSH agent
    (``use_agent``), then ``~/.ssh/id_*`` (``look_for_keys``), then ``password``.

    Host keys are checked against ``~/.ssh/known_hosts`` (``use_system_known_hosts``) and the
    ``known_hosts`` file. An unknown key is refused unless ``accept_new_host_keys`` is set; then it
    is recorded in ``known_hosts`` (or ``~/.ssh/known_hosts`` when that is not given). A key that
    differs from a recorded one is always refused.

    Connecting is retried for transient network errors only (refused, reset, timeout, EOF before
    the SSH banner), with exponential backoff and jitter, at most ``connect_attempts`` times and
    for at most ``connect_budget_s`` seconds in all. Authentication and host-key errors are never
    retried.
    """

    key_filename: str | None = None
    password: Secret | None = None
    use_agent: bool = True
    look_for_keys: bool = True
    known_hosts: str | None = None
    use_system_known_hosts: bool = True
    accept_new_host_keys: bool = False
    #: Limit for one TCP connect, the banner and authentication, each.
    connect_timeout_s: float = 10.0
    connect_attempts: int = 8
    connect_budget_s: float = 90.0
    #: Password for ``sudo -S`` when the connecting user is not root and sudo asks for one.
    sudo_password: Secret | None = None
    #: SSH keepalive interval, so idle NAT/firewall state does not drop long silent commands.
    keepalive_s: int = 15

    def __post_init__(self) -> None:
        if self.connect_attempts < 1:
            raise UsageError(f"connect attempts must be at least 1, not {self.connect_attempts}")
        if self.connect_timeout_s <= 0:
            raise UsageError(f"the connect timeout must be positive, not {self.connect_timeout_s}")


def secret_from_env(variable: str, *, what: str = "--sudo-password-env", hint: str | None = None) -> Secret:
    """The value of an environment variable as a :class:`Secret` (for ``--sudo-password-env VAR``).

    Raises :class:`UsageError` naming ``what`` (the option, or an inventory's ``file:line``) when
    the variable is unset or empty: a password given on the command line itself would end up in
    shell history and ``ps`` output. The run that uses it masks it in every text it shows or logs
    (see :class:`~workload.commands.Secrets`; the CLI adds it to the run's).
    """
    if not variable or not variable.replace("_", "").isalnum():
        raise UsageError(f"{what} {variable!r}: not an environment variable name", hint="e.g. WORKLOAD_PASSWORD")
    value = os.environ.get(variable)
    if not value:
        raise UsageError(
            f"{what} {variable}: the environment variable {variable} is not set or empty",
            hint=hint or f"export {variable}=... first (or use --ask-sudo-password to be prompted)",
        )
    return Secret(value)
