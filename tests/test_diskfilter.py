"""DiskFilter grammar, VirtualClient semantics, and the property: the OS disk is never picked."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workload.facts.disks import DiskFacts, Mount, Probe, build_facts, parse_lsblk
from workload.installers.diskfilter import DiskFilter, parse_size
from workload.installers.disks import (
    FormatDisksParameters,
    MountDisksParameters,
    MountFacts,
    Owner,
    PlanRefused,
    plan_format,
    plan_mount,
)

GIB = 1024**3
TIB = 1024**4


def disk(
    name: str,
    size: int,
    *,
    mount: str | None = None,
    children: list[dict[str, Any]] | None = None,
    dtype: str = "disk",
    tran: str | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "path": f"/dev/{name}",
        "size": size,
        "type": dtype,
        "mountpoints": [mount],
        "tran": tran,
        "children": children or [],
    }


def part(name: str, size: int, *, fstype: str | None = "ext4", mount: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "path": f"/dev/{name}",
        "size": size,
        "type": "part",
        "fstype": fstype,
        "uuid": f"uuid-{name}",
        "mountpoints": [mount],
    }


def facts_of(*devices: dict[str, Any]) -> DiskFacts:
    return build_facts(parse_lsblk(json.dumps({"blockdevices": list(devices)})))


@pytest.fixture
def vm() -> DiskFacts:
    """An OS disk (the biggest), two 2 TiB NVMe, one 500 GiB disk, and a loop device."""
    return facts_of(
        disk("sda", 4 * TIB, children=[part("sda1", 4 * TIB - GIB, mount="/")]),
        disk("nvme0n1", 2 * TIB, tran="nvme"),
        disk("nvme1n1", 2 * TIB, tran="nvme"),
        disk("sdb", 500 * GIB),
        disk("loop3", 64 * 1024**2, dtype="loop"),
    )


def names(disks: list[Any]) -> list[str]:
    return [d.name for d in disks]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SizeGreaterThan:1000gb&OSDisk:false", ["nvme0n1", "nvme1n1"]),
        ("sizegreaterthan:2tb", ["nvme0n1", "nvme1n1"]),  # >= like VirtualClient
        ("SizeGreaterThan:2.5tb", []),
        ("BiggestSize", ["nvme0n1", "nvme1n1"]),  # biggest NON-OS disk: the OS disk is cut first
        ("SmallestSize", ["sdb"]),
        ("SizeLessThan:500gb", ["sdb"]),  # <=
        ("SizeEqualTo:505gb", ["sdb"]),  # within 1 %
        ("SizeEqualTo:510gb", []),
        ("DiskPath:/dev/nvme1n1,/dev/sdb", ["nvme1n1", "sdb"]),
        ("DiskPath:/dev/sda", []),  # naming the OS disk does not select it
        ("DiskPath:/dev/loop3", ["loop3"]),  # loop devices only when named
        ("None", ["nvme0n1", "nvme1n1", "sdb"]),
        ("", ["nvme0n1", "nvme1n1", "sdb"]),
        ("OSDISK:FALSE&SizeGreaterThan:1000GB&BiggestSize", ["nvme0n1", "nvme1n1"]),
    ],
)
def test_selection_for_mount(vm: DiskFacts, text: str, expected: list[str]) -> None:
    assert names(DiskFilter.parse(text).select(vm.disks, purpose="mount")) == expected


def test_osdisk_true_selects_only_the_os_disk_for_mount_and_nothing_for_format(vm: DiskFacts) -> None:
    flt = DiskFilter.parse("OSDisk:true")
    assert names(flt.select(vm.disks, purpose="mount")) == ["sda"]
    assert flt.select(vm.disks, purpose="format") == []
    assert names(DiskFilter.parse("OSDisk").select(vm.disks, purpose="mount")) == ["sda"]  # bare = true (VC)


def test_terms_apply_in_written_order(vm: DiskFacts) -> None:
    assert names(DiskFilter.parse("SizeLessThan:1tb&BiggestSize").select(vm.disks, purpose="mount")) == ["sdb"]
    assert names(DiskFilter.parse("BiggestSize&SizeLessThan:1tb").select(vm.disks, purpose="mount")) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1000gb", 1000 * GIB),
        ("1.5TB", int(1.5 * TIB)),
        ("512", 512),
        ("64 mb", 64 * 1024**2),
        ("2kb", 2048),
        ("10b", 10),
        (".5gb", GIB // 2),
    ],
)
def test_sizes_are_1024_based(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SizeGreaterThen:1tb", "DiskFilter: unknown term 'SizeGreaterThen' (known terms: BiggestSize,"),
        ("SizeGreaterThan:10xb", "DiskFilter: SizeGreaterThan: '10xb' is not a size"),
        ("SizeGreaterThan:-1gb", "DiskFilter: SizeGreaterThan: '-1gb' is not a size"),
        ("SizeGreaterThan", "DiskFilter: SizeGreaterThan needs a size"),
        ("BiggestSize&SmallestSize", "DiskFilter: BiggestSize and SmallestSize conflict"),
        ("BiggestSize:yes", "DiskFilter: BiggestSize takes no value"),
        ("OSDisk:maybe", "DiskFilter: OSDisk takes true or false, got 'maybe'"),
        ("OSDisk:true&OSDisk:false", "DiskFilter: OSDisk is given twice"),
        ("SizeGreaterThan:2tb&SizeLessThan:1tb", "DiskFilter: SizeGreaterThan:2tb and SizeLessThan:1tb conflict"),
        ("SizeEqualTo:5tb&SizeLessThan:1tb", "DiskFilter: SizeEqualTo:5tb conflicts with the other size terms"),
        ("None&BiggestSize", "DiskFilter: None means 'no filtering' and cannot be combined"),
        ("DiskPath:", "DiskFilter: DiskPath needs one or more device paths"),
        ("DiskPath:sdc", "DiskFilter: DiskPath 'sdc' is not a device path"),
        ("AccessPath:/mnt", "DiskFilter: unknown term 'AccessPath'"),
    ],
)
def test_bad_filters_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        DiskFilter.parse(text)
    assert str(info.value).startswith(message)


# -- property: no generated machine and no generated filter ever picks the OS disk ----------------
OS_POINTS = ["/", "/boot", "/boot/efi", "[SWAP]"]
OTHER_POINTS = [None, None, None, "/data", "/mnt", "/srv/x"]
FSTYPES = [None, None, "ext4", "xfs", "swap", "vfat", "LVM2_member", "linux_raid_member"]


@st.composite
def machines(draw: st.DrawFn) -> tuple[DiskFacts, set[str]]:
    """A random lsblk tree; one disk (or none) holds the OS, directly, on a partition, or via LVM/md."""
    count = draw(st.integers(1, 6))
    kinds = ["sd", "nvme", "vd", "loop"]
    devices: list[dict[str, Any]] = []
    os_index = draw(st.one_of(st.none(), st.integers(0, count - 1)))
    how = draw(st.sampled_from(["disk", "part", "lvm", "md"]))
    sizes = st.integers(0, 8 * TIB)
    for i in range(count):
        kind = draw(st.sampled_from(kinds))
        name = f"nvme{i}n1" if kind == "nvme" else f"loop{i}" if kind == "loop" else f"{kind}{chr(97 + i)}"
        size = draw(sizes)
        children = []
        for j in range(draw(st.integers(0, 3))):
            pname = f"{name}p{j + 1}" if name[-1].isdigit() else f"{name}{j + 1}"
            children.append(
                part(
                    pname, draw(sizes), fstype=draw(st.sampled_from(FSTYPES)), mount=draw(st.sampled_from(OTHER_POINTS))
                )
            )
        whole_fs = draw(st.sampled_from([None, None, "ext4"]))
        whole_mount = draw(st.sampled_from(OTHER_POINTS)) if whole_fs else None
        if i == os_index:
            point = draw(st.sampled_from(OS_POINTS))
            if how == "disk":
                whole_fs, whole_mount, children = "ext4", point, []
            elif how == "part" or not children:
                children.append(part(f"{name}x9", draw(sizes), fstype="ext4", mount=point))
            else:
                holder = {
                    "name": f"vg-root{i}" if how == "lvm" else f"md{i}",
                    "path": f"/dev/mapper/vg-root{i}",
                    "size": draw(sizes),
                    "type": "lvm" if how == "lvm" else "raid0",
                    "fstype": "ext4",
                    "mountpoints": [point],
                }
                children[0]["children"] = [holder]
        dev = disk(
            name,
            size,
            mount=whole_mount,
            children=children,
            dtype="loop" if kind == "loop" else "disk",
            tran="nvme" if kind == "nvme" else None,
        )
        dev["fstype"] = whole_fs
        devices.append(dev)
    text = json.dumps({"blockdevices": devices})
    probes = {f"/dev/{d['name']}": Probe(pttype="gpt") for d in devices if d["children"] and draw(st.booleans())}
    mounts = [Mount("/", "/dev/vda-elsewhere", "ext4", None, None)] if os_index is None else []
    facts = build_facts(parse_lsblk(text), probes=probes, mounts=mounts)
    os_disks = {d.path for d in facts.disks if d.is_os_disk}
    if os_index is not None:
        assert f"/dev/{devices[os_index]['name']}" in os_disks or devices[os_index]["size"] == 0
    return facts, os_disks


TERM_TEXTS = st.sampled_from(
    [
        "BiggestSize",
        "SmallestSize",
        "SizeGreaterThan:{s}",
        "SizeLessThan:{s}",
        "SizeEqualTo:{s}",
        "DiskPath:{p}",
        "OSDisk:false",
        "OSDisk:true",
        "OSDisk",
        "None",
    ]
)


@st.composite
def filters(draw: st.DrawFn, facts: DiskFacts) -> str:
    terms = []
    for template in draw(st.lists(TERM_TEXTS, max_size=4)):
        size = draw(st.sampled_from(["1gb", "500gb", "1000gb", "2tb", "0.5tb", "8tb", "0"]))
        paths = [d.path for d in facts.disks] + ["/dev/sdz"]
        chosen = draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3))
        term = template.format(s=size, p=",".join(chosen))
        terms.append(term.upper() if draw(st.booleans()) else term)
    return "&".join(terms)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_os_disk_never_formatted_nor_chosen_for_scratch(data: st.DataObject) -> None:
    facts, os_disks = data.draw(machines())
    text = data.draw(filters(facts))
    try:
        flt = DiskFilter.parse(text)
    except ValueError as exc:
        assert str(exc).startswith("DiskFilter: ")
        return
    os_nodes = {p for d in facts.disks if d.is_os_disk for p in d.node_paths()}
    assert not {d.path for d in flt.select(facts.disks, purpose="format")} & os_disks
    if flt.os_disk is not True:
        assert not {d.path for d in flt.select(facts.disks, purpose="mount")} & os_disks

    # The planners, end to end: no formatting command names any node of the OS disk...
    if flt.os_disk is not True:
        params = FormatDisksParameters(DiskFilter=text)
        try:
            plan = plan_format(params, facts)
        except PlanRefused:
            plan = None
        if plan is not None:
            touched = {str(a) for c in plan.commands for a in c.argv if str(a).startswith("/dev/")}
            assert not touched & os_nodes, (text, touched)
            # ...and every disk it formats was blank.
            for change_disk in touched:
                d = facts.disk(change_disk)
                if d is not None:
                    assert not d.device.children and not d.signatures and not d.device.mountpoints
        # ...and MountDisks never puts the scratch space on the OS disk.
        mount_params = MountDisksParameters(DiskFilter=text)
        mount_facts = MountFacts(disks=facts, fstab_text="", owner=Owner("u", 1000, 1000))
        try:
            result = plan_mount(mount_params, mount_facts)
        except PlanRefused:
            return
        assert not set(result.scratch_volume.disks) & os_disks
