"""FormatDisks + MountDisks on REAL loop devices made by the tests, through plan/apply/verify.

Every filter names the test's own loop device (DiskPath), the fstab is a temporary file and the
mount points are under tmp_path, so this machine's disks and /etc/fstab are never touched.
Every loop device is unmounted and detached at the end, whatever happened.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.steptypes import step_context
from workload.errors import StepError
from workload.hosts.local import LocalHost
from workload.installers.disks import FormatDisks, FormatDisksParameters, MountDisks, MountDisksParameters
from workload.steps import HostState, Step, StepContext, StepPlan

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices need root"),
]


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def make_loop(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Factory of fresh 64 MiB loop devices; all are unmounted and detached afterwards."""
    made: list[str] = []

    def make() -> str:
        image = tmp_path / f"disk{len(made)}.img"
        sh("truncate", "-s", "64M", str(image))
        # -P rescans partitions: a reused loop number must not show a stale partition.
        try:
            dev = sh("losetup", "-f", "--show", "-P", str(image))
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot attach a loop device here: {exc.stderr.strip()}")
        made.append(dev)
        return dev

    yield make
    for dev in made:
        points = subprocess.run(["lsblk", "-nr", "-o", "MOUNTPOINTS", dev], capture_output=True, text=True).stdout
        for point in points.split():
            subprocess.run(["umount", point], capture_output=True)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
    # A device another process still has open (a blkid of another worker's disk scan) is detached when it
    # closes it: the kernel's lazy detach. So the check waits for that, bounded.
    deadline = time.monotonic() + 15
    while True:
        left = sh("losetup", "-a")
        if not any(str(tmp_path) in line for line in left.splitlines()) or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    assert not any(str(tmp_path) in line for line in left.splitlines()), left


@pytest.fixture
def host() -> LocalHost:
    return LocalHost()


def context(host: LocalHost, tmp_path: Path) -> StepContext:
    return step_context(host, tmp_path)


def run_step(step: Step, ctx: StepContext) -> StepPlan:
    """What the engine does for one step: plan, apply when changed, verify."""
    plan = step.plan(ctx)
    if plan.changed:
        step.apply(ctx, plan)
    step.verify(ctx)
    return plan


def fmt(dev: str) -> FormatDisks:
    return FormatDisks(
        FormatDisksParameters(DiskFilter=f"DiskPath:{dev}"), location="Dependencies[0]", kind="dependency"
    )


def mnt(dev: str, tmp_path: Path, **extra: str) -> MountDisks:
    params = MountDisksParameters(
        DiskFilter=f"DiskPath:{dev}",
        MountLocation=str(tmp_path / "mnt"),
        FstabPath=str(tmp_path / "fstab"),
        Username="nobody",
        **extra,
    )
    return MountDisks(params, location="Dependencies[1]", kind="dependency")


def test_blank_loop_is_formatted_mounted_idempotent_and_survives_a_reboot(
    make_loop: Callable[[], str], host: LocalHost, tmp_path: Path
) -> None:
    dev = make_loop()
    other = make_loop()  # a second blank disk the filter does not name: must stay blank
    ctx = context(host, tmp_path)
    (tmp_path / "fstab").write_text("# test fstab\n")

    plan = run_step(fmt(dev), ctx)
    assert [c.summary.split()[1] for c in plan.changes] == [dev]
    assert sh("blkid", "-p", "-o", "value", "-s", "LABEL", f"{dev}p1") == "workload-scratch"
    assert subprocess.run(["blkid", "-p", other], capture_output=True).returncode == 2  # untouched
    assert run_step(fmt(dev), ctx).noop_reason == f"already formatted: {dev}p1 (ext4, label workload-scratch)"

    mp = tmp_path / "mnt" / f"mnt_{Path(dev).name}p1"
    plan = run_step(mnt(dev, tmp_path), ctx)
    assert plan.changed
    assert sh("findmnt", "-n", "-o", "SOURCE", str(mp)) == f"{dev}p1"
    uuid = sh("blkid", "-p", "-o", "value", "-s", "UUID", f"{dev}p1")
    fstab = (tmp_path / "fstab").read_text()
    assert fstab == f"# test fstab\nUUID={uuid} {mp} ext4 defaults,nofail,x-systemd.device-timeout=10s 0 2\n"
    nobody = (int(sh("id", "-u", "nobody")), int(sh("id", "-g", "nobody")))
    for path in (mp, mp / "scratch"):
        assert (path.stat().st_uid, path.stat().st_gid) == nobody
    assert ctx.exports["MLPERF_SCRATCH_PATH"] == f"{mp}/scratch"
    assert HostState(host, str(tmp_path / "state.json")).get("MountDisks")["scratch_path"] == f"{mp}/scratch"

    again = run_step(mnt(dev, tmp_path), ctx)
    assert not again.changed and again.noop_reason == f"already mounted: {dev}p1 at {mp}"

    # "Reboot": the mount is gone; the next run mounts it back from the fstab, adding no line.
    sh("umount", str(mp))
    plan = run_step(mnt(dev, tmp_path), ctx)
    assert [c.argv[0] for c in plan.commands][:2] == ["mkdir", "mount"]
    assert sh("findmnt", "-n", "-o", "SOURCE", str(mp)) == f"{dev}p1"
    assert (tmp_path / "fstab").read_text() == fstab
    assert (mp / "scratch").is_dir()


def test_loop_with_a_filesystem_is_refused_and_its_file_survives(
    make_loop: Callable[[], str], host: LocalHost, tmp_path: Path
) -> None:
    dev = make_loop()
    sh("mkfs.ext4", "-q", "-L", "precious", dev)
    data = tmp_path / "data"
    data.mkdir()
    sh("mount", dev, str(data))
    (data / "keep.txt").write_text("do not format me\n")
    sh("umount", str(data))
    ctx = context(host, tmp_path)

    plan = run_step(fmt(dev), ctx)
    assert not plan.changed
    assert plan.noop_reason == f"no blank disk matches DiskFilter DiskPath:{dev}"
    assert any(f"left alone: {dev} (64.0 MiB) holds data signatures (ext4)" in n for n in plan.notes)
    sh("mount", dev, str(data))
    assert (data / "keep.txt").read_text() == "do not format me\n"
    sh("umount", str(data))


def test_apply_refuses_when_the_disk_changed_after_planning(
    make_loop: Callable[[], str], host: LocalHost, tmp_path: Path
) -> None:
    dev = make_loop()
    ctx = context(host, tmp_path)
    step = fmt(dev)
    plan = step.plan(ctx)
    assert plan.changed
    sh("mkfs.ext4", "-q", "-L", "arrived-late", dev)  # someone put data there in between
    with pytest.raises(StepError, match="the disks changed since the plan was made; nothing was formatted"):
        step.apply(ctx, plan)
    assert sh("blkid", "-p", "-o", "value", "-s", "LABEL", dev) == "arrived-late"


def test_min_free_space_fails_naming_the_volume(make_loop: Callable[[], str], host: LocalHost, tmp_path: Path) -> None:
    dev = make_loop()
    ctx = context(host, tmp_path)
    run_step(fmt(dev), ctx)
    with pytest.raises(StepError) as info:
        mnt(dev, tmp_path, MinFreeSpace="1tb").plan(ctx)
    assert f"the scratch volume {dev}p1 is only" in str(info.value)
    assert "MinFreeSpace requires 1.0 TiB (1tb)" in str(info.value)


def md_unavailable() -> str | None:
    if not Path("/proc/mdstat").exists():
        return "this kernel has no md (software RAID) driver: /proc/mdstat is missing"
    if subprocess.run(["sh", "-c", "command -v mdadm"], capture_output=True).returncode != 0:
        return "mdadm is not installed (apt-get install mdadm)"
    return None


def test_raid0_of_two_loops_is_built_recorded_formatted_mounted_and_removed(
    make_loop: Callable[[], str], host: LocalHost, tmp_path: Path
) -> None:
    reason = md_unavailable()
    if reason:
        pytest.skip(reason)
    first, second = make_loop(), make_loop()
    name = f"wltest{os.getpid() % 100000}"
    array = f"/dev/md/{name}"
    conf = tmp_path / "mdadm.conf"  # never the machine's own /etc/mdadm/mdadm.conf (nor its initramfs)
    step = FormatDisks(
        FormatDisksParameters(
            DiskFilter=f"DiskPath:{first},{second}", Raid0=True, RaidName=name, MdadmConfPath=str(conf)
        ),
        location="Dependencies[0]",
        kind="dependency",
    )
    ctx = context(host, tmp_path)
    ctx.options = {"raid0_allow_non_nvme": True}
    (tmp_path / "fstab").write_text("")
    try:
        plan = run_step(step, ctx)
        assert plan.changed and f"stripe {first}, {second} into RAID0 {array}" in plan.changes[0].summary
        assert sh("blkid", "-p", "-o", "value", "-s", "LABEL", array) == "workload-scratch"
        brief = sh("mdadm", "--detail", "--brief", array)
        assert conf.read_text() == brief + "\n"  # recorded once, exactly what mdadm says
        again = run_step(step, ctx)
        assert not again.changed and again.noop_reason is not None
        assert again.noop_reason.startswith("RAID0 already formatted:")
        assert conf.read_text() == brief + "\n"

        mounted = run_step(mnt(first, tmp_path), ctx)
        assert mounted.changed
        scratch = ctx.exports["MLPERF_SCRATCH_PATH"]
        source = sh("findmnt", "-n", "-o", "SOURCE", "--target", scratch)
        assert os.path.realpath(source) == os.path.realpath(array)
    finally:
        for point in sh("sh", "-c", f"findmnt -n -o TARGET --source {array} || true").split():
            subprocess.run(["umount", point], capture_output=True)
        subprocess.run(["mdadm", "--stop", array], capture_output=True)
        subprocess.run(["mdadm", "--zero-superblock", first, second], capture_output=True)
    assert not Path(array).exists()
