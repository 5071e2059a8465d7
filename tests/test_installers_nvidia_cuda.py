"""NvidiaCudaInstallation's pure planner: (parameters, facts) -> exact commands or a no-op reason."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.fixtures.facts.builders import (
    AZUREUSER,
    DEBIAN_12,
    ROCKY_9,
    ROOT,
    UBUNTU_22,
    UBUNTU_24,
    X86,
    download,
    fabric_manager,
    inventory,
    package_facts,
    v,
)
from workload.commands import Command
from workload.facts.nvidia import DriverOrigin
from workload.facts.system import Architecture
from workload.installers.apt import APT_LOCKS, AptRefresh, PlanRefused
from workload.installers.nvidia_cuda import (
    CudaFacts,
    NvidiaCudaInstallation,
    NvidiaCudaParameters,
    PreflightFacts,
    VerifyFacts,
    apt_pin_text,
    check_possible,
    plan_nvidia_cuda,
    verify_problems,
)

RUNFILE = "https://developer.download.nvidia.com/compute/cuda/12.4.0/local_installers/cuda_12.4.0_550.54.14_linux.run"
DRIVER, DKMS, FM, META = (
    "nvidia-driver-550-server",
    "nvidia-dkms-550-server",
    "nvidia-fabricmanager-550",
    "cuda-drivers-fabricmanager-550",
)
# The repository offers a NEWER fabric manager (and driver) than the one we pin.
OFFERED = {DRIVER: ("550.144.03", "550.127.05"), DKMS: ("550.144.03", "550.127.05"), FM: ("550.144.03", "550.127.05")}
PROVISIONED = {DRIVER: v("550.127.05"), DKMS: v("550.127.05"), FM: v("550.127.05"), "build-essential": "12.9ubuntu3"}


#: How the explicit lock wait reads in a snapshot: all four apt/dpkg locks.
LOCK_WAIT = "wait-for-dpkg-lock 600 " + " ".join(APT_LOCKS)


def params(**kw: Any) -> NvidiaCudaParameters:
    base: dict[str, Any] = {"LinuxDriverVersion": "550", "LinuxCudaVersion": "12.4", "LinuxLocalRunFile": RUNFILE}
    base.update(kw)
    return NvidiaCudaParameters(**base)


def facts(**kw: Any) -> CudaFacts:
    base: dict[str, Any] = {
        "os": UBUNTU_22,
        "arch": X86,
        "packages": package_facts(offered=OFFERED),
        "gpus": inventory(loaded=None),
        "fabric_manager": fabric_manager(None),
        "user": ROOT,
        "toolkit_installed": False,
        "runfile": download(),
        "bashrc_has_block": False,
        "cuda_repo_configured": False,
        "refreshed": True,
    }
    base.update(kw)
    return CudaFacts(**base)


def provisioned(**kw: Any) -> CudaFacts:
    base: dict[str, Any] = {
        "packages": package_facts(installed=PROVISIONED, holds={DRIVER, DKMS, FM}, offered=OFFERED),
        "gpus": inventory(loaded="550.127.05"),
        "fabric_manager": fabric_manager("550.127.05", active=True, enabled=True),
        "toolkit_installed": True,
        "runfile": download(complete=True),
        "bashrc_has_block": True,
        "refreshed": False,
        "apt_pin": apt_pin_text(params(), "550.127.05"),
    }
    base.update(kw)
    return facts(**base)


def short(command: Command) -> str:
    """A command without the fixed apt options and with scripts named by their label: for snapshots."""
    argv = [str(a) for a in command.argv]
    if argv[:2] == ["sh", "-c"] and len(argv) > 3:
        argv = argv[3:]  # the script's $0 label and its arguments
    if "apt-get" in argv:
        argv = [a for a in argv if not a.startswith(("DPkg::", "Dpkg::")) and a not in ("-o", "-y", "-q")]
    text = " ".join(argv)
    if command.user:
        text = f"[as {command.user}] {text}"
    return text


def snapshot(plan: Any) -> list[tuple[str, list[str]]]:
    return [(c.summary, [short(x) for x in c.commands]) for c in plan.changes]


def test_fresh_ubuntu_host_with_nvswitch_pins_driver_and_fm_exactly() -> None:
    plan = plan_nvidia_cuda(params(LinuxDriverPackageVersion="550.127.05"), facts())
    full = v("550.127.05")
    assert snapshot(plan) == [
        (
            # One apt transaction: one dependency solve, one dpkg run, one round of triggers.
            "install build tools (build-essential), NVIDIA driver 550.127.05 (branch 550) and fabric manager "
            "550.127.05 (exactly the driver's version; installed: none; the repository's newest is 550.144.03), "
            f"held: {DKMS}={full}, {DRIVER}={full}, {FM}={full}",
            [
                LOCK_WAIT,
                "tee /etc/apt/preferences.d/workload-nvidia-550",
                f"apt-get install build-essential {DKMS}={full} {DRIVER}={full} {FM}={full}",
                f"apt-mark hold {DKMS} {DRIVER} {FM}",
            ],
        ),
        (
            "download the CUDA 12.4 run file to /var/cache/workload/cuda_12.4.0_550.54.14_linux.run "
            "(no RunFileSha256 given to check)",
            [
                "mkdir -p -- /var/cache/workload",
                "retry 5 3 curl -fL -C - --retry 3 --retry-delay 2 --connect-timeout 30 --speed-limit 1024 "
                "--speed-time 60 -sS -o /var/cache/workload/cuda_12.4.0_550.54.14_linux.run.part -- " + RUNFILE,
                "mv -f -- /var/cache/workload/cuda_12.4.0_550.54.14_linux.run.part "
                "/var/cache/workload/cuda_12.4.0_550.54.14_linux.run",
            ],
        ),
        (
            "install the CUDA 12.4 toolkit into /usr/local/cuda-12.4 (toolkit only)",
            ["sh /var/cache/workload/cuda_12.4.0_550.54.14_linux.run --silent --toolkit"],
        ),
        ("add CUDA 12.4 to PATH and LD_LIBRARY_PATH in /root/.bashrc (user root)", ["tee -a /root/.bashrc"]),
        ("enable and start the nvidia-fabricmanager service", ["systemctl enable nvidia-fabricmanager"]),
    ]
    assert plan.reboot_required
    assert "starts at boot" in " ".join(plan.notes)
    bashrc = plan.changes[3].commands[0]
    assert bashrc.sudo and bashrc.input is not None
    assert "export PATH=/usr/local/cuda-12.4/bin${PATH:+:${PATH}}" in bashrc.input
    assert bashrc.input.startswith("# >>> workload: CUDA 12.4 >>>\n")
    # Installs are never retried blindly; downloads and apt-get update are.
    installs = [c for c in plan.commands if "install" in c.argv and c.argv[0] == "apt-get"]
    assert len(installs) == 1 and all(c.argv[0] != "sh" for c in installs)


def test_default_version_is_the_newest_offered_and_fm_follows_it() -> None:
    plan = plan_nvidia_cuda(params(), facts())
    commands = [short(c) for c in plan.commands]
    newest = v("550.144.03")
    assert f"apt-get install build-essential {DKMS}={newest} {DRIVER}={newest} {FM}={newest}" in commands


def test_missing_build_tools_or_holds_alone_get_a_change_of_their_own() -> None:
    no_build = {k: val for k, val in PROVISIONED.items() if k != "build-essential"}
    plan = plan_nvidia_cuda(
        params(),
        provisioned(
            packages=package_facts(installed=no_build, holds={DRIVER, DKMS, FM}, offered=OFFERED), refreshed=True
        ),
    )
    assert snapshot(plan) == [("install build tools (build-essential)", [LOCK_WAIT, "apt-get install build-essential"])]
    # Build tools missing and the fabric manager not held: installed and held in the same change.
    plan = plan_nvidia_cuda(
        params(),
        provisioned(packages=package_facts(installed=no_build, holds={DRIVER, DKMS}, offered=OFFERED), refreshed=True),
    )
    assert snapshot(plan) == [
        (
            f"install build tools (build-essential); hold {FM}",
            [LOCK_WAIT, "apt-get install build-essential", f"apt-mark hold {FM}"],
        )
    ]
    plan = plan_nvidia_cuda(params(), provisioned(packages=package_facts(installed=PROVISIONED, holds={DRIVER})))
    assert snapshot(plan) == [
        (
            f"hold {DKMS}, {FM} so an upgrade cannot move one without the other",
            [LOCK_WAIT, f"apt-mark hold {DKMS} {FM}"],
        )
    ]
    assert not plan.reboot_required


def test_plan_before_refresh_starts_with_apt_update_and_previews_the_rest() -> None:
    plan = plan_nvidia_cuda(params(), facts(refreshed=False))
    assert isinstance(plan.changes[0], AptRefresh)
    assert [short(c) for c in plan.changes[0].commands] == [
        LOCK_WAIT,
        "retry 4 5 apt-get update",
        "stamp /var/lib/workload/apt-lists-refreshed",  # so the next installers need no refresh of their own
    ]
    assert all(c.summary.startswith("(preview) ") for c in plan.changes[1:])
    assert plan.reboot_required


def test_empty_package_lists_plan_a_refresh_then_the_cuda_repo_then_refuse() -> None:
    empty = package_facts()
    first = plan_nvidia_cuda(params(), facts(packages=empty, refreshed=False))
    assert len(first.changes) == 1 and isinstance(first.changes[0], AptRefresh)
    assert "exact versions are chosen after `apt-get update`" in first.notes[0]
    second = plan_nvidia_cuda(params(), facts(packages=empty, refreshed=True))
    cmds = [short(c) for c in second.commands]
    assert "tee /etc/apt/sources.list.d/workload-nvidia-cuda.list" in cmds
    repo_line = next(c.input for c in second.commands if c.argv[0] == "tee")
    assert repo_line == (
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/workload-nvidia-cuda.asc] "
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /\n"
    )
    assert cmds[-2:] == ["retry 4 5 apt-get update", "stamp /var/lib/workload/apt-lists-refreshed"]
    with pytest.raises(PlanRefused, match="no configured apt source offers nvidia-driver-550-server"):
        plan_nvidia_cuda(params(), facts(packages=empty, refreshed=True, cuda_repo_configured=True))


def test_provisioned_host_plans_nothing_even_when_the_repo_offers_newer() -> None:
    plan = plan_nvidia_cuda(params(), provisioned())
    assert not plan.changed and not plan.reboot_required
    assert plan.noop_reason == (
        "driver 550.127.05 installed and held and loaded, fabric manager 550.127.05 matches and runs, "
        "CUDA 12.4 toolkit present"
    )


def test_mismatched_fm_is_downgraded_to_exactly_the_driver_version() -> None:
    installed = {**PROVISIONED, FM: v("550.144.03")}
    plan = plan_nvidia_cuda(
        params(),
        provisioned(
            packages=package_facts(installed=installed, holds={DRIVER, DKMS, FM}, offered=OFFERED),
            fabric_manager=fabric_manager("550.144.03", active=False, enabled=True),
            refreshed=True,
        ),
    )
    full = v("550.127.05")
    assert snapshot(plan)[0][1] == [
        LOCK_WAIT,
        f"apt-mark unhold {FM}",
        f"apt-get install --allow-downgrades {FM}={full}",
        f"apt-mark hold {FM}",
    ]
    assert snapshot(plan)[1] == (
        "enable and start the nvidia-fabricmanager service",
        ["systemctl restart nvidia-fabricmanager"],
    )
    assert "installed: 550.144.03" in plan.changes[0].summary
    assert not plan.reboot_required  # the driver is already right and loaded


def test_installed_but_not_loaded_waits_for_a_reboot() -> None:
    plan = plan_nvidia_cuda(params(), provisioned(gpus=inventory(loaded=None, status="no-driver")))
    assert not plan.changed and plan.reboot_required
    assert "takes effect after a reboot" in plan.notes[0]
    mismatch = plan_nvidia_cuda(params(), provisioned(gpus=inventory(loaded=None, status="mismatch")))
    assert mismatch.reboot_required


def test_no_nvswitch_means_no_fabric_manager() -> None:
    plan = plan_nvidia_cuda(params(), facts(gpus=inventory(loaded=None, nvswitches=0)))
    assert not any("fabricmanager" in short(c) for c in plan.commands)
    assert "no fabric manager: no NVSwitch on this host" in plan.notes
    forced = plan_nvidia_cuda(params(InstallFabricManager=True), facts(gpus=inventory(loaded=None, nvswitches=0)))
    assert any(FM in short(c) for c in forced.commands)
    off = plan_nvidia_cuda(params(InstallFabricManager="false"), facts())
    assert not any("fabricmanager" in short(c) for c in off.commands)


def test_nvidia_repo_pins_meta_and_binary_fabric_manager_packages() -> None:
    offered = {DRIVER: ("550.127.05",), DKMS: ("550.127.05",)}
    pkgs = package_facts(offered=offered)
    nvidia_style = {
        META: ("550.144.03-1", "550.127.05-1"),
        FM: ("550.144.03-1", "550.127.05-1"),
    }
    from workload.facts.packages import AptPolicy

    policies = dict(pkgs.policies)
    for name, versions in nvidia_style.items():
        policies[name] = AptPolicy(name, None, versions[0], versions, versions)
    plan = plan_nvidia_cuda(params(), facts(packages=dataclasses.replace(pkgs, policies=policies)))
    install = next(short(c).split() for c in plan.commands if short(c).startswith("apt-get install"))
    assert {f"{META}=550.127.05-1", f"{FM}=550.127.05-1", f"{DRIVER}={v('550.127.05')}"} <= set(install)


@pytest.mark.parametrize("os_release", [UBUNTU_22, UBUNTU_24])
def test_supported_systems_plan_the_same_packages(os_release: Any) -> None:
    plan = plan_nvidia_cuda(params(LinuxDriverPackageVersion="550.127.05"), facts(os=os_release))
    assert any(short(c).startswith(f"apt-get install build-essential {DKMS}=") for c in plan.commands)


def test_debian_is_refused_naming_the_supported_ubuntu_releases() -> None:
    """Neither Debian nor NVIDIA's debian12 repository has nvidia-driver-550-server: refuse up front,
    instead of refreshing, adding NVIDIA's repository and then failing on "no apt source offers"."""
    with pytest.raises(PlanRefused) as info:
        check_possible(params(), PreflightFacts(DEBIAN_12, X86, inventory(loaded=None)))
    assert info.value.problem.startswith(
        "Debian GNU/Linux 12 (bookworm) is not supported by NvidiaCudaInstallation "
        "(supported: Ubuntu 22.04, Ubuntu 24.04): it installs Ubuntu's nvidia-driver-550-server packages"
    )
    assert info.value.hint is not None and "leave NvidiaCudaInstallation out of the profile" in info.value.hint
    with pytest.raises(PlanRefused, match="Debian GNU/Linux 12"):
        plan_nvidia_cuda(params(), facts(os=DEBIAN_12, packages=package_facts(), refreshed=True))


def test_a_driver_from_the_run_file_is_refused_not_overwritten() -> None:
    """nvidia-smi answers but no package owns it: NVIDIA's .run installer put it there."""
    runfile = DriverOrigin("/usr/bin/nvidia-smi", None, "/usr/bin/nvidia-uninstall")
    with pytest.raises(PlanRefused) as info:
        plan_nvidia_cuda(params(), facts(gpus=inventory(loaded="550.90.07"), driver_origin=runfile))
    assert info.value.problem == (
        "an NVIDIA driver 550.90.07 installed from NVIDIA's .run file is on this host (/usr/bin/nvidia-smi "
        "belongs to no package); installing nvidia-driver-550-server over it would leave two drivers "
        "overwriting each other's files"
    )
    assert info.value.hint is not None and "sudo /usr/bin/nvidia-uninstall --silent" in info.value.hint
    # The packaged driver is ours to manage: no refusal.
    packaged = DriverOrigin("/usr/bin/nvidia-smi", "nvidia-utils-550-server", None)
    plan = plan_nvidia_cuda(params(), provisioned(driver_origin=packaged))
    assert not plan.changed


def test_a_driver_bump_behind_stale_lists_previews_a_reboot_and_the_refreshed_plan_has_one() -> None:
    """The audit's case: provisioned at 550.127.05, LinuxDriverPackageVersion raised to a version
    the stale lists lack. The engine reboots on the plan applied after the refresh (the second)."""
    stale = {DRIVER: ("550.127.05",), DKMS: ("550.127.05",), FM: ("550.127.05",)}
    bumped = params(LinuxDriverPackageVersion="550.144.03")
    holds = {DRIVER, DKMS, FM}
    before = plan_nvidia_cuda(
        bumped, provisioned(packages=package_facts(installed=PROVISIONED, holds=holds, offered=stale))
    )
    assert [type(c) for c in before.changes] == [AptRefresh] and before.reboot_required
    after = plan_nvidia_cuda(
        bumped, provisioned(packages=package_facts(installed=PROVISIONED, holds=holds, offered=OFFERED), refreshed=True)
    )
    assert after.reboot_required
    bump = v("550.144.03")
    assert f"apt-get install {DKMS}={bump} {DRIVER}={bump} {FM}={bump}" in [short(c) for c in after.commands]
    # Only the fabric manager is missing from the stale lists: the driver stays, so no reboot is previewed.
    driver_only = {DRIVER: v("550.127.05"), DKMS: v("550.127.05"), "build-essential": "12.9ubuntu3"}
    same = plan_nvidia_cuda(
        params(LinuxDriverPackageVersion="550.127.05"),
        provisioned(
            packages=package_facts(installed=driver_only, holds={DRIVER, DKMS}), fabric_manager=fabric_manager(None)
        ),
    )
    assert [type(c) for c in same.changes] == [AptRefresh] and not same.reboot_required


def test_unsupported_os_or_arch_is_refused_before_anything_changes() -> None:
    with pytest.raises(PlanRefused, match=r"Rocky Linux 9.4 \(Blue Onyx\) is not supported"):
        plan_nvidia_cuda(params(), facts(os=ROCKY_9))
    with pytest.raises(PlanRefused, match="architecture ppc64le is not supported"):
        plan_nvidia_cuda(params(), facts(arch=Architecture("ppc64le", "ppc64el")))


def test_no_gpu_is_refused_unless_allowed() -> None:
    none = inventory(loaded=None, gpus=0, nvswitches=0)
    with pytest.raises(PlanRefused, match="no NVIDIA GPU is visible"):
        plan_nvidia_cuda(params(), facts(gpus=none))
    plan = plan_nvidia_cuda(params(), facts(gpus=none, allow_no_gpu=True))
    assert plan.changed and plan.reboot_required
    # After the reboot a GPU-less host cannot load the driver: no endless reboot, a no-op instead.
    after = plan_nvidia_cuda(params(), provisioned(gpus=none, allow_no_gpu=True, fabric_manager=fabric_manager(None)))
    assert not after.changed and not after.reboot_required


def test_bashrc_of_a_non_root_user_is_written_as_that_user() -> None:
    plan = plan_nvidia_cuda(params(), facts(user=AZUREUSER))
    bashrc = [c for c in plan.commands if c.argv[:2] == ("tee", "-a")]
    assert [short(c) for c in bashrc] == ["[as azureuser] tee -a /home/azureuser/.bashrc"]
    assert not bashrc[0].sudo
    root = plan_nvidia_cuda(params(), facts(user=ROOT))
    assert [short(c) for c in root.commands if c.argv[:2] == ("tee", "-a")] == ["tee -a /root/.bashrc"]


def test_download_resumes_and_checks_the_checksum() -> None:
    sha = "a" * 64
    plan = plan_nvidia_cuda(params(RunFileSha256=sha), facts(runfile=download(partial=1234)))
    change = next(c for c in plan.changes if c.summary.startswith("download"))
    assert "resuming after 1234 bytes" in change.summary and "checked against RunFileSha256" in change.summary
    assert any(short(c).startswith(f"verify-sha256 {sha} ") for c in change.commands)
    cached = plan_nvidia_cuda(params(), facts(runfile=download(complete=True)))
    assert not any(c.summary.startswith("download") for c in cached.changes)
    assert any("--toolkit" in short(c) for c in cached.commands)


def test_interrupted_dpkg_is_finished_first() -> None:
    pkgs = package_facts(installed={DKMS: v("550.127.05")}, broken={DKMS}, offered=OFFERED)
    plan = plan_nvidia_cuda(params(), facts(packages=pkgs))
    assert plan.changes[0].summary.startswith("finish the interrupted dpkg run")
    assert short(plan.changes[0].commands[1]) == "dpkg --force-confdef --force-confold --configure -a"


def test_verify_states_both_versions_and_the_fix() -> None:
    installed = {**PROVISIONED, FM: v("550.144.03")}
    problems = verify_problems(
        params(),
        VerifyFacts.of(
            provisioned(
                packages=package_facts(installed=installed, holds={DRIVER, DKMS, FM}, offered=OFFERED),
                fabric_manager=fabric_manager("550.144.03", active=False, enabled=True),
            )
        ),
    )
    assert len(problems) == 1
    problem, fix = problems[0]
    assert problem == "fabric manager is 550.144.03 but the NVIDIA driver is 550.127.05"
    assert f"sudo apt-get install --allow-downgrades {FM}={v('550.127.05')}" in fix
    assert verify_problems(params(), VerifyFacts.of(provisioned())) == []
    unloaded = verify_problems(params(), VerifyFacts.of(provisioned(gpus=inventory(loaded="550.90.07"))))
    assert unloaded[0][0].startswith("the loaded NVIDIA driver is not 550.127.05 (nvidia-smi reports driver 550.90.07)")


def test_verify_fix_names_the_full_apt_version_and_lifts_the_hold() -> None:
    """`apt-get install nvidia-driver-550-server=550.144.03` is rejected: apt wants the full version."""
    problems = verify_problems(params(LinuxDriverPackageVersion="550.144.03"), VerifyFacts.of(provisioned()))
    problem, fix = problems[0]
    assert problem == f"{DRIVER} is {v('550.127.05')}, not 550.144.03"
    assert fix == (
        f"sudo apt-mark unhold {DRIVER} {DKMS}; "
        f"sudo apt-get install --allow-downgrades {DRIVER}={v('550.144.03')} {DKMS}={v('550.144.03')}; "
        f"sudo apt-mark hold {DRIVER} {DKMS}"
    )


def test_verify_requires_the_holds() -> None:
    loose = provisioned(packages=package_facts(installed=PROVISIONED, holds={DRIVER}, offered=OFFERED))
    assert verify_problems(params(), VerifyFacts.of(loose)) == [
        (
            f"{DKMS}, {FM} not held: an apt upgrade can move the driver and the fabric manager apart",
            f"sudo apt-mark hold {DKMS} {FM}",
        )
    ]


def test_verify_runs_nvcc_not_just_looks_for_the_folder() -> None:
    broken = dataclasses.replace(
        VerifyFacts.of(provisioned(toolkit_installed=False)),
        toolkit_problem="/usr/local/cuda-12.4/bin/nvcc does not exist",
    )
    assert verify_problems(params(), broken) == [
        (
            "the CUDA 12.4 toolkit does not work: /usr/local/cuda-12.4/bin/nvcc does not exist",
            "sudo sh /var/cache/workload/cuda_12.4.0_550.54.14_linux.run --silent --toolkit",
        )
    ]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"LinuxDriverVersion": "55x"}, "LinuxDriverVersion: '55x' is not a driver branch"),
        ({"LinuxDriverPackageVersion": "535.183.01"}, "LinuxDriverPackageVersion: '535.183.01' is not a version of"),
        ({"LinuxLocalRunFile": None}, "LinuxLocalRunFile: the CUDA run file URL is required"),
        ({"LinuxCudaVersion": "twelve"}, "LinuxCudaVersion: 'twelve' is not a CUDA version"),
        ({"RunFileSha256": "abc"}, "RunFileSha256: expected 64 hexadecimal digits"),
    ],
)
def test_bad_parameters_are_named(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        NvidiaCudaInstallation.check_parameters(params(**kw))
    NvidiaCudaInstallation.check_parameters(params(CudaRequired=False, LinuxLocalRunFile=None, LinuxCudaVersion=None))


def test_apt_pin_makes_the_exact_version_every_branch_packages_candidate() -> None:
    plan = plan_nvidia_cuda(params(LinuxDriverPackageVersion="550.127.05"), facts())
    pin = next(c for c in plan.commands if c.argv[:2] == ("tee", "/etc/apt/preferences.d/workload-nvidia-550"))
    assert pin.sudo and pin.input is not None
    assert "Package: *-550 *-550-server *-550-open\nPin: version 550.127.05-*\nPin-Priority: 1001\n" in pin.input
    # A provisioned host whose pin file was removed gets it back, and nothing else.
    plan = plan_nvidia_cuda(params(), provisioned(apt_pin=None))
    assert [c.summary for c in plan.changes] == [
        "pin branch 550 at 550.127.05 in /etc/apt/preferences.d/workload-nvidia-550"
    ]
