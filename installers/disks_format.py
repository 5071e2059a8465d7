"""``FormatDisks``: partition and format only blank disks (or stripe blank NVMe disks into a RAID0).

Moved out of :mod:`workload.installers.disks` (which re-exports every name and states the contract):
the parameters, the blank-disk refusals, the pure planner :func:`plan_format` and the step.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from workload.commands import Command, cmd
from workload.facts.disks import DISKS, Disk, DiskFacts, format_size
from workload.facts.fact import Fact, command_fact
from workload.facts.system import file_text
from workload.installers.diskfilter import DiskFilter as Filter
from workload.installers.disks_common import _NAME, ALLOW_NON_NVME_OPTION, MDADM_CONF, PlanRefused
from workload.steps import Change, FactPhase, Step, StepContext, StepParameters, StepPlan


# == FormatDisks ===================================================================================
class FormatDisksParameters(StepParameters):
    DiskFilter: str = "OSDisk:false"
    Raid0: bool = False
    #: How many blank NVMe disks to stripe (default: every one matched; at least 2).
    Raid0Devices: int | None = None
    RaidName: str = "scratch"
    FileSystem: str = "ext4"
    #: ext4 labels hold at most 16 bytes.
    Label: str = "workload-scratch"
    #: Where a new RAID0 array is recorded so it is assembled at boot; tests point it at a temporary file.
    MdadmConfPath: str = MDADM_CONF


def partition_path(disk_path: str) -> str:
    """The first partition's device path: ``/dev/sdc`` -> ``/dev/sdc1``, ``/dev/nvme0n1`` -> ``/dev/nvme0n1p1``."""
    return f"{disk_path}p1" if disk_path[-1:].isdigit() else f"{disk_path}1"


def refusal(disk: Disk, facts: DiskFacts) -> str | None:
    """Why ``disk`` must not be formatted (every reason, joined), or None when it is blank and safe."""
    if disk.is_os_disk:
        return "is the OS disk (" + "; ".join(disk.os_reasons) + ")"
    reasons: list[str] = []
    if not facts.os_disk_known:
        reasons.append("the disk holding / could not be identified on this host, so no disk is formatted")
    if disk.probe_error:
        reasons.append(f"could not be probed for signatures ({disk.probe_error}); an unchecked disk is not formatted")
    if disk.device.read_only:
        reasons.append("is read-only")
    if disk.device.children:
        reasons.append("has partitions or holders: " + ", ".join(c.describe() for c in disk.device.children))
    if disk.device.mountpoints:
        reasons.append("is mounted at " + ", ".join(disk.device.mountpoints))
    if disk.swap:
        reasons.append("is active swap")
    if disk.signatures or disk.device.fstype:
        found = list(disk.signatures) or [disk.device.fstype or ""]
        reasons.append("holds data signatures (" + ", ".join(found) + "); wipe it yourself if it really is free")
    return "; ".join(reasons) or None


def _formatted_by_us(disk: Disk, params: FormatDisksParameters) -> str | None:
    for node in disk.device.walk():
        if node.label == params.Label and node.fstype == params.FileSystem:
            return f"{node.path} ({node.fstype}, label {node.label})"
    return None


#: Exits 1, naming why, unless the disk (argv[2]; argv[1] names the script in displays) is free
#: for FormatDisks to write: it opens exclusively (O_EXCL on a block device fails while it is
#: mounted, in a RAID/LVM, or claimed by mkfs & co.), has no holders, and no process has it or one
#: of its partitions open. Run right before the first write (parted), so a disk someone took since
#: the plan is left untouched. When processes having it open is the only reason, it looks again
#: for up to :data:`PROBE_WAIT_S`: blkid and udev's workers open every new or changed block device
#: for a few milliseconds to read its signatures (seen: a blkid of a concurrent disk scan), and a
#: disk a program really uses is still open then.
PROBE_WAIT_S = 5.0
EXCLUSIVE_SCRIPT = r"""
import os, sys, time
disk = os.path.realpath(sys.argv[2])
name = os.path.basename(disk)
sysdir = "/sys/class/block/" + name


def lasting_reasons():
    busy = []
    try:
        os.close(os.open(disk, os.O_RDONLY | os.O_EXCL))
    except OSError as e:
        why = "mounted, in a RAID or LVM, or claimed by a program"
        busy.append("it cannot be opened exclusively (%s): %s" % (e.strerror, why))
    holders = os.listdir(sysdir + "/holders") if os.path.isdir(sysdir + "/holders") else []
    if holders:
        busy.append("held by " + ", ".join(sorted(holders)))
    return busy


def open_in():
    parts = [p for p in (os.listdir(sysdir) if os.path.isdir(sysdir) else []) if p.startswith(name)]
    targets = {disk} | {"/dev/" + p for p in parts}
    me = os.getpid()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            except OSError:
                continue
            if target in targets:
                try:
                    with open("/proc/%s/comm" % pid) as f:
                        comm = f.read().strip()
                except OSError:
                    comm = "?"
                found.append("open in process %s (%s) as %s" % (pid, comm, target))
                break
    return found


deadline = time.monotonic() + float(sys.argv[3])
while True:
    lasting, opened = lasting_reasons(), open_in()
    if not opened or lasting or time.monotonic() >= deadline:
        break
    time.sleep(0.2)
busy = lasting + opened
if busy:
    sys.stderr.write("%s is in use: %s; nothing was written to it\n" % (disk, "; ".join(busy)))
    sys.exit(1)
print("%s is not in use" % disk)
"""


def exclusive_check(disk_path: str) -> Command:
    """The check that ``disk_path`` is free, run before the first write (see :data:`EXCLUSIVE_SCRIPT`)."""
    return cmd(
        "python3", "-c", EXCLUSIVE_SCRIPT, "disk-is-free", disk_path, f"{PROBE_WAIT_S:g}", sudo=True, timeout=120
    )


def _single_disk_change(disk: Disk, params: FormatDisksParameters) -> Change:
    part = partition_path(disk.path)
    commands = (
        exclusive_check(disk.path),
        cmd(
            "parted",
            "-s",
            "-a",
            "optimal",
            disk.path,
            "mklabel",
            "gpt",
            "mkpart",
            params.Label,
            "ext4",
            "1MiB",
            "100%",
            sudo=True,
            timeout=300,
        ),
        cmd("partprobe", disk.path, sudo=True, timeout=120),
        cmd("udevadm", "settle", "--timeout=60", sudo=True, timeout=120),
        # -F: the partition is brand new on a disk proven blank; without it mkfs may stop to ask
        # about stale bytes. -m 0: no root reserve on a data disk (5 % of 4 TB is 200 GB).
        cmd("mkfs.ext4", "-q", "-F", "-m", "0", "-L", params.Label, part, sudo=True, timeout=3600),
    )
    summary = f"partition {disk.path} ({format_size(disk.size)}; gpt, one partition) and format {part} as ext4"
    return Change(f"{summary} labelled {params.Label}", commands, target=disk.path)


# Idempotent: the array's line is appended only where the file does not list its UUID yet.
PERSIST_RAID_SCRIPT = (
    'conf=$1 array=$2; line=$(mdadm --detail --brief "$array") || exit $?; '
    "uuid=$(printf '%s\\n' \"$line\" | sed -n 's/.*UUID=\\([0-9a-fA-F:]*\\).*/\\1/p'); "
    '[ -n "$uuid" ] || { echo "mdadm printed no UUID for $array: $line" >&2; exit 1; }; '
    'mkdir -p "$(dirname "$conf")"; '
    'if grep -qis "UUID=$uuid" "$conf"; then echo "$conf already lists $array ($uuid)"; '
    'else printf \'%s\\n\' "$line" >> "$conf" && echo "added to $conf: $line"; fi'
)
UPDATE_INITRAMFS_SCRIPT = (
    "if command -v update-initramfs >/dev/null 2>&1; then exec update-initramfs -u; fi; "
    'echo "no update-initramfs on this host: nothing to update"'
)


def _persist_raid_commands(array: str, params: FormatDisksParameters) -> tuple[Command, ...]:
    """Record ``array`` in the mdadm.conf (once), then refresh the initramfs copy of the system one."""
    commands = [
        cmd("sh", "-c", PERSIST_RAID_SCRIPT, "persist-raid", params.MdadmConfPath, array, sudo=True, timeout=120)
    ]
    if params.MdadmConfPath == MDADM_CONF:
        commands.append(cmd("sh", "-c", UPDATE_INITRAMFS_SCRIPT, "update-initramfs", sudo=True, timeout=1800))
    return tuple(commands)


def _uuid_hex(text: str) -> str:
    """An md UUID in either spelling (blkid ``8-4-4-4-12``, mdadm ``8:8:8:8``) as 32 lowercase hex digits."""
    return re.sub(r"[^0-9a-f]", "", text.lower())


def _recorded_arrays(conf_text: str) -> set[str]:
    return {_uuid_hex(m) for m in re.findall(r"\bUUID=([0-9a-fA-F:-]+)", conf_text)}


def _raid_change(members: Sequence[Disk], params: FormatDisksParameters) -> Change:
    array = f"/dev/md/{params.RaidName}"
    commands = (
        cmd(
            "mdadm",
            "--create",
            array,
            "--run",
            "--level=0",
            f"--raid-devices={len(members)}",
            f"--name={params.RaidName}",
            *(d.path for d in members),
            sudo=True,
            timeout=300,
        ),
        cmd("udevadm", "settle", "--timeout=60", sudo=True, timeout=120),
        cmd("mkfs.ext4", "-q", "-F", "-m", "0", "-L", params.Label, array, sudo=True, timeout=3600),
        *_persist_raid_commands(array, params),
    )
    size = format_size(sum(d.size for d in members))
    names = ", ".join(d.path for d in members)
    return Change(
        f"stripe {names} into RAID0 {array} ({size}), format it as ext4 labelled {params.Label} "
        f"and record it in {params.MdadmConfPath}",
        commands,
    )


def _unrecorded_raid(matched: Sequence[Disk], params: FormatDisksParameters, mdadm_conf: str) -> tuple[str, str] | None:
    """(array device, md UUID) of our formatted RAID whose UUID ``mdadm_conf`` does not list, if any."""
    recorded = _recorded_arrays(mdadm_conf)
    for disk in matched:
        for member in disk.device.walk():
            if member.fstype != "linux_raid_member" or not member.uuid:
                continue
            for node in member.children:
                ours = node.label == params.Label and node.fstype == params.FileSystem
                if ours and node.type.startswith("raid") and _uuid_hex(member.uuid) not in recorded:
                    return node.path, member.uuid
    return None


#: Host state key: the disks FormatDisks began to write (path -> what it knew of the disk), set
#: before the first write and cleared once the disk is formatted. A run cut off between partitioning
#: and mkfs leaves a disk with a partition table only; with this record the next run finishes it.
STARTED_KEY = "FormatDisks:started"
#: Whole-disk signatures a partition table of ours leaves (wipefs names a GPT and its protective MBR).
_TABLE_SIGNATURES = frozenset({"gpt", "PMBR"})


def started_record(disk: Disk, params: FormatDisksParameters, when: str) -> dict[str, object]:
    """What FormatDisks records of a disk before its first write (to recognise it when resuming)."""
    return {"size": disk.size, "model": disk.device.model, "label": params.Label, "started": when}


def _leftover_of_ours(disk: Disk, facts: DiskFacts, params: FormatDisksParameters, record: object) -> bool:
    """Whether ``disk`` is exactly what an interrupted FormatDisks of the same disk left behind.

    The same size and model as recorded, the same label, nothing mounted, no swap, probed, not the
    OS disk, and nothing on it but a partition table with at most one empty partition.
    """
    if not isinstance(record, Mapping):
        return False
    same = record.get("size") == disk.size and record.get("model") == disk.device.model
    if not same or record.get("label") != params.Label:
        return False
    if disk.is_os_disk or not facts.os_disk_known or disk.probe_error or disk.device.read_only or disk.swap:
        return False
    if any(node.mountpoints for node in disk.device.walk()) or disk.device.fstype:
        return False
    if not set(disk.signatures) <= _TABLE_SIGNATURES or len(disk.device.children) > 1:
        return False
    return all(c.type == "part" and not c.fstype and not c.children for c in disk.device.children)


def plan_format(
    params: FormatDisksParameters,
    facts: DiskFacts,
    *,
    has_mdadm: bool = True,
    mdadm_conf: str | None = None,
    allow_non_nvme: bool = False,
    started: Mapping[str, object] | None = None,
) -> StepPlan:
    """What FormatDisks would do (pure). Raises :class:`PlanRefused` for an impossible RAID0, and
    when a matched disk could not be probed (a wrong sudo password: nothing is known, so the step fails).

    ``mdadm_conf``: the text of ``MdadmConfPath`` (None: not read; "" where it does not exist).
    ``allow_non_nvme``: the test option that lets loop devices be RAID0 members.
    ``started``: the host state's :data:`STARTED_KEY` record; a disk there that holds only what an
    interrupted format of it left (:func:`_leftover_of_ours`) is formatted again from the start.
    """
    flt = Filter.parse(params.DiskFilter)
    matched = flt.select(facts.disks, purpose="format")
    unprobed = [d for d in matched if d.probe_error and not d.is_os_disk]
    if unprobed:
        raise PlanRefused(
            "could not probe "
            + "; ".join(f"{d.path} ({d.probe_error})" for d in unprobed)
            + ": no disk is formatted without knowing what it holds",
            hint="check that sudo works on the host (--sudo-password-env, or passwordless sudo) and run again",
        )
    started = started or {}
    notes: list[str] = list(facts.notes)
    skipped = len(facts.disks) - len(matched)
    if skipped:
        notes.append(f"{skipped} disk(s) not matched by DiskFilter {flt} (the OS disk never is)")
    eligible: list[Disk] = []
    done: list[str] = []
    for disk in matched:
        ours = _formatted_by_us(disk, params)
        if ours is not None:
            done.append(ours)
            continue
        reason = refusal(disk, facts)
        if reason is not None and not params.Raid0 and _leftover_of_ours(disk, facts, params, started.get(disk.path)):
            record = started[disk.path]
            when = record.get("started", "an earlier run") if isinstance(record, Mapping) else "an earlier run"
            notes.append(f"resuming: FormatDisks began formatting {disk.path} at {when} and was cut off before mkfs")
            reason = None
        if reason is None:
            eligible.append(disk)
        else:
            notes.append(f"left alone: {disk.path} ({format_size(disk.size)}) {reason}")
    done = list(dict.fromkeys(done))  # a RAID shows under each of its members
    if done:
        notes.append("already formatted: " + ", ".join(done))
    if params.Raid0:
        members = [d for d in eligible if d.is_nvme or allow_non_nvme]
        notes.extend(
            f"left alone: {d.path} is blank but not NVMe (Raid0 stripes NVMe disks)"
            for d in eligible
            if d not in members
        )
        if params.Raid0Devices is not None:
            members = members[: params.Raid0Devices]
        need = params.Raid0Devices or 2
        if done and len(members) < need:
            unrecorded = _unrecorded_raid(matched, params, mdadm_conf) if mdadm_conf is not None else None
            if unrecorded is not None:
                array, uuid = unrecorded
                return StepPlan(
                    changes=(
                        Change(
                            f"record RAID0 {array} (UUID {uuid}) in {params.MdadmConfPath} so it is assembled at boot",
                            _persist_raid_commands(array, params),
                        ),
                    ),
                    notes=(*notes, "already formatted: " + ", ".join(done)),
                )
            return StepPlan.noop("RAID0 already formatted: " + ", ".join(done), notes=tuple(notes))
        if len(members) < need:
            found = ", ".join(d.path for d in members) or "none"
            raise PlanRefused(
                f"Raid0 needs at least {need} blank NVMe disks matching DiskFilter {flt}; "
                f"found {len(members)} ({found})",
                hint="; ".join(notes) or "check the DiskFilter, or set Raid0: false",
            )
        if not has_mdadm:
            raise PlanRefused("Raid0 needs mdadm, which is not installed", hint="install mdadm (apt-get install mdadm)")
        return StepPlan(changes=(_raid_change(members, params),), notes=tuple(notes))
    if not eligible:
        if done:
            return StepPlan.noop("already formatted: " + ", ".join(done), notes=tuple(notes))
        return StepPlan.noop(f"no blank disk matches DiskFilter {flt}", notes=tuple(notes))
    return StepPlan(changes=tuple(_single_disk_change(d, params) for d in eligible), notes=tuple(notes))


#: Whether mdadm is installed (RAID0 needs it).
MDADM_INSTALLED: Fact[bool] = command_fact(
    "mdadm-installed", cmd("sh", "-c", "command -v mdadm", timeout=30, readonly=True), lambda _host, result: result.ok
)


class FormatDisks(Step):
    """Partition and format blank data disks (never the OS disk, never a disk holding anything)."""

    type_name: ClassVar[str] = "FormatDisks"
    Parameters: ClassVar[type[StepParameters]] = FormatDisksParameters

    @property
    def p(self) -> FormatDisksParameters:
        assert isinstance(self.params, FormatDisksParameters)
        return self.params

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, FormatDisksParameters)
        flt = Filter.parse(params.DiskFilter)
        if flt.os_disk is True:
            raise ValueError("DiskFilter: OSDisk:true cannot be used with FormatDisks: the OS disk is never formatted")
        if params.FileSystem.lower() != "ext4":
            raise ValueError(f"FileSystem: {params.FileSystem!r} is not supported (only ext4)")
        if not params.Label or len(params.Label.encode()) > 16 or not _NAME.match(params.Label):
            raise ValueError(f"Label: {params.Label!r} must be 1-16 characters of letters, digits, '.', '_' or '-'")
        if not _NAME.match(params.RaidName) or len(params.RaidName) > 32:
            raise ValueError(f"RaidName: {params.RaidName!r} must be 1-32 letters, digits, '.', '_' or '-'")
        if params.Raid0Devices is not None and params.Raid0Devices < 2:
            raise ValueError(f"Raid0Devices: RAID0 needs at least 2 disks, got {params.Raid0Devices}")
        if not params.MdadmConfPath.startswith("/") or any(c.isspace() for c in params.MdadmConfPath):
            raise ValueError(f"MdadmConfPath: {params.MdadmConfPath!r} must be an absolute path without spaces")

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """The disks; for RAID0 also whether mdadm is installed and the mdadm.conf. Verify plans again: the same."""
        if not self.p.Raid0:
            return (DISKS,)
        return (DISKS, MDADM_INSTALLED, file_text(self.p.MdadmConfPath))

    def _plan(self, ctx: StepContext, *, allow_non_nvme: bool, started: Mapping[str, object]) -> StepPlan:
        view = self.read_facts(ctx, "plan")
        has_mdadm = True
        mdadm_conf: str | None = None
        if self.p.Raid0:
            has_mdadm = view[MDADM_INSTALLED]
            mdadm_conf = view[file_text(self.p.MdadmConfPath)] or ""
        return plan_format(
            self.p,
            view[DISKS],
            has_mdadm=has_mdadm,
            mdadm_conf=mdadm_conf,
            allow_non_nvme=allow_non_nvme,
            started=started,
        )

    def plan(self, ctx: StepContext) -> StepPlan:
        allow = bool(ctx.options.get(ALLOW_NON_NVME_OPTION, False))
        try:
            return self._plan(ctx, allow_non_nvme=allow, started=ctx.state.mapping(STARTED_KEY))
        except PlanRefused as exc:
            raise self.fail(exc.problem, ctx, hint=exc.hint) from None
        except ValueError as exc:
            raise self.fail(str(exc), ctx) from None

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        # Destructive commands run only on facts read now, not at plan time: a disk that got a
        # filesystem or a mount in between makes the fresh plan differ, and nothing runs.
        fresh = self.plan(ctx)
        if fresh.changes != plan.changes:
            raise self.fail(
                "the disks changed since the plan was made; nothing was formatted",
                ctx,
                hint="run again to plan on the current state",
            )
        if self.p.Raid0:
            super().apply(ctx, plan)
            return
        disks = {d.path: d for d in self.read_facts(ctx, "plan")[DISKS].disks}  # remembered: read by the plan above
        began: list[str] = ctx.memo.setdefault(STARTED_KEY, [])
        for change in plan.changes:
            ctx.log(f"-> {change.summary}")
            check, *writes = change.commands
            ctx.check(check)  # the disk is free: nothing is written otherwise
            # Recorded between the check and the first write: a run cut off after parted can
            # finish the disk next time; a disk never written is never recorded.
            path = change.target
            assert path is not None and path in disks, (
                "each change of a one-disk-per-change plan names its disk (_single_disk_change)"
            )
            when = time.strftime("%Y-%m-%dT%H:%M:%S")
            ctx.state.merge(STARTED_KEY, {path: started_record(disks[path], self.p, when)})
            began.append(path)
            for command in writes:
                ctx.check(command)

    def verify(self, ctx: StepContext) -> None:
        left = self.plan(ctx)
        if left.changed:
            raise self.fail("still blank after formatting: " + "; ".join(c.summary for c in left.changes), ctx)
        started = ctx.state.mapping(STARTED_KEY)
        if not started:
            return
        # Success only for disks that really are formatted: a disk this step began and that is not
        # finished (someone took it between parted and mkfs) fails the step, naming it.
        facts = self.read_facts(ctx, "verify")[DISKS]
        disks = {d.path: d for d in facts.disks}
        matched = {d.path for d in Filter.parse(self.p.DiskFilter).select(facts.disks, purpose="format")}
        finished = {p: None for p in started if p in disks and _formatted_by_us(disks[p], self.p) is not None}
        if finished:
            ctx.state.merge(STARTED_KEY, finished)
        began_now = set(ctx.memo.get(STARTED_KEY, ()))
        for path in started:
            if path not in finished and path not in began_now and path in matched:
                why = refusal(disks[path], facts) if path in disks else "the disk is gone"
                ctx.log(f"note: an earlier FormatDisks began {path} and could not finish it: {why}")
        unfinished = [p for p in began_now if p not in finished]
        if unfinished:
            raise self.fail(
                "began formatting "
                + ", ".join(unfinished)
                + " but it is not formatted: "
                + "; ".join(refusal(disks[p], facts) or "not formatted" for p in unfinished if p in disks),
                ctx,
                hint="free the disk (unmount it, stop the program that holds it) and run again: "
                "FormatDisks finishes a disk it began",
            )
