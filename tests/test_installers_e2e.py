"""The three installers end to end, over SSH, on fresh Debian "VMs" of the test bed (slow).

Real sshd, apt, dpkg, sudo, curl and sha256sum inside the VM; stand-in NVIDIA/Docker packages
with real names and versions from a local apt repository that offers a NEWER fabric manager
(550.144.03) than the driver we pin (550.127.05).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from installers.docker import DockerInstallation
from installers.doctor import read_doctor_facts, run_checks
from installers.nvidia_container_toolkit import NvidiaContainerToolkitInstallation
from installers.nvidia_cuda import NvidiaCudaInstallation
from workload.hosts import ConnectOptions, Host, open_host, parse_host_spec
from workload.steps import HostState, Step, StepContext, StepParameters, StepPlan

pytestmark = pytest.mark.slow

# The test bed has no lspci; this one reads the VM's hardware file like the stand-in nvidia-smi,
# so NVSwitch auto-detection runs the same code path as on a real machine (lspci -n -D -d 10de:).
LSPCI = r"""#!/usr/bin/python3
import json
try:
    hw = json.load(open("/var/lib/standin/hardware.json"))
except (OSError, ValueError):
    hw = {}
for g in hw.get("gpus", []):
    bus = g["bus_id"].lower()[-12:]
    print(f"{bus} 0302: 10de:{g.get('pci_device_id', '0x233010DE')[2:6].lower()} (rev a1)")
if hw.get("nvswitch"):
    for i in range(4):
        print(f"0000:{0x05 + i:02x}:00.0 0680: 10de:22a3 (rev a1)")
"""


def open_vm(vm: Any) -> Host:
    options = ConnectOptions(
        key_filename=str(vm.key_path),
        known_hosts=str(vm.known_hosts_path),
        use_agent=False,
        look_for_keys=False,
        use_system_known_hosts=False,
    )
    return open_host(parse_host_spec(vm.host_spec), options)


def make_step(cls: type[Step], index: int, **params: Any) -> Step:
    parameters: StepParameters = cls.Parameters(**params)
    cls.check_parameters(parameters)
    return cls(parameters, location=f"Dependencies[{index}]", kind="dependency")


class Runner:
    """Drives steps like the engine does: plan -> apply -> (reboot, re-plan) -> verify."""

    def __init__(self, vm: Any, tmp_path: Path) -> None:
        self.vm = vm
        self.tmp_path = tmp_path
        self.host = open_vm(vm)

    def context(self, step: Step) -> StepContext:
        return StepContext(
            host=self.host,
            host_dir=self.tmp_path,
            log_path=self.tmp_path / f"{step.type_name}.log",
            state=HostState(self.host),
        )

    def run(self, step: Step) -> tuple[StepPlan, StepPlan | None]:
        ctx = self.context(step)
        plan = step.plan(ctx)
        after: StepPlan | None = None
        if plan.changed:
            step.apply(ctx, plan)
        if plan.reboot_required:
            self.host.close()
            self.vm.reboot()
            self.host = open_vm(self.vm)
            ctx = self.context(step)
            after = step.plan(ctx)
            assert not after.reboot_required, after
            if after.changed:
                step.apply(ctx, after)
        step.verify(ctx)
        return plan, after

    def sh(self, *argv: str) -> str:
        return self.vm.check(list(argv))


def install_lspci(vm: Any) -> None:
    vm.write_file("/usr/bin/lspci", LSPCI, mode=0o755)


def test_three_installers_on_a_fresh_vm_then_rerun_mismatch_and_doctor(
    fresh_vm: Callable[..., Any], cuda_runfile_server: Any, tmp_path: Path
) -> None:
    vm = fresh_vm(os_release="ubuntu-22.04", user="azureuser", gpus=8, nvswitch=True)
    install_lspci(vm)
    runner = Runner(vm, tmp_path)
    cuda = make_step(
        NvidiaCudaInstallation,
        3,
        LinuxCudaVersion="12.4",
        LinuxDriverVersion="550",
        LinuxDriverPackageVersion="550.127.05",
        LinuxLocalRunFile=cuda_runfile_server.url,
        RunFileSha256=cuda_runfile_server.sha256,
    )
    steps = [cuda, make_step(DockerInstallation, 4), make_step(NvidiaContainerToolkitInstallation, 5)]

    # The download is cut at 1 MiB; the retry resumes it (Range request) and the checksum passes.
    cuda_runfile_server.cut_next_download(1024 * 1024)
    started = time.monotonic()
    first = [runner.run(step) for step in steps]
    first_s = time.monotonic() - started
    cuda_plan, cuda_after = first[0]
    assert cuda_plan.changed and cuda_plan.reboot_required
    assert cuda_after is not None and not cuda_after.changed, "after the reboot the re-plan must be a no-op"
    ranges = [r.range for r in cuda_runfile_server.server.requests if r.method == "GET"]
    assert any(r and r.startswith("bytes=1048576-") for r in ranges), ranges

    # Exactly the pinned version, although the repository offers 550.144.03; both held.
    assert vm.loaded_driver() == "550.127.05"
    assert runner.sh("nv-fabricmanager", "--version").strip() == "Fabric Manager version is : 550.127.05"
    holds = set(runner.sh("apt-mark", "showhold").split())
    assert {"nvidia-driver-550-server", "nvidia-dkms-550-server", "nvidia-fabricmanager-550"} <= holds
    assert runner.sh("systemctl", "is-active", "nvidia-fabricmanager").strip() == "active"
    bashrc = runner.sh("cat", "/home/azureuser/.bashrc")
    assert bashrc.count("# >>> workload: CUDA 12.4 >>>") == 1
    assert runner.sh("stat", "-c", "%U", "/home/azureuser/.bashrc").strip() == "azureuser"
    assert "docker" in runner.sh("id", "-nG", "azureuser").split()
    assert "nvidia" in runner.sh("cat", "/etc/docker/daemon.json")

    # A second run on the provisioned host plans no change and is much faster.
    started = time.monotonic()
    second = [runner.run(step) for step in steps]
    second_s = time.monotonic() - started
    for plan, after in second:
        assert not plan.changed and not plan.reboot_required and after is None, plan
        assert plan.noop_reason
    assert second_s < first_s * 0.5, (first_s, second_s)

    # An upgrade splits the pair (fabric manager 550.144.03 vs driver 550.127.05): doctor names it...
    runner.sh("apt-mark", "unhold", "nvidia-fabricmanager-550", "cuda-drivers-fabricmanager-550")
    runner.sh(
        "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
        "nvidia-fabricmanager-550=550.144.03-1", "cuda-drivers-fabricmanager-550=550.144.03-1",
    )  # fmt: skip
    vm.exec(["systemctl", "restart", "nvidia-fabricmanager"])  # fails, like the real one
    checks = {c.name: c for c in run_checks(read_doctor_facts(runner.host))}
    fm = checks["fabric manager"]
    assert fm.status == "fail"
    assert fm.detail == "fabric manager 550.144.03 does not match driver 550.127.05: it refuses to start"
    assert "cuda-drivers-fabricmanager-550=550.127.05-1 nvidia-fabricmanager-550=550.127.05-1" in fm.fix
    # ...and the installer plans exactly the downgrade, then fixes it without a reboot.
    plan, after = runner.run(cuda)
    assert after is None and not plan.reboot_required
    commands = " ".join(c.display() for c in plan.commands)
    assert (
        "--allow-downgrades cuda-drivers-fabricmanager-550=550.127.05-1 nvidia-fabricmanager-550=550.127.05-1"
        in commands
    )
    assert "apt-mark unhold" not in commands or "apt-mark hold" in commands
    assert runner.sh("nv-fabricmanager", "--version").strip().endswith("550.127.05")
    checks = {c.name: c for c in run_checks(read_doctor_facts(runner.host), min_free_gb=0)}
    assert checks["fabric manager"].status == "pass", checks["fabric manager"]
    assert checks["nvidia runtime"].status == "pass" and checks["driver loaded"].status == "pass"
    print(f"\nfirst run {first_s:.1f}s, second run {second_s:.1f}s, ratio {second_s / first_s:.1%}")


def test_a_held_dpkg_lock_delays_the_step_then_it_succeeds(fresh_vm: Callable[..., Any], tmp_path: Path) -> None:
    vm = fresh_vm(gpus=0, nvswitch=False)  # Debian 12, root
    runner = Runner(vm, tmp_path)
    pid = vm.hold_dpkg_lock(6)
    step = make_step(DockerInstallation, 1, DpkgLockTimeout=120)
    started = time.monotonic()
    plan, _ = runner.run(step)
    waited = time.monotonic() - started
    assert plan.changed and waited >= 4
    log = (tmp_path / "DockerInstallation.log").read_text()
    assert f"waiting for the dpkg lock: unattended-upgr (pid {pid}) holds /var/lib/dpkg/lock" in log
    assert "the dpkg lock is free after" in log
    assert runner.sh("docker", "info", "--format", "{{.ServerVersion}}").strip()


def test_lock_held_past_the_bound_fails_naming_the_holder(fresh_vm: Callable[..., Any], tmp_path: Path) -> None:
    from workload.errors import CommandFailed

    vm = fresh_vm(gpus=0, nvswitch=False)
    runner = Runner(vm, tmp_path)
    pid = vm.hold_dpkg_lock(60)
    step = make_step(DockerInstallation, 1, DpkgLockTimeout=3)
    ctx = runner.context(step)
    plan = step.plan(ctx)
    with pytest.raises(CommandFailed) as info:
        step.apply(ctx, plan)
    assert f"the dpkg lock is still held after 3s: unattended-upgr (pid {pid})" in str(info.value)
    code, out = vm.exec(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "docker-ce"])
    assert code != 0 or out.strip() in ("", "un"), "nothing may be installed when the lock never came free"


def test_unsupported_os_is_refused_at_plan_time(fresh_vm: Callable[..., Any], tmp_path: Path) -> None:
    from workload.errors import StepError

    vm = fresh_vm(gpus=0, nvswitch=False)
    vm.write_file("/etc/os-release", 'ID=rocky\nVERSION_ID="9.4"\nPRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"\n')
    runner = Runner(vm, tmp_path)
    step = make_step(DockerInstallation, 1)
    with pytest.raises(StepError) as info:
        step.plan(runner.context(step))
    assert "Dependencies[1] DockerInstallation: Rocky Linux 9.4 (Blue Onyx) is not supported" in str(info.value)


def test_workload_run_through_the_engine_reboots_and_resumes(
    fresh_vm: Callable[..., Any], cuda_runfile_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`workload run` with a profile of the three installers: the engine reboots the VM after the
    driver, re-plans (no-op), verifies, goes on; `workload plan` afterwards shows no change."""
    import json

    from workload.cli import invoke

    vm = fresh_vm(os_release="ubuntu-24.04", gpus=2, gpu_name="NVIDIA H100 PCIe", nvswitch=False)
    install_lspci(vm)
    profile = tmp_path / "SETUP-GPU.json"
    profile.write_text(
        json.dumps(
            {
                "Description": "driver + CUDA + Docker + toolkit",
                "Parameters": {"LinuxDriverPackageVersion": "", "Username": ""},
                "Actions": [],
                "Dependencies": [
                    {
                        "Type": "NvidiaCudaInstallation",
                        "Parameters": {
                            "Scenario": "InstallNvidiaCuda",
                            "LinuxCudaVersion": "12.4",
                            "LinuxDriverVersion": 550,
                            "LinuxDriverPackageVersion": "$.Parameters.LinuxDriverPackageVersion",
                            "Username": "$.Parameters.Username",
                            "LinuxLocalRunFile": cuda_runfile_server.url,
                        },
                    },
                    {"Type": "DockerInstallation", "Parameters": {"Scenario": "InstallDocker"}},
                    {"Type": "NvidiaContainerToolkitInstallation", "Parameters": {"Scenario": "InstallToolkit"}},
                ],
            }
        )
    )
    common = ["--profile", str(profile), "--host", vm.host_spec, "--identity", str(vm.key_path)]
    common += ["--known-hosts", str(vm.known_hosts_path)]
    code = invoke(["run", *common, "--output-dir", str(tmp_path / "runs")])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    # No NVSwitch on this PCIe machine: no fabric manager; the newest 550 driver the repo offers.
    assert vm.loaded_driver() == "550.144.03"
    code, _ = vm.exec(["dpkg-query", "-W", "nvidia-fabricmanager-550"])
    assert code != 0
    code = invoke(["plan", *common])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert out.out.count("no change") == 3, out.out
    assert "$ " not in out.out  # no command would run
