"""The target QPS of an MLCommons endpoints client run in Server or Interactive (v6.1 ``Client=endpoints``).

The client runs an online benchmark as a Poisson load at ``settings.load_pattern.target_qps`` (its
``config/schema.py``: ``LoadPattern`` "poisson: target_qps sets scheduler rate (online, required - validated)",
``Poisson requires --target-qps``); NVIDIA's v6.1 ``endpoint.yaml`` files for Server and Interactive write one
number there (``configs/qwen3_vl_235b_a22b/*/VLLM/{Server,Interactive}/endpoint.yaml``: ``type: "poisson"``,
``target_qps: 1215`` / ``350``). Nothing in the client chooses it, so this runner does, in this order:

1. the profile's ``ServerTargetQps`` / ``InteractiveTargetQps`` (the user's number wins);
2. NVIDIA's published ``server_target_qps`` for this machine's GPU in ``gpuconfigs/v6.1`` (the harness part of the
   scenario's ``harness.py``; NVIDIA's Interactive files set ``server_target_qps`` too), the nearest published GPU
   count scaled to this one as :meth:`~workload.mlperf.gpuconfigs_parts.PartsTable.resolve` does for custom systems;
   another GPU's value is never used (its rate could be far off this machine's);
3. otherwise a :class:`~workload.errors.ProfileError` naming the parameter to set.

The latency limits a Server/Interactive run is judged by are not the client's to set: the ruleset
(``mlperf-inference-v6.1``: the client's ``rulesets/mlcommons/rules.py``, TTFT/TPOT per model and
``OptimizationPriority``) and the submission checker apply them to the result; ``workload.metrics``' endpoints
parser judges them the same way (:mod:`workload.metrics.parsers.endpoint_rules`).
"""

from __future__ import annotations

from dataclasses import dataclass

from workload.errors import ProfileError
from workload.mlperf.gpuconfigs_parts import PartsTable
from workload.mlperf.system import HostSystem

#: The scenarios the client runs online (Poisson at a target QPS) and the parameter that sets each one's rate.
PARAMETERS = {"Server": "ServerTargetQps", "Interactive": "InteractiveTargetQps"}
#: The harness field NVIDIA's Server and Interactive ``harness.py`` files give the rate in (``loadgen_fields``).
FIELD = "server_target_qps"


@dataclass(frozen=True)
class TargetQps:
    """The rate and where it comes from (shown in the plan and the step log)."""

    value: float
    source: str


def choose(
    scenario: str,
    given: float | None,
    system: HostSystem | None,
    table: PartsTable,
    model: str,
    accuracy: str,
    *,
    system_problem: str | None = None,
) -> TargetQps:
    """The target QPS of ``model`` in ``scenario`` (``Server``/``Interactive``) at ``accuracy`` (``k_99``...).

    ``given`` is the scenario's parameter; ``system`` the machine's GPUs (None when unknown, ``system_problem``
    saying why). Raises ProfileError naming the parameter when neither gives a number.
    """
    parameter = PARAMETERS[scenario]
    if given is not None:
        return TargetQps(float(given), f"the parameter {parameter}")
    where = "this machine's GPUs"
    if system is not None and system.gpu_count > 0:
        where = f"{system.gpu_count}x {system.gpu_name}"
        if table.sku_for_gpu(system.gpu_name) is not None:
            resolved = table.resolve(
                system.gpu_name, system.gpu_memory_mib, system.gpu_count, model, scenario, accuracy
            )
            part = resolved.parts.get("harness")
            value = part.values.get(FIELD) if part is not None and part.tuned else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                note = f" {part.note}" if part is not None and part.note else ""
                source = part.source if part is not None else ""
                return TargetQps(float(value), f"NVIDIA's {FIELD} for {where}: {source}{note}")
    elif system_problem:
        where = f"this machine's GPUs ({system_problem})"
    raise ProfileError(
        parameter,
        f"MLCommons' endpoints client runs {model} {scenario} as a Poisson load at a target QPS, and "
        f"gpuconfigs/v6.1 has no NVIDIA {FIELD} of {model} {scenario} ({accuracy}) for {where}; "
        f"set {parameter} to the queries per second to send",
    )
