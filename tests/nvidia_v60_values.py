"""Run INSIDE NVIDIA's v6.0 harness environment (not by pytest): load config files the way NVIDIA's code does and
print what it resolves, as JSON.

Usage: ``python nvidia_v60_values.py CONFIG_DIR SYSTEM [SYSTEM ...]``, run by ``tests/upstream_nvidia.py``
``run_in_round`` (a staged closed/NVIDIA, nvmitten and ``tests/upstream_standins`` on ``PYTHONPATH``). For every
``CONFIG_DIR/<SYSTEM>/<Scenario>/<benchmark>.py`` it does what ``MainRunner.__init__`` does (NVIDIA's v6.0
``code/main.py`` lines 131-144: ``ScopedImporter([config_dir / system] + sys.path)`` then
``ConfigurationIndex.load_module(f"{scenario}.{benchmark}", prefix=[system, benchmark, scenario])``), then reads every
``EXPORTS`` key back with ``ConfigurationIndex.get`` (line 492) and the file's ``ACCURACY_OVERRIDES`` as
``_load_accuracy_overrides`` does (lines 370-384). Values are what nvmitten's ``Configuration`` holds after each Field's
``from_string`` (``configurator/configurable.py`` ``load_module``), keyed ``<module alias>.<field name>`` by the Field
object's home module, so a field written against the wrong module is a different key.

Output: ``{system: {scenario: {benchmark: {accuracy: {"exported": dict name, "fields": {...}, "env": {...},
"accuracy_overrides": {...}}}}}}`` (accuracy: ``k_99``/``k_99_9``; only Custom MaxP settings, the ones a custom
system runs), plus ``"errors"``: ``[file, message]`` for every file NVIDIA's code refused.
"""

from __future__ import annotations

import enum
import importlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import upstream_standins_boot  # noqa: F401  (installs the stand-ins before NVIDIA's imports)

#: Alias -> module of NVIDIA's Field definitions, as NVIDIA's v6.0 config files import them.
FIELD_MODULES = {
    "llm_fields": "code.llmlib.fields",
    "model_fields": "code.fields.models",
    "loadgen_fields": "code.fields.loadgen",
    "harness_fields": "code.fields.harness",
    "power_fields": "code.fields.power",
    "triton_fields": "code.fields.triton",
    "general_fields": "code.fields.general",
    "builder_fields": "code.fields.gen_engines",
}


def plain(value: Any) -> Any:
    """JSON-able form of a resolved value (enum members by name, lower-cased, as the config files spell them)."""
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)  # a path, or another object the harness made from a string


def main(config_dir: Path, systems: list[str]) -> dict[str, Any]:
    from nvmitten.configurator import ConfigurationIndex, Field
    from nvmitten.importer import ScopedImporter

    # NVIDIA's ``code`` package shadows the standard library's ``code`` module on this PYTHONPATH
    C = importlib.import_module("code.common.constants")

    names: dict[int, str] = {}
    for alias, module_name in FIELD_MODULES.items():
        module = importlib.import_module(module_name)
        for attr, value in vars(module).items():
            if isinstance(value, Field):
                names.setdefault(id(value), f"{alias}.{attr}")

    def key(field: Any) -> str:
        return names.get(id(field), f"?.{field.name}")

    out: dict[str, Any] = {"errors": []}
    for system in systems:
        root = config_dir / system
        for scenario_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for path in sorted(scenario_dir.glob("*.py")):
                scenario, bench = scenario_dir.name, path.stem
                index = ConfigurationIndex()
                imp_path = f"{scenario}.{bench}"
                for cached in [m for m in sys.modules if m == scenario or m.startswith(f"{scenario}.")]:
                    del sys.modules[cached]  # each system's Offline.<bench> is a module of its own
                before = dict(os.environ)
                try:
                    with ScopedImporter([str(root), *sys.path]):
                        index.load_module(imp_path, prefix=[system, bench, scenario])
                        module = sys.modules[imp_path]
                except Exception as exc:  # NVIDIA's code refusing the file is the finding
                    out["errors"].append([str(path), "".join(traceback.format_exception_only(exc)).strip()])
                    continue
                env = {k: v for k, v in os.environ.items() if before.get(k) != v}
                os.environ.clear()
                os.environ.update(before)
                overrides = getattr(module, "ACCURACY_OVERRIDES", None) or {}
                per_target: dict[str, Any] = {}
                for setting, exported in module.EXPORTS.items():
                    if setting.harness_type != C.HarnessType.Custom or setting.power_setting != C.PowerSetting.MaxP:
                        continue
                    accuracy = {0.99: "k_99", 0.999: "k_99_9"}[setting.accuracy_target.value]
                    config = index.get([system, bench, scenario, setting])
                    dict_name = next((n for n, v in vars(module).items() if v is exported), None)
                    per_target[accuracy] = {
                        "exported": dict_name,
                        "fields": {key(f): plain(v) for f, v in config.items()},
                        "env": env,
                        "accuracy_overrides": {key(f): plain(v) for f, v in (overrides.get(setting) or {}).items()},
                    }
                out.setdefault(system, {}).setdefault(scenario, {})[bench] = per_target
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:]), indent=1, sort_keys=True))
