"""Decide from the recorded times whether two runs' iterations can be compared pair by pair.

A shared machine's load swings over minutes; two runs whose iterations alternated in time (A1 B1
A2 B2 ..., or B1 A1 A2 B2 ...: any order within a pair) met the same swing in each pair, and the
ratio of a pair cancels it (:func:`workload.metrics.intervals.paired_interval`). Whether they did
is read from the iterations' own times (each metric's ``start_time`` and ``end_time``: LoadGen's
test start, to the second, and its end), never assumed from how the runs were named or stored.

The rule: both sides have the same number ``n >= 2`` of iterations, each with a start time; sorted
by start, iteration ``i`` of A and iteration ``i`` of B form pair ``i``, and for every ``i >= 2``
both iterations of pair ``i`` began no earlier than both of pair ``i - 1`` had ended (an iteration
without an end time ends at its start). So the pairs occupy consecutive stretches of time, one after
the other, and no iteration of a later pair ran between the two of an earlier one: A1 A2 ... An
followed by B1 ... Bn is not paired (A2 began before B1 ended), nor are the pooled iterations of
several hosts that ran at once. Otherwise the sides are compared unpaired, and :attr:`Pairing.reason`
says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

#: one iteration's time: its start and its end (None where not recorded)
Span = tuple[datetime | None, datetime | None]


@dataclass(frozen=True)
class Pairing:
    """Pair ``i`` is ``(order_a[i], order_b[i])``, indexes into the two sides' values in time order;
    empty orders and a ``reason`` when the sides cannot be paired."""

    order_a: tuple[int, ...] = ()
    order_b: tuple[int, ...] = ()
    reason: str = ""

    @property
    def paired(self) -> bool:
        return bool(self.order_a)


def _utc(moment: datetime) -> datetime:
    """``moment`` comparable with any other: a time without a zone is taken as UTC (runs record UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def pair_iterations(a: Sequence[Span], b: Sequence[Span]) -> Pairing:
    """The pairs of the iterations ``a`` and ``b`` (their times, in any order) by the module's rule."""
    if len(a) != len(b):
        return Pairing(reason=f"the sides have {len(a)} and {len(b)} iterations")
    if len(a) < 2:
        return Pairing(reason="one iteration a side")
    if any(start is None for start, _ in (*a, *b)):
        return Pairing(reason="an iteration has no recorded start time")

    def timed(side: Sequence[Span]) -> list[tuple[datetime, datetime, int]]:
        spans = []
        for index, (start, end) in enumerate(side):
            assert start is not None  # checked above
            begun = _utc(start)
            spans.append((begun, max(begun, _utc(end)) if end is not None else begun, index))
        return sorted(spans)

    left, right = timed(a), timed(b)
    for i in range(1, len(left)):
        begun = min(left[i][0], right[i][0])
        ended = max(left[i - 1][1], right[i - 1][1])
        if begun < ended:
            return Pairing(
                reason=f"not interleaved in time: the {_ordinal(i + 1)} iterations began before "
                f"both {_ordinal(i)} ones had ended"
            )
    return Pairing(tuple(s[2] for s in left), tuple(s[2] for s in right))
