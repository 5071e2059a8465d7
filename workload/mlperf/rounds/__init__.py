"""The harness round adapters, and the one place that chooses among them.

Contract: :func:`choose_round` is called by the MLPerf action at ``plan`` and at ``apply`` with
what it read of the checkout (:class:`~workload.mlperf.rounds.base.Checkout`) and the step's
``HarnessRound`` parameter. A parameter value names a round (``v4.1``, ``4.1``) and overrides
detection; otherwise the first adapter of :data:`ROUNDS` (newest first) that
:meth:`~workload.mlperf.rounds.base.HarnessRound.recognises` the checkout is used. A checkout whose
VERSION is newer than every adapter's is refused (ProfileError naming the rounds this runner knows):
its layout, targets and config format are unknown, and guessing an older round's would run the
wrong commands. Any other checkout no adapter recognises (no VERSION yet, or an older round) gets
:data:`DEFAULT`, with a note when it has a VERSION.

Adding a round: write ``rounds/vX_Y.py`` (see ``base.py``), put its class in :data:`ROUNDS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from workload.errors import ProfileError
from workload.mlperf.rounds.base import Checkout, HarnessRound, PlanInputs
from workload.mlperf.rounds.v4_1 import V4_1Round
from workload.mlperf.rounds.v5_0 import V5_0Round
from workload.mlperf.rounds.v5_1 import V5_1Round
from workload.mlperf.rounds.v6_0 import V6_0Round
from workload.mlperf.rounds.v6_1 import V6_1Round

__all__ = ["DEFAULT", "ROUNDS", "Checkout", "Chosen", "HarnessRound", "PlanInputs", "choose_round", "round_named"]

#: Every adapter, newest first (detection takes the first that recognises a checkout).
ROUNDS: tuple[type[HarnessRound], ...] = (V6_1Round, V6_0Round, V5_1Round, V5_0Round, V4_1Round)
#: The round planned for when nothing is known of the checkout yet.
DEFAULT: type[HarnessRound] = V4_1Round


@dataclass(frozen=True)
class Chosen:
    """The round chosen and, when it was not recognised from the checkout, why (shown as a note)."""

    round: HarnessRound
    note: str | None = None


def round_named(name: str) -> type[HarnessRound]:
    """The adapter named ``name`` (``v4.1``, ``4.1``, ``v4.0``: any version it runs); ValueError if none."""
    wanted = name.strip().lower().removeprefix("v")
    for adapter in ROUNDS:
        if wanted in {str(v).removeprefix("v") for v in adapter.versions} | {adapter.name.removeprefix("v")}:
            return adapter
    raise ValueError(f"unknown harness round {name!r} (known: {known_rounds()})")


def known_rounds() -> str:
    """Every VERSION some adapter runs, oldest first (``v4.0, v4.1, v5.0, ...``): what refusals name."""
    return ", ".join(str(v) for v in sorted({v for adapter in ROUNDS for v in adapter.versions}))


def choose_round(checkout: Checkout, requested: str | None = None) -> Chosen:
    """The round to plan and run with (see the module docstring for the rule)."""
    if requested:
        return Chosen(round_named(requested)())
    for adapter in ROUNDS:
        if adapter.recognises(checkout):
            return Chosen(adapter())
    if checkout.version is None:
        return Chosen(DEFAULT())
    newest = max(v for adapter in ROUNDS for v in adapter.versions)
    if checkout.version > newest:
        raise ProfileError(
            "closed/NVIDIA/VERSION",
            f"the checkout is NVIDIA's harness {checkout.version}, newer than every round this runner knows "
            f"({known_rounds()})",
            hint="check out a round it knows (ResultsRepoUri/ResultsRepoCommit), or set the parameter HarnessRound "
            "to run this checkout as one of them",
        )
    return Chosen(
        DEFAULT(),
        note=f"harness version {checkout.version} has no adapter; running it as {DEFAULT.name} "
        "(set the parameter HarnessRound to choose one)",
    )


def markers() -> tuple[str, ...]:
    """Every path some adapter's detection looks at (read-only, relative to closed/NVIDIA)."""
    return tuple(dict.fromkeys(m for adapter in ROUNDS for m in adapter.markers))
