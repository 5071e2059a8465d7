"""NVIDIA's v4.0 / v4.1 harness (``closed/NVIDIA`` of mlcommons/inference_results_v4.0 and v4.1).

What this round does, and the upstream file each value comes from (see
``tests/fixtures/harness/UPSTREAM.md`` for the stand-in harness that reproduces them):
* image: ``docker/release/Dockerfile`` (named build contexts ``docker/<name>``) then
  ``docker/Dockerfile.user`` adding the user, as ``make build_docker`` / ``launch_docker`` do;
* system check: ``python3 -m scripts.get_system_id`` (prints ``None`` or ``KnownSystem.<member>``);
* setup: ``make download_data|download_model|preprocess_data BENCHMARKS=<model>`` (Makefile.data),
  then ``make build`` once per commit;
* runs: ``make generate_engines`` once, ``make run_harness`` per test mode with ``RUN_ARGS`` and a
  per-run ``LOG_DIR`` (Makefile); quick runs ``--test_run`` (v4.1) / ``--fast`` (v4.0);
* custom systems: a marked block in ``code/common/systems/custom_list.py`` and
  ``configs/<model>/<Scenario>/custom.py`` (:mod:`workload.mlperf.custom_system`).
"""

from __future__ import annotations

from typing import ClassVar

from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.common.config_version_runs import ConfigVersionRuns
from workload.mlperf.rounds.common.make_harness import HarnessSystemCheck, ImageFromRecipe, MakeSetup
from workload.mlperf.rounds.common.registered_classes import RegisteredConfigClasses
from workload.mlperf.rounds.common.results import LogDirResults

#: The harness's own system detection (``scripts/get_system_id.py``, run as a module from closed/NVIDIA).
SYSTEM_ID_ARGV: tuple[str, ...] = ("python3", "-m", "scripts.get_system_id")


class V4_1Round(
    HarnessSystemCheck, ImageFromRecipe, MakeSetup, ConfigVersionRuns, RegisteredConfigClasses, LogDirResults
):
    """v4.0 and v4.1: the layout this runner was first written for, composed from the make-target harness's
    strategies (``rounds/common/``) with runs by config version and registered config classes."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)
    system_id_argv: ClassVar[tuple[str, ...]] = SYSTEM_ID_ARGV


#: The adapter :func:`workload.mlperf.rounds.discover` finds in this folder.
ADAPTER = V4_1Round
