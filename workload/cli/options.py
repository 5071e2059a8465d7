"""Options shared by several commands, and turning them into profiles and hosts."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from workload.cli.target_opener import TargetOpener

if TYPE_CHECKING:
    from workload.commands import Secret
    from workload.hosts.base import Host, HostSpec
    from workload.hosts.options import ConnectOptions
    from workload.profile import ResolvedProfile

F = TypeVar("F", bound=Callable[..., Any])


def parameter_options(func: F) -> F:
    """``--parameters`` and ``--scenarios``, VirtualClient style."""
    func = click.option(
        "--scenarios",
        metavar="LIST",
        help="Only actions whose Scenario is listed (a,b); '-name' excludes an action or dependency. "
        "MLPerf scenarios (Offline, Server...) are the actions' Scenarios parameter: set them with -p.",
    )(func)
    func = click.option(
        "--parameters",
        "-p",
        multiple=True,
        metavar="K=V,,,K=V",
        help="Override profile Parameters. Pairs split on ',,,' if present, else ';', else ','. Repeatable.",
    )(func)
    return func


def profile_options(func: F) -> F:
    """The profile, as VirtualClient's ``--profile NAME|PATH`` or as the first argument: every command
    that takes a profile accepts both forms (``workload show PROFILE`` and ``workload run --profile
    PROFILE`` alike). The command receives it as ``profile: str``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, profile=pick_profile(kwargs.pop("profile_argument"), kwargs.pop("profile_option")), **kwargs)

    decorated: Any = click.option(
        "--profile",
        "profile_option",
        metavar="NAME|PATH",
        help="A shipped profile name (see `workload profiles`) or a path to a profile JSON file; "
        "may also be given as the first argument.",
    )(wrapper)
    decorated = click.argument("profile_argument", metavar="[PROFILE]", required=False)(decorated)
    return cast(F, decorated)


def pick_profile(argument: str | None, option: str | None) -> str:
    """The one profile of a command line (argument or ``--profile``); a :class:`UsageError` when
    there is none, or two that differ."""
    from workload.errors import UsageError

    if argument is not None and option is not None and argument != option:
        raise UsageError(
            f"two profiles given: {argument} (argument) and {option} (--profile)", hint="give the profile once"
        )
    profile = option if option is not None else argument
    if profile is None:
        raise UsageError(
            "no profile given",
            hint="name it as --profile NAME|PATH or as the first argument (`workload profiles` lists shipped ones)",
        )
    return profile


@dataclass(frozen=True)
class Targets:
    """The ``--host``/``--inventory`` and SSH options of a command, as one value."""

    hosts: tuple[str, ...] = ()
    inventory: Path | None = None
    parallel: int = 8
    identity: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    sudo_password_env: str | None = None
    ask_sudo_password: bool = False
    ssh_password_env: str | None = None
    #: ``--slurm PARTITION`` and its options (workload/cli/slurm_targets.py), by option name.
    slurm: dict[str, Any] = field(default_factory=dict)


_TARGET_FIELDS = tuple(f.name for f in fields(Targets) if f.name != "slurm")


def host_options(func: F) -> F:
    """Target hosts and how to connect to them; the command receives them as ``targets: Targets``."""

    from workload.cli.slurm_targets import SLURM_OPTIONS, slurm_click_options

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        slurm = {name: kwargs.pop(name) for name in SLURM_OPTIONS}
        targets = Targets(**{name: kwargs.pop(name) for name in _TARGET_FIELDS}, slurm=slurm)
        return func(*args, targets=targets, **kwargs)

    options = [
        click.option(
            "--host",
            "hosts",
            multiple=True,
            metavar="SPEC",
            help="Target: local:// (default) or ssh://user@host[:port]. Repeatable.",
        ),
        click.option(
            "--inventory",
            type=click.Path(path_type=Path),
            help="File listing target hosts (see README: Inventory).",
        ),
        click.option(
            "--parallel",
            type=click.IntRange(1, 256),
            default=8,
            show_default=True,
            help="Hosts worked on at once.",
        ),
        click.option("--identity", "-i", "identity", metavar="KEYFILE", help="SSH private key file."),
        click.option(
            "--ssh-password-env",
            metavar="VAR",
            help="SSH password auth: read the password from this environment variable (never from the "
            "command line). Inventory hosts may name their own with password_env=VAR.",
        ),
        click.option(
            "--known-hosts",
            metavar="FILE",
            help="known_hosts file for SSH host key checks (default ~/.ssh/known_hosts).",
        ),
        click.option(
            "--accept-new-host-key",
            is_flag=True,
            help="Trust and record host keys not yet in known_hosts (keys that CHANGED are still refused).",
        ),
        click.option(
            "--sudo-password-env",
            metavar="VAR",
            help="Read the sudo password from this environment variable (never from the command line).",
        ),
        click.option("--ask-sudo-password", is_flag=True, help="Prompt for the sudo password (needs a terminal)."),
        *slurm_click_options(),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return cast(F, decorated)


def resolve_from_options(profile: str, parameters: tuple[str, ...], scenarios: str | None) -> ResolvedProfile:
    """Load and resolve a profile from the command's options; print its warnings on stderr."""
    from workload.params import parse_parameters
    from workload.profile import load_profile, resolve_profile

    overrides = parse_parameters(parameters)
    scenario_list = [s.strip() for s in (scenarios or "").split(",") if s.strip()]
    resolved = resolve_profile(load_profile(profile), overrides, scenarios=scenario_list)
    for warning in resolved.warnings:
        click.echo(f"warning: {warning}", err=True)
    return resolved


@dataclass(frozen=True)
class HostOpener:
    """Opens a host spec with the connection options (a ``HostFactory``); knows their secret values."""

    options: ConnectOptions
    specs: tuple[HostSpec, ...]

    def __call__(self, spec: HostSpec) -> Host:
        from workload.hosts import open_host

        return open_host(spec, self.options)

    @property
    def secrets(self) -> list[Secret]:
        """The passwords of the connection options and the inventory, for the run to mask in its texts."""
        found = [self.options.password, self.options.sudo_password, *(s.password for s in self.specs)]
        return [s for s in found if s is not None]


def build_targets(targets: Targets, *, only: set[str] | None = None) -> tuple[list[HostSpec], TargetOpener]:
    """The host specs to work on and a factory that opens each with the connection options.

    With ``--slurm``, the hosts are the nodes of a new allocation (``only``: these nodes) and
    ``--host`` names the login host (see :mod:`workload.cli.slurm_targets`).

    Everything that can be checked without connecting is checked here, before the engine starts,
    as a :class:`~workload.errors.UsageError` naming the option or the inventory line: key files
    exist, password variables are set, a sudo password prompt has a terminal to prompt on.
    """
    from workload.errors import UsageError
    from workload.hosts import ConnectOptions, secret_from_env
    from workload.hosts.base import parse_host_spec
    from workload.inventory import load_inventory

    specs = [parse_host_spec(h) for h in targets.hosts]
    if targets.inventory is not None:
        specs += load_inventory(targets.inventory)
    if not specs:
        specs = [parse_host_spec("local://")]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise UsageError("the same host is given twice: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    identity = str(Path(targets.identity).expanduser()) if targets.identity else None
    if identity is not None:
        check_key_file(identity, "-i/--identity ")
    for spec in specs:
        if spec.key_filename is not None:
            check_key_file(spec.key_filename, f"{spec.source}: key=")
    ssh_password: Secret | None = None
    if targets.ssh_password_env:
        ssh_password = secret_from_env(
            targets.ssh_password_env,
            what="--ssh-password-env",
            hint=f"export {targets.ssh_password_env}=... first (the option names the variable, never the password)",
        )
    password: Secret | None = None
    if targets.sudo_password_env:
        password = secret_from_env(targets.sudo_password_env)
    elif targets.ask_sudo_password:
        password = _prompt_sudo_password()
    options = ConnectOptions(
        key_filename=identity,
        password=ssh_password,
        known_hosts=targets.known_hosts,
        accept_new_host_keys=targets.accept_new_host_key,
        sudo_password=password,
    )
    opener = HostOpener(options, tuple(specs))
    from workload.cli.slurm_targets import slurm_targets, wants_slurm

    if wants_slurm(targets.slurm):
        return slurm_targets(targets.slurm, specs, opener, only=only)
    return specs, opener


def check_key_file(path: str, where: str) -> None:
    """Raise a UsageError naming ``where`` unless ``path`` is a readable file.

    ``where`` is the prefix of the message: ``"-i/--identity "`` or ``"fleet.txt:3: key="``.
    """
    import os

    from workload.errors import UsageError

    if not os.path.exists(path):
        raise UsageError(f"{where}{path}: no such key file", hint="give the path of an SSH private key")
    if not os.path.isfile(path):
        raise UsageError(f"{where}{path}: is not a file", hint="give the path of an SSH private key")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{where}{path}: cannot be read by this user")
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError as exc:
        raise UsageError(f"{where}{path}: cannot be read: {exc.strerror or exc}") from None
    problem = key_file_problem(head)
    if problem:
        raise UsageError(
            f"{where}{path}: {problem}", hint="give the path of an SSH private key (e.g. ~/.ssh/id_ed25519)"
        )


def key_file_problem(head: bytes) -> str | None:
    """Why these first bytes of a file are not an SSH private key paramiko can use, or None.

    Private keys are PEM blocks (OpenSSH's ``-----BEGIN OPENSSH PRIVATE KEY-----``, and the
    ``RSA``/``EC``/``DSA``/PKCS#8 ones). A public key (``ssh-ed25519 AAAA...``, the ``.pub``
    file) and a PuTTY ``.ppk`` are named as such, since they are the usual mix-ups.
    """
    text = head.lstrip()
    if text.startswith(b"-----BEGIN ") and b"PRIVATE KEY-----" in text.split(b"\n", 1)[0]:
        return None
    if text.startswith((b"ssh-", b"ecdsa-", b"sk-")) or b"PUBLIC KEY-----" in text[:80]:
        return "is a public key, not a private key (leave out the .pub)"
    if text.startswith(b"PuTTY-User-Key-File-"):
        return "is a PuTTY key; convert it with: puttygen KEY.ppk -O private-openssh -o KEY"
    return "is not an SSH private key (no -----BEGIN ... PRIVATE KEY----- line)"


def _prompt_sudo_password() -> Secret:
    """Prompt on the terminal; a UsageError when there is none (CI, a pipe, nohup)."""
    import sys

    from workload.commands import Secret
    from workload.errors import UsageError

    no_terminal = UsageError(
        "--ask-sudo-password: there is no terminal to prompt on",
        hint="export the password in a variable and pass --sudo-password-env VAR instead",
    )
    if not sys.stdin.isatty() and not _has_controlling_terminal():
        raise no_terminal
    try:
        value = click.prompt("sudo password", hide_input=True)
    except click.exceptions.Abort:  # end of input: nobody can answer
        raise no_terminal from None
    return Secret(str(value))


def _has_controlling_terminal() -> bool:
    try:
        with open("/dev/tty", "rb"):
            return True
    except OSError:
        return False
