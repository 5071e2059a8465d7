"""What a run reports: the options it runs under, each step's and host's outcome, the progress sink.

Moved out of :mod:`workload.engine` (which re-exports every name): the engine's loop fills these
values, the CLI renders them and ``run.json`` records them (:func:`unfinished_hosts` reads it back).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from workload.commands import Secrets, mask_text
from workload.errors import WorkloadError
from workload.steps import Step, StepPlan

StepStatus = Literal["changed", "unchanged", "failed", "skipped", "planned", "reboot", "interrupted"]
HostStatus = Literal["ok", "failed", "reboot-required", "interrupted"]


@dataclass
class RunOptions:
    dependencies_only: bool = False
    iterations: int = 1
    #: VirtualClient's --timeout: repeat action rounds until this many seconds have passed.
    timeout_s: float | None = None
    #: Stop at the first failed action; a failed host then stops the others too.
    fail_fast: bool = False
    #: Hosts worked on at once (one worker thread and one connection each).
    parallel: int = 8
    reboot_timeout_s: float = 1800.0
    #: Where host state lives on each host (default: /var/lib/workload/state.json as root). The
    #: environment variable WORKLOAD_STATE_PATH sets it for a whole CLI run (tests, side-by-side runs).
    state_path: str | None = field(default_factory=lambda: os.environ.get("WORKLOAD_STATE_PATH") or None)
    #: Values handed to every step as ``ctx.options``.
    step_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StepOutcome:
    label: str
    status: StepStatus
    duration_s: float = 0.0
    message: str = ""
    plan: StepPlan | None = None
    #: ``time.monotonic()`` just after the step was announced (log line, reporter): the moment the
    #: engine counts a round of actions from, so that anything watching the announcements sees rounds
    #: spaced by at least ``MinimumExecutionInterval``. Not written to run.json (a process-local clock).
    started_at: float = 0.0


def _masked(value: object, secrets: Secrets | None) -> object:
    """``value`` (an error's fields) with every text in it masked, lists and dicts walked."""
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, list):
        return [_masked(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _masked(item, secrets) for key, item in value.items()}
    return value


@dataclass
class HostOutcome:
    name: str
    status: HostStatus = "ok"
    steps: list[StepOutcome] = field(default_factory=list)
    error: WorkloadError | None = None
    results: list[Path] = field(default_factory=list)
    duration_s: float = 0.0
    #: The host's inventory labels (``rack=r12``); copied into each of its metrics' metadata.
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def steps_done(self) -> int:
        return sum(1 for s in self.steps if s.status in ("changed", "unchanged"))

    @property
    def reason(self) -> str:
        """The first line of the error, naming the step that failed (the hosts table shows it), or ``""``."""
        if self.error is None:
            return ""
        first = (str(self.error).splitlines() or [""])[0]  # an error may have no text at all
        last = self.steps[-1] if self.steps else None
        if last is not None and last.status in ("failed", "interrupted") and not _names_step(self.error):
            return f"{last.label}: {first}"
        return first

    def to_json(self, secrets: Secrets | None = None) -> dict[str, Any]:
        """The outcome as ``run.json`` records it, texts masked (URL passwords, the run's ``secrets``)."""
        return {
            "host": self.name,
            "status": self.status,
            "duration_s": round(self.duration_s, 3),
            "error": mask_text(str(self.error), secrets) if self.error else None,
            "error_fields": _masked(self.error.fields(), secrets) if self.error else None,
            "labels": dict(self.labels),
            "steps": [
                {
                    "step": s.label,
                    "status": s.status,
                    "duration_s": round(s.duration_s, 3),
                    "message": mask_text(s.message, secrets),
                }
                for s in self.steps
            ],
            "results": [str(p) for p in self.results],
        }


class Reporter(Protocol):
    """Receives progress events; the CLI renders them (rich), tests record them.

    Called from the hosts' worker threads (several at once): implementations must be thread-safe.
    """

    def step_started(self, host: str, step: Step) -> None: ...

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None: ...

    def line(self, host: str, text: str) -> None: ...

    def host_finished(self, host: str, outcome: HostOutcome) -> None: ...


class NullReporter:
    def step_started(self, host: str, step: Step) -> None:
        pass

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        pass

    def line(self, host: str, text: str) -> None:
        pass

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        pass


def unfinished_hosts(run_folder: Path) -> list[str]:
    """The hosts of a previous run that did not end ``ok`` (for ``run --only-failed RUN_FOLDER``).

    Read from ``RUN_FOLDER/run.json``; raises :class:`~workload.errors.UsageError` naming the file
    when it is missing or not a run record.
    """
    import json

    from workload.errors import UsageError
    from workload.safefile import read_regular

    path = run_folder / "run.json"
    try:
        data = json.loads(read_regular(path))
        outcomes = data["outcomes"]
        return [str(o["host"]) for o in outcomes if o["status"] != "ok"]
    except OSError as exc:
        raise UsageError(f"--only-failed {run_folder}: cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"--only-failed {run_folder}: {path} is not the run.json of a workload run") from None


def _names_step(error: BaseException | None) -> bool:
    """Whether the error (or one it was raised from) says which step it is about (its ``step`` field)."""
    seen = 0
    while isinstance(error, WorkloadError) and seen < 10:
        if error.step is not None:
            return True
        error, seen = error.__cause__, seen + 1
    return False
