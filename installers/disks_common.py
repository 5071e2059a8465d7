"""What ``FormatDisks`` and ``MountDisks`` share: names, paths and the planners' refusal.

Moved out of :mod:`workload.installers.disks` (which re-exports every name; its docstring states both
steps' contracts).
"""

from __future__ import annotations

import re

from workload.errors import EXIT_STEP_FAILED, WorkloadError

SCRATCH_EXPORT = "MLPERF_SCRATCH_PATH"
STATE_KEY = "MountDisks"
FSTAB_OPTIONS = "defaults,nofail,x-systemd.device-timeout=10s"
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
MDADM_CONF = "/etc/mdadm/mdadm.conf"
#: Step option (tests): let non-NVMe disks (loop devices) be RAID0 members.
ALLOW_NON_NVME_OPTION = "raid0_allow_non_nvme"


class PlanRefused(WorkloadError):
    """A planner cannot produce a safe plan; the step turns it into a StepError naming itself."""

    exit_code = EXIT_STEP_FAILED
