"""Commands are values.

A :class:`Command` holds an argv tuple plus how to run it (env, cwd, timeout, sudo, user). It is
rendered to a shell line only at the transport edge (:meth:`Command.shell_line`), with every
argument quoted by :func:`shlex.quote`. Nothing taken from a profile is ever pasted into a shell
unquoted. A deliberate shell pipeline is spelled :func:`shell` so it can be found with grep.

Secrets (passwords, tokens) are wrapped in :class:`Secret`; they render as ``***`` in
:meth:`Command.display` (logs, ``plan`` output, error messages) and as their value only in
:meth:`Command.shell_line`. Two kinds of secret also hide inside plain text, and
:func:`mask_text` masks both: the secrets of a URL, found by parsing it (the password of
``https://user:TOKEN@host/...`` with any characters, a token given as its user
``https://TOKEN@host/...`` but not an SSH login name, query parameters named like secrets such as
``?password=``), see :func:`url_secret_spans`, and the values of a run's :class:`Secrets` (the values of profile
parameters named like secrets, passwords read from the environment). A :class:`Secrets` is held by
the run (``ResolvedProfile.secrets``, the engine) and passed to what displays or logs text (step
logs, host logs, the console, ``run.json``, ``plan``/``show``); there is no process-wide registry,
so two runs in one process never mask (or leak) each other's values. The real values stay in the
argv that runs.
"""

from __future__ import annotations

import re
import shlex
import threading
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

#: where a URL starts (``scheme://``); its end is the first character below that no URL holds unquoted
_URL_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*)://")
_URL_END = re.compile(r"[\s\"'<>`]")
#: schemes whose lone user name (``ssh://azureuser@10.0.0.4``) is a login name, not a token
_LOGIN_SCHEMES = frozenset({"ssh", "sftp", "scp", "git+ssh", "ssh+git"})
#: query parameter names that hold a secret: the name contains one of these (any case) ...
_SECRET_QUERY_PARTS = ("password", "passwd", "passphrase", "secret", "token", "credential", "apikey", "api_key")
#: ... or is one of these (an Azure SAS ``sig``, libpq's ``sslkey`` is a path and stays visible)
_SECRET_QUERY_NAMES = frozenset({"sig", "signature", "key", "pass", "pwd", "auth", "authorization", "access_key"})


def secret_query_name(name: str) -> bool:
    """Whether a URL query parameter named ``name`` holds a secret (``password``, ``sslpassword``, ``sig``)."""
    lowered = name.strip().lower()
    return lowered in _SECRET_QUERY_NAMES or any(part in lowered for part in _SECRET_QUERY_PARTS)


def url_secret_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of every secret inside the URLs of ``text``, in order, not overlapping.

    Found by parsing each URL (``scheme://`` up to white space or a quote), not by a pattern of what
    a password may contain, because people type passwords with any character:

    * the user information is everything up to the **last** ``@`` of the URL (a password may hold
      ``/``, ``@``, ``?`` or ``#``; RFC 3986 wants them percent-encoded, but libpq, SQLAlchemy and
      git accept many of them as typed), provided the user name (before the first ``:``) has no
      ``/`` - else that ``@`` is in a path (``https://host/pkg@1.0``). Its secret is the password
      (after the first ``:``) or, without a ``:``, the user itself when the scheme is not SSH's
      (``https://TOKEN@github.com``; an SSH login name stays visible). This errs on the side of
      masking: ``https://host:443/a@b`` shows as ``https://host:***@b``.
    * the value of every query parameter named like a secret (:func:`secret_query_name`); with
      several ``@`` the query is also read as if the user information ended at the first one, and
      what either reading finds is masked.
    """
    if "://" not in text:
        return []
    spans: list[tuple[int, int]] = []
    for match in _URL_SCHEME.finditer(text):
        start = match.end()
        end_match = _URL_END.search(text, start)
        end = end_match.start() if end_match else len(text)
        userinfo, host_start = _userinfo_span(text, match.group(1).lower(), start, end)
        spans += userinfo
        spans += _query_spans(text, host_start, end)
        first_at = text.find("@", start, end)
        if 0 <= first_at < host_start - 1:
            # several "@": read the URL also as if its user information ended at the first one, so
            # that a secret query value holding an "@" (``?password=a@b``) is masked whole too
            spans += _query_spans(text, first_at + 1, end)
    return _merged(spans)


def userinfo_end(text: str, start: int, end: int) -> int | None:
    """The offset of the ``@`` that ends the user information of the URL whose authority starts at
    ``start`` (just after ``://``) and which ends at ``end``; None when it has none.

    The rule of :func:`url_secret_spans`: the last ``@``, unless the user name before it holds a ``/``.
    """
    at = text.rfind("@", start, end)
    if at < start:
        return None
    colon = text.find(":", start, at)
    if "/" in text[start : colon if colon >= 0 else at]:
        return None  # an "@" in a path or query: no user information
    return at


def _userinfo_span(text: str, scheme: str, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
    """(the secret of the URL's user information, where its host starts) for the URL at ``start:end``."""
    at = userinfo_end(text, start, end)
    if at is None:
        return [], start
    colon = text.find(":", start, at)
    if colon >= 0:
        return ([(colon + 1, at)] if at > colon + 1 else []), at + 1
    return ([] if scheme in _LOGIN_SCHEMES or at == start else [(start, at)]), at + 1


def _query_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The values of the secret query parameters of the URL whose host starts at ``start``."""
    question = text.find("?", start, end)
    if question < 0:
        return []
    hash_mark = text.find("#", question, end)
    stop = hash_mark if hash_mark >= 0 else end
    spans = []
    position = question + 1
    while position < stop:
        amp = text.find("&", position, stop)
        item_end = amp if amp >= 0 else stop
        equals = text.find("=", position, item_end)
        if equals > position and item_end > equals + 1 and secret_query_name(text[position:equals]):
            spans.append((equals + 1, item_end))
        position = item_end + 1
    return spans


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


#: Secret values shorter than this are not masked inside other text: masking every "abc" or "true"
#: in every log line would garble logs and hide nothing (such values are still masked as whole
#: parameter values and as Secret arguments).
MIN_MASKED_LENGTH = 4


class Secrets:
    """The secret values one run masks in every text it displays or logs (see the module docstring).

    Made by whoever learns the values (``resolve_profile`` from the profile, the CLI from password
    variables) and handed to the run; thread-safe, as a fleet's hosts mask from their own threads.
    Values shorter than :data:`MIN_MASKED_LENGTH` are ignored.
    """

    __slots__ = ("_lock", "_sorted", "_values")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._sorted: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.add(*values)

    def add(self, *values: str) -> None:
        """Mask ``values`` from now on."""
        with self._lock:
            new = {v for v in values if len(v) >= MIN_MASKED_LENGTH} - self._values
            if new:
                self._values |= new
                # longest first, so a secret that contains another is masked whole
                self._sorted = tuple(sorted(self._values, key=len, reverse=True))

    def union(self, *values: str | Secret) -> Secrets:
        """A new :class:`Secrets` with these values and ``values`` (this one unchanged)."""
        return Secrets([*self._sorted, *(v.value if isinstance(v, Secret) else v for v in values)])

    @property
    def values(self) -> tuple[str, ...]:
        """The values, longest first."""
        return self._sorted

    def mask(self, text: str) -> str:
        """``text`` with URL passwords and these values replaced by ``***``."""
        return mask_text(text, self)

    def __len__(self) -> int:
        return len(self._sorted)

    def __repr__(self) -> str:
        return f"Secrets({len(self._sorted)} values)"


def mask_url_passwords(text: str) -> str:
    """``text`` with the secrets of every URL replaced (``https://user:***@host/db?password=***``).

    What counts as a URL's secret: :func:`url_secret_spans`.
    """
    spans = url_secret_spans(text)
    for start, end in reversed(spans):
        text = text[:start] + MASK + text[end:]
    return text


def url_passwords(text: str) -> list[str]:
    """The secrets of the URLs in ``text`` (passwords, lone-user tokens, secret query values)."""
    return [text[start:end] for start, end in url_secret_spans(text) if text[start:end] != MASK]


def mask_text(text: str, secrets: Secrets | None = None) -> str:
    """``text`` with URL passwords and the values of ``secrets`` (the run's, when it has any) replaced by ``***``."""
    text = mask_url_passwords(text)
    for secret in secrets.values if secrets is not None else ():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def _plain(arg: Arg) -> str:
    return arg.value if isinstance(arg, Secret) else arg


def _masked(arg: Arg, secrets: Secrets | None = None) -> str:
    return MASK if isinstance(arg, Secret) else mask_text(arg, secrets)


_EMPTY_ENV: Mapping[str, Arg] = MappingProxyType({})


@dataclass(frozen=True)
class RetryPolicy:
    """How to run a failed command again, decided where the command is built (never from its argv).

    At most ``attempts`` runs in all; after the n-th failed run, a pause of ``wait_s * 2**(n-1)``
    seconds (at most ``max_wait_s``). Only failures whose stderr matches ``when`` are retried
    (a transient network error); None: every failure.
    """

    attempts: int
    wait_s: float = 0.0
    max_wait_s: float = 120.0
    when: re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"a RetryPolicy needs at least 1 attempt, got {self.attempts}")

    def retries(self, attempt: int, stderr: str) -> bool:
        """Whether a command that failed its ``attempt``-th run (1-based) with ``stderr`` runs again."""
        return attempt < self.attempts and (self.when is None or bool(self.when.search(stderr)))

    def pause_s(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th failed run (exponential, capped)."""
        return float(min(self.max_wait_s, self.wait_s * 2 ** (attempt - 1)))


@dataclass(frozen=True)
class Command:
    """One command to run on a host.

    ``argv`` is never joined without quoting. ``sudo`` asks for root; ``user`` asks to run as that
    user (through sudo when the connection is someone else). ``timeout`` is in seconds.
    ``input`` is fed to stdin. ``idempotent`` says whether a retry after a lost connection is safe.
    ``readonly`` says the command only reads the host (a fact query): while a host remembers facts
    (:meth:`~workload.hosts.base.Host.remembering_facts`) a second run of it returns the first result.
    ``scope`` narrows that: a readonly command reads only that part of the host (e.g. apt's package
    lists), and a command that is not readonly changes only that part, so it makes the host forget
    the facts of that scope alone. None: any part (a command with no scope may change anything).

    Intent that code acts on is a field here, set where the command is built, never found by
    searching argv: ``retry`` (a :class:`RetryPolicy`; the step context's ``check`` follows it),
    ``kind`` (what the command is for, a name its builder exports, e.g. ``apt.APT_GET``) and
    ``lock`` (a host-wide lock the command takes or waits for, e.g. dpkg's: planners put one wait
    for it before the first command that takes it). They survive :meth:`with_options`.
    """

    argv: tuple[Arg, ...]
    env: Mapping[str, Arg] = field(default_factory=lambda: _EMPTY_ENV)
    cwd: str | None = None
    sudo: bool = False
    user: str | None = None
    timeout: float | None = None
    input: str | None = None
    idempotent: bool = True
    readonly: bool = False
    scope: str | None = None
    retry: RetryPolicy | None = None
    kind: str | None = None
    lock: str | None = None

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
    def display(self, secrets: Secrets | None = None) -> str:
        """The masked, human-readable form: for logs, plans and error messages."""
        return self._render(lambda arg: _masked(arg, secrets))

    def shell_line(self) -> str:
        """The real shell line (secrets included). Only transports call this."""
        return self._render(_plain)

    def masked_argv(self) -> tuple[str, ...]:
        """The arguments as they may be shown (``***`` for secrets, masked text): for results and errors."""
        return tuple(_masked(a) for a in self.argv)

    def argv_values(self) -> list[str]:
        """The real argv (secrets included), for transports that exec without a shell."""
        return [_plain(a) for a in self.argv]

    def env_values(self) -> dict[str, str]:
        return {k: _plain(v) for k, v in self.env.items()}

    def secrets(self) -> list[str]:
        """Every secret value this command carries, so transports can mask them in output too.

        Secret arguments and environment values, and the passwords of URLs in plain arguments
        (``git clone https://user:TOKEN@host/repo`` may echo the URL back).
        """
        values = [a.value for a in self.argv if isinstance(a, Secret)]
        values += [v.value for v in self.env.values() if isinstance(v, Secret)]
        for arg in [*self.argv, *self.env.values()]:
            if isinstance(arg, str):
                values += url_passwords(arg)
        return [v for v in values if v]

    def _render(self, render: Callable[[Arg], str]) -> str:
        parts: list[str] = []
        if self.cwd:
            parts.append(f"cd {shlex.quote(render(self.cwd))} &&")
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


def masked_arg(arg: Arg, secrets: Secrets | None = None) -> str:
    """One argument as it may be shown: ``***`` for a Secret, :func:`mask_text` for text."""
    return _masked(arg, secrets)
