"""Results of THIS run: found under the run's own LOG_DIR, mapped to (model, scenario, test mode).

The harness exits 0 when it ran nothing (unknown system, no registered config), so success is
"every expected (model, scenario, mode) has a result folder", not an exit code. A missing result is
explained from what the harness printed when it said why. Result files are never deleted.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from workload.hosts.base import Host
from workload.mlperf.catalog import MODELS

#: Files that make a folder a result folder (LoadGen's detail log or NVIDIA's metadata.json).
RESULT_MARKERS = ("metadata.json", "mlperf_log_detail.txt")
UNKNOWN_SYSTEM_TEXT = "did not match any known systems"
#: The endpoints client's result summary (workload/metrics/parsers/endpoints.py reads the folder).
ENDPOINTS_SUMMARY = "result_summary.json"


@dataclass(frozen=True)
class Expected:
    """One result a run must produce: a benchmark (``bert-99.9``: the model at one accuracy target),
    a scenario and a test mode. ``ConfigVersion=default,high_accuracy`` expects ``bert-99`` and
    ``bert-99.9`` for each scenario: one is not the other's result."""

    model: str
    benchmark: str
    scenario: str
    test_mode: str

    def __str__(self) -> str:
        return f"{self.benchmark} {self.scenario} {self.test_mode}"


@dataclass(frozen=True)
class Found:
    """One result folder on the host and what it holds."""

    expected: Expected
    directory: str
    files: tuple[str, ...]
    system_name: str


def model_of(benchmark_full: str) -> str | None:
    """``bert-99.9`` -> ``bert``; ``mixtral-8x7b`` -> ``mixtral-8x7b``; None if not a model."""
    for suffix in ("-99.9", "-99"):
        if benchmark_full.endswith(suffix) and benchmark_full.removesuffix(suffix) in MODELS:
            return benchmark_full.removesuffix(suffix)
    return benchmark_full if benchmark_full in MODELS else None


def parse_listing(log_dir: str, listing: str) -> dict[str, list[str]]:
    """``find <log_dir> -type f`` output -> {result folder: [file names]} for folders with a marker."""
    folders: dict[str, list[str]] = {}
    for line in listing.splitlines():
        path = line.strip()
        if not path.startswith(log_dir.rstrip("/") + "/"):
            continue
        folder, name = posixpath.dirname(path), posixpath.basename(path)
        if name == ENDPOINTS_SUMMARY and posixpath.basename(folder) == "performance":
            # MLCommons' endpoints client (v6.1) keeps its summary in <scenario folder>/performance/.
            folder, name = posixpath.dirname(folder), f"performance/{name}"
        folders.setdefault(folder, []).append(name)
    markers = (*RESULT_MARKERS, f"performance/{ENDPOINTS_SUMMARY}")
    return {d: sorted(f) for d, f in sorted(folders.items()) if any(m in f for m in markers)}


def map_results(folders: dict[str, list[str]], test_mode: str) -> list[Found]:
    """Map ``<LOG_DIR>/<system_name>/<benchmark_full>/<Scenario>`` folders to Expected keys."""
    found = []
    for directory, files in folders.items():
        parts = directory.rstrip("/").split("/")
        if len(parts) < 3:
            continue
        system_name, bench, scenario = parts[-3], parts[-2], parts[-1]
        model = model_of(bench)
        if model is None:
            continue
        found.append(Found(Expected(model, bench, scenario, test_mode), directory, tuple(files), system_name))
    return found


def explain_missing(expected: Expected, output: str, *, system_text: str | None, custom_support: bool = False) -> str:
    """Why the harness produced no result for ``expected``, from what it printed.

    ``custom_support``: whether RequireCustomSystemSupport was on (the hint differs).
    """
    if UNKNOWN_SYSTEM_TEXT in output:
        detected = f" (detected {system_text})" if system_text else ""
        return (
            f"the harness did not recognise this system{detected} and ran nothing; set the parameter "
            "RequireCustomSystemSupport=true to register it as a custom system"
        )
    pattern = re.compile(r"No registered config for (\S+?)\.?\s*(?:for (WorkloadSetting\([^)]*\)))?$", re.M)
    high_accuracy = expected.benchmark.endswith("-99.9")
    for match in pattern.finditer(output):
        name, setting = match.group(1), match.group(2) or ""
        if f".{expected.scenario}." not in f".{name}." or not name.startswith(expected.model + "."):
            continue
        if setting and high_accuracy != ("99_9" in setting or "0.999" in setting):
            continue  # the warning is about the other accuracy target
        hint = (
            "gpuconfigs/ has no values for it"
            if custom_support
            else "set the parameter RequireCustomSystemSupport=true to add one from gpuconfigs/"
        )
        return f"the harness has no registered config for {name}{' ' + setting if setting else ''}; {hint}"
    if "Traceback (most recent call last)" in output:
        last = [line for line in output.splitlines() if line.strip()][-1:]
        return "the harness crashed" + (f": {last[0].strip()}" if last else "")
    return "the harness produced no result folder for it (see the step log)"


def find_results(host: Host, log_dir: str, test_mode: str) -> list[Found]:
    """Every result folder under ``log_dir`` on the host (none if the folder does not exist)."""
    from workload.commands import cmd

    if not host.exists(log_dir):
        return []
    listing = host.run(cmd("find", log_dir, "-type", "f", timeout=120))
    return map_results(parse_listing(log_dir, listing.stdout), test_mode)


def read_metadata(host: Host, found: Found) -> dict[str, object] | None:
    """The folder's metadata.json, or None when absent or unreadable (the metrics layer reports that)."""
    if "metadata.json" not in found.files:
        return None
    try:
        data = json.loads(host.read_text(posixpath.join(found.directory, "metadata.json")))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def copy_local(host: Host, found: Found, destination: Path) -> Path:
    """Copy one result folder from a remote host to ``destination/<system>/<bench>/<Scenario>``."""
    parts = found.directory.rstrip("/").split("/")
    target = destination.joinpath(*parts[-3:])
    target.mkdir(parents=True, exist_ok=True)
    for name in found.files:
        host.get(posixpath.join(found.directory, name), str(target / name))
    return target
