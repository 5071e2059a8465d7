"""NVIDIA's own system detection from v5.1 on, run as the system check: ``code/main.py`` imports ``DETECTED_SYSTEM``
from ``code/common/systems/system_list.py`` (nvmitten's ``System.detect()`` matched against NVIDIA's systems, or the
``SYSTEM_NAME`` override) and logs ``DETECTED_SYSTEM.extras['id']``; the check prints that id, nothing else, on
stdout (the module's own log lines go to stderr). An unknown machine is ``UNREGISTERED_<arch>_<gpu>x<n>``."""

from __future__ import annotations

#: The check's argv (v5.1 ships no ``scripts/get_system_id.py``; ``get_system_id.sh`` runs NVIDIA's internal image).
DETECTION_ARGV: tuple[str, ...] = (
    "python3",
    "-c",
    "from code.common.systems.system_list import DETECTED_SYSTEM; print(DETECTED_SYSTEM.extras['id'])",
)


def system_answer(output: str) -> str | None:
    """The id the system check printed: the last line that is one token (the harness's log lines around it, on
    stderr, are ``[time file:line LEVEL] ...``); None when there is none."""
    answers = [line.strip() for line in output.splitlines() if line.strip() and len(line.split()) == 1]
    answers = [a for a in answers if not a.startswith("[")]
    return answers[-1] if answers else None


def is_unregistered(system_id: str) -> bool:
    """Whether the system check's answer is its placeholder for a machine it does not know."""
    return system_id.strip().startswith("UNREGISTERED")
