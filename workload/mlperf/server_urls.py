"""Which trtllm-serve servers NVIDIA's v6.1 harness starts for one run, read from the config files it imports.

``make run_llm_server`` (``nv-mlpinf run_llm_server``) starts one ``trtllm-serve --host 0.0.0.0 --port <p>`` per URL
of ``trtllm_server_urls`` (one per data-parallel rank), all in the process group of the make; the harness (or
MLCommons' endpoints client) sends the queries to the same URLs. The URLs come from, in NVIDIA's v6.1 code:

* the ``llm_fields.trtllm_server_urls`` entry of ``configs/<benchmark>/<SYSTEM>/TRTLLM/<Scenario>/server.py`` (the
  ``EXPORTS`` dict of the run's ``WorkloadSetting``, its ``AccuracyTarget``), a list of ``"host:port"`` strings
  (``nv_mlpinf/llmlib/fields.py``: ``trtllm_server_urls`` "TRTLLM server URLs (default=0.0.0.0:30000)", split on
  ``,`` from the command line); the files workload generates write ``LLMServerPort`` upward
  (:func:`workload.mlperf.rounds.v6_1.systems.v61_files`);
* else NVIDIA's default: ``len(detected GPUs) // instance size`` servers on ``0.0.0.0:30000``, ``30001``...,
  the instance size read from the ``trtllm_yml_override`` YAML (``moe_expert_parallel_size`` when above 1, else
  ``tensor_parallel_size * pipeline_parallel_size``). NVIDIA's own v6.1 ``server.py`` files name no URLs
  (``intel-ai-tce/inference_results_v6.1`` @ ``5174fca8`` ``closed/NVIDIA/configs/llama2_70b/
  GB300-NVL72_GB300-288GB_aarch64x4/TRTLLM/Server/server.py``), so this is how NVIDIA's runs get theirs.
  Upstream: NVIDIA's v6.1 ``nv_mlpinf/llmlib/config.py`` (index file id ``68295946639``)
  ``TrtllmEndpointServerConfig.__post_init__``, ``_get_endpoint_url`` (``base_port = 30000``),
  ``_parse_instance_size_from_yaml``; ``nv_mlpinf/llmlib/launch_server.py`` ``RunTrtllmServeOp.run`` (F61
  ``closed/Inventec/src/nv_mlpinf/llmlib/launch_server.py``: one process per URL, ``CUDA_VISIBLE_DEVICES`` =
  ``index * gpus_per_server`` upward).

Every server binds 0.0.0.0 whatever host its URL names, so this runner probes and sends to ``127.0.0.1:<port>``
(the container shares the host's network). ``LLMServerPort`` is the base port of the files workload writes; when the
harness's files name other ports, those win and :attr:`ServerUrls.note` says so (the log and the step's notes show
it; nothing is refused for it).

The system check also asks :func:`exports_targets` which accuracy targets a config file has values for (v6.0's
files have the same ``EXPORTS``): a run of a target its files lack is left out
(:mod:`workload.mlperf.system_support_files`).

Pure: the caller reads the files (:func:`resolve` takes a reader); the Python files are parsed with :mod:`ast`,
never imported or run. A value this module cannot read (a URL list built by code, a YAML path that is neither
``paths.PROJECT_BASE_DIR / '<path>'`` nor a string) is a :class:`ServerConfigError` naming the file and the key.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: NVIDIA's base port when a config names no URLs (``_get_endpoint_url``: ``base_port = 30000``).
NVIDIA_BASE_PORT = 30000
URLS_FIELD = "trtllm_server_urls"
YAML_FIELD = "trtllm_yml_override"
#: Where the servers are probed and queried from the harness container (host network).
LOCAL_HOST = "127.0.0.1"
#: The container path of closed/NVIDIA (NVIDIA's ``paths.PROJECT_BASE_DIR``).
_PROJECT = "/work/"


class ServerConfigError(ValueError):
    """A config file whose servers this runner cannot tell (the message names the file and the key)."""


@dataclass(frozen=True)
class ServerUrls:
    """The servers of one run: ``127.0.0.1:<port>`` each, where they come from, and a note when they are not the
    ports ``LLMServerPort`` gives."""

    urls: tuple[str, ...]
    #: For logs and messages: ``configs/.../server.py (trtllm_server_urls)`` or NVIDIA's default and why.
    source: str
    #: Set when the ports are not ``LLMServerPort`` upward (shown in the log and the plan's notes).
    note: str | None = None
    #: A disagreement between the files (harness.py sends elsewhere than server.py starts), for the log.
    warning: str | None = None


@dataclass(frozen=True)
class ConfigEntry:
    """What one ``EXPORTS`` entry of a v6.1 config file says about the servers."""

    #: ``trtllm_server_urls`` as written (``host:port`` strings), or None when the entry names none.
    urls: tuple[str, ...] | None
    #: ``trtllm_yml_override`` relative to closed/NVIDIA, or None when the entry names none.
    serve_yaml: str | None


def ports_from(base: int, count: int) -> tuple[int, ...]:
    return tuple(range(base, base + count))


def local(ports: Sequence[int]) -> tuple[str, ...]:
    return tuple(f"{LOCAL_HOST}:{p}" for p in ports)


def port_of(url: str, *, where: str = "") -> int:
    """The port of ``host:port`` (a scheme is allowed); ServerConfigError naming ``where`` when there is none."""
    rest = url.split("://", 1)[-1].split("/", 1)[0]
    _host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServerConfigError(f"{where}{URLS_FIELD}: {url!r} is not 'host:port'")
    return int(port)


def describe(urls: Sequence[str]) -> str:
    """``127.0.0.1:30000``; ``127.0.0.1:30000-30007 (8 servers)`` for consecutive ports; else the list."""
    if len(urls) > 2:
        hosts = {u.rpartition(":")[0] for u in urls}
        ports = [int(u.rpartition(":")[2]) for u in urls if u.rpartition(":")[2].isdigit()]
        if len(hosts) == 1 and len(ports) == len(urls) and ports == list(range(ports[0], ports[0] + len(ports))):
            return f"{hosts.pop()}:{ports[0]}-{ports[-1]} ({len(urls)} servers)"
    return ", ".join(urls)


def instance_size(yaml_text: str) -> int:
    """GPUs per server from a trtllm-serve options YAML: ``moe_expert_parallel_size`` when above 1, else
    ``tensor_parallel_size * pipeline_parallel_size`` (absent keys are 1), as ``_parse_instance_size_from_yaml``.

    Only top-level ``key: <int>`` lines are read (those three keys are top-level scalars in NVIDIA's files).
    """
    values: dict[str, int] = {}
    for line in yaml_text.splitlines():
        found = re.match(r"^(\w+)\s*:\s*['\"]?(\d+)['\"]?\s*(#.*)?$", line)
        if found:
            values[found.group(1)] = int(found.group(2))
    ep = values.get("moe_expert_parallel_size", 1)
    return ep if ep > 1 else values.get("tensor_parallel_size", 1) * values.get("pipeline_parallel_size", 1)


def read_entry(text: str, path: str, accuracy: str) -> ConfigEntry | None:
    """The ``EXPORTS`` entry of ``AccuracyTarget(<accuracy>)`` (MaxP) in a v6.1 config file, or None when the file
    has none (the harness then stops: "Config not found for current system"). ``accuracy``: ``0.99``/``0.999``.

    Dicts may be written out or built from others (``{**ifb_config, ...}``); ServerConfigError for a syntax error or
    a value of the two keys that is not written as this module reads it.
    """
    names = _names(text, path)
    chosen = _exports(names).get(f"{float(accuracy):g}")
    if chosen is None:
        return None
    items = _items(chosen, names, set())
    urls: tuple[str, ...] | None = None
    if URLS_FIELD in items:
        value = items[URLS_FIELD]
        if not isinstance(value, (ast.List, ast.Tuple)) or not all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            raise ServerConfigError(
                f"{path}: {URLS_FIELD} is {ast.unparse(value)}, not a list of 'host:port' strings; workload reads "
                "the list as written to know which servers to wait for"
            )
        urls = tuple(str(e.value) for e in value.elts if isinstance(e, ast.Constant))
        if not urls:
            raise ServerConfigError(f"{path}: {URLS_FIELD} is an empty list: the harness would start no server")
        for url in urls:
            port_of(url, where=f"{path}: ")
    serve_yaml = _project_path(items[YAML_FIELD], path) if YAML_FIELD in items else None
    return ConfigEntry(urls, serve_yaml)


def exports_targets(text: str, path: str) -> frozenset[str] | None:
    """The accuracy targets (``0.99``/``0.999``) a v6.0 or v6.1 config file has an ``EXPORTS`` entry for (MaxP): the
    entry NVIDIA's harness looks up for ``--accuracy_target``. None when a key's target cannot be read (written as
    a name or an expression): the file may hold any target. ServerConfigError naming the file when it is not valid
    Python."""
    exports = _names(text, path).get("EXPORTS")
    targets: set[str] = set()
    for key in exports.keys if isinstance(exports, ast.Dict) else []:
        number = _accuracy_of(key) if key is not None else None
        if key is None or number is None:
            return None
        if "MaxQ" not in ast.unparse(key):
            targets.add(f"{number:g}")
    return frozenset(targets)


def _names(text: str, path: str) -> dict[str, ast.expr]:
    """The module's top-level ``name = value`` assignments (parsed, never run)."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ServerConfigError(f"{path}: not valid Python (line {exc.lineno}): {exc.msg}") from None
    names: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            names[node.targets[0].id] = node.value
    return names


def _exports(names: dict[str, ast.expr]) -> dict[str, ast.expr]:
    """Accuracy target (``0.99``/``0.999``) -> its ``EXPORTS`` value: the first MaxP entry keyed
    ``...AccuracyTarget(<n>)...`` (NVIDIA's ``WorkloadSetting(harness type, AccuracyTarget(n), PowerSetting.MaxP)``,
    the key the harness builds from ``--accuracy_target``)."""
    exports = names.get("EXPORTS")
    out: dict[str, ast.expr] = {}
    if not isinstance(exports, ast.Dict):
        return out
    for key, value in zip(exports.keys, exports.values, strict=True):
        if key is None or "MaxQ" in ast.unparse(key):
            continue
        number = _accuracy_of(key)
        if number is not None:
            out.setdefault(f"{number:g}", value)
    return out


def resolve(
    server_py: str,
    read: Callable[[str], str | None],
    accuracy: str,
    *,
    gpu_count: Callable[[], int],
    base_port: int,
    harness_py: str | None = None,
) -> ServerUrls:
    """The servers ``make run_llm_server`` starts for the config ``server_py`` (relative to closed/NVIDIA).

    ``read(path)`` returns a file's text (path relative to closed/NVIDIA) or None when it does not exist;
    ``gpu_count()`` the machine's GPUs (called only for NVIDIA's default); ``base_port`` is ``LLMServerPort``.
    ``harness_py`` given: its own ``trtllm_server_urls``, when it names some, are compared with the servers'.
    """
    ours = local(ports_from(base_port, 1))
    text = read(server_py)
    entry = read_entry(text, server_py, accuracy) if text is not None else None
    if entry is None:
        # The harness stops at once ("Config not found"): the server's own error is what the run reports.
        return ServerUrls(ours, f"{server_py} has no EXPORTS entry for AccuracyTarget({accuracy})")
    if entry.urls is not None:
        ports = tuple(port_of(u) for u in entry.urls)
        source = f"{server_py} ({URLS_FIELD}: {', '.join(entry.urls)})"
    else:
        ports, source = _nvidia_default(server_py, entry, read, gpu_count)
    urls = local(ports)
    note = None
    if ports != ports_from(base_port, len(ports)):
        note = (
            f"trtllm-serve on {describe(urls)} as {source} says, not from LLMServerPort={base_port} "
            "(LLMServerPort sets the ports of the config files workload generates)"
        )
    warning = None
    harness_text = read(harness_py) if harness_py else None
    if harness_py and harness_text is not None:
        sends = read_entry(harness_text, harness_py, accuracy)
        if sends is not None and sends.urls is not None and tuple(port_of(u) for u in sends.urls) != ports:
            warning = (
                f"{harness_py} sends the queries to {', '.join(sends.urls)} while {server_py} starts the servers on "
                f"{describe(urls)}: NVIDIA's harness would wait for servers that never come"
            )
    return ServerUrls(urls, source, note, warning)


def _nvidia_default(
    server_py: str, entry: ConfigEntry, read: Callable[[str], str | None], gpu_count: Callable[[], int]
) -> tuple[tuple[int, ...], str]:
    if entry.serve_yaml is None:
        raise ServerConfigError(
            f"{server_py}: names neither {URLS_FIELD} nor {YAML_FIELD}; NVIDIA's run_llm_server needs the YAML "
            '("A trtllm_yml_override YAML file is required")'
        )
    yaml_text = read(entry.serve_yaml)
    if yaml_text is None:
        raise ServerConfigError(f"{server_py}: {YAML_FIELD} {entry.serve_yaml} does not exist")
    size = instance_size(yaml_text)
    gpus = gpu_count()
    count = gpus // size if size > 0 else 0
    if count < 1:
        raise ServerConfigError(
            f"{server_py}: names no {URLS_FIELD}, so NVIDIA's harness starts one server per {size} GPUs "
            f"({entry.serve_yaml}) of this machine's {gpus}: none"
        )
    return ports_from(NVIDIA_BASE_PORT, count), (
        f"NVIDIA's default ({server_py} names no {URLS_FIELD}: one server per {size} GPU(s) of "
        f"{entry.serve_yaml}, {gpus} GPUs, ports from {NVIDIA_BASE_PORT})"
    )


def _accuracy_of(key: ast.expr) -> float | None:
    """The accuracy target of an EXPORTS key: ``AccuracyTarget(<n>)``; ``AccuracyTarget()`` or a
    ``WorkloadSetting(...)`` naming none is 0.99 (the defaults of NVIDIA's ``AccuracyTarget.__init__`` and
    ``WorkloadSetting.accuracy_target``, v6.1 ``nv_mlpinf/common/constants.py``); ``AccuracyTarget.k_99`` /
    ``k_99_9`` as older files write it. None when the key says nothing this can read (a name, an expression)."""
    named = {"k_99": 0.99, "k_99_9": 0.999}
    for node in ast.walk(key):
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "AccuracyTarget":
            if not node.args and not node.keywords:
                return 0.99
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, (int, float)):
                return float(node.args[0].value)
            return None
        if (
            isinstance(node, ast.Attribute)
            and node.attr in named
            and ast.unparse(node.value).endswith("AccuracyTarget")
        ):
            return named[node.attr]
    if isinstance(key, ast.Call) and ast.unparse(key.func).split(".")[-1] == "WorkloadSetting":
        return 0.99
    return None


def _items(node: ast.expr, names: dict[str, ast.expr], seen: set[str]) -> dict[str, ast.expr]:
    """Field name (the attribute of ``llm_fields.<name>``) -> value expression, ``**other`` dicts merged in order."""
    if isinstance(node, ast.Name) and node.id in names and node.id not in seen:
        return _items(names[node.id], names, seen | {node.id})
    out: dict[str, ast.expr] = {}
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(_items(value, names, seen))
            elif isinstance(key, ast.Attribute):
                out[key.attr] = value
            elif isinstance(key, ast.Name):
                out[key.id] = value
    return out


def _project_path(value: ast.expr, path: str) -> str:
    """``paths.PROJECT_BASE_DIR / 'configs/x.yaml'`` or ``'/work/configs/x.yaml'`` -> ``configs/x.yaml``."""
    if (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Div)
        and ast.unparse(value.left).split(".")[-1] == "PROJECT_BASE_DIR"
        and isinstance(value.right, ast.Constant)
        and isinstance(value.right.value, str)
    ):
        return value.right.value.lstrip("/")
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        text = value.value
        if text.startswith(_PROJECT):
            return text[len(_PROJECT) :]
        if not text.startswith("/"):
            return text
    raise ServerConfigError(
        f"{path}: {YAML_FIELD} is {ast.unparse(value)}; workload reads paths.PROJECT_BASE_DIR / '<path>' or a path "
        "under /work to count the GPUs per server"
    )
