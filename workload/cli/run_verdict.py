"""The verdict of a whole ``workload run``: why it failed, in summary.json and on the console.

The results' verdict (:class:`workload.metrics.Verdict`) judges what was measured; a run can fail
for reasons that have nothing to measure: a host refused by a preflight check, a step whose
command failed, a stop by Ctrl-C or SIGTERM, a reboot to do. :func:`run_reasons` names each (host,
step, command, signal); :func:`write_verdict` puts them first in ``summary.json``'s verdict, which
is written for every run, with the exit code, so CI reading only summary.json, the report and the
console all say the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workload.safefile import read_regular

if TYPE_CHECKING:
    from workload.commands import Secrets
    from workload.outcomes import HostOutcome
    from workload.rundir import RunFolder

#: outcome statuses that fail a run, each with its reason
_FAILING = ("failed", "interrupted", "reboot-required")


def run_reasons(outcomes: Sequence[HostOutcome], secrets: Secrets, interrupt: str | None) -> list[str]:
    """Why the run failed apart from its results: the stop (and which signal), then each host's error."""
    reasons = [f"the run was {interrupt}: not every planned step ran"] if interrupt else []
    for outcome in outcomes:
        if outcome.status not in _FAILING or outcome.error is None:
            continue
        reason = outcome.reason or outcome.status
        where = "" if reason.startswith(f"[{outcome.name}]") else f"[{outcome.name}] "
        reasons.append(secrets.mask(f"{where}{reason}"))
    return reasons


def write_verdict(
    folder: RunFolder, profile_name: str, reasons: Sequence[str], exit_code: int, interrupt: str | None
) -> dict[str, Any]:
    """Merge the run's verdict into ``summary.json`` (created when the run left none); the verdict.

    ``ok`` holds only for exit code 0 and results that passed; ``failures`` starts with ``reasons``,
    then the results' own; ``exit_code``, ``interrupted`` and ``interrupt_reason`` say how it ended.
    Raises OSError when summary.json cannot be written (the caller names it).
    """
    path = folder.root / "summary.json"
    try:
        summary = json.loads(read_regular(path))  # a FIFO planted there is refused, not waited on
    except (OSError, ValueError):
        summary = None
    if not isinstance(summary, dict):
        summary = {"experiment_id": folder.run_id, "profile_name": profile_name, "results": []}
    found = summary.get("verdict")
    verdict: dict[str, Any] = found if isinstance(found, dict) else {"total": 0}
    results_ok = verdict.get("ok", True) is True
    failures = [str(f) for f in verdict.get("failures") or []]
    summary["verdict"] = {
        **verdict,
        "ok": results_ok and exit_code == 0,
        "exit_code": exit_code,
        "failures": [*reasons, *(f for f in failures if f not in reasons)],
    }
    summary["exit_code"] = exit_code
    summary["interrupted"] = interrupt is not None
    summary["interrupt_reason"] = interrupt
    folder.write_json("summary.json", summary)
    verdict_out: dict[str, Any] = summary["verdict"]
    return verdict_out


def banner(results_lines: Sequence[str], reasons: Sequence[str], exit_code: int) -> list[str]:
    """The console's verdict: the results' lines, then, when the run failed for other reasons, a
    ``verdict: FAILED`` line naming the first reason and one ``why:`` line for each other one (the
    results' head then reads ``results: ...``: it judged only what was measured)."""
    if not reasons:
        return list(results_lines)
    lines = ["results:" + line[len("verdict:") :] if line.startswith("verdict:") else line for line in results_lines]
    lines.append(f"verdict: FAILED (exit code {exit_code}) - {reasons[0]}")
    lines.extend(f"  why: {reason}" for reason in reasons[1:])
    return lines
