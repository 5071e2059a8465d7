"""``workload plan --json``: the plans of every host as one JSON document (commands masked)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workload.commands import Secrets, mask_text

if TYPE_CHECKING:
    from workload.cli.plan_summary import HostSummary
    from workload.engine import HostOutcome


def _step(step: Any, secrets: Secrets | None) -> dict[str, Any]:
    plan = step.plan
    message = mask_text(step.message or "", secrets)
    entry: dict[str, Any] = {"step": step.label, "status": step.status, "message": message}
    if plan is not None:
        entry["changes"] = [
            {
                "summary": mask_text(change.summary, secrets),
                "commands": [c.display(secrets) for c in change.commands],
                "decided_after": mask_text(change.decided_after, secrets) if change.decided_after else None,
            }
            for change in plan.changes
        ]
        entry["no_change_reason"] = mask_text(plan.noop_reason, secrets) if plan.noop_reason else None
        entry["reboot_required"] = plan.reboot_required
        entry["notes"] = [mask_text(n, secrets) for n in plan.notes]
    return entry


def plan_document(
    profile: str,
    outcomes: Sequence[HostOutcome],
    exit_code: int,
    secrets: Secrets | None = None,
    *,
    summaries: Sequence[HostSummary] = (),
) -> str:
    """``{"profile", "exit_code", "hosts": [{"host", "status", "error", "gpu", "would_fail", "steps": [...]}]}``.

    Each step: label, status (``planned``, ``unchanged``, ``failed``...), message, and its plan:
    ``changes`` (summary, the exact commands with secrets as ``***``, and ``decided_after``: null, or
    what a change of a deferred tail waits for, as ``plan`` labels it), ``no_change_reason``,
    ``reboot_required`` and ``notes``. From the summary (:mod:`workload.cli.plan_summary`): ``gpu``,
    the host's GPU line (null where not read), and ``would_fail``, the labels of the steps that
    would fail if run now (those that cannot be planned and those that need a GPU the host lacks).
    """
    by_host = {summary.host: summary for summary in summaries}
    hosts = []
    for o in outcomes:
        summary = by_host.get(o.name)
        hosts.append(
            {
                "host": o.name,
                "status": o.status,
                "error": mask_text(str(o.error), secrets) if o.error is not None else None,
                "gpu": summary.gpu.describe() if summary is not None and summary.gpu is not None else None,
                "would_fail": [line.label for line in summary.fail] if summary is not None else [],
                "steps": [_step(s, secrets) for s in o.steps],
            }
        )
    return json.dumps({"profile": profile, "exit_code": exit_code, "hosts": hosts}, indent=2)
