"""One step's life on one host (plan -> apply -> reboot -> verify), independent of the engine's loop.

Moved out of :mod:`workload.engine` (which re-exports every name): :func:`drive_step` is what the
engine calls per step; :func:`describe_plan` and :func:`read_boot_id` are its helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workload.errors import WorkloadError
from workload.hosts.base import Host
from workload.steps import Step, StepContext, StepPlan

#: Said under a preflight failure, by ``run`` and ``plan`` alike.
PREFLIGHT_NOTE = "found by the preflight before the first step: `run` stops there and changes nothing on this host"


@dataclass(frozen=True)
class DrivenStep:
    """What :func:`drive_step` did: the plan made first, the plan applied, the plan after a reboot."""

    plan: StepPlan
    #: The plan whose changes were made: ``plan``, or the step's own re-plan during apply (an
    #: installer plans again from apt's refreshed lists, and only that plan knows the versions).
    applied: StepPlan
    after_reboot: StepPlan | None = None


def drive_step(step: Step, ctx: StepContext, reboot: Callable[[StepContext], StepContext]) -> DrivenStep:
    """One step's life on one host: plan -> apply -> (reboot -> re-plan -> apply) -> verify.

    The reboot is decided from the plan actually applied, not the first one: a plan made before
    ``apt-get update`` cannot know that the refreshed lists bring a new driver. ``reboot`` reboots
    the host (or raises :class:`~workload.errors.RebootRequired`) and returns the context to go on
    with. After the reboot the step is planned again; if it still wants a reboot, it fails.
    Raises :class:`~workload.errors.StepError` when verify fails.
    """
    ctx.host.prefetch(step.fact_queries(ctx, "plan"))
    plan = step.plan(ctx)
    ctx.log(f"plan: {describe_plan(plan)}")
    applied = plan
    if plan.changed and step.kind == "dependency" and not ctx.host.allows_changes:
        # A node of a scheduler (Slurm): the admins provision it; say what is missing and the fix.
        from workload.verify_only import missing_on_node

        raise missing_on_node(step, ctx, plan)
    if plan.changed:
        applied = step.apply(ctx, plan) or plan
        if applied is not plan:
            ctx.log(f"applied: {describe_plan(applied)}")
    after: StepPlan | None = None
    if applied.reboot_required:
        ctx = reboot(ctx)
        ctx.host.prefetch(step.fact_queries(ctx, "plan"))
        after = step.plan(ctx)
        ctx.log(f"plan after the reboot: {describe_plan(after)}")
        if after.reboot_required:
            raise step.fail("the host still needs a reboot after rebooting", ctx)
        if after.changed and (step.apply(ctx, after) or after).reboot_required:
            raise step.fail("the host still needs a reboot after rebooting", ctx)
    ctx.host.prefetch(step.fact_queries(ctx, "verify"))
    step.verify(ctx)
    return DrivenStep(plan, applied, after)


def _with_preflight_note(error: WorkloadError) -> str:
    """The error's message, the preflight note, then its hint (the hint stays last, as everywhere)."""
    text = f"{error.message}\n{PREFLIGHT_NOTE}"
    return f"{text}\n  hint: {error.hint}" if error.hint else text


def read_boot_id(host: Host) -> str:
    """The host's boot id, or "" when it cannot be read (unlike :func:`workload.hosts.reboot.read_boot_id`)."""
    from workload.hosts.reboot import BOOT_ID_QUERY

    return host.run(BOOT_ID_QUERY).stdout.strip()


def describe_plan(plan: StepPlan) -> str:
    """One line: what a plan would do."""
    if plan.changed:
        n = len(plan.commands)
        text = f"{len(plan.changes)} change(s), {n} command(s)"
    else:
        text = f"no change: {plan.noop_reason or 'nothing to do'}"
    if plan.reboot_required:
        text += "; then a reboot"
    return text
