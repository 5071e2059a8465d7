"""Disk facts: block devices, filesystems, mounts, swap, fstab, and which disk is the OS disk.

Read-only. :func:`read_disk_facts` runs the queries on a host; every parser below is a pure
function of command output, tested on recorded outputs (``tests/fixtures/disks/``).

Sources, and why each is needed:

* ``lsblk --json --bytes`` gives the device tree (disk -> partitions -> LVM/md/crypt holders),
  sizes, types and mount points. Its FSTYPE/UUID/LABEL come from the udev database, which is
  empty where udev does not run (containers, minimal VMs), so they are NOT trusted alone:
* ``blkid -p`` probes every node low-level for a filesystem or partition-table signature;
* ``wipefs --no-act --json`` lists every signature on a whole disk (backup GPT, stale
  superblocks that ``blkid`` reports only one of);
* ``findmnt`` gives mounts with sizes and free space (and the source of ``/`` even where lsblk
  shows no mount point); ``/proc/swaps`` gives active swap.

A disk is the OS disk when it holds ``/``, ``/boot``, ``/boot/efi``, ``/usr``, ``/var`` or active
swap, directly, on a partition, or through any holder below it (LVM, md, crypt), because
lsblk lists those holders as children of every member.

The parsers live in :mod:`workload.facts.disks_parsers`; this module keeps the model (volumes,
disks, the OS disk) and the gathering, and re-exports every parser's name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from workload.commands import cmd
from workload.errors import FactError

# Moved by job (issue 14); re-exported so that every name stays importable from here.
from workload.facts.disks_parsers import (
    BlockDevice,
    FstabEntry,
    Mount,
    Probe,
    parse_blkid_export,
    parse_findmnt,
    parse_fstab,
    parse_lsblk,
    parse_swaps,
    parse_wipefs_json,
)
from workload.facts.fact import Fact
from workload.hosts.base import Host

__all__ = [
    "LSBLK_COLUMNS",
    "MOUNTABLE_FSTYPES",
    "OS_MOUNTPOINTS",
    "SWAP_MARK",
    "BlockDevice",
    "Disk",
    "DiskFacts",
    "FstabEntry",
    "Mount",
    "Probe",
    "Volume",
    "build_facts",
    "format_size",
    "is_candidate",
    "parse_blkid_export",
    "parse_findmnt",
    "parse_fstab",
    "parse_lsblk",
    "parse_swaps",
    "parse_wipefs_json",
    "read_disk_facts",
    "read_lsblk",
]

#: Mount points whose disk is the operating-system disk.
OS_MOUNTPOINTS = ("/", "/boot", "/boot/efi", "/usr", "/var")
#: lsblk shows active swap as this mount point.
SWAP_MARK = "[SWAP]"
#: Filesystems MountDisks will mount.
MOUNTABLE_FSTYPES = frozenset({"ext4", "ext3", "ext2", "xfs", "btrfs"})
#: Top-level device name prefixes that are never data disks (compressed RAM, RAM disks, optical).
_NOT_DISKS = ("zram", "ram", "sr", "fd")

LSBLK_COLUMNS = "NAME,PATH,SIZE,TYPE,FSTYPE,UUID,LABEL,MOUNTPOINTS,PKNAME,ROTA,TRAN,MODEL,RO"


# -- the model -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Volume:
    """A filesystem on a disk, a partition, or a holder (md, LVM) that MountDisks may mount."""

    name: str
    path: str
    size: int
    fstype: str
    uuid: str | None
    label: str | None
    mountpoints: tuple[str, ...]
    #: Paths of the disks this volume lives on (several for md RAID).
    disks: tuple[str, ...]


@dataclass(frozen=True)
class Disk:
    """A whole disk (top-level lsblk node) with what was found on it."""

    device: BlockDevice
    #: Why this disk is the OS disk (``"vda2 holds /"``); empty when it is not.
    os_reasons: tuple[str, ...] = ()
    #: Signatures found on the WHOLE disk by blkid -p / wipefs (``gpt``, ``PMBR``, ``ext4``).
    signatures: tuple[str, ...] = ()
    #: Why the disk could not be probed (then it is never formatted); None when probing worked.
    probe_error: str | None = None
    #: Names below this disk that are active swap.
    swap: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.device.name

    @property
    def path(self) -> str:
        return self.device.path

    @property
    def size(self) -> int:
        return self.device.size

    @property
    def is_os_disk(self) -> bool:
        return bool(self.os_reasons)

    @property
    def is_loop(self) -> bool:
        return self.device.type == "loop"

    @property
    def is_nvme(self) -> bool:
        return (self.device.transport or "").lower() == "nvme" or self.name.startswith("nvme")

    def node_paths(self) -> tuple[str, ...]:
        """Every device path on this disk (itself, partitions, holders)."""
        return tuple(node.path for node in self.device.walk())

    def mountpoints(self) -> tuple[str, ...]:
        return tuple(p for node in self.device.walk() for p in node.mountpoints)


@dataclass(frozen=True)
class DiskFacts:
    """Every disk of a host, with volumes and mounts."""

    disks: tuple[Disk, ...]
    mounts: tuple[Mount, ...] = ()
    #: The source of ``/`` per findmnt (``/dev/vda1``, ``overlay``...), None if unknown.
    root_source: str | None = None
    swaps: tuple[str, ...] = ()
    #: Notes about facts that could not be read fully (shown in plans).
    notes: tuple[str, ...] = field(default=())

    @property
    def os_disk_known(self) -> bool:
        """Whether some disk was identified as holding ``/``."""
        return any(any(r.endswith(" holds /") for r in d.os_reasons) for d in self.disks)

    def disk(self, path_or_name: str) -> Disk | None:
        for disk in self.disks:
            if path_or_name in (disk.path, disk.name):
                return disk
        return None

    def volumes(self, disks: Sequence[Disk] | None = None) -> tuple[Volume, ...]:
        """Mountable filesystems on ``disks`` (default: all), each once, in lsblk order."""
        chosen = self.disks if disks is None else tuple(disks)
        members: dict[str, list[str]] = {}
        nodes: dict[str, BlockDevice] = {}
        for disk in self.disks:
            for node in disk.device.walk():
                members.setdefault(node.path, [])
                if disk.path not in members[node.path]:
                    members[node.path].append(disk.path)
                nodes.setdefault(node.path, node)
        wanted = {d.path for d in chosen}
        found: list[Volume] = []
        for disk in chosen:
            for node in disk.device.walk():
                if node.fstype not in MOUNTABLE_FSTYPES or any(v.path == node.path for v in found):
                    continue
                on = tuple(members[node.path])
                # A volume striped over a disk that was not chosen (md across the OS disk) is not ours.
                if not set(on) <= wanted:
                    continue
                found.append(
                    Volume(
                        name=node.name,
                        path=node.path,
                        size=node.size,
                        fstype=node.fstype,
                        uuid=node.uuid,
                        label=node.label,
                        mountpoints=node.mountpoints,
                        disks=on,
                    )
                )
        return tuple(found)

    def mount_at(self, target: str) -> Mount | None:
        """The mount at ``target`` (the last one wins, like the kernel's view)."""
        target = posixpath.normpath(target)
        hits = [m for m in self.mounts if posixpath.normpath(m.target) == target]
        return hits[-1] if hits else None


def _enrich(node: BlockDevice, probes: Mapping[str, Probe]) -> BlockDevice:
    """Fill FSTYPE/UUID/LABEL that lsblk lacked (no udev) from blkid's low-level probe."""
    probe = probes.get(node.path)
    changes: dict[str, Any] = {"children": tuple(_enrich(c, probes) for c in node.children)}
    if probe is not None:
        changes["fstype"] = node.fstype or probe.fstype
        changes["uuid"] = node.uuid or probe.uuid
        changes["label"] = node.label or probe.label
    return replace(node, **changes)


def is_candidate(device: BlockDevice) -> bool:
    """Whether a top-level lsblk node can be a data disk at all (not zram, a CD, an empty loop)."""
    if device.type not in ("disk", "loop"):
        return False
    return device.size > 0 and not device.name.startswith(_NOT_DISKS)


def build_facts(
    devices: Sequence[BlockDevice],
    *,
    probes: Mapping[str, Probe] | None = None,
    probe_errors: Mapping[str, str] | None = None,
    disk_signatures: Mapping[str, Sequence[str]] | None = None,
    mounts: Sequence[Mount] = (),
    swaps: Sequence[str] = (),
) -> DiskFacts:
    """Assemble the model from parsed outputs (pure).

    ``disk_signatures`` maps a disk path to wipefs' signature list; a disk absent from both it and
    ``probes`` counts as "not probed" only when ``probe_errors`` names it.
    """
    probes = probes or {}
    probe_errors = probe_errors or {}
    disk_signatures = disk_signatures or {}
    os_sources = {posixpath.normpath(m.target): m.source for m in mounts if m.target in OS_MOUNTPOINTS}
    root_source = os_sources.get("/")
    swap_set = set(swaps)
    disks: list[Disk] = []
    for raw in devices:
        if not is_candidate(raw):
            continue
        device = _enrich(raw, probes)
        reasons: list[str] = []
        swap: list[str] = []
        for node in device.walk():
            for point in node.mountpoints:
                if point in OS_MOUNTPOINTS:
                    reasons.append(f"{node.name} holds {point}")
                if point == SWAP_MARK:
                    swap.append(node.name)
            for target, source in os_sources.items():
                # findmnt knows the source of / even where lsblk shows no mount point for it.
                if source == node.path and f"{node.name} holds {target}" not in reasons:
                    reasons.append(f"{node.name} holds {target}")
            if node.path in swap_set and node.name not in swap:
                swap.append(node.name)
        reasons.extend(f"{name} is active swap" for name in swap)
        sigs: list[str] = []
        probe = probes.get(device.path)
        if probe is not None:
            sigs.extend(s for s in (probe.pttype, probe.fstype) if s)
        for sig in disk_signatures.get(device.path, ()):
            if sig not in sigs:
                sigs.append(sig)
        disks.append(
            Disk(
                device=device,
                os_reasons=tuple(dict.fromkeys(reasons)),
                signatures=tuple(sigs),
                probe_error=probe_errors.get(device.path),
                swap=tuple(dict.fromkeys(swap)),
            )
        )
    notes = []
    if root_source is not None and not any(any(r.endswith(" holds /") for r in d.os_reasons) for d in disks):
        notes.append(f"/ is mounted from {root_source!r}, which is not a disk seen by lsblk")
    return DiskFacts(
        disks=tuple(disks), mounts=tuple(mounts), root_source=root_source, swaps=tuple(swaps), notes=tuple(notes)
    )


# -- gathering (the only impure part) --------------------------------------------------------------
#: The block devices (``lsblk``) and the mounts (``findmnt``): the queries every disk plan starts from. What they
#: list decides the probes run after them (``blkid``, ``wipefs`` of each candidate disk).
LSBLK_QUERY = cmd("lsblk", "--json", "--bytes", "--output", LSBLK_COLUMNS, timeout=60, readonly=True)
FINDMNT_QUERY = cmd(
    "findmnt", "--json", "--bytes", "--list", "-o", "TARGET,SOURCE,FSTYPE,SIZE,AVAIL", timeout=60, readonly=True
)


def read_lsblk(host: Host) -> tuple[BlockDevice, ...]:
    """Run lsblk on the host; fall back to MOUNTPOINT where lsblk predates MOUNTPOINTS (< 2.37)."""
    columns = LSBLK_COLUMNS
    result = host.run(LSBLK_QUERY)
    if not result.ok and "unknown column" in result.stderr:
        columns = columns.replace("MOUNTPOINTS", "MOUNTPOINT")
        result = host.run(cmd("lsblk", "--json", "--bytes", "--output", columns, timeout=60, readonly=True))
    if not result.ok:
        raise FactError(f"lsblk failed (exit {result.returncode}): {result.stderr.strip()[-300:]}", host=host.name)
    return parse_lsblk(result.stdout)


def read_disk_facts(host: Host) -> DiskFacts:
    """Query the host for everything :func:`build_facts` needs (read-only; probes use sudo)."""
    devices = read_lsblk(host)
    candidates = [d for d in devices if is_candidate(d)]
    paths = [node.path for d in candidates for node in d.walk()]
    probes: dict[str, Probe] = {}
    errors: dict[str, str] = {}
    if paths:
        # One blkid per device: given several, blkid -p stops at the first device without a
        # signature (util-linux 2.38). The loop keeps it to one round trip.
        script = 'for dev in "$@"; do blkid -p -o export "$dev"; echo; done'
        result = host.run(cmd("sh", "-c", script, "sh", *dict.fromkeys(paths), sudo=True, timeout=300, readonly=True))
        probes, errors = parse_blkid_export(result.stdout, result.stderr)
    signatures: dict[str, tuple[str, ...]] = {}
    for disk in candidates:
        result = host.run(cmd("wipefs", "--no-act", "--json", disk.path, sudo=True, timeout=60, readonly=True))
        if result.ok:
            signatures[disk.path] = parse_wipefs_json(result.stdout)
        else:
            errors.setdefault(disk.path, f"wipefs: {result.stderr.strip()[-200:] or f'exit {result.returncode}'}")
    found = host.run(FINDMNT_QUERY)
    if not found.ok:
        raise FactError(f"findmnt failed (exit {found.returncode}): {found.stderr.strip()[-300:]}", host=host.name)
    mounts = parse_findmnt(found.stdout)
    try:
        swaps = parse_swaps(host.read_text("/proc/swaps"))
    except FileNotFoundError:
        swaps = ()
    return build_facts(
        devices, probes=probes, probe_errors=errors, disk_signatures=signatures, mounts=mounts, swaps=swaps
    )


#: Every disk, its probes and the mounts (:func:`read_disk_facts`), declared once (:mod:`workload.facts.fact`).
DISKS: Fact[DiskFacts] = Fact("disks", read_disk_facts, (LSBLK_QUERY, FINDMNT_QUERY))


def format_size(size: int | float | None) -> str:
    """Human words for a byte count, 1024-based (``1.5 TiB``)."""
    if size is None:
        return "unknown"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"  # pragma: no cover - loop always returns
