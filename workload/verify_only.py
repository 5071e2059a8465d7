"""Verify-only dependency steps: on hosts we may not change (Slurm nodes), say what is missing and the fix.

On a cluster the admins provision the nodes and jobs run without root. A dependency step whose
plan has changes is then not applied: it fails with what is missing (the plan's change summaries)
and the exact commands the admin can run (the plan's own commands), so nothing is guessed and
nothing is changed. ``--slurm-allow-changes`` turns this off (the host's ``allows_changes``).
"""

from __future__ import annotations

from workload.errors import StepError
from workload.steps import Step, StepContext, StepPlan

#: Commands shown in full before the rest are counted (the step log has the whole plan).
SHOWN_COMMANDS = 12


def missing_on_node(step: Step, ctx: StepContext, plan: StepPlan) -> StepError:
    """The error for a dependency that is not in place on a host that is verify-only."""
    missing = "; ".join(change.summary for change in plan.changes)
    commands = [command.display() for command in plan.commands]
    shown = commands[:SHOWN_COMMANDS]
    more = f"\n  ... and {len(commands) - len(shown)} more (see the step log)" if len(commands) > len(shown) else ""
    fix = "\n".join(f"  {line}" for line in shown) + more if shown else "  (the plan has no commands)"
    ctx.log(f"verify-only: not applied; missing: {missing}")
    return step.fail(
        f"missing on this node (verify-only: the cluster's admins provision it): {missing}\n"
        f"the fix for the admin (as root on every node):\n{fix}",
        ctx,
        hint="ask the cluster's admins to run these on the nodes, or pass --slurm-allow-changes "
        "if you may change the nodes yourself",
    )
