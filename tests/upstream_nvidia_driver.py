"""Runs NVIDIA's REAL v5.1/v6.0 harness code on config files, as ``make generate_engines``/``run_harness`` would.

Run by :func:`tests.upstream_nvidia.resolve_configs` in a subprocess whose working directory is a staged copy of a
round's ``closed/NVIDIA``, with ``PYTHONPATH=<nvmitten>/src:<staged tree>:tests/upstream_standins`` and
``SYSTEM_NAME`` set. Reads ``{"runs": [[flag, ...], ...]}`` (each run's flags: make's RUN_ARGS with ``--action``)
on stdin and prints one JSON line: ``{"system": {...}, "results": [{"benchmark", "scenario", "target", "file", "values",
"fallback", "problem"}]}`` (one per benchmark and scenario of each run; a run whose ``MainRunner`` raised, e.g. a config
file NVIDIA's code cannot import, is one ``{"flags", "problem"}`` entry, NVIDIA's traceback on stderr).

What runs is NVIDIA's:
* ``code/common/systems/system_list.py`` (imported by ``code/main.py``): the runtime system, ``SYSTEM_NAME``
  overriding detection (``SystemIndex.get_runtime_system``);
* ``code/main.py`` ``MainRunner.__init__``: each (benchmark, scenario) config file found at ``conf_path`` (else the
  ``minimal`` fallback, reported) and loaded by nvmitten's ``ConfigurationIndex.load_module`` under
  ``ScopedImporter``; the metafields' own parsers turn the names into NVIDIA's enums (``code/fields/meta.py``).

What this driver re-states, line for line, because the rest of ``MainRunner._run_workload`` builds engines and runs
the benchmark (GPU/TensorRT work): v5.1/v6.0 ``code/main.py`` ``_run_workload`` (v5.1 lines 151-186, v6.0 lines
458-540, the default ``--mpi_mode``) -- the keyspace
``[system_id, benchmark, scenario, WorkloadSetting(default harness type, accuracy target, MaxP)]``, the
``config_index.get`` with the fallback to ``minimal`` (reported as ``fallback``, never used), the "Sanitize
configuration for types" loop (every key a Mitten ``Field``, strings parsed by ``from_string``),
``Workload.from_fields`` put under ``Workload.FIELD``, ``builder_fields.force_build_engines`` for GenerateEngines,
and, for LLMs, NVIDIA's own ``HarnessConfig()`` built under ``config.autoapply()``
(``core_type = HarnessConfig().core_type``: its ``__post_init__`` reads ``llm_gen_config_path``,
``code/llmlib/config.py`` line 178 in v5.1).

Stand-ins (``tests/upstream_standins``, each naming what it replaces) only for TensorRT, CUDA, NVTX, PyTorch, ONNX,
the round's clone of MLCommons' checker (the real file, cut to the round: ``pinned_checker.py``) and
``code/ops.py`` (engine builds and the benchmark run; not in the published trees we hold).
"""

from __future__ import annotations

import enum
import json
import logging
import sys
from typing import Any

import upstream_standins_boot  # noqa: F401  (installs the stand-ins before NVIDIA's imports)


def _plain(value: Any) -> Any:
    """A JSON-able form of a resolved value (enums by value string, paths as text)."""
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    valstr = getattr(value, "valstr", None)
    if isinstance(valstr, str):
        return valstr
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def main() -> int:
    request = json.loads(sys.stdin.read())
    from code.common.systems.system_list import DETECTED_SYSTEM
    from code.main import MainRunner

    from nvmitten.configurator import Configuration

    system = DETECTED_SYSTEM
    results = []
    for flags in request["runs"]:
        # code/main.py __main__: the flags (make's RUN_ARGS) read by nvmitten's autoconfigure from the command line.
        sys.argv = ["code/main.py", *flags]
        try:
            with Configuration().autoapply():
                runner = MainRunner(system)
        except Exception as exc:  # NVIDIA's code could not load the config files of this run: the finding
            logging.exception("NVIDIA's MainRunner failed for %s", flags)
            results.append({"flags": " ".join(flags), "problem": f"MainRunner: {type(exc).__name__}: {exc}"})
            continue
        for benchmark in runner.benchmarks:
            for scenario in runner.scenarios:
                results.append(_resolve(runner, system, benchmark, scenario, " ".join(flags)))
    answer = {
        "system": {"id": system.extras.get("id"), "tags": sorted(system.extras.get("tags", ()))},
        "results": results,
        "fields": _flag_names(),
    }
    print(json.dumps(answer))
    return 0


def _flag_names() -> list[str]:
    """Every command-line flag NVIDIA's code accepts: the names of the Mitten ``Field`` objects of ``code/fields/*``,
    ``code/llmlib/fields.py`` and every ``code.*`` module loaded so far, less those not read from the command line
    (``disallow_argparse``/``from_environ``: nvmitten ``configurator/fields.py`` ``Field.add_to_argparse``)."""
    import importlib
    from pathlib import Path

    from nvmitten.configurator import Field

    for path in sorted(Path("code/fields").glob("*.py")):
        importlib.import_module(f"code.fields.{path.stem}")
    importlib.import_module("code.llmlib.fields")
    names = set()
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "code" or name.startswith("code.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, Field) and not value.disallow_argparse:
                names.add(value.name)
    return sorted(names)


def _resolve(runner: Any, system: Any, benchmark: Any, scenario: Any, flags: str) -> dict[str, Any]:
    """One (benchmark, scenario) of a MainRunner resolved as ``_run_workload`` does (see the module docstring)."""
    import code.common.constants as C
    import code.fields.gen_engines as builder_fields
    from code.common.workload import Workload

    from nvmitten.configurator import Field

    accuracy = runner.accuracy_target
    path = runner.conf_path(benchmark, scenario)
    # code/main.py _run_workload: the keyspace and the minimal fallback.
    harness_type = benchmark.default_harness_type if runner.harness_type is None else runner.harness_type
    setting = C.WorkloadSetting(harness_type=harness_type, accuracy_target=accuracy, power_setting=runner.power_setting)
    config = runner.config_index.get([runner.system_id, benchmark, scenario, setting])
    entry: dict[str, Any] = {
        "benchmark": benchmark.valstr,
        "scenario": scenario.valstr,
        "target": str(accuracy.value),
        "flags": flags,
        "file": str(path.relative_to(runner.config_dir.parent)) if path.exists() else None,
        "fallback": None,
        "problem": None,
        "values": {},
    }
    if config is None:
        minimal = runner.config_index.get(["minimal", benchmark, scenario, setting])
        entry["fallback"] = "minimal" if minimal is not None else "empty"
        return entry
    for key, value in list(config.items()):
        if not isinstance(key, Field):
            entry["problem"] = f"Invalid Configuration key {key!r} is not a Mitten Field object"
            break
        if isinstance(value, str) and (key.from_string and key.from_string is not str):
            config[key] = key.from_string(value)
    entry["values"] = {key.name: _plain(value) for key, value in config.items()}
    config[Workload.FIELD] = Workload.from_fields(benchmark, scenario, system=system, setting=setting)
    if runner.action == C.Action.GenerateEngines:
        config[builder_fields.force_build_engines] = True
    if benchmark.is_llm and benchmark is not C.Benchmark.WHISPER and entry["problem"] is None:
        from code.llmlib.config import HarnessConfig

        try:
            with config.autoapply():
                entry["core_type"] = _plain(HarnessConfig().core_type)
        except Exception as exc:  # NVIDIA's config step refusing our values is the finding, reported
            entry["problem"] = f"HarnessConfig(): {type(exc).__name__}: {exc}"
    return entry


if __name__ == "__main__":
    sys.exit(main())
