"""``--slurm PARTITION``: the nodes of one Slurm allocation as the run's hosts.

The ``--host`` given (one; default ``local://``) is the *login host* where Slurm's tools work. The
allocation is made here, before the engine starts (pending states and reasons are printed on
stderr while it waits), and given back (``scancel``) when the command ends, whatever the end:
success, failure, Ctrl-C or SIGTERM (the click context's close callbacks run in every case).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    # Only for annotations: `--help` builds the Slurm options from this module and must not load
    # the host layer (bench/bench_startup.py); the functions that need them import them.
    from workload.cli.target_opener import TargetOpener
    from workload.commands import Secret
    from workload.engine import HostOutcome
    from workload.hosts.base import Host, HostSpec
    from workload.hosts.slurm_alloc import SlurmAllocation

SLURM_OPTIONS = (
    "slurm",
    "nodes",
    "nodelist",
    "constraint",
    "gres",
    "account",
    "slurm_time",
    "reservation",
    "slurm_allow_changes",
    "slurm_requeue",
)


def slurm_click_options() -> list[Callable[[Any], Any]]:
    """The click options of a Slurm target (added to every command that takes ``--host``)."""
    return [
        click.option(
            "--slurm",
            metavar="PARTITION",
            help="Run on nodes of this Slurm partition: one allocation, one job step per node and command "
            "(--host is then the login host where sinfo/srun work).",
        ),
        click.option("--nodes", type=click.IntRange(1, 100_000), help="Slurm: how many nodes (default 1)."),
        click.option("--nodelist", metavar="LIST", help="Slurm: these nodes (a host list, e.g. gpu[01-04])."),
        click.option("--constraint", metavar="FEATURES", help="Slurm: nodes with these features (e.g. h100)."),
        click.option("--gres", metavar="gpu:N", help="Slurm: generic resources per node, e.g. gpu:8."),
        click.option("--account", metavar="NAME", help="Slurm: charge this account."),
        click.option("--time", "slurm_time", metavar="LIMIT", help="Slurm: the job's time limit (e.g. 2:00:00)."),
        click.option("--reservation", metavar="NAME", help="Slurm: use this reservation."),
        click.option(
            "--slurm-allow-changes",
            is_flag=True,
            help="Slurm: let dependency steps install on the nodes (default: verify only, the admins provision).",
        ),
        click.option(
            "--slurm-requeue",
            is_flag=True,
            help="Slurm: run the work of a node that failed once more on another node of the partition.",
        ),
    ]


def wants_slurm(values: dict[str, Any]) -> bool:
    """Whether the command line asked for Slurm; Slurm-only options without ``--slurm`` are refused."""
    from workload.errors import UsageError

    if values.get("slurm"):
        return True
    given = [f"--{name.replace('slurm_time', 'time').replace('_', '-')}" for name in SLURM_OPTIONS if values.get(name)]
    if given:
        raise UsageError(f"{', '.join(given)} only work(s) with --slurm PARTITION")
    return False


def slurm_targets(
    values: dict[str, Any],
    login_specs: list[HostSpec],
    factory: TargetOpener,
    *,
    only: set[str] | None = None,
) -> tuple[list[HostSpec], TargetOpener]:
    """Allocate the nodes; return one host spec per node and a factory of :class:`SlurmHost`.

    ``only`` (``--only-failed``): these nodes of an earlier run, and no others.
    """
    from workload.errors import UsageError
    from workload.hosts.base import HostSpec
    from workload.hosts.slurm_alloc import SlurmAllocation, SlurmRequest

    if len(login_specs) != 1:
        raise UsageError(
            "--slurm: give at most one --host, the login host where Slurm's tools work (no --inventory)",
            hint="e.g. --slurm gpu --nodes 4 --host ssh://me@login1",
        )
    if only is not None and not only:
        return [], factory  # --only-failed: nothing left to run (the caller says so)
    nodelist = values.get("nodelist")
    nodes = values.get("nodes")
    if only is not None:
        nodelist, nodes = ",".join(sorted(only)), len(only)
    request = SlurmRequest(
        partition=values["slurm"],
        nodes=nodes,
        nodelist=nodelist,
        constraint=values.get("constraint"),
        gres=values.get("gres"),
        account=values.get("account"),
        time=values.get("slurm_time"),
        reservation=values.get("reservation"),
        allow_changes=bool(values.get("slurm_allow_changes")),
        requeue=bool(values.get("slurm_requeue")),
    )
    login_spec = login_specs[0]
    control = factory(login_spec)
    job_name = f"workload-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    allocation = SlurmAllocation(control, request, job_name)
    context = click.get_current_context(silent=True)

    def release() -> None:
        allocation.release()
        if allocation.job_id is not None:
            click.echo(f"slurm job {allocation.job_id}: cancelled (scancel), its nodes given back", err=True)
        control.close()

    if context is not None:
        context.call_on_close(release)

    def say(line: str) -> None:
        click.echo(line, err=True)

    say(f"slurm: asking {login_spec.name} for {' '.join(request.salloc_argv(job_name)[1:])}")
    try:
        node_names = allocation.allocate(say)
    except BaseException:
        if context is None:
            release()
        raise
    specs = [HostSpec(scheme="slurm", hostname=node, alias=node, source="--slurm") for node in node_names]
    return specs, SlurmNodes(allocation, factory, login_spec)


class SlurmNodes:
    """The host factory of a ``--slurm`` run: a :class:`SlurmHost` per node, each with a login connection of its own."""

    def __init__(self, allocation: SlurmAllocation, factory: TargetOpener, login_spec: HostSpec) -> None:
        self.allocation = allocation
        self.factory = factory
        self.login_spec = login_spec

    @property
    def secrets(self) -> list[Secret]:
        """The login connection's secrets (every node is reached through it)."""
        return self.factory.secrets

    def __call__(self, spec: HostSpec) -> Host:
        from workload.hosts.slurm import SlurmHost

        login = self.factory(self.login_spec)
        return SlurmHost(spec.hostname, self.allocation, login, allows_changes=self.allocation.request.allow_changes)


def requeue_lost_nodes(
    factory: Callable[[HostSpec], Host],
    outcomes: list[HostOutcome],
    rerun: Callable[[list[HostSpec], Callable[[HostSpec], Host]], list[HostOutcome]],
) -> list[HostOutcome]:
    """``--slurm-requeue``: the work of nodes that failed (:class:`NodeLost`) runs once more on other nodes.

    A second allocation of as many nodes, excluding the lost ones, made and given back like the
    first; ``rerun(specs, factory)`` runs the profile on them. Each replacement's outcome takes the
    lost node's place, labelled ``requeued_from=<lost node>`` (its metrics carry the label too).
    Without ``--slurm-requeue`` (or with nothing lost) the outcomes are returned unchanged.
    """
    from workload.hosts.base import HostSpec
    from workload.hosts.slurm import NodeLost
    from workload.hosts.slurm_alloc import SlurmAllocation

    if not isinstance(factory, SlurmNodes) or not factory.allocation.request.requeue:
        return outcomes
    lost = [o for o in outcomes if o.status == "failed" and isinstance(o.error, NodeLost)]
    if not lost:
        return outcomes
    first = factory.allocation
    request = replace(
        first.request, nodes=len(lost), nodelist=None, exclude=tuple(sorted({*first.request.exclude, *first.nodes}))
    )
    again = SlurmAllocation(first.login, request, f"{first.job_name}-requeue")
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(again.release)
    names = ", ".join(o.name for o in lost)
    click.echo(f"slurm: requeue: {len(lost)} node(s) lost ({names}); asking for others", err=True)
    try:
        nodes = again.allocate(lambda line: click.echo(line, err=True))
    except BaseException:
        again.release()
        raise
    specs = [
        HostSpec(scheme="slurm", hostname=node, alias=node, source="--slurm-requeue", labels={"requeued_from": old})
        for node, old in zip(nodes, (o.name for o in lost), strict=False)
    ]
    results = rerun(specs, SlurmNodes(again, factory.factory, factory.login_spec))
    replaced = {spec.labels["requeued_from"]: outcome for spec, outcome in zip(specs, results, strict=True)}
    return [replaced.get(o.name, o) for o in outcomes]
