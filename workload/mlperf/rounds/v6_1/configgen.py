"""Config files of a custom system in NVIDIA's v6.1 format, and MLCommons' endpoints client's config (pure text).

``closed/NVIDIA/configs/<model>/<SYSTEM>/TRTLLM/<Scenario>/``: ``server.py`` (what ``run_llm_server`` imports: the
trtllm-serve options file, its environment file, the precision), ``harness.py`` (what ``run_harness`` imports), the
``trtllm-serve`` options YAML and its env YAML; the system is named by ``SYSTEM_NAME``
(tests/fixtures/harness/rounds/v6.1/UPSTREAM.md names the files read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from workload.mlperf.system_files import MARK, Provenance, fields_dict, workload_setting

_V61_IMPORTS = (
    "import nv_mlpinf.common.constants as C",
    "import nv_mlpinf.common.paths as paths",
    "import nv_mlpinf.llmlib.fields as llm_fields",
    "import nv_mlpinf.fields.models as model_fields",
    "import nv_mlpinf.fields.loadgen as loadgen_fields",
    "import nv_mlpinf.fields.harness as harness_fields",
)


def v61_folder(benchmark: str, system_id: str, scenario: str, backend: str = "TRTLLM") -> str:
    """``configs/llama2_70b/WL_B300-SXM-270GBx8/TRTLLM/Offline`` (``conf_import_base`` of nv_mlpinf/main.py)."""
    return f"configs/{benchmark.replace('-', '_').replace('.', '_')}/{system_id}/{backend}/{scenario}"


def _yaml(value: Any, indent: int = 0) -> list[str]:
    """A YAML block for plain dicts/lists/scalars (JSON scalars are valid YAML)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, Mapping) and item:
                lines += [f"{pad}{key}:", *_yaml(item, indent + 2)]
            else:
                lines.append(f"{pad}{key}: {json.dumps(item)}")
    return lines


def v61_serve_yaml(options: Mapping[str, Any], provenance: Provenance, system_id: str, description: str) -> str:
    """The ``trtllm-serve --extra_llm_api_options`` file."""
    return "\n".join([*provenance.header(system_id, description), *_yaml(options)]) + "\n"


def v61_env_yaml(env: Mapping[str, str]) -> str:
    return "\n".join([MARK, *(f"{k}: {json.dumps(str(v))}" for k, v in env.items())]) + "\n"


def v61_server(
    folder: str,
    urls: Sequence[str],
    precision: str,
    provenance: Provenance,
    system_id: str,
    description: str,
    accuracy: str = "k_99",
) -> str:
    """``server.py``: the options and env files beside it (paths under ``paths.PROJECT_BASE_DIR``), the endpoints."""
    body = [
        f"    llm_fields.trtllm_yml_override: paths.PROJECT_BASE_DIR / {folder + '/trtllm-serve.yaml'!r},",
        f"    llm_fields.env_yml_override: paths.PROJECT_BASE_DIR / {folder + '/trtllm-serve-env.yaml'!r},",
        f"    llm_fields.trtllm_server_urls: {list(urls)!r},",
        f"    model_fields.precision: {precision!r},",
    ]
    out = [*provenance.header(system_id, description), *_V61_IMPORTS, "", "ifb_config = {", *body, "}", ""]
    out += ["EXPORTS = {", f"    {workload_setting(accuracy)}: ifb_config,", "}", ""]
    return "\n".join(out)


def v61_harness(
    fields: Mapping[str, Any],
    urls: Sequence[str],
    provenance: Provenance,
    system_id: str,
    description: str,
    accuracy: str = "k_99",
    tensor_dir: str | None = None,
) -> str:
    """``harness.py``: LoadGen and harness fields plus the endpoints the harness sends queries to."""
    values = {**fields, "trtllm_server_urls": list(urls)}
    body = fields_dict(values)
    if tensor_dir:
        # NVIDIA writes it as an expression over the scratch space (paths.PREPROCESSED_DATA_DIR / 'llama2-70b/').
        body = (
            body[: -len("\n}")] + f"\n    harness_fields.tensor_path: paths.PREPROCESSED_DATA_DIR / {tensor_dir!r},\n}}"
        )
    out = [*provenance.header(system_id, description), *_V61_IMPORTS, ""]
    out += [f"harness_config = {body}", "", "EXPORTS = {"]
    out += [f"    {workload_setting(accuracy)}: harness_config,", "}", ""]
    return "\n".join(out)


#: The fewest workers the endpoints client starts on its own (``endpoint_client/config.py``
#: ``_get_auto_num_workers``: ``min_workers = 10``).
CLIENT_MIN_WORKERS = 10


def client_workers(servers: int) -> int:
    """The endpoints client's worker count for ``servers`` servers: the smallest multiple of ``servers`` that is at
    least the client's own minimum, so every server gets as many workers (and queries) as the others."""
    return servers * -(-CLIENT_MIN_WORKERS // servers)


def endpoint_config(
    *,
    name: str,
    model: str,
    scenario: str,
    urls: Sequence[str],
    report_dir: str,
    min_duration_ms: int,
    samples: int,
    target_qps: float | None,
    max_new_tokens: int,
    seeds: Mapping[str, int] | None = None,
) -> str:
    """An MLCommons endpoints client config (``inference-endpoint benchmark from-config -c``), written as JSON (a
    subset of YAML) in the schema of NVIDIA's v6.1 ``endpoint.yaml`` files.

    Offline is ``type: offline`` with ``load_pattern.type: max_throughput`` and a fixed ``n_samples_to_issue``
    (NVIDIA's Offline files: "min_duration_ms ... is overrided when n_samples to issue is present"). Server and
    Interactive are ``type: online`` with ``load_pattern: {type: poisson, target_qps}`` and streaming on ("Required
    for TTFT/TPOT measurement"), no sample count: the client issues target_qps x min_duration (its
    ``RuntimeConfig``: "Calculated from QPS * duration"). ValueError for an online scenario without a positive
    ``target_qps`` (the client's own rule: "Poisson requires --target-qps").

    ``urls`` (``host:port`` each) are every trtllm-serve server of the run, all in ``endpoint_config.endpoints``:
    the client's schema takes a list (``config/schema.py`` ``EndpointConfig.endpoints``: ``list[str]``,
    ``min_length=1``, "Endpoint URL(s)"), its benchmark joins each with the API route into
    ``HTTPClientConfig.endpoint_urls`` (``commands/benchmark/execute.py``), and each worker process sends to
    ``endpoint_urls[worker_id % len(endpoint_urls)]`` (``endpoint_client/worker.py`` ``_make_http_request``) while
    queries go to the workers round-robin (``endpoint_client/http_client.py`` ``issue``: ``cycle(range(num_workers))``).
    A server's share is its workers' share, so with several servers ``settings.client.num_workers`` is set to a
    multiple of their count (:func:`client_workers`; NVIDIA's own ``endpoint.yaml`` files set it too:
    ``configs/qwen3_vl_235b_a22b/VR-NVL72_VR-288GB_aarch64x72/VLLM/Server/endpoint.yaml`` ``num_workers: 8``);
    the client's default (``_get_auto_num_workers``: the NUMA node's CPUs, 10 to 24) would give 8 servers 2, 2, 1, 1,
    ... of 10 workers. One server takes the client's default.

    ``seeds`` (the round's LoadGen seeds: ``sample_index_rng_seed``, ``schedule_rng_seed``) become the client's
    ``settings.runtime.dataloader_random_seed`` and ``scheduler_random_seed``, as NVIDIA's published ``config.yaml``
    files carry them: MLCommons' checker reads those two keys as the run's seeds (its endpoints parser) and rejects a
    result whose seeds are not the round's (``checks/performance_check.py`` ``seeds_check``). Left out, the client
    uses its own default (42), and the result cannot be submitted.
    """
    if not urls:
        raise ValueError("the endpoints client needs at least one server URL")
    online = scenario in ("Server", "Interactive")
    params: dict[str, Any] = {"name": model, "max_new_tokens": max_new_tokens}
    runtime: dict[str, Any] = {"min_duration_ms": min_duration_ms}
    if seeds is not None:
        runtime["dataloader_random_seed"] = seeds["sample_index_rng_seed"]
        runtime["scheduler_random_seed"] = seeds["schedule_rng_seed"]
    if online:
        if target_qps is None or not target_qps > 0:
            raise ValueError(f"{scenario}: the endpoints client's Poisson load needs a target_qps above 0")
        pattern: dict[str, Any] = {"type": "poisson", "target_qps": target_qps}
        params["streaming"] = "on"
    else:
        pattern = {"type": "max_throughput"}
        runtime["n_samples_to_issue"] = samples
    config = {
        "name": name,
        "version": "1.0",
        "type": "online" if online else "offline",
        "submission_ref": {"model": model, "ruleset": "mlperf-inference-v6.1"},
        "model_params": params,
        "datasets": [{"name": model, "type": "performance"}],
        "settings": {
            "runtime": runtime,
            "load_pattern": pattern,
            **({"client": {"num_workers": client_workers(len(urls))}} if len(urls) > 1 else {}),
        },
        "endpoint_config": {"endpoints": [f"http://{url}" for url in urls], "api_key": None},
        "report_dir": report_dir,
    }
    return json.dumps(config, indent=2) + "\n"
