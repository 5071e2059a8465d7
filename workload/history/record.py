"""Turn a run folder (or any results folder) and its parsed results into a :class:`RunRecord`.

Where each fact comes from, first found wins:

* ``run.json`` (written by ``workload run``): run id, profile, hosts with their inventory labels
  (``sku=ND96isr_H100_v5``), and, where the run recorded them, start/end times, exit code and
  per-host ``facts`` (CPU model, GPU, driver, CUDA);
* the results: the harness system name (``H200-SXM-141GBx8_TRT``: GPU model and count, NVIDIA's
  ``<gpu>x<count>`` naming of systems in its ``systems/`` configurations), LoadGen and TensorRT versions;
* ``profile.json``'s parameters (masked with the project's masking before they are stored): the
  driver and CUDA version the profile installs (``LinuxDriverVersion``, ``LinuxCudaVersion``) and the
  MLPerf round of the harness (``inference_results_v4.1`` in ``ResultsRepoUri``);
* for the ``local`` host, this machine's CPU model (``/proc/cpuinfo``).

What belongs to the run itself comes from the run folder when it has it, whatever the recording
command says: ``run.json``'s exit code and tag, ``summary.json``'s verdict and interruption. So
``results RUN --record`` of a run that exited 4 records exit 4, not the verdict of re-reading its
results. The record's identity and kind are computed here (:mod:`workload.history.identity`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workload import __version__
from workload.history.identity import result_identity, run_kind
from workload.history.store import HostFacts, RunRecord
from workload.metrics.collection import Collection
from workload.params import display_parameters
from workload.safefile import read_regular

#: ``H200-SXM-141GBx8`` / ``DGX-H100_H100-SXM-80GBx8_TRT``: the GPU and its count in a system name
_SYSTEM_GPUS = re.compile(r"(?:^|_)([A-Za-z0-9][A-Za-z0-9.-]*?)x(\d+)(?=_|$)")
_ROUND = re.compile(r"inference_results_(v\d+(?:\.\d+)*)", re.IGNORECASE)
_STAMP = re.compile(r"^(\d{8}-\d{6})")
#: names a fact may have in run.json or inventory labels -> our column
_ALIASES: dict[str, tuple[str, ...]] = {
    "sku": ("sku", "vm_size", "vmsize", "instance_type"),
    "gpu_model": ("gpu_model", "gpu", "gpu_name"),
    "gpu_count": ("gpu_count", "gpus"),
    "driver": ("driver", "driver_version", "nvidia_driver"),
    "cuda": ("cuda", "cuda_version"),
    "harness_round": ("harness_round", "mlperf_round", "round"),
    "cpu": ("cpu", "cpu_model", "cpu_model_name"),
}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _time(value: Any) -> datetime | None:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
    return None


def _first(mapping: Mapping[str, Any], *keys: str) -> Any:
    lowered = {k.lower(): v for k, v in mapping.items()}
    for key in keys:
        value = lowered.get(key)
        if value not in (None, ""):
            return value
    return None


def gpus_of_system(system: str | None) -> tuple[str | None, int | None]:
    """GPU model and count from a harness system name (``H200-SXM-141GBx8_TRT`` -> ``H200-SXM-141GB``, 8)."""
    if not system:
        return None, None
    found = _SYSTEM_GPUS.findall(system)
    if not found:
        return None, None
    model, count = found[-1]
    return model, int(count)


def harness_round(parameters: Mapping[str, Any]) -> str | None:
    """The MLPerf round (``v4.1``) named by the results repository a profile clones, if any."""
    for value in parameters.values():
        match = _ROUND.search(value) if isinstance(value, str) else None
        if match:
            return match[1]
    return None


def local_cpu_model() -> str | None:
    """This machine's CPU model from /proc/cpuinfo (None where it has none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        return None
    return None


def _host_facts(
    name: str, labels: Mapping[str, Any], facts: Mapping[str, Any], collection: Collection, params: Mapping[str, Any]
) -> HostFacts:
    known: dict[str, Any] = {str(k): v for k, v in labels.items()}
    known.update({str(k): v for k, v in facts.items()})
    mine = [r for r in collection.results if r.host == name or (r.host is None and name == "local")]
    system = next((r.system for r in mine if r.system), None)
    gpu_model, gpu_count = gpus_of_system(system)
    if system:
        known.setdefault("system", system)
    for result in mine:
        for metric in result.metrics[:1]:
            for key in ("loadgen_version", "tensorrt_version"):
                if metric.metadata.get(key) is not None:
                    known.setdefault(key, metric.metadata[key])
    column: dict[str, Any] = {col: _first(known, *aliases) for col, aliases in _ALIASES.items()}
    column["gpu_model"] = column["gpu_model"] or gpu_model
    column["gpu_count"] = column["gpu_count"] or gpu_count
    column["driver"] = column["driver"] or _first(params, "linuxdriverversion") or None
    column["cuda"] = column["cuda"] or _first(params, "linuxcudaversion") or None
    column["harness_round"] = column["harness_round"] or harness_round(params)
    if column["cpu"] is None and name == "local":
        column["cpu"] = local_cpu_model()
    try:
        count = int(column["gpu_count"]) if column["gpu_count"] is not None else None
    except (TypeError, ValueError):
        count = None
    text = {k: (None if v is None else str(v)) for k, v in column.items() if k != "gpu_count"}
    all_facts = {k: v for k, v in known.items() if isinstance(v, str | int | float | bool)}
    all_facts.update({k: v for k, v in column.items() if v is not None})
    return HostFacts(name=name, gpu_count=count, facts=all_facts, **text)


def _actions(profile_doc: Mapping[str, Any]) -> list[Any]:
    """The run's actions as profile.json has them (type and resolved parameters), secrets masked again."""
    actions = profile_doc.get("Actions")
    if not isinstance(actions, list):
        return []
    shown = []
    for action in actions:
        if isinstance(action, dict):
            found = action.get("Parameters")
            parameters = display_parameters(found) if isinstance(found, dict) else {}
            shown.append({"Type": action.get("Type"), "Parameters": parameters})
    return shown


def build_record(
    source: Path,
    collection: Collection,
    *,
    command: str,
    exit_code: int | None,
    ok: bool | None,
    tag: str | None = None,
    ended_at: datetime | None = None,
) -> RunRecord:
    """The record of the run or results folder ``source`` whose parsed results are ``collection``."""
    folder = source if source.is_dir() else source.parent
    run = _read_json(folder / "run.json")
    profile_doc = _read_json(folder / "profile.json")
    raw_params = profile_doc.get("Parameters") if isinstance(profile_doc.get("Parameters"), dict) else {}
    params = display_parameters(raw_params or {})
    own_id = run_id = run.get("run_id") if isinstance(run.get("run_id"), str) else None
    if run_id is None:  # a results folder: its name (recording it again replaces it, see History.record)
        run_id = folder.resolve().name or "results"
    profile = run.get("profile") if isinstance(run.get("profile"), str) else profile_doc.get("Name")
    started = _time(_first(run, "started_at", "start_time", "start"))
    stamp = _STAMP.match(run_id)
    if started is None and stamp:
        started = datetime.strptime(stamp[1], "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    times = [m.start_time for m in collection.metrics if m.start_time is not None]
    if started is None and times:
        started = min(_time(t.isoformat()) or t for t in times)
    ended = _time(_first(run, "ended_at", "end_time", "end")) or ended_at or datetime.now(UTC)
    summary = _read_json(folder / "summary.json")
    if isinstance(run.get("exit_code"), int) and not isinstance(run.get("exit_code"), bool):
        exit_code = run["exit_code"]  # the run's own, not the verdict of re-reading its results
        verdict = summary.get("verdict")
        own_ok = verdict.get("ok") if isinstance(verdict, dict) else None
        ok = own_ok if isinstance(own_ok, bool) else exit_code == 0
    if tag is None and isinstance(run.get("tag"), str) and run["tag"]:
        tag = run["tag"]
    interrupted = None
    if summary.get("interrupted") is True:
        reason = summary.get("interrupt_reason")
        interrupted = reason if isinstance(reason, str) and reason else "interrupted"
    host_entries = [h for h in run.get("hosts", []) if isinstance(h, dict) and isinstance(h.get("name"), str)]
    names = [h["name"] for h in host_entries] or collection.hosts or ["local"]
    entry_of = {h["name"]: h for h in host_entries}
    host_rows = []
    for name in names:
        entry = entry_of.get(name, {})
        labels = entry.get("labels")
        facts = entry.get("facts")
        labels = labels if isinstance(labels, dict) else {}
        facts = facts if isinstance(facts, dict) else {}
        host_rows.append(_host_facts(name, labels, facts, collection, params))
    return RunRecord(
        identity=result_identity(collection.results, run_id=own_id, folder=str(folder.resolve())),
        kind=run_kind(
            profile if isinstance(profile, str) else None,
            params,
            (h.sku for h in host_rows),
            len(host_rows),
            _actions(profile_doc),
        ),
        interrupted=interrupted,
        run_id=run_id,
        command=command,
        results=collection.results,
        profile=profile if isinstance(profile, str) else None,
        tag=tag,
        source=str(folder.resolve()),
        started_at=started or ended,
        ended_at=ended,
        exit_code=exit_code,
        ok=ok,
        parameters=params,
        hosts=host_rows,
        tool_version=__version__,
    )
