"""Result layout: a run's results in its own ``LOG_DIR`` below ``build/logs`` (NVIDIA's ``Makefile.const``:
``export LOG_DIR ?= $(BUILD_DIR)/logs/$(TIMESTAMP)``), named by run id, model, test mode and group so that no two
runs share one and ``apply`` can tell a run id already used (:meth:`results_prefix`)."""

from __future__ import annotations

from workload.mlperf.harness import log_dir, log_dir_prefix
from workload.mlperf.rounds.base import HarnessRound


class LogDirResults(HarnessRound):
    """``results_dir`` / ``results_prefix`` of a round whose runs take a ``LOG_DIR`` per run (every round so far)."""

    def results_dir(self, run_id: str, model: str, test_mode: str, index: int) -> str:
        """Where one run's results land, relative to closed/NVIDIA (the run's LOG_DIR)."""
        return log_dir(run_id, model, test_mode, index)

    def results_prefix(self, run_id: str, model: str) -> str:
        """What every :meth:`results_dir` of one run of one model starts with."""
        return log_dir_prefix(run_id, model)
