"""FormatDisks / MountDisks planners: pure functions of (parameters, facts)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.test_disks_facts import load_facts
from workload.facts.disks import DiskFacts, Mount
from workload.installers.disks import (
    EXCLUSIVE_SCRIPT,
    PERSIST_RAID_SCRIPT,
    UPDATE_INITRAMFS_SCRIPT,
    FormatDisks,
    FormatDisksParameters,
    MountDisks,
    MountDisksParameters,
    MountFacts,
    Owner,
    PlanRefused,
    fstab_line,
    plan_format,
    plan_mount,
)

USER = Owner("azureuser", 1000, 1000)


def argvs(plan: object) -> list[list[str]]:
    return [[str(a) for a in c.argv] for c in plan.commands]  # type: ignore[attr-defined]


# -- FormatDisks ---------------------------------------------------------------------------------
def test_azure_vm_formats_only_the_blank_nvme_disks_and_says_why_not_the_resource_disk() -> None:
    plan = plan_format(FormatDisksParameters(), load_facts("azure_nd"))
    assert [c.summary.split()[1] for c in plan.changes] == ["/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme2n1"]
    # the disk is checked to be free before the first write
    assert argvs(plan)[0] == ["python3", "-c", EXCLUSIVE_SCRIPT, "disk-is-free", "/dev/nvme0n1", "5"]
    assert argvs(plan)[1:5] == [
        [
            "parted",
            "-s",
            "-a",
            "optimal",
            "/dev/nvme0n1",
            "mklabel",
            "gpt",
            "mkpart",
            "workload-scratch",
            "ext4",
            "1MiB",
            "100%",
        ],
        ["partprobe", "/dev/nvme0n1"],
        ["udevadm", "settle", "--timeout=60"],
        ["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "workload-scratch", "/dev/nvme0n1p1"],
    ]
    assert all(c.sudo for c in plan.commands)
    assert any(
        n.startswith("left alone: /dev/sdb (2.7 TiB) has partitions or holders: sdb1 (ext4, mounted at /mnt)")
        for n in plan.notes
    )
    assert "1 disk(s) not matched by DiskFilter OSDisk:false (the OS disk never is)" in plan.notes
    assert not any("/dev/sda" in a for argv in argvs(plan) for a in argv)


def test_filter_narrows_formatting() -> None:
    plan = plan_format(FormatDisksParameters(DiskFilter="SizeGreaterThan:1000gb"), load_facts("azure_nd"))
    assert [c.summary.split()[1] for c in plan.changes] == ["/dev/nvme2n1"]  # 1 TiB >= 1000 GiB; 894 GiB is not


def test_recorded_loops_every_used_disk_is_refused_with_its_reason() -> None:
    facts = load_facts("loops")
    plan = plan_format(FormatDisksParameters(DiskFilter="DiskPath:/dev/loop0,/dev/loop1,/dev/loop3"), facts)
    assert not plan.changed
    assert plan.noop_reason == "no blank disk matches DiskFilter DiskPath:/dev/loop0,/dev/loop1,/dev/loop3"
    notes = "\n".join(plan.notes)
    assert "left alone: /dev/loop0 (64.0 MiB) has partitions or holders: loop0p1" in notes
    assert "left alone: /dev/loop1 (64.0 MiB) has partitions or holders: loop1p1; holds data signatures (ext4)" in notes
    assert "left alone: /dev/loop3 (64.0 MiB) has partitions or holders: loop3p1" in notes


def test_already_formatted_workload_disk_is_a_noop_with_reason() -> None:
    plan = plan_format(FormatDisksParameters(DiskFilter="DiskPath:/dev/loop2"), load_facts("loops"))
    assert plan.noop_reason == "already formatted: /dev/loop2p1 (ext4, label workload-scratch)"


def test_unknown_os_disk_formats_nothing() -> None:
    from workload.facts.disks import build_facts, parse_lsblk

    facts = build_facts(
        parse_lsblk('{"blockdevices":[{"name":"sdc","path":"/dev/sdc","size":1000,"type":"disk"}]}'),
        mounts=[Mount("/", "overlay", "overlay", None, None)],
    )
    plan = plan_format(FormatDisksParameters(), facts)
    assert not plan.changed
    assert any("the disk holding / could not be identified" in n for n in plan.notes)


def test_unprobed_disk_is_not_formatted() -> None:
    root = load_facts("thismachine")
    (nvme,) = (d for d in load_facts("azure_nd").disks if d.name == "nvme0n1")
    facts = DiskFacts(disks=(root.disks[0], replace(nvme, probe_error="Operation not permitted")), mounts=root.mounts)
    # nothing known about the disk (a wrong sudo password): a failed step, not "no change"
    with pytest.raises(PlanRefused, match=r"could not probe /dev/nvme0n1 \(Operation not permitted\)"):
        plan_format(FormatDisksParameters(), facts)
    assert plan_format(FormatDisksParameters(), replace(facts, disks=(root.disks[0], nvme))).changed


def test_raid0_stripes_the_blank_nvme_disks() -> None:
    plan = plan_format(FormatDisksParameters(Raid0=True, RaidName="scratch"), load_facts("azure_nd"))
    assert argvs(plan) == [
        [
            "mdadm",
            "--create",
            "/dev/md/scratch",
            "--run",
            "--level=0",
            "--raid-devices=3",
            "--name=scratch",
            "/dev/nvme0n1",
            "/dev/nvme1n1",
            "/dev/nvme2n1",
        ],
        ["udevadm", "settle", "--timeout=60"],
        ["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "workload-scratch", "/dev/md/scratch"],
        ["sh", "-c", PERSIST_RAID_SCRIPT, "persist-raid", "/etc/mdadm/mdadm.conf", "/dev/md/scratch"],
        ["sh", "-c", UPDATE_INITRAMFS_SCRIPT, "update-initramfs"],
    ]
    assert plan.changes[0].summary.endswith("and record it in /etc/mdadm/mdadm.conf")
    two = plan_format(FormatDisksParameters(Raid0=True, Raid0Devices=2), load_facts("azure_nd"))
    assert "--raid-devices=2" in argvs(two)[0] and "/dev/nvme2n1" not in argvs(two)[0]


def test_raid0_with_too_few_disks_or_no_mdadm_is_refused() -> None:
    with pytest.raises(
        PlanRefused,
        match=r"Raid0 needs at least 2 blank NVMe disks matching DiskFilter "
        r"DiskPath:/dev/nvme0n1; found 1 \(/dev/nvme0n1\)",
    ):
        plan_format(FormatDisksParameters(Raid0=True, DiskFilter="DiskPath:/dev/nvme0n1"), load_facts("azure_nd"))
    with pytest.raises(PlanRefused, match="Raid0 needs mdadm"):
        plan_format(FormatDisksParameters(Raid0=True), load_facts("azure_nd"), has_mdadm=False)


def raid_vm(md_uuid: str = "3b7a1c2d-5e6f-7a8b-9c0d-1e2f3a4b5c6d") -> DiskFacts:
    """Two NVMe disks striped by FormatDisks into md127 (ext4, our label), and the OS disk."""
    from workload.facts.disks import build_facts, parse_lsblk

    md = (
        '{"name":"md127","path":"/dev/md127","size":1998,"type":"raid0","fstype":"ext4",'
        '"uuid":"fs-uuid","label":"workload-scratch"}'
    )

    def member(name: str) -> str:
        return (
            f'{{"name":"{name}","path":"/dev/{name}","size":1000,"type":"disk","tran":"nvme",'
            f'"fstype":"linux_raid_member","uuid":"{md_uuid}","label":"vm:scratch","children":[{md}]}}'
        )

    text = (
        '{"blockdevices":[{"name":"sda","path":"/dev/sda","size":9999999,"type":"disk","children":['
        '{"name":"sda1","path":"/dev/sda1","size":9999000,"type":"part","fstype":"ext4","uuid":"root",'
        f'"mountpoints":["/"]}}]}},{member("nvme0n1")},{member("nvme1n1")}]}}'
    )
    return build_facts(parse_lsblk(text), mounts=[Mount("/", "/dev/sda1", "ext4", 9999000, 5000)])


def test_a_formatted_raid_missing_from_mdadm_conf_is_recorded_then_left_alone() -> None:
    """A RAID0 the reboot would not assemble under its name gets its mdadm.conf line (and nothing else)."""
    params = FormatDisksParameters(Raid0=True)
    plan = plan_format(params, raid_vm(), mdadm_conf="# mdadm.conf\nHOMEHOST <system>\n")
    assert [c.summary for c in plan.changes] == [
        "record RAID0 /dev/md127 (UUID 3b7a1c2d-5e6f-7a8b-9c0d-1e2f3a4b5c6d) in /etc/mdadm/mdadm.conf "
        "so it is assembled at boot"
    ]
    assert argvs(plan)[0][-2:] == ["/etc/mdadm/mdadm.conf", "/dev/md127"]
    recorded = "ARRAY /dev/md/scratch metadata=1.2 name=vm:scratch UUID=3b7a1c2d:5e6f7a8b:9c0d1e2f:3a4b5c6d\n"
    done = plan_format(params, raid_vm(), mdadm_conf=recorded)
    assert not done.changed and done.noop_reason == "RAID0 already formatted: /dev/md127 (ext4, label workload-scratch)"
    # A test's own mdadm.conf: recorded there, and the host's initramfs is left alone.
    mine = plan_format(params.model_copy(update={"MdadmConfPath": "/tmp/t/mdadm.conf"}), raid_vm(), mdadm_conf="")
    assert [a[3] for a in argvs(mine)] == ["persist-raid"]


def test_raid0_of_non_nvme_disks_only_with_the_test_option() -> None:
    from workload.facts.disks import build_facts, parse_lsblk

    loop = '{{"name":"loop{0}","path":"/dev/loop{0}","size":67108864,"type":"loop","ro":false}}'
    text = (
        '{"blockdevices":[{"name":"sda","path":"/dev/sda","size":9999999,"type":"disk","children":['
        '{"name":"sda1","path":"/dev/sda1","size":9999000,"type":"part","fstype":"ext4","mountpoints":["/"]}]},'
        f"{loop.format(3)},{loop.format(4)}]}}"
    )
    loops = build_facts(parse_lsblk(text), mounts=[Mount("/", "/dev/sda1", "ext4", 9999000, 5000)])
    params = FormatDisksParameters(Raid0=True, DiskFilter="DiskPath:/dev/loop3,/dev/loop4")
    with pytest.raises(PlanRefused, match="Raid0 needs at least 2 blank NVMe disks"):
        plan_format(params, loops)
    plan = plan_format(params, loops, allow_non_nvme=True)
    assert argvs(plan)[0][-2:] == ["/dev/loop3", "/dev/loop4"]


def test_the_raid_record_is_written_once(tmp_path: object) -> None:
    """The persist script on this machine, with a stand-in mdadm printing what `mdadm --detail --brief` prints."""
    import os
    from pathlib import Path

    from workload.hosts.local import LocalHost

    tmp = Path(str(tmp_path))
    (tmp / "bin").mkdir()
    fake = tmp / "bin" / "mdadm"
    fake.write_text(
        "#!/bin/sh\n[ \"$*\" = '--detail --brief /dev/md127' ] || exit 1\n"
        "echo 'ARRAY /dev/md/scratch metadata=1.2 name=vm:scratch UUID=3b7a1c2d:5e6f7a8b:9c0d1e2f:3a4b5c6d'\n"
    )
    fake.chmod(0o755)
    conf = tmp / "etc" / "mdadm" / "mdadm.conf"
    params = FormatDisksParameters(Raid0=True, MdadmConfPath=str(conf))
    (persist,) = plan_format(params, raid_vm(), mdadm_conf="").commands
    persist = persist.with_options(env={"PATH": f"{tmp / 'bin'}:{os.environ['PATH']}"})
    host = LocalHost()
    first = host.check(persist)
    second = host.check(persist)
    line = "ARRAY /dev/md/scratch metadata=1.2 name=vm:scratch UUID=3b7a1c2d:5e6f7a8b:9c0d1e2f:3a4b5c6d\n"
    assert conf.read_text() == line
    assert first.stdout.startswith(f"added to {conf}: ARRAY /dev/md/scratch")
    assert second.stdout == f"{conf} already lists /dev/md127 (3b7a1c2d:5e6f7a8b:9c0d1e2f:3a4b5c6d)\n"
    assert not plan_format(params, raid_vm(), mdadm_conf=conf.read_text()).changed


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"DiskFilter": "OSDisk:true"}, "DiskFilter: OSDisk:true cannot be used with FormatDisks"),
        ({"DiskFilter": "Biggest"}, "DiskFilter: unknown term 'Biggest'"),
        ({"FileSystem": "ntfs"}, "FileSystem: 'ntfs' is not supported (only ext4)"),
        ({"Label": "a-label-longer-than-16"}, "Label: 'a-label-longer-than-16' must be 1-16 characters"),
        ({"RaidName": "x/y"}, "RaidName: 'x/y' must be"),
        ({"Raid0Devices": 1}, "Raid0Devices: RAID0 needs at least 2 disks, got 1"),
    ],
)
def test_format_parameters_are_checked_at_profile_load(params: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        FormatDisks.check_parameters(FormatDisksParameters(**params))  # type: ignore[arg-type]
    assert str(info.value).startswith(message)


# -- MountDisks ----------------------------------------------------------------------------------
def mount_facts(
    facts: DiskFacts, fstab: str = "", stats: dict[str, tuple[int, int]] | None = None, systemd: bool = False
) -> MountFacts:
    return MountFacts(disks=facts, fstab_text=fstab, owner=USER, stats=stats or {}, systemd=systemd)


def formatted_vm(mounted: bool = False, avail: int | None = None) -> DiskFacts:
    """Two data disks with one workload partition each (the bigger is nvme1n1), like after FormatDisks."""
    from workload.facts.disks import build_facts, parse_lsblk

    def d(name: str, size: int) -> str:
        point = f'"/data/mnt_{name}p1"' if mounted else "null"
        return (
            f'{{"name":"{name}","path":"/dev/{name}","size":{size},"type":"disk","tran":"nvme","children":['
            f'{{"name":"{name}p1","path":"/dev/{name}p1","size":{size - 1},"type":"part","fstype":"ext4",'
            f'"uuid":"uuid-{name}","label":"workload-scratch","mountpoints":[{point}]}}]}}'
        )

    text = (
        '{"blockdevices":[{"name":"sda","path":"/dev/sda","size":9999999,"type":"disk","children":['
        '{"name":"sda1","path":"/dev/sda1","size":9999000,"type":"part","fstype":"ext4","uuid":"root",'
        f'"mountpoints":["/"]}}]}},{d("nvme0n1", 1000)},{d("nvme1n1", 3000)}]}}'
    )
    mounts = [Mount("/", "/dev/sda1", "ext4", 9999000, 5000)]
    if mounted:
        mounts += [Mount(f"/data/mnt_{n}p1", f"/dev/{n}p1", "ext4", 900, avail) for n in ("nvme0n1", "nvme1n1")]
    return build_facts(parse_lsblk(text), mounts=mounts)


PARAMS = MountDisksParameters(MountLocation="/data", FstabPath="/tmp/x/fstab")


def test_first_mount_adds_one_fstab_line_per_volume_by_uuid_and_exports_the_biggest() -> None:
    result = plan_mount(PARAMS, mount_facts(formatted_vm(), fstab="# header"))
    assert result.scratch_path == "/data/mnt_nvme1n1p1/scratch"
    assert dict(result.mountpoints) == {
        "/dev/nvme0n1p1": "/data/mnt_nvme0n1p1",
        "/dev/nvme1n1p1": "/data/mnt_nvme1n1p1",
    }
    tees = [c for c in result.plan.commands if c.argv[0] == "tee"]
    assert [c.input for c in tees] == [
        "\nUUID=uuid-nvme0n1 /data/mnt_nvme0n1p1 ext4 defaults,nofail,x-systemd.device-timeout=10s 0 2\n",  # fstab
        "UUID=uuid-nvme1n1 /data/mnt_nvme1n1p1 ext4 defaults,nofail,x-systemd.device-timeout=10s 0 2\n",  # lacked \n
    ]
    assert ["mount", "--fstab", "/tmp/x/fstab", "/data/mnt_nvme1n1p1"] in argvs(result.plan)
    assert ["chown", "azureuser:", "/data/mnt_nvme1n1p1/scratch"] in argvs(result.plan)
    assert ["mkdir", "-p", "/data/mnt_nvme0n1p1/scratch"] not in argvs(result.plan)  # scratch only on the chosen one
    assert not any(c.argv[0] == "systemctl" for c in result.plan.commands)  # not /etc/fstab


def test_systemd_reloads_after_editing_etc_fstab() -> None:
    params = MountDisksParameters()
    result = plan_mount(params, mount_facts(formatted_vm(), systemd=True))
    assert ["systemctl", "daemon-reload"] in argvs(result.plan)
    assert result.scratch_path == "/mnt/mnt_nvme1n1p1/scratch"


def lines_for(facts: DiskFacts) -> str:
    vols = {v.name: v for v in facts.volumes()}
    return "".join(fstab_line(vols[n], f"/data/mnt_{n}") + "\n" for n in ("nvme0n1p1", "nvme1n1p1"))


def test_second_run_is_a_noop() -> None:
    facts = formatted_vm(mounted=True, avail=800)
    stats = {p: (1000, 1000) for p in ("/data/mnt_nvme0n1p1", "/data/mnt_nvme1n1p1", "/data/mnt_nvme1n1p1/scratch")}
    result = plan_mount(PARAMS, mount_facts(facts, fstab=lines_for(facts), stats=stats))
    assert not result.plan.changed
    assert result.plan.noop_reason.startswith("already mounted: /dev/nvme0n1p1 at /data/mnt_nvme0n1p1")
    assert "MLPERF_SCRATCH_PATH=/data/mnt_nvme1n1p1/scratch (on /dev/nvme1n1p1, 2.9 KiB)" in result.plan.notes


def test_after_reboot_without_mounts_it_remounts_from_fstab_with_no_new_line() -> None:
    facts = formatted_vm(mounted=False)
    fstab = lines_for(formatted_vm(mounted=True))
    result = plan_mount(PARAMS, mount_facts(facts, fstab=fstab))
    assert not any(c.argv[0] == "tee" for c in result.plan.commands)
    assert ["mount", "--fstab", "/tmp/x/fstab", "/data/mnt_nvme0n1p1"] in argvs(result.plan)


def test_fstab_mount_point_wins_over_the_computed_one() -> None:
    facts = formatted_vm()
    fstab = "UUID=uuid-nvme1n1 /scratch-here ext4 defaults 0 2\n"
    result = plan_mount(PARAMS, mount_facts(facts, fstab=fstab))
    assert result.scratch_path == "/scratch-here/scratch"
    assert sum(1 for c in result.plan.commands if c.argv[0] == "tee") == 1  # only nvme0n1p1 gets a line


def test_foreign_fstab_line_on_our_mount_point_is_refused() -> None:
    fstab = "# x\n/dev/sdz1 /data/mnt_nvme0n1p1 xfs defaults 0 0\n"
    with pytest.raises(PlanRefused, match=r"/tmp/x/fstab line 2 already mounts /dev/sdz1 at /data/mnt_nvme0n1p1"):
        plan_mount(PARAMS, mount_facts(formatted_vm(), fstab=fstab))


def test_min_free_space_names_volume_free_and_required() -> None:
    facts = formatted_vm(mounted=True, avail=800)
    params = MountDisksParameters(MountLocation="/data", FstabPath="/tmp/x/fstab", MinFreeSpace="1kb")
    with pytest.raises(PlanRefused) as info:
        plan_mount(params, mount_facts(facts, fstab=lines_for(facts)))
    assert str(info.value).startswith(
        "the scratch volume /dev/nvme1n1p1 mounted at /data/mnt_nvme1n1p1 has 800 B free; "
        "MinFreeSpace requires 1.0 KiB (1kb)"
    )
    with pytest.raises(PlanRefused, match=r"the scratch volume /dev/nvme1n1p1 is only 2.9 KiB; MinFreeSpace requires"):
        plan_mount(params.model_copy(update={"MinFreeSpace": "4kb"}), mount_facts(formatted_vm()))


def test_nothing_to_mount_is_a_clear_error() -> None:
    with pytest.raises(
        PlanRefused,
        match=r"no disk matches DiskFilter SizeGreaterThan:1000gb \(disks seen: "
        r"/dev/sda 9.5 MiB \(OS disk\), /dev/nvme0n1",
    ):
        plan_mount(MountDisksParameters(DiskFilter="SizeGreaterThan:1000gb"), mount_facts(formatted_vm()))
    with pytest.raises(PlanRefused, match="matches /dev/nvme0n1, /dev/nvme1n1, /dev/nvme2n1, but none holds a"):
        plan_mount(
            MountDisksParameters(DiskFilter="DiskPath:/dev/nvme0n1,/dev/nvme1n1,/dev/nvme2n1"),
            mount_facts(load_facts("azure_nd")),
        )


def test_volume_mounted_elsewhere_is_used_where_it_is() -> None:
    result = plan_mount(MountDisksParameters(DiskFilter="DiskPath:/dev/sdb"), mount_facts(load_facts("azure_nd")))
    assert result.scratch_path == "/mnt/scratch"
    assert not any(c.argv[0] in ("tee", "mount") for c in result.plan.commands)
    assert "/dev/sdb1 is already mounted at /mnt (not by MountDisks); used as is" in result.plan.notes


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"MountLocation": "mnt"}, "MountLocation: 'mnt' must be an absolute path without spaces"),
        ({"FstabPath": "/etc/my fstab"}, "FstabPath: '/etc/my fstab' must be an absolute path"),
        ({"MountPointPrefix": "a/b"}, "MountPointPrefix: 'a/b' must be"),
        ({"MinFreeSpace": "lots"}, "MinFreeSpace: 'lots' is not a size"),
        ({"DiskFilter": "SizeGreaterThan:1000gib"}, "DiskFilter: SizeGreaterThan: '1000gib' is not a size"),
    ],
)
def test_mount_parameters_are_checked_at_profile_load(params: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        MountDisks.check_parameters(MountDisksParameters(**params))  # type: ignore[arg-type]
    assert str(info.value).startswith(message)
