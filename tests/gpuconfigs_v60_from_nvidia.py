"""How ``gpuconfigs/v6.0/*.json`` entries are written: from what NVIDIA's own v6.0 code resolves (a maintainer's tool).

Usage: ``python -m tests.gpuconfigs_v60_from_nvidia RESOLVED.json CONFIGS_DIR`` where RESOLVED.json is the output of
:mod:`tests.nvidia_v60_values` over every system folder of a v6.0 ``closed/NVIDIA/configs`` tree (CONFIGS_DIR, e.g. a
checkout of ``gbeezybez/inference_results_v6.0``, the copy ``../shared/upstream/nvidia-harness/v6.0`` holds part of).

Every (system, scenario, benchmark, accuracy target) NVIDIA's code resolves for a single-node system (a node holds 8
B200/B300 or 4 GB200/GB300) of a benchmark the table carries becomes the table entry for that GPU count: its fields
exactly as ``ConfigurationIndex.get`` returns them (the Field names without their module), its ``os.environ`` lines,
its ``ACCURACY_OVERRIDES``. Files the SKU's ``not_used`` names stay out. A harness-only config (no
``gpu_batch_size``) keeps the ``atomic`` count the table gave it, else takes the largest smaller count of the same
benchmark, scenario and target that has its own values. ``read_from`` says whether the file is also in
``shared/upstream`` (the conformance test reads those at test time) or only in the full tree.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FORK = "gbeezybez/inference_results_v6.0 @ 232fbf90fceb1d55b633030556fb02deddb4517b"
#: NVIDIA's system-id prefix -> our SKU file, and how many GPUs one node holds.
SKUS = {
    "B200-SXM-180GB": ("B200_SXM_180GB", 8),
    "B300-SXM-270GB": ("B300_SXM_270GB", 8),
    "GB200-NVL72_GB200-186GB_aarch64": ("GB200_186GB", 4),
    "GB300-NVL72_GB300-288GB_aarch64": ("GB300_288GB", 4),
}
BENCHMARKS = ("llama2-70b", "llama3_1-8b", "llama3_1-405b", "gpt-oss-120b", "deepseek-r1")
SCENARIO_ORDER = ("Offline", "Server", "Interactive", "SingleStream", "MultiStream")


def _bare(fields: dict[str, Any]) -> dict[str, Any]:
    return {name.split(".", 1)[1]: value for name, value in fields.items()}


def _in_shared(rel: str) -> bool:
    upstream = Path(os.environ.get("WORKLOAD_UPSTREAM", ROOT.parent / "shared" / "upstream"))
    shared = upstream / "nvidia-harness" / "v6.0" / rel
    return shared.is_file()


def rewrite(resolved: dict[str, Any], configs_dir: Path) -> None:
    for system, scenarios in resolved.items():
        found = re.fullmatch(r"(?P<prefix>.+)x(?P<count>\d+)", system)
        if system == "errors" or not found or found["prefix"] not in SKUS:
            continue
        sku, per_node = SKUS[found["prefix"]]
        count = int(found["count"])
        if count > per_node:
            continue
        path = ROOT / "gpuconfigs" / "v6.0" / f"{sku}.json"
        table = json.loads(path.read_text())
        for scenario, benches in scenarios.items():
            for bench, targets in benches.items():
                rel = f"closed/NVIDIA/configs/{system}/{scenario}/{bench}.py"
                if bench not in BENCHMARKS or rel in table.get("not_used", {}):
                    continue
                assert (configs_dir / system / scenario / f"{bench}.py").is_file(), rel
                for accuracy, got in targets.items():
                    per_count = table["configs"].setdefault(bench, {}).setdefault(scenario, {}).setdefault(accuracy, {})
                    old = per_count.get(str(count), {})
                    where = (
                        "also in shared/upstream/nvidia-harness/v6.0" if _in_shared(rel) else "not in shared/upstream"
                    )
                    entry: dict[str, Any] = {
                        "file": rel,
                        "class": f"WorkloadSetting(Custom,{0.99 if accuracy == 'k_99' else 0.999},MaxP)",
                        "read_from": f"{FORK} ({where})",
                        "fields": _bare(got["fields"]),
                    }
                    if got["env"]:
                        entry["env"] = got["env"]
                    if got["accuracy_overrides"]:
                        entry["accuracy_overrides"] = _bare(got["accuracy_overrides"])
                    if got["exported"]:
                        entry["exported"] = got["exported"]
                    if "gpu_batch_size" not in entry["fields"]:
                        atomic = old.get("atomic")
                        if atomic is None:
                            own = [
                                int(c)
                                for c, e in per_count.items()
                                if int(c) < count and "gpu_batch_size" in e["fields"]
                            ]
                            atomic = max(own) if own else None
                        if atomic is None:
                            continue  # filled in a second pass, once the smaller count is in
                        entry["atomic"] = atomic
                    per_count[str(count)] = entry
                    table.get("unpublished", {}).get(bench, {}).pop(scenario, None)
        table["unpublished"] = {b: s for b, s in table.get("unpublished", {}).items() if s}
        table["configs"] = {
            b: {
                s: {a: dict(sorted(c.items(), key=lambda kv: int(kv[0]))) for a, c in sorted(t.items())}
                for s, t in sorted(sc.items(), key=lambda kv: SCENARIO_ORDER.index(kv[0]))
            }
            for b, sc in table["configs"].items()
        }
        path.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    data = json.loads(Path(sys.argv[1]).read_text())
    for _ in range(2):  # a harness-only config finds its atomic count once the smaller system's entry is written
        rewrite(data, Path(sys.argv[2]))
