"""Doctor: pure checks over facts, and the real command on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.facts.builders import fabric_manager, inventory
from workload.doctor import (
    DoctorFacts,
    check_container_toolkit,
    check_disk_space,
    check_driver_loaded,
    check_fabric_manager,
    check_nvidia_runtime,
    check_reboot,
    run_checks,
)
from workload.facts.docker import DockerInfo
from workload.facts.nvidia import GpuInventory
from workload.facts.packages import AptPolicy
from workload.facts.system import FreeSpace, RebootPending

FM = "nvidia-fabricmanager-550"
POLICIES = {
    FM: AptPolicy(
        FM, "550.144.03-1", "550.144.03-1", ("550.144.03-1", "550.127.05-1"), ("550.144.03-1", "550.127.05-1")
    )
}
DOCKER_OK = DockerInfo(installed=True, server_version="27.3.1", runtimes=("nvidia", "runc"))


def healthy(**kw: object) -> DoctorFacts:
    base: dict[str, object] = {
        "gpus": inventory(loaded="550.127.05"),
        "fabric_manager": fabric_manager("550.127.05", active=True, enabled=True),
        "fm_policies": POLICIES,
        "docker": DOCKER_OK,
        "reboot": RebootPending(False),
        "scratch": FreeSpace("/mnt/scratch", "/mnt", 2_000 * 10**9),
        "scratch_path": "/mnt/scratch",
        "ctk_version": "1.17.3",
    }
    base.update(kw)
    return DoctorFacts(**base)  # type: ignore[arg-type]


def test_healthy_nvswitch_host_passes_everything() -> None:
    checks = run_checks(healthy())
    assert [(c.name, c.status) for c in checks] == [
        ("GPU visible", "pass"),
        ("driver loaded", "pass"),
        ("fabric manager", "pass"),
        ("Docker works", "pass"),
        ("nvidia runtime", "pass"),
        ("container toolkit", "pass"),
        ("scratch space", "pass"),
        ("no reboot pending", "pass"),
    ]
    assert checks[0].detail == "8x NVIDIA A100-SXM4-40GB (40960 MiB), driver 550.127.05"


def test_mismatched_fabric_manager_fails_with_the_exact_downgrade() -> None:
    check = check_fabric_manager(inventory(loaded="550.127.05"), fabric_manager("550.144.03", active=False), POLICIES)
    assert check.status == "fail"
    assert check.detail == "fabric manager 550.144.03 does not match driver 550.127.05: it refuses to start"
    assert f"sudo apt-get install --allow-downgrades {FM}=550.127.05-1" in check.fix
    assert f"sudo apt-mark hold {FM}" in check.fix


def test_fabric_manager_skipped_without_nvswitch_and_failed_when_stopped() -> None:
    assert check_fabric_manager(inventory(loaded="550.127.05", nvswitches=0), fabric_manager(None), {}).status == "skip"
    stopped = check_fabric_manager(inventory(loaded="550.127.05"), fabric_manager("550.127.05", active=False), {})
    assert stopped.status == "fail" and "service is inactive" in stopped.detail


@pytest.mark.parametrize(
    ("status", "fix_part"),
    [("no-driver", "reboot"), ("mismatch", "sudo reboot"), ("not-installed", "NvidiaCudaInstallation")],
)
def test_driver_failures_each_have_a_fix(status: str, fix_part: str) -> None:
    gpus = GpuInventory(status=status, pci_gpus=8, message="m", library_version="550.144")  # type: ignore[arg-type]
    check = check_driver_loaded(gpus)
    assert check.status == "fail" and fix_part in check.fix


def test_runtime_disk_and_reboot_checks() -> None:
    no_runtime = check_nvidia_runtime(DockerInfo(installed=True, server_version="27.3.1", runtimes=("runc",)))
    assert no_runtime.status == "fail" and "nvidia-ctk runtime configure --runtime=docker" in no_runtime.fix
    assert check_nvidia_runtime(DockerInfo(installed=True, error="down")).status == "skip"
    small = check_disk_space(FreeSpace("/mnt", "/", 50 * 10**9), "/mnt", 500)
    assert small.status == "fail" and small.detail == "50 GB free on / (for /mnt); need 500 GB"
    assert check_disk_space(None, None, 500).status == "skip"
    recorded = check_disk_space(
        FreeSpace("/mnt/a/scratch", "/mnt/a", 900 * 10**9), "/mnt/a/scratch", 500, source="MountDisks"
    )
    assert recorded.detail == "900 GB free on /mnt/a (for /mnt/a/scratch, recorded by MountDisks); need 500 GB"
    pending = check_reboot(RebootPending(True, ("nvidia-dkms-550-server",)))
    assert pending.status == "fail" and "nvidia-dkms-550-server" in pending.detail and pending.fix == "sudo reboot"


def test_container_toolkit_check_names_nvidia_ctk() -> None:
    assert check_container_toolkit("1.17.3", DOCKER_OK) == run_checks(healthy())[5]
    gone = check_container_toolkit(None, DOCKER_OK)
    assert gone.status == "fail" and "--reinstall nvidia-container-toolkit-base" in gone.fix
    never = check_container_toolkit(None, DockerInfo(installed=True, server_version="27.3.1", runtimes=("runc",)))
    assert never.fix == "run the NvidiaContainerToolkitInstallation step"


def test_doctor_checks_the_scratch_path_mountdisks_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --scratch, the scratch row uses MLPERF_SCRATCH_PATH from the host state MountDisks wrote."""
    from workload.cli import invoke
    from workload.doctor import read_doctor_facts
    from workload.hosts.local import LocalHost

    scratch = tmp_path / "mnt_nvme1n1" / "scratch"
    scratch.mkdir(parents=True)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"MountDisks": {"scratch_path": str(scratch), "scratch_volume": "/dev/nvme1n1"}}))
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(state))
    row = next(c for c in run_checks(read_doctor_facts(LocalHost()), min_free_gb=0.001) if c.name == "scratch space")
    assert row.status == "pass" and f"(for {scratch}, recorded by MountDisks)" in row.detail
    invoke(["doctor", "--min-free-gb", "0.001"])
    line = next(line for line in capsys.readouterr().out.splitlines() if "scratch space" in line)
    assert "pass" in line
    # Nothing recorded and no --scratch: skipped, saying so.
    state.write_text("{}")
    row = next(c for c in run_checks(read_doctor_facts(LocalHost())) if c.name == "scratch space")
    assert row.status == "skip" and row.detail.endswith("and none recorded by MountDisks")
    # --scratch wins over the recorded path.
    state.write_text(json.dumps({"MountDisks": {"scratch_path": "/nonexistent/scratch"}}))
    row = next(c for c in run_checks(read_doctor_facts(LocalHost(), scratch_path="/tmp")) if c.name == "scratch space")
    assert "(for /tmp)" in row.detail


def test_doctor_command_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    """The real command on the CI machine (no GPU): exit 4, the GPU row fails, the scratch row passes."""
    from workload.cli import invoke

    code = invoke(["doctor", "--scratch", "/tmp", "--min-free-gb", "0.001"])
    out = capsys.readouterr().out
    assert code == 4
    assert "GPU visible" in out and "FAIL" in out and "scratch space" in out
    assert "check(s) failed" in out


def test_doctor_exits_3_when_the_only_failure_is_an_unreachable_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the README's exit codes say (and as `run` does): 3 when a host cannot be reached, 4 when a
    reached host fails a check. Port 1 of 127.0.0.1 refuses for real; one connect attempt, not eight."""
    import functools
    import subprocess

    import workload.hosts
    from workload.cli import invoke
    from workload.hosts.options import ConnectOptions

    monkeypatch.setattr(workload.hosts, "ConnectOptions", functools.partial(ConnectOptions, connect_attempts=1))
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60)
    code = invoke(["doctor", "--host", "ssh://nobody@127.0.0.1:1", "-i", str(key)])
    out = capsys.readouterr().out
    assert code == 3 and "reach the host" in out and "connection refused" in out
    # the unreachable host beside this machine, which fails its GPU check: a failed check wins
    code = invoke(["doctor", "--host", "local://", "--host", "ssh://nobody@127.0.0.1:1", "-i", str(key)])
    assert code == 4 and "GPU visible" in capsys.readouterr().out
