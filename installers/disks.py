"""``FormatDisks`` and ``MountDisks``: scratch space for the benchmark data, safe by construction.

FormatDisks (VirtualClient-compatible parameters plus ``Raid0``)
  Partitions (gpt, one partition over the whole disk) and formats (ext4, labelled ``Label``) only
  disks that are BLANK: no partitions or holders, no signature seen by ``blkid -p`` or ``wipefs``,
  not mounted, not swap, not read-only, probed successfully, and not the OS disk. Every other disk
  the filter matches is left alone and named in the plan notes WITH THE REASON. The filter can
  only narrow this; ``OSDisk:true`` is refused at profile load. Apply re-reads the facts and runs
  nothing unless the fresh plan is the same (no formatting on facts older than the command).
  ``Raid0: true`` stripes the blank NVMe disks matched (``Raid0Devices`` of them, default all,
  at least 2) into ``/dev/md/<RaidName>`` with mdadm and formats the array instead. The array is
  persisted so the reboot after the driver install assembles it under the same name: its
  ``mdadm --detail --brief`` line is added to ``MdadmConfPath`` (``/etc/mdadm/mdadm.conf``) unless
  the file already lists its UUID, and the initramfs (which carries a copy of that file) is
  updated where ``update-initramfs`` exists. A RAID formatted earlier whose UUID the file lacks
  gets just that. Tests let loop devices take part with the step option ``raid0_allow_non_nvme``.

MountDisks
  Mounts every ext4/xfs/btrfs volume on the disks the filter picks at
  ``<MountLocation>/<MountPointPrefix>_<device name>`` (``/mnt/mnt_nvme1n1p1``) unless the
  fstab already names a mount point for it (then that one: the fstab is the authority once
  written, so a renamed device after a reboot keeps its mount point). Each mount gets ONE fstab
  line by filesystem UUID with ``defaults,nofail,x-systemd.device-timeout=10s`` so it survives
  the driver-install reboot and a missing disk cannot hang the boot. The mount itself is made
  with ``mount --fstab <FstabPath> <mount point>``, which also proves the line works. The mount
  root and the scratch folder belong to the real user (``Username``, else ``SUDO_USER``, else the
  connecting user). A volume already mounted elsewhere by someone else is used where it is.

  The scratch volume is the biggest selected volume; ``MLPERF_SCRATCH_PATH`` =
  ``<its mount point>/scratch`` is exported to later steps (``ctx.exports``) and recorded in the
  host state under ``MountDisks``. ``MinFreeSpace`` (e.g. ``900gb``) fails the step, naming the
  volume, when the scratch volume has less free space.

Both planners are pure functions of (parameters, facts): :func:`plan_format`, :func:`plan_mount`.

The code lives by job in :mod:`workload.installers.disks_format` (FormatDisks), :mod:`workload.installers.disks_mount`
(MountDisks) and :mod:`workload.installers.disks_common` (what both share); this module states the contract
and re-exports every name, so ``workload.installers.disks:FormatDisks`` and older imports keep working.
"""

from __future__ import annotations

from workload.facts.disks import (
    Disk,
    DiskFacts,
    FstabEntry,
    Volume,
    format_size,
    parse_fstab,
    read_disk_facts,
)

# Re-exports (issue 14 split this module by job; every name stays importable from here).
from workload.installers.diskfilter import DiskFilter as Filter
from workload.installers.diskfilter import parse_size
from workload.installers.disks_common import (
    ALLOW_NON_NVME_OPTION,
    FSTAB_OPTIONS,
    MDADM_CONF,
    SCRATCH_EXPORT,
    STATE_KEY,
    PlanRefused,
)
from workload.installers.disks_format import (
    EXCLUSIVE_SCRIPT,
    PERSIST_RAID_SCRIPT,
    STARTED_KEY,
    UPDATE_INITRAMFS_SCRIPT,
    FormatDisks,
    FormatDisksParameters,
    exclusive_check,
    partition_path,
    plan_format,
    refusal,
    started_record,
)
from workload.installers.disks_mount import (
    MountDisks,
    MountDisksParameters,
    MountFacts,
    MountPlan,
    Owner,
    fstab_escape,
    fstab_line,
    plan_mount,
    planned_mountpoint,
    read_stats,
    resolve_owner,
)

__all__ = [
    "ALLOW_NON_NVME_OPTION",
    "EXCLUSIVE_SCRIPT",
    "FSTAB_OPTIONS",
    "MDADM_CONF",
    "PERSIST_RAID_SCRIPT",
    "SCRATCH_EXPORT",
    "STARTED_KEY",
    "STATE_KEY",
    "UPDATE_INITRAMFS_SCRIPT",
    "Disk",
    "DiskFacts",
    "Filter",
    "FormatDisks",
    "FormatDisksParameters",
    "FstabEntry",
    "MountDisks",
    "MountDisksParameters",
    "MountFacts",
    "MountPlan",
    "Owner",
    "PlanRefused",
    "Volume",
    "exclusive_check",
    "format_size",
    "fstab_escape",
    "fstab_line",
    "parse_fstab",
    "parse_size",
    "partition_path",
    "plan_format",
    "plan_mount",
    "planned_mountpoint",
    "read_disk_facts",
    "read_stats",
    "refusal",
    "resolve_owner",
    "started_record",
]
