"""Commands are values.

A :class:`Command` holds an argv tuple plus how to run it (env, cwd, timeout, sudo, user). It is
rendered to a shell line only at the transport edge (:meth:`Command.shell_line`), with every
argument quoted by :func:`shlex.quote`. Nothing taken from a profile is ever pasted into a shell
unquoted. A deliberate shell pipeline is spelled :func:`shell` so it can be found with grep.

Secrets (passwords, tokens) are wrapped in :class:`Secret`; they render as ``***`` in
:meth:`Command.display` (logs, ``plan`` output, error messages) and as their value only in
:meth:`Command.shell_line`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

MASK = "***"


@dataclass(frozen=True)
class Secret:
    """A value that must never appear in logs. ``str()`` gives the mask, ``.value`` the secret."""

    value: str = field(repr=False)

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret({MASK})"


Arg = str | Secret


def _plain(arg: Arg) -> str:
    return arg.value if isinstance(arg, Secret) else arg


def _masked(arg: Arg) -> str:
    return MASK if isinstance(arg, Secret) else arg


_EMPTY_ENV: Mapping[str, Arg] = MappingProxyType({})


@dataclass(frozen=True)
class Command:
    """One command to run on a host.

    ``argv`` is never joined without quoting. ``sudo`` asks for root; ``user`` asks to run as that
    user (through sudo when the connection is someone else). ``timeout`` is in seconds.
    ``input`` is fed to stdin. ``idempotent`` says whether a retry after a lost connection is safe.
    """

    argv: tuple[Arg, ...]
    env: Mapping[str, Arg] = field(default_factory=lambda: _EMPTY_ENV)
    cwd: str | None = None
    sudo: bool = False
    user: str | None = None
    timeout: float | None = None
    input: str | None = None
    idempotent: bool = True

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a Command needs at least one argument")
        for arg in self.argv:
            if not isinstance(arg, (str, Secret)):
                raise TypeError(f"Command argument {arg!r} is {type(arg).__name__}, expected str or Secret")
        for key in self.env:
            if not key.replace("_", "").isalnum():
                raise ValueError(f"invalid environment variable name {key!r}")

    # -- rendering -------------------------------------------------------------------------------
    def display(self) -> str:
        """The masked, human-readable form: for logs, plans and error messages."""
        return self._render(_masked)

    def shell_line(self) -> str:
        """The real shell line (secrets included). Only transports call this."""
        return self._render(_plain)

    def argv_values(self) -> list[str]:
        """The real argv (secrets included), for transports that exec without a shell."""
        return [_plain(a) for a in self.argv]

    def env_values(self) -> dict[str, str]:
        return {k: _plain(v) for k, v in self.env.items()}

    def secrets(self) -> list[str]:
        """Every secret value this command carries, so transports can mask them in output too."""
        values = [a.value for a in self.argv if isinstance(a, Secret)]
        values += [v.value for v in self.env.values() if isinstance(v, Secret)]
        return [v for v in values if v]

    def _render(self, render: Callable[[Arg], str]) -> str:
        parts: list[str] = []
        if self.cwd:
            parts.append(f"cd {shlex.quote(self.cwd)} &&")
        if self.env:
            parts.append("env")
            parts.extend(shlex.quote(f"{k}={render(v)}") for k, v in self.env.items())
        parts.extend(shlex.quote(render(a)) for a in self.argv)
        return " ".join(parts)

    # -- derivation ------------------------------------------------------------------------------
    def with_options(self, **changes: object) -> Command:
        """A copy with some fields changed (``timeout``, ``sudo``, ...)."""
        from dataclasses import replace

        return replace(self, **changes)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.display()


def cmd(*argv: Arg, **options: object) -> Command:
    """Shorthand: ``cmd("apt-get", "install", "-y", pkg, sudo=True)``."""
    env = options.pop("env", None)
    if env is not None:
        options["env"] = MappingProxyType(dict(env))  # type: ignore[call-overload]
    return Command(tuple(argv), **options)  # type: ignore[arg-type]


def shell(script: str, **options: object) -> Command:
    """An explicit shell script run by ``bash -c`` (pipelines, redirections).

    Use only with text written in this project; interpolate outside values with
    :func:`shlex.quote` (or pass them as ``env``), never with plain formatting.
    """
    return cmd("bash", "-c", script, **options)


def quote_all(args: Iterable[Arg]) -> str:
    """Masked, quoted join of arguments (for messages)."""
    return " ".join(shlex.quote(_masked(a)) for a in args)
