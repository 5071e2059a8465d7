"""Disk-fact parsers on recorded real outputs (tests/fixtures/disks/) and hand-written lsblk trees."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workload.errors import FactError
from workload.facts.disks import (
    DiskFacts,
    build_facts,
    parse_blkid_export,
    parse_findmnt,
    parse_fstab,
    parse_lsblk,
    parse_swaps,
    parse_wipefs_json,
)

FIXTURES = Path(__file__).parent / "fixtures" / "disks"


def load_facts(name: str) -> DiskFacts:
    """DiskFacts from a fixture folder, the way read_disk_facts assembles them."""
    folder = FIXTURES / name
    devices = parse_lsblk((folder / "lsblk.json").read_text())
    probes, errors = {}, {}
    if (folder / "blkid.txt").exists():
        probes, errors = parse_blkid_export((folder / "blkid.txt").read_text(), (folder / "blkid.stderr").read_text())
    signatures = {
        f"/dev/{p.stem.removeprefix('wipefs-')}": parse_wipefs_json(p.read_text()) for p in folder.glob("wipefs-*.json")
    }
    return build_facts(
        devices,
        probes=probes,
        probe_errors=errors,
        disk_signatures=signatures,
        mounts=parse_findmnt((folder / "findmnt.json").read_text()) if (folder / "findmnt.json").exists() else (),
        swaps=parse_swaps((folder / "swaps.txt").read_text()) if (folder / "swaps.txt").exists() else (),
    )


def test_this_machine_root_disk_is_the_os_disk_and_zram_is_no_disk() -> None:
    facts = load_facts("thismachine")
    assert [d.name for d in facts.disks] == ["vda"]  # zram0 (size 0) is not a data disk
    (vda,) = facts.disks
    assert vda.is_os_disk and "vda holds /" in vda.os_reasons
    assert facts.os_disk_known
    assert facts.root_source == "/dev/vda"


def test_recorded_loops_fill_filesystems_from_blkid_where_lsblk_has_none() -> None:
    raw = parse_lsblk((FIXTURES / "loops" / "lsblk.json").read_text())
    assert all(node.fstype is None for dev in raw for node in dev.walk())  # no udev here: lsblk knows nothing
    facts = load_facts("loops")
    by_name = {d.name: d for d in facts.disks}
    assert set(by_name) == {"vda", "loop0", "loop1", "loop2", "loop3"}
    # loop0 is blank for blkid and wipefs, but the kernel still lists a stale partition from an
    # earlier use of the device (attached without -P): the facts keep it, so it is never "blank".
    assert by_name["loop0"].signatures == ()
    assert [c.name for c in by_name["loop0"].device.children] == ["loop0p1"]
    assert by_name["loop1"].device.fstype == "ext4" and by_name["loop1"].device.label == "data"
    assert by_name["loop1"].signatures == ("ext4",)
    assert by_name["loop2"].signatures[0] == "gpt" and "PMBR" in by_name["loop2"].signatures
    (part,) = by_name["loop2"].device.children
    assert (part.fstype, part.label, part.mountpoints) == ("ext4", "workload-scratch", ("/tmp/wl-rec-mnt",))
    assert by_name["loop3"].device.children[0].fstype is None
    assert by_name["vda"].probe_error == "Operation not permitted"
    assert by_name["vda"].is_os_disk
    assert not any(by_name[n].is_os_disk for n in ("loop0", "loop1", "loop2", "loop3"))


def test_recorded_loops_volumes_and_free_space() -> None:
    facts = load_facts("loops")
    volumes = {v.name: v for v in facts.volumes()}
    assert set(volumes) == {"loop1", "loop2p1"}  # vda's ext4 is invisible to blkid here; loop3p1 has no fs
    mount = facts.mount_at("/tmp/wl-rec-mnt")
    assert mount is not None and mount.source == "/dev/loop2p1" and mount.avail and mount.avail > 0


def test_azure_vm_root_efi_and_resource_disk() -> None:
    facts = load_facts("azure_nd")
    by_name = {d.name: d for d in facts.disks}
    assert "sr0" not in by_name  # a DVD is never a disk
    assert set(by_name["sda"].os_reasons) == {"sda1 holds /", "sda15 holds /boot/efi"}
    assert not by_name["sdb"].is_os_disk  # the resource disk is mounted at /mnt but is not the OS disk
    assert [d.name for d in facts.disks if d.is_nvme] == ["nvme0n1", "nvme1n1", "nvme2n1"]


def test_old_lsblk_format_root_on_lvm_on_md_marks_both_members() -> None:
    facts = load_facts("lvm_md_old")
    by_name = {d.name: d for d in facts.disks}
    for name in ("sda", "sdb"):
        assert by_name[name].is_os_disk, name
        assert "vg0-root holds /" in by_name[name].os_reasons
        assert "vg0-swap is active swap" in by_name[name].os_reasons
    assert by_name["sda"].size == 480103981056 and by_name["sda"].device.rotational is False
    assert not by_name["nvme0n1"].is_os_disk
    # The root LV is on both disks; it is listed once and never offered for the NVMe disk alone.
    assert [v.name for v in facts.volumes()] == ["vg0-root"]
    assert facts.volumes([by_name["nvme0n1"]]) == ()


def test_findmnt_root_source_marks_the_os_disk_when_lsblk_shows_no_mountpoint() -> None:
    devices = parse_lsblk('{"blockdevices":[{"name":"vdb","path":"/dev/vdb","size":100,"type":"disk"}]}')
    mounts = parse_findmnt('{"filesystems":[{"target":"/","source":"/dev/vdb","fstype":"ext4"}]}')
    facts = build_facts(devices, mounts=mounts)
    assert facts.disks[0].is_os_disk and facts.os_disk_known


def test_swap_from_proc_swaps_marks_disk() -> None:
    devices = parse_lsblk(
        '{"blockdevices":[{"name":"sdc","path":"/dev/sdc","size":100,"type":"disk",'
        '"children":[{"name":"sdc1","path":"/dev/sdc1","size":90,"type":"part"}]}]}'
    )
    swaps = parse_swaps("Filename Type Size Used Priority\n/dev/sdc1 partition 1 0 -2\n/swap.img file 1 0 -3\n")
    assert swaps == ("/dev/sdc1", "/swap.img")
    facts = build_facts(devices, swaps=swaps)
    assert facts.disks[0].os_reasons == ("sdc1 is active swap",)


def test_overlay_root_leaves_os_disk_unknown_with_a_note() -> None:
    devices = parse_lsblk('{"blockdevices":[{"name":"sdc","path":"/dev/sdc","size":100,"type":"disk"}]}')
    mounts = parse_findmnt('{"filesystems":[{"target":"/","source":"overlay","fstype":"overlay"}]}')
    facts = build_facts(devices, mounts=mounts)
    assert not facts.os_disk_known
    assert facts.notes == ("/ is mounted from 'overlay', which is not a disk seen by lsblk",)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "lsblk: output is not JSON"),
        ('{"devices": []}', "lsblk: output has no 'blockdevices' list"),
        ('{"blockdevices":[{"path":"/dev/x"}]}', "lsblk: blockdevices[0] has no name"),
        ('{"blockdevices":[{"name":"x","size":"big"}]}', "lsblk: blockdevices[0] (x) has a size that is not a number"),
    ],
)
def test_bad_lsblk_output_is_one_clear_error(text: str, problem: str) -> None:
    with pytest.raises(FactError, match=re.escape(problem)):
        parse_lsblk(text)


def test_fstab_parser_unescapes_and_skips_comments() -> None:
    text = "# comment\n\nUUID=abc /mnt/my\\040disk ext4 defaults,nofail 0 2\nbroken\n/dev/sdb1 /data/ xfs\n"
    entries = parse_fstab(text)
    assert [(e.spec, e.target, e.fstype, e.line_no) for e in entries] == [
        ("UUID=abc", "/mnt/my disk", "ext4", 3),
        ("/dev/sdb1", "/data", "xfs", 5),
    ]


def test_findmnt_bind_mount_source_is_the_device() -> None:
    mounts = parse_findmnt(
        '{"filesystems":[{"target":"/etc/hosts","source":"/dev/vda1[/var/lib/docker/x/hosts]","fstype":"ext4",'
        '"size":"10","avail":null}]}'
    )
    assert mounts[0].source == "/dev/vda1" and mounts[0].size == 10 and mounts[0].avail is None
