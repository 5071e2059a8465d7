"""A fact about a host, declared once: its name, the read-only commands that read it, and its reader.

Every consumer derives what it needs from the one declaration:

- **prefetching**: the engine runs the :attr:`Fact.queries` of every fact a step declares in one
  round trip before the step reads them (:func:`queries_of`, :meth:`workload.hosts.base.Host.prefetch`);
- **memoising**: a :class:`HostFacts` view reads each declared fact at most once (one read per host
  per phase), and inside :meth:`~workload.hosts.base.Host.remembering_facts` the host answers a
  query another step already ran from memory;
- **doctor**: ``workload doctor`` reads exactly the facts it declares (:mod:`workload.doctor`).

A step names the facts it needs per phase (:meth:`workload.steps.Step.facts`) and reads them through
a :class:`HostFacts` view; reading a fact the step did not declare raises :class:`UndeclaredFact`, so a
declaration cannot drift from the reads (a test that exercises the step fails).

Facts with a parameter (a user name, a list of packages, a path) are made by a function of the
parameter; the parameter is part of the fact's :attr:`~Fact.name`, which is the fact's identity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from workload.commands import Command
from workload.hosts.base import Host

T = TypeVar("T")


@dataclass(frozen=True)
class Fact(Generic[T]):
    """One read-only fact about a host.

    ``read`` runs exactly the :attr:`queries` (plus file reads through the host, which are not
    commands and so are never batched) and parses their output. Two facts are the same fact when
    their names are equal.
    """

    #: The identity: ``"gpus"``, or with its parameter, ``"user-home(alice)"``.
    name: str
    #: Reads the fact from a host (runs :attr:`queries`, parses them); never changes the host.
    read: Callable[[Host], T] = field(compare=False, repr=False)
    #: The read-only commands :attr:`read` runs, for the engine's batched prefetch.
    queries: tuple[Command, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        # Only read-only commands may be remembered and batched: a fact that changed the host
        # would make every remembered answer stale.
        changing = [q.display() for q in self.queries if not q.readonly]
        if changing:
            raise ValueError(f"fact {self.name!r} declares commands that are not read-only: {changing}")


def command_fact(name: str, query: Command, parse: Callable[[Host, Any], T]) -> Fact[T]:
    """The common fact: one read-only command and a parser of (host, its result).

    The reader is derived from the query, so the prefetched command and the command read are the
    same value.
    """
    return Fact(name, lambda host: parse(host, host.run(query)), (query,))


def queries_of(facts: Iterable[Fact[Any]]) -> list[Command]:
    """Every query of ``facts``, each once, in order (what the engine prefetches)."""
    seen: dict[str, Command] = {}
    for fact in facts:
        for query in fact.queries:
            seen.setdefault(query.display(), query)
    return list(seen.values())


class UndeclaredFact(AssertionError):
    """A reader asked for a fact it did not declare: a programming error, caught by the tests.

    Not a :class:`~workload.errors.WorkloadError` (no user input can cause it): it means a step's
    (or doctor's) declaration drifted from what it reads.
    """


class HostFacts:
    """The facts one reader (a step in one phase, doctor) declared, read from one host at most once each.

    ``facts[GPUS]`` reads the fact on first use and returns the same value after; a fact not in the
    declaration raises :class:`UndeclaredFact`. :meth:`prefetch` runs every declared query in one
    round trip (only inside :meth:`~workload.hosts.base.Host.remembering_facts`; elsewhere the
    host keeps nothing and each fact runs its own query when read).
    """

    def __init__(self, host: Host, declared: Sequence[Fact[Any]], *, reader: str) -> None:
        self.host = host
        self.reader = reader
        self.declared: dict[str, Fact[Any]] = {fact.name: fact for fact in declared}
        self._values: dict[str, Any] = {}

    def __getitem__(self, fact: Fact[T]) -> T:
        if fact.name not in self.declared:
            raise UndeclaredFact(
                f"{self.reader} reads the fact {fact.name!r} without declaring it "
                f"(declared: {', '.join(self.declared) or 'none'}): add it to the declaration"
            )
        if fact.name not in self._values:
            self._values[fact.name] = fact.read(self.host)
        return cast(T, self._values[fact.name])

    @property
    def read_names(self) -> list[str]:
        """The names of the facts read so far, in the order first read."""
        return list(self._values)

    def prefetch(self) -> int:
        """Batch every declared query in one round trip (see :meth:`~workload.hosts.base.Host.prefetch`)."""
        return self.host.prefetch(queries_of(self.declared.values()))
