"""``MountDisks``: mount the selected volumes through one fstab line each; export the scratch path.

Moved out of :mod:`workload.installers.disks` (which re-exports every name and states the contract):
the parameters, the pure planner :func:`plan_mount`, the owner and space reads, and the step.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from workload.commands import Command, cmd
from workload.facts.disks import DISKS, DiskFacts, FstabEntry, Volume, format_size, parse_fstab, read_disk_facts
from workload.facts.fact import Fact
from workload.hosts.base import Host
from workload.installers.diskfilter import DiskFilter as Filter
from workload.installers.diskfilter import parse_size
from workload.installers.disks_common import _NAME, FSTAB_OPTIONS, SCRATCH_EXPORT, STATE_KEY, PlanRefused
from workload.steps import Change, FactPhase, Step, StepContext, StepParameters, StepPlan


# == MountDisks ====================================================================================
class MountDisksParameters(StepParameters):
    DiskFilter: str = "OSDisk:false"
    MountLocation: str = "/mnt"
    MountPointPrefix: str = "mnt"
    Username: str | None = None
    #: The fstab to edit; tests point it at a temporary file.
    FstabPath: str = "/etc/fstab"
    #: Free space the scratch volume must have, e.g. "900gb" (1024-based); none by default.
    MinFreeSpace: str | None = None


@dataclass(frozen=True)
class Owner:
    """The user who owns the mount points: name and numeric ids on the host."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class MountFacts:
    disks: DiskFacts
    fstab_text: str
    owner: Owner
    #: ``path -> (uid, gid)`` for the mount points and scratch folders that exist.
    stats: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: Whether systemd runs (then it must re-read an edited /etc/fstab).
    systemd: bool = False


@dataclass(frozen=True)
class MountPlan:
    plan: StepPlan
    #: Mount point per volume path (planned or existing).
    mountpoints: Mapping[str, str]
    scratch_volume: Volume
    scratch_path: str


def fstab_escape(path: str) -> str:
    return path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")


def fstab_line(volume: Volume, mountpoint: str) -> str:
    """The line MountDisks writes: by UUID, ``nofail`` and a short device timeout."""
    return f"UUID={volume.uuid} {fstab_escape(mountpoint)} {volume.fstype} {FSTAB_OPTIONS} 0 2"


def _entry_for(volume: Volume, entries: Sequence[FstabEntry]) -> FstabEntry | None:
    # LABEL= is not matched on purpose: FormatDisks gives every disk the same label.
    specs = {volume.path}
    if volume.uuid:
        specs |= {f"UUID={volume.uuid}", f"/dev/disk/by-uuid/{volume.uuid}", f'UUID="{volume.uuid}"'}
    for entry in entries:
        if entry.spec in specs:
            return entry
    return None


def planned_mountpoint(params: MountDisksParameters, volume: Volume) -> str:
    """``<MountLocation>/<MountPointPrefix>_<device name>``, e.g. ``/mnt/mnt_loop3p1``."""
    return posixpath.join(posixpath.normpath(params.MountLocation), f"{params.MountPointPrefix}_{volume.name}")


def plan_mount(params: MountDisksParameters, facts: MountFacts) -> MountPlan:
    """What MountDisks would do (pure). Raises :class:`PlanRefused` when nothing can be mounted."""
    flt = Filter.parse(params.DiskFilter)
    disks = flt.select(facts.disks.disks, purpose="mount")
    if not disks:
        seen = (
            ", ".join(
                f"{d.path} {format_size(d.size)}{' (OS disk)' if d.is_os_disk else ''}" for d in facts.disks.disks
            )
            or "none"
        )
        raise PlanRefused(
            f"no disk matches DiskFilter {flt} (disks seen: {seen})", hint="change the DiskFilter parameter"
        )
    volumes = facts.disks.volumes(disks)
    if not volumes:
        names = ", ".join(d.path for d in disks)
        raise PlanRefused(
            f"DiskFilter {flt} matches {names}, but none holds a filesystem to mount",
            hint="run FormatDisks first (it formats blank disks)",
        )
    entries = parse_fstab(facts.fstab_text)
    scratch = max(volumes, key=lambda v: v.size)  # max() keeps the first of equals: lsblk order
    changes: list[Change] = []
    notes: list[str] = list(facts.disks.notes)
    mountpoints: dict[str, str] = {}
    fstab_ends_clean = not facts.fstab_text or facts.fstab_text.endswith("\n")
    new_lines = 0
    for volume in volumes:
        entry = _entry_for(volume, entries)
        if entry is None and volume.mountpoints:
            # Mounted by someone else, outside our fstab management: use it where it is.
            mp = volume.mountpoints[0]
            mountpoints[volume.path] = mp
            notes.append(f"{volume.path} is already mounted at {mp} (not by MountDisks); used as is")
            if volume is scratch:
                changes.extend(_scratch_changes(mp, facts, mounted=True))
            continue
        mp = entry.target if entry is not None else planned_mountpoint(params, volume)
        mountpoints[volume.path] = mp
        for other in entries:
            if other.target == mp and other is not entry:
                raise PlanRefused(
                    f"{params.FstabPath} line {other.line_no} already mounts {other.spec} at {mp}, "
                    f"where {volume.path} would go",
                    hint="remove that line or choose another MountLocation/MountPointPrefix",
                )
        current = facts.disks.mount_at(mp)
        mounted = mp in volume.mountpoints
        if current is not None and not mounted and current.source != volume.path:
            raise PlanRefused(
                f"{mp} is already a mount point of {current.source}; {volume.path} cannot go there",
                hint="unmount it or choose another MountLocation/MountPointPrefix",
            )
        commands: list[Command] = []
        if entry is None:
            if volume.uuid is None:
                raise PlanRefused(f"{volume.path} ({volume.fstype}) has no filesystem UUID to write to the fstab")
            line = fstab_line(volume, mp) + "\n"
            if new_lines == 0 and not fstab_ends_clean:
                line = "\n" + line
            new_lines += 1
            commands += [
                cmd("mkdir", "-p", mp, sudo=True, timeout=60),
                cmd("tee", "-a", params.FstabPath, input=line, sudo=True, timeout=60),
            ]
            if facts.systemd and params.FstabPath == "/etc/fstab":
                commands.append(cmd("systemctl", "daemon-reload", sudo=True, timeout=120))
        if not mounted:
            if entry is not None:
                commands.append(cmd("mkdir", "-p", mp, sudo=True, timeout=60))
            commands.append(cmd("mount", "--fstab", params.FstabPath, mp, sudo=True, timeout=300))
        if commands:
            what = "add an fstab line and mount" if entry is None else "mount (from the fstab)"
            changes.append(Change(f"{what} {volume.path} ({format_size(volume.size)}) at {mp}", tuple(commands)))
        changes.extend(_owner_changes(mp, facts, mounted=mounted))
        if volume is scratch:
            changes.extend(_scratch_changes(mp, facts, mounted=mounted))
    scratch_path = posixpath.join(mountpoints[scratch.path], "scratch")
    _check_space(params, facts, scratch, mountpoints[scratch.path])
    notes.append(f"{SCRATCH_EXPORT}={scratch_path} (on {scratch.path}, {format_size(scratch.size)})")
    if changes:
        plan = StepPlan(changes=tuple(changes), notes=tuple(notes))
    else:
        where = ", ".join(f"{path} at {mp}" for path, mp in mountpoints.items())
        plan = StepPlan.noop(f"already mounted: {where}", notes=tuple(notes))
    return MountPlan(plan=plan, mountpoints=mountpoints, scratch_volume=scratch, scratch_path=scratch_path)


def _owner_changes(mp: str, facts: MountFacts, *, mounted: bool) -> list[Change]:
    owner = facts.owner
    if mounted and facts.stats.get(mp) == (owner.uid, owner.gid):
        return []
    return [Change(f"give {mp} to {owner.name}", (cmd("chown", f"{owner.name}:", mp, sudo=True, timeout=60),))]


def _scratch_changes(mp: str, facts: MountFacts, *, mounted: bool) -> list[Change]:
    owner = facts.owner
    scratch = posixpath.join(mp, "scratch")
    current = facts.stats.get(scratch) if mounted else None
    if current == (owner.uid, owner.gid):
        return []
    commands: list[Command] = []
    if current is None:
        commands.append(cmd("mkdir", "-p", scratch, sudo=True, timeout=60))
    commands.append(cmd("chown", f"{owner.name}:", scratch, sudo=True, timeout=60))
    return [Change(f"create the scratch folder {scratch} for {owner.name}", tuple(commands))]


def _check_space(params: MountDisksParameters, facts: MountFacts, volume: Volume, mp: str) -> None:
    if not params.MinFreeSpace:
        return
    need = parse_size(params.MinFreeSpace, where="MinFreeSpace")
    mount = facts.disks.mount_at(mp)
    if mount is not None and mount.source == volume.path and mount.avail is not None:
        if mount.avail < need:
            raise PlanRefused(
                f"the scratch volume {volume.path} mounted at {mp} has {format_size(mount.avail)} free; "
                f"MinFreeSpace requires {format_size(need)} ({params.MinFreeSpace})",
                hint="free space on it, choose a bigger disk with DiskFilter, or lower MinFreeSpace",
            )
    elif volume.size < need:
        raise PlanRefused(
            f"the scratch volume {volume.path} is only {format_size(volume.size)}; "
            f"MinFreeSpace requires {format_size(need)} ({params.MinFreeSpace})",
            hint="choose a bigger disk with DiskFilter (e.g. SizeGreaterThan:1000gb) or lower MinFreeSpace",
        )


#: Who ran sudo (the owner when Username is not given).
SUDO_USER_QUERY = cmd("printenv", "SUDO_USER", timeout=30, readonly=True)


def resolve_owner(host: Host, username: str | None) -> Owner:
    """``Username``, else ``SUDO_USER`` (when not root), else the connecting user; with ids."""
    name = (username or "").strip()
    if not name:
        sudo_user = host.run(SUDO_USER_QUERY).stdout.strip()
        name = sudo_user if sudo_user and sudo_user != "root" else host.identity.user
    uid = host.run(cmd("id", "-u", name, timeout=30, readonly=True))
    gid = host.run(cmd("id", "-g", name, timeout=30, readonly=True))
    if not (uid.ok and gid.ok):
        raise PlanRefused(f"Username: no user {name!r} on this host", hint="set Username to an existing user")
    return Owner(name=name, uid=int(uid.stdout.strip()), gid=int(gid.stdout.strip()))


def read_stats(host: Host, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Owner ids of the paths that exist (missing ones are simply absent)."""
    if not paths:
        return {}
    result = host.run(cmd("stat", "-c", "%u:%g:%n", *paths, timeout=60, readonly=True))
    stats: dict[str, tuple[int, int]] = {}
    for line in result.stdout.splitlines():
        uid, _, rest = line.partition(":")
        gid, _, path = rest.partition(":")
        if uid.isdigit() and gid.isdigit():
            stats[path] = (int(uid), int(gid))
    return stats


class MountDisks(Step):
    """Mount the chosen volumes persistently and export MLPERF_SCRATCH_PATH."""

    type_name: ClassVar[str] = "MountDisks"
    Parameters: ClassVar[type[StepParameters]] = MountDisksParameters

    @property
    def p(self) -> MountDisksParameters:
        assert isinstance(self.params, MountDisksParameters)
        return self.params

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, MountDisksParameters)
        Filter.parse(params.DiskFilter)
        for name, value in (("MountLocation", params.MountLocation), ("FstabPath", params.FstabPath)):
            if not value.startswith("/") or any(c.isspace() for c in value):
                raise ValueError(f"{name}: {value!r} must be an absolute path without spaces")
        if not _NAME.match(params.MountPointPrefix):
            raise ValueError(f"MountPointPrefix: {params.MountPointPrefix!r} must be letters, digits, '.', '_' or '-'")
        if params.MinFreeSpace:
            parse_size(params.MinFreeSpace, where="MinFreeSpace")
        if params.Username is not None and params.Username.strip() and not _NAME.match(params.Username.strip()):
            raise ValueError(f"Username: {params.Username!r} is not a user name")

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """Plan and verify read the same: the disks, fstab, the owner and the owners of the mount points."""
        return (self._mount_facts(),)

    def _mount_facts(self) -> Fact[MountFacts]:
        """Everything :func:`plan_mount` reads, as one fact: which mount points' owners are read depends on the
        disks and fstab it finds (its ``stat`` follows them); the disks' and the sudo caller's queries come first."""
        queries = DISKS.queries if (self.p.Username or "").strip() else (*DISKS.queries, SUDO_USER_QUERY)
        p = self.p
        name = f"mount-disks({p.FstabPath},{p.Username or ''},{p.MountLocation},{p.MountPointPrefix})"
        return Fact(name, self._read_facts, queries)

    def _read_facts(self, host: Host) -> MountFacts:
        disks = read_disk_facts(host)
        try:
            fstab_text = host.read_text(self.p.FstabPath)
        except FileNotFoundError:
            fstab_text = ""
        owner = resolve_owner(host, self.p.Username)
        candidates: list[str] = []
        for entry in parse_fstab(fstab_text):
            candidates += [entry.target, posixpath.join(entry.target, "scratch")]
        for volume in disks.volumes():
            mp = planned_mountpoint(self.p, volume)
            candidates += [mp, posixpath.join(mp, "scratch")]
            for point in volume.mountpoints:
                candidates.append(posixpath.join(point, "scratch"))
        stats = read_stats(host, list(dict.fromkeys(candidates)))
        return MountFacts(
            disks=disks, fstab_text=fstab_text, owner=owner, stats=stats, systemd=host.exists("/run/systemd/system")
        )

    def _mount_plan(self, ctx: StepContext) -> MountPlan:
        try:
            return plan_mount(self.p, self.read_facts(ctx, "plan")[self._mount_facts()])
        except (PlanRefused, ValueError) as exc:
            raise self.fail(str(exc), ctx) from None

    def plan(self, ctx: StepContext) -> StepPlan:
        result = self._mount_plan(ctx)
        # In memory only (plan changes nothing on the host): later steps' plans see the path.
        ctx.exports[SCRATCH_EXPORT] = result.scratch_path
        return result.plan

    def verify(self, ctx: StepContext) -> None:
        result = self._mount_plan(ctx)
        if result.plan.changed:
            raise self.fail("not done after apply: " + "; ".join(c.summary for c in result.plan.changes), ctx)
        ctx.exports[SCRATCH_EXPORT] = result.scratch_path
        ctx.state.set(
            STATE_KEY,
            {
                "scratch_path": result.scratch_path,
                "scratch_volume": result.scratch_volume.path,
                "scratch_uuid": result.scratch_volume.uuid,
                "mountpoints": dict(result.mountpoints),
            },
        )
