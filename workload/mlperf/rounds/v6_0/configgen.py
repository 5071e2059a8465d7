"""Config files of a custom system in NVIDIA's v6.0 format, rendered from gpuconfigs values (pure text).

``closed/NVIDIA/configs/<SYSTEM>/<Scenario>/<benchmark>.py`` (the benchmark's ``.`` spelled ``_``): a Python module
of dicts keyed by the harness's Field objects (``model_fields.gpu_batch_size``...) and
``EXPORTS = {C.WorkloadSetting(C.HarnessType.Custom, C.AccuracyTarget(0.99), C.PowerSetting.MaxP): <dict>}``, with
``ACCURACY_OVERRIDES`` for AccuracyOnly runs; the system is named by ``SYSTEM_NAME`` (tests/fixtures/harness/
rounds/v6.0/UPSTREAM.md names the files read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workload.mlperf.system_files import Provenance, fields_dict, workload_setting

_V60_IMPORTS = (
    "import code.common.constants as C",
    "import code.llmlib.fields as llm_fields",
    "import code.fields.models as model_fields",
    "import code.fields.loadgen as loadgen_fields",
    "import code.fields.harness as harness_fields",
)


def v60_config(
    system_id: str,
    description: str,
    settings: Mapping[str, Mapping[str, Any]],
    provenance: Provenance,
    *,
    env: Mapping[str, str] | None = None,
    accuracy_overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """A v6.0 config file: one dict per accuracy target (``settings``: ``k_99``/``k_99_9`` -> fields)."""
    out = [*provenance.header(system_id, description), *_V60_IMPORTS]
    if env:
        out += ["import os", ""] + [f"os.environ[{k!r}] = {v!r}" for k, v in env.items()]
    out.append("")
    for accuracy, fields in settings.items():
        out += [f"config_{accuracy} = {fields_dict(fields)}", ""]
    out.append("EXPORTS = {")
    out += [f"    {workload_setting(a)}: config_{a}," for a in settings]
    out += ["}", ""]
    if accuracy_overrides:
        out.append("ACCURACY_OVERRIDES = {")
        for accuracy, fields in accuracy_overrides.items():
            body = fields_dict(fields, indent="        ").replace("\n}", "\n    }")
            out.append(f"    {workload_setting(accuracy)}: {body},")
        out += ["}", ""]
    return "\n".join(out)


def v60_config_path(system_id: str, scenario: str, benchmark: str) -> str:
    """``configs/WL_B200-SXM-180GBx8/Offline/llama3_1-405b.py`` (relative to closed/NVIDIA)."""
    return f"configs/{system_id}/{scenario}/{benchmark.replace('.', '_')}.py"
