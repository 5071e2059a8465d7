"""Runs NVIDIA's REAL v4.1 config registry (``configs/configuration.py``) on the config files of a staged tree.

Run by ``tests/test_upstream_nvidia_v41.py`` in a subprocess whose working directory is a staged copy of v4.1's
``closed/NVIDIA`` (``PYTHONPATH=<staged tree>:tests/upstream_standins``). Reads ``{"loads": [[benchmark, scenario],
...]}`` on stdin; for each, NVIDIA's ``ConfigRegistry.load_configs`` imports ``configs/<benchmark>/<Scenario>/
__init__.py`` and the ``custom.py`` beside it (registering each class validates it: ``ConfigRegistry.register`` ->
``validate``, which raises on a field the workload does not allow, a missing required field, a bad inheritance...),
with ``code/common/systems/system_list.py`` adding the systems of ``code/common/systems/custom_list.py``. Prints one
JSON line: every registered class, ``{"benchmark", "scenario", "system", "setting": [harness, accuracy, power],
"name", "values", "allowed"}``; ``values`` are the class's public attributes (what the harness reads), enums by value
string; ``allowed`` the fields NVIDIA's code allows for the class's system.
A file NVIDIA's registry refuses is an exception (exit 1, NVIDIA's traceback on stderr).
"""

from __future__ import annotations

import enum
import json
import sys
from typing import Any


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, enum.Enum):
        valstr = getattr(value, "valstr", None)
        return valstr() if callable(valstr) else str(value.value)
    return str(value)


def main() -> int:
    request = json.loads(sys.stdin.read())
    from code.common.constants import Benchmark, Scenario
    from code.common.fields import get_applicable_fields

    from configs.configuration import ConfigRegistry

    out = []
    for benchmark_name, scenario_name in request["loads"]:
        benchmark, scenario = Benchmark.get_match(benchmark_name), Scenario.get_match(scenario_name)
        ConfigRegistry.load_configs(benchmark, scenario)
        systems = ConfigRegistry._registry.get([benchmark, scenario]) or {}
        for system, settings in systems.items():
            for setting, config in settings.items():
                values = {
                    name: _plain(getattr(config, name))
                    for name in dir(config)
                    if not name.startswith("_") and not callable(getattr(config, name)) and name != "system"
                }
                out.append(
                    {
                        "benchmark": benchmark_name,
                        "scenario": scenario_name,
                        "system": system.name,
                        "setting": [
                            _plain(setting.harness_type),
                            _plain(setting.accuracy_target),
                            _plain(setting.power_setting),
                        ],
                        "name": config.__name__,
                        "values": values,
                        # The fields NVIDIA's code allows for this class's system (configs/configuration.py
                        # _check_field_descriptions: required + optional of get_applicable_fields).
                        "allowed": sorted(
                            f.name
                            for group in get_applicable_fields(None, benchmark, scenario, config.system, setting)
                            for f in group
                        ),
                    }
                )
    print(json.dumps({"configs": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
