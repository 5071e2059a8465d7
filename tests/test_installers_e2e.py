"""The three installers end to end, over SSH, on fresh Debian "VMs" of the test bed (slow).

Real sshd, apt, dpkg, sudo, curl and sha256sum inside the VM; stand-in NVIDIA/Docker packages
with real names and versions from a local apt repository that offers a NEWER fabric manager
(550.144.03) than the driver we pin (550.127.05).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workload.doctor import read_doctor_facts, run_checks
from workload.engine import drive_step
from workload.errors import StepError
from workload.facts.packages import read_package_facts
from workload.hosts import ConnectOptions, Host, SshHost, open_host, parse_host_spec
from workload.installers.apt import AptRefresh
from workload.installers.docker import DockerInstallation
from workload.installers.nvidia_container_toolkit import NvidiaContainerToolkitInstallation
from workload.installers.nvidia_cuda import NvidiaCudaInstallation
from workload.steps import HostState, Step, StepContext, StepParameters, StepPlan

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).parent / "fixtures" / "facts"

# The test bed has no lspci; this one reads the VM's hardware file like the stand-in nvidia-smi,
# so NVSwitch auto-detection runs the same code path as on a real machine (lspci -n -D -d 10de:).
# The listing is rendered by Python once per content of the hardware file and then only compared
# and printed (cmp, cat): the fleet benchmark calls it 48 times on a shared 2-core machine.
LSPCI = r"""#!/bin/sh
hw=/var/lib/standin/hardware.json cache=/run/standin/lspci tmp=/run/standin/lspci.$$
if [ -f "$cache.source" ] && cmp -s "$hw" "$cache.source" 2>/dev/null; then
    exec cat "$cache.out"
fi
render() {
    python3 -S -c '
import json, sys
try:
    hw = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    hw = {}
for g in hw.get("gpus", []):
    bus = g["bus_id"].lower()[-12:]
    device = g.get("pci_device_id", "0x233010DE")[2:6].lower()
    print(f"{bus} 0302: 10de:{device} (rev a1)")
if hw.get("nvswitch"):
    for i in range(4):
        print(f"0000:{0x05 + i:02x}:00.0 0680: 10de:22a3 (rev a1)")
' "$1"
}
if cp "$hw" "$tmp.source" 2>/dev/null && render "$tmp.source" >"$tmp.out" 2>/dev/null; then
    mv -f "$tmp.out" "$cache.out" && mv -f "$tmp.source" "$cache.source"
    exec cat "$cache.out"
fi
rm -f "$tmp.source" "$tmp.out" 2>/dev/null
render "$hw"  # no hardware file, or not allowed to keep the listing (not root)
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
    """Drives steps with the engine's own :func:`~workload.engine.drive_step` (plan -> apply ->
    reboot when the APPLIED plan wants one -> re-plan -> verify); only the reboot is the test
    bed's (a container restart, then a new connection)."""

    def __init__(self, vm: Any, tmp_path: Path) -> None:
        self.vm = vm
        self.tmp_path = tmp_path
        self.host = open_vm(vm)
        self.reboots = 0

    def context(self, step: Step) -> StepContext:
        return StepContext(
            host=self.host,
            host_dir=self.tmp_path,
            log_path=self.tmp_path / f"{step.type_name}.log",
            state=HostState(self.host),
        )

    def reboot(self, ctx: StepContext) -> StepContext:
        self.host.close()
        self.vm.reboot()
        self.reboots += 1
        self.host = open_vm(self.vm)
        return dataclasses.replace(ctx, host=self.host, state=HostState(self.host))

    def run(self, step: Step) -> tuple[StepPlan, StepPlan | None]:
        driven = drive_step(step, self.context(step), self.reboot)
        return driven.plan, driven.after_reboot

    def sh(self, *argv: str) -> str:
        return self.vm.check(list(argv))


def install_lspci(vm: Any) -> None:
    vm.write_file("/usr/bin/lspci", LSPCI, mode=0o755)


@pytest.mark.heavy(seconds=26)
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
    # The driver step refreshed the package lists seconds ago: the next installers plan from them
    # (no second and third `apt-get update`); their plans are exact, not previews.
    assert isinstance(cuda_plan.changes[0], AptRefresh)
    for plan, _after in first[1:]:
        assert plan.changed and not any(isinstance(c, AptRefresh) for c in plan.changes), plan
        assert not any(c.summary.startswith("(preview)") for c in plan.changes), plan
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
    assert checks["container toolkit"].status == "pass" and checks["container toolkit"].detail == "nvidia-ctk 1.17.3"
    print(f"\nfirst run {first_s:.1f}s, second run {second_s:.1f}s, ratio {second_s / first_s:.1%}")

    # A toolkit folder whose nvcc is gone is not a toolkit: verify says so, and the step reinstalls it.
    runner.sh("rm", "/usr/local/cuda-12.4/bin/nvcc")
    with pytest.raises(StepError) as broken:
        cuda.verify(runner.context(cuda))
    assert "the CUDA 12.4 toolkit does not work: /usr/local/cuda-12.4/bin/nvcc does not exist" in str(broken.value)
    plan, _ = runner.run(cuda)
    assert [c.summary for c in plan.changes] == [
        "install the CUDA 12.4 toolkit into /usr/local/cuda-12.4 (toolkit only)"
    ]
    assert "release 12.4" in runner.sh("/usr/local/cuda-12.4/bin/nvcc", "--version")

    # The audit's case: LinuxDriverPackageVersion raised to a version the host's stale lists do not
    # have. Only the plan made after `apt-get update` knows the driver changes; the reboot follows it.
    runner.sh("sh", "-c", "rm -f /var/lib/apt/lists/*_Packages")
    bumped = make_step(
        NvidiaCudaInstallation,
        3,
        LinuxCudaVersion="12.4",
        LinuxDriverVersion="550",
        LinuxDriverPackageVersion="550.144.03",
        LinuxLocalRunFile=cuda_runfile_server.url,
        RunFileSha256=cuda_runfile_server.sha256,
    )
    reboots = runner.reboots
    driven = drive_step(bumped, runner.context(bumped), runner.reboot)
    assert [type(c).__name__ for c in driven.plan.changes] == ["AptRefresh"]
    assert driven.applied.reboot_required and driven.applied is not driven.plan
    assert runner.reboots == reboots + 1 and driven.after_reboot is not None and not driven.after_reboot.changed
    assert vm.loaded_driver() == "550.144.03"
    assert runner.sh("nv-fabricmanager", "--version").strip().endswith("550.144.03")
    held = read_package_facts(runner.host, []).holds
    assert {"nvidia-driver-550-server", "nvidia-dkms-550-server", "nvidia-fabricmanager-550"} <= held


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
    assert f"waiting for the apt/dpkg lock: unattended-upgr (pid {pid}) holds /var/lib/dpkg/lock-frontend" in log
    assert "the apt/dpkg locks are free after" in log
    assert runner.sh("docker", "info", "--format", "{{.ServerVersion}}").strip()

    # apt-daily's refresh holds the package lists' lock, which DPkg::Lock::Timeout does not wait
    # for: the explicit wait must, or `apt-get update` fails ("Could not get lock /var/lib/apt/lists/lock").
    pid = vm.hold_dpkg_lock(6, locks=["/var/lib/apt/lists/lock"])
    toolkit = make_step(NvidiaContainerToolkitInstallation, 2, DpkgLockTimeout=120)
    plan, _ = runner.run(toolkit)
    assert plan.changed
    log = (tmp_path / "NvidiaContainerToolkitInstallation.log").read_text()
    assert f"waiting for the apt/dpkg lock: unattended-upgr (pid {pid}) holds /var/lib/apt/lists/lock" in log
    assert "Could not get lock" not in log
    assert runner.sh("nvidia-ctk", "--version").startswith("NVIDIA Container Toolkit CLI version 1.17.3")


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
    assert f"the apt/dpkg lock is still held after 3s: unattended-upgr (pid {pid})" in str(info.value)
    code, out = vm.exec(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "docker-ce"])
    assert code != 0 or out.strip() in ("", "un"), "nothing may be installed when the lock never came free"


def installed(vm: Any, package: str) -> bool:
    code, out = vm.exec(["dpkg-query", "-W", "-f", "${Status}", package])
    return code == 0 and out.strip() == "install ok installed"


def test_impossible_hosts_are_refused_before_any_step_changes_them(
    fresh_vm: Callable[..., Any], cuda_runfile_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`workload run` of Docker, then the driver: whatever makes the driver step impossible on the
    host stops the run at the preflight, before Docker is installed; `workload plan` says the same."""
    import json

    from tests.testbed.aptrepo import standin
    from workload.cli import invoke
    from workload.engine import PREFLIGHT_NOTE

    vm = fresh_vm(os_release="ubuntu-22.04", gpus=0, nvswitch=False)
    install_lspci(vm)
    profile = tmp_path / "SETUP.json"
    driver = {"Scenario": "InstallDriver", "LinuxDriverVersion": "550", "LinuxCudaVersion": "12.4"}
    driver["LinuxLocalRunFile"] = cuda_runfile_server.url
    document = {
        "Description": "Docker, then the NVIDIA driver",
        "Dependencies": [
            {"Type": "DockerInstallation", "Parameters": {"Scenario": "InstallDocker"}},
            {"Type": "NvidiaCudaInstallation", "Parameters": driver},
        ],
    }
    profile.write_text(json.dumps(document))
    common = ["--profile", str(profile), "--host", vm.host_spec, "--identity", str(vm.key_path)]
    common += ["--known-hosts", str(vm.known_hosts_path)]
    runs = tmp_path / "runs"

    def refused() -> str:
        """Run; it must fail at the preflight with nothing installed. Returns the host's error."""
        code = invoke(["run", *common, "--output-dir", str(runs)])
        capsys.readouterr()
        assert code == 4
        record = json.loads((sorted(runs.iterdir())[-1] / "run.json").read_text())
        (outcome,) = record["outcomes"]
        assert [s["status"] for s in outcome["steps"]] == ["failed"] * len(outcome["steps"])
        assert not installed(vm, "docker-ce"), "DockerInstallation ran although the run could never finish"
        error: str = outcome["error"]
        assert PREFLIGHT_NOTE in error
        return error

    label = f"[127.0.0.1:{vm.port}] Dependencies[1] NvidiaCudaInstallation (InstallDriver): "
    assert refused().startswith(f"{label}no NVIDIA GPU is visible on this host's PCI bus")

    # GPUs, but a driver from NVIDIA's .run file: nvidia-smi that no package owns, and its uninstaller.
    vm.set_gpus("NVIDIA H100 PCIe", 2, nvswitch=False)
    vm.write_file(
        "/usr/bin/nvidia-smi", standin("nvidia-smi", version="550.90.07", branch="550", cuda="12.4"), mode=0o755
    )
    vm.write_file("/usr/bin/nvidia-uninstall", "#!/bin/sh\nexit 0\n", mode=0o755)
    vm.check(["sh", "-c", "echo 550.90.07 > /run/nvidia-driver-loaded"])  # the .run file's module, loaded
    assert refused().startswith(
        f"{label}an NVIDIA driver 550.90.07 installed from NVIDIA's .run file is on this host "
        "(/usr/bin/nvidia-smi belongs to no package)"
    )
    code = invoke(["plan", *common])
    out = capsys.readouterr().out
    assert code == 0 and "installed from NVIDIA's .run file" in out and ", 1 would fail if run now." in out

    # Debian: its archive and NVIDIA's Debian repository lack the packages the step pins.
    vm.check(["rm", "-f", "/usr/bin/nvidia-smi", "/usr/bin/nvidia-uninstall", "/run/nvidia-driver-loaded"])
    vm.write_file("/etc/os-release", (FIXTURES / "os_release" / "debian-12.txt").read_text())
    assert refused().startswith(f"{label}Debian GNU/Linux 12 (bookworm) is not supported by NvidiaCudaInstallation")

    # An OS no installer supports: both steps are named.
    vm.write_file("/etc/os-release", 'ID=rocky\nVERSION_ID="9.4"\nPRETTY_NAME="Rocky Linux 9.4 (Blue Onyx)"\n')
    error = refused()
    assert error.startswith(
        f"[127.0.0.1:{vm.port}] Dependencies[0] DockerInstallation (InstallDocker): "
        "Rocky Linux 9.4 (Blue Onyx) is not supported"
    )
    assert "also impossible here: Dependencies[1] NvidiaCudaInstallation (InstallDriver): Rocky Linux 9.4" in error


def test_gpus_without_a_loaded_driver_fail_the_toolkit_verify(fresh_vm: Callable[..., Any], tmp_path: Path) -> None:
    """GPUs on the PCI bus, no NVIDIA driver: containers cannot use them, so the toolkit step must not pass."""
    vm = fresh_vm(os_release="ubuntu-22.04", gpus=2, gpu_name="NVIDIA H100 PCIe", nvswitch=False)
    install_lspci(vm)
    runner = Runner(vm, tmp_path)
    runner.run(make_step(DockerInstallation, 1))
    with pytest.raises(StepError) as info:
        runner.run(make_step(NvidiaContainerToolkitInstallation, 2))
    assert "2 NVIDIA GPU(s) on the PCI bus, but their driver does not answer" in str(info.value)
    assert info.value.hint == "run NvidiaCudaInstallation before this step"
    assert "nvidia" in runner.sh("cat", "/etc/docker/daemon.json")  # installed and configured, just not usable yet


def test_workload_run_through_the_engine_reboots_and_resumes(
    fresh_vm: Callable[..., Any],
    cuda_runfile_server: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
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
    # Each step's fact queries reach the host together (Host.prefetch): re-checking the whole
    # provisioned host is a handful of SSH commands, not one per fact (the step-by-step reading
    # took 22).
    lines: list[str] = []
    real_execute = SshHost._execute

    def counting(self: SshHost, shell_line: str, **kwargs: Any) -> tuple[int, bool]:
        lines.append(shell_line)
        return real_execute(self, shell_line, **kwargs)

    monkeypatch.setattr(SshHost, "_execute", counting)
    code = invoke(["plan", *common])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    # the summary plan prints by default: every step of the provisioned host has nothing to do
    assert "0 would change, 3 no change, 0 would fail if run now." in out.out, out.out
    assert "$ " not in out.out  # no command would run
    batches = [line for line in lines if "workload-batch-" in line]
    assert batches and len(lines) <= 6, lines
