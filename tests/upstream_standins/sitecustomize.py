"""Loads the stand-ins (``upstream_standins_boot``) into every Python process started with this folder on
``PYTHONPATH``: so a command exactly as the runner plans it (``python3 -c "from code.common.systems.system_list
import ..."``) runs NVIDIA's code here with only GPU/TensorRT parts stood in."""

import upstream_standins_boot  # noqa: F401
