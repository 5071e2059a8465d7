"""Options shared by several commands, and turning them into profiles and hosts."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

if TYPE_CHECKING:
    from workload.engine import HostFactory
    from workload.hosts.base import HostSpec
    from workload.profile import ResolvedProfile

F = TypeVar("F", bound=Callable[..., Any])


def parameter_options(func: F) -> F:
    """``--parameters`` and ``--scenarios``, VirtualClient style."""
    func = click.option(
        "--scenarios",
        metavar="LIST",
        help="Only actions whose Scenario is listed (a,b); '-name' excludes an action or dependency.",
    )(func)
    func = click.option(
        "--parameters",
        "-p",
        multiple=True,
        metavar="K=V,,,K=V",
        help="Override profile Parameters. Pairs split on ',,,' if present, else ';', else ','. Repeatable.",
    )(func)
    return func


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


_TARGET_FIELDS = tuple(f.name for f in fields(Targets))


def host_options(func: F) -> F:
    """Target hosts and how to connect to them; the command receives them as ``targets: Targets``."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        targets = Targets(**{name: kwargs.pop(name) for name in _TARGET_FIELDS})
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
        click.option("--ask-sudo-password", is_flag=True, help="Prompt for the sudo password."),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return cast(F, decorated)


def resolve_from_options(profile: str, parameters: tuple[str, ...], scenarios: str | None) -> ResolvedProfile:
    from workload.params import parse_parameters
    from workload.profile import load_profile, resolve_profile

    overrides = parse_parameters(parameters)
    scenario_list = [s.strip() for s in (scenarios or "").split(",") if s.strip()]
    return resolve_profile(load_profile(profile), overrides, scenarios=scenario_list)


def build_targets(targets: Targets) -> tuple[list[HostSpec], HostFactory]:
    """The host specs to work on and a factory that opens each with the connection options."""
    from workload.commands import Secret
    from workload.errors import UsageError
    from workload.hosts import ConnectOptions, open_host, secret_from_env
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
    password: Secret | None = None
    if targets.sudo_password_env:
        password = secret_from_env(targets.sudo_password_env)
    elif targets.ask_sudo_password:
        password = Secret(click.prompt("sudo password", hide_input=True))
    options = ConnectOptions(
        key_filename=str(Path(targets.identity).expanduser()) if targets.identity else None,
        known_hosts=targets.known_hosts,
        accept_new_host_keys=targets.accept_new_host_key,
        sudo_password=password,
    )

    def factory(spec: HostSpec) -> Any:
        return open_host(spec, options)

    return specs, factory
