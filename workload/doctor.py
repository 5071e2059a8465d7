"""Preflight checks (``workload doctor``): is this host ready to run MLPerf on its GPUs?

Each check is a pure function of facts returning a :class:`Check`: ``pass``, ``fail`` (with the
command that fixes it) or ``skip`` (not applicable here, e.g. no NVSwitch so no fabric manager).
:func:`doctor_facts` declares the facts the checks read (:mod:`workload.facts.fact`);
:func:`read_doctor_facts` reads exactly those from a host; :func:`run_checks` applies every check.

The scratch space is checked at ``--scratch PATH`` or, without it, at the ``MLPERF_SCRATCH_PATH``
that MountDisks recorded in the host's state (``/var/lib/workload/state.json``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from workload.facts.docker import DOCKER_INFO, NVIDIA_CTK_VERSION, DockerInfo
from workload.facts.fact import Fact, HostFacts
from workload.facts.nvidia import FABRIC_MANAGER, FABRIC_MANAGER_UNIT, GPUS, FabricManagerFacts, GpuInventory, read_gpus
from workload.facts.packages import AptPolicy, read_apt_policy, upstream_version
from workload.facts.system import REBOOT_PENDING, FreeSpace, RebootPending, free_space
from workload.hosts.base import Host

CheckStatus = Literal["pass", "fail", "skip"]
DEFAULT_MIN_FREE_GB = 500.0


@dataclass(frozen=True)
class Check:
    name: str
    status: CheckStatus
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "fail"


@dataclass(frozen=True)
class DoctorFacts:
    gpus: GpuInventory
    fabric_manager: FabricManagerFacts
    #: apt policies of the fabric manager packages of the loaded driver's branch (for exact fixes).
    fm_policies: dict[str, AptPolicy]
    docker: DockerInfo
    reboot: RebootPending
    scratch: FreeSpace | None  # None where no scratch path was given or df failed
    scratch_path: str | None = None
    #: ``nvidia-ctk --version`` (None: the NVIDIA container toolkit's CLI is missing or broken).
    ctk_version: str | None = None
    #: Where ``scratch_path`` came from: "--scratch", or "MountDisks" (the host's state).
    scratch_source: str = "--scratch"


def check_gpu_visible(gpus: GpuInventory) -> Check:
    if gpus.count > 0:
        return Check("GPU visible", "pass", gpus.describe())
    return Check(
        "GPU visible",
        "fail",
        "no NVIDIA GPU on the PCI bus",
        "use a GPU machine (e.g. an ND-series VM); in a VM, check that the GPUs are passed through",
    )


def check_driver_loaded(gpus: GpuInventory, *, admin_managed: bool = False) -> Check:
    name = "driver loaded"
    if gpus.status == "ok":
        return Check(name, "pass", f"NVIDIA driver {gpus.driver_version}")
    if gpus.count == 0 and gpus.status in ("not-installed", "no-driver"):
        return Check(name, "skip", "no GPU to drive")
    fixes = {
        "not-installed": "install it: workload run --profile PERF-GPU-MLPERF --dependencies (NvidiaCudaInstallation)",
        "no-driver": "if the driver was just installed, reboot (sudo reboot); else reinstall the driver packages",
        "mismatch": "the installed driver differs from the loaded one (an upgrade without a reboot): sudo reboot; "
        "then hold the packages: sudo apt-mark hold nvidia-driver-<branch>-server",
        "no-devices": "the driver sees no GPU: check `dmesg | grep -i nvrm`",
    }
    if admin_managed:
        fixes["not-installed"] = ADMIN_DRIVER_FIX
    detail = gpus.message or gpus.status
    if gpus.status == "mismatch" and gpus.library_version:
        detail += f" (installed library {gpus.library_version})"
    return Check(name, "fail", detail, fixes.get(gpus.status, "check `nvidia-smi` and `dmesg | grep -i nvrm`"))


def _fm_fix(driver: str, policies: dict[str, AptPolicy]) -> str:
    branch = driver.split(".")[0]
    pins: list[str] = []
    for name in (f"cuda-drivers-fabricmanager-{branch}", f"nvidia-fabricmanager-{branch}"):
        policy = policies.get(name)
        matches = [v for v in (policy.available if policy else ()) if upstream_version(v) == driver]
        if matches:
            pins.append(f"{name}={matches[0]}")
    names = [p.split("=")[0] for p in pins] or [f"nvidia-fabricmanager-{branch}"]
    target = " ".join(pins) if pins else f"nvidia-fabricmanager-{branch}=<the {driver} version in apt-cache policy>"
    return (
        f"sudo apt-mark unhold {' '.join(names)} && sudo apt-get install --allow-downgrades {target} "
        f"&& sudo apt-mark hold {' '.join(names)} && sudo systemctl restart {FABRIC_MANAGER_UNIT}"
    )


def check_fabric_manager(gpus: GpuInventory, fm: FabricManagerFacts, policies: dict[str, AptPolicy]) -> Check:
    name = "fabric manager"
    if not gpus.nvswitch:
        return Check(name, "skip", "no NVSwitch: the fabric manager is not needed")
    driver = gpus.driver_version
    if driver is None:
        return Check(name, "skip", "the driver is not loaded, so the versions cannot be compared")
    if fm.version is None:
        return Check(name, "fail", f"NVSwitches present but nv-fabricmanager is not installed (driver {driver})",
                     _fm_fix(driver, policies))  # fmt: skip
    if fm.version != driver:
        return Check(
            name, "fail", f"fabric manager {fm.version} does not match driver {driver}: it refuses to start",
            _fm_fix(driver, policies),
        )  # fmt: skip
    if not fm.service.is_active:
        return Check(
            name, "fail", f"fabric manager {fm.version} matches the driver, but the service is {fm.service.active}",
            f"sudo systemctl enable --now {FABRIC_MANAGER_UNIT}; see why: journalctl -u {FABRIC_MANAGER_UNIT}",
        )  # fmt: skip
    return Check(name, "pass", f"fabric manager {fm.version} == driver {driver}, service active")


#: On a host the user may not change (a Slurm node, provisioned by the cluster's admins): what to
#: ask them for instead of an installer step (Docker's own packages and the toolkit's, as installed
#: by DockerInstallation and NvidiaContainerToolkitInstallation).
ADMIN_DOCKER_FIX = (
    "ask the cluster's admins to install Docker on the node (apt-get install docker-ce docker-ce-cli "
    "containerd.io; systemctl enable --now docker) and to let your user open its socket (the docker group); "
    "where you may change the nodes yourself, rerun with --slurm-allow-changes"
)
ADMIN_TOOLKIT_FIX = (
    "ask the cluster's admins to install the NVIDIA container toolkit on the node (apt-get install "
    "nvidia-container-toolkit nvidia-container-toolkit-base; nvidia-ctk runtime configure --runtime=docker; "
    "systemctl restart docker); where you may change the nodes yourself, rerun with --slurm-allow-changes"
)
ADMIN_DRIVER_FIX = (
    "ask the cluster's admins to install the NVIDIA driver and CUDA on the node (nvidia-driver-<branch>-server, "
    "cuda-drivers-fabricmanager-<branch> where it has NVSwitches) and reboot it"
)


def check_docker(docker: DockerInfo, *, admin_managed: bool = False) -> Check:
    if docker.daemon_ok:
        return Check("Docker works", "pass", f"Docker {docker.server_version}")
    if not docker.installed:
        fix = ADMIN_DOCKER_FIX if admin_managed else "run the DockerInstallation step"
        return Check("Docker works", "fail", "docker is not installed", fix)
    return Check("Docker works", "fail", docker.error, "sudo systemctl restart docker; journalctl -u docker says why")


def check_nvidia_runtime(docker: DockerInfo) -> Check:
    name = "nvidia runtime"
    if not docker.daemon_ok:
        return Check(name, "skip", "Docker does not answer")
    if docker.has_nvidia_runtime:
        return Check(name, "pass", f"runtimes: {', '.join(docker.runtimes)}")
    return Check(
        name,
        "fail",
        f"Docker has no nvidia runtime (runtimes: {', '.join(docker.runtimes)})",
        "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
    )


def check_container_toolkit(ctk_version: str | None, docker: DockerInfo, *, admin_managed: bool = False) -> Check:
    name = "container toolkit"
    if ctk_version is not None:
        return Check(name, "pass", f"nvidia-ctk {ctk_version}")
    if admin_managed:
        fix = ADMIN_TOOLKIT_FIX
    elif not docker.has_nvidia_runtime:
        fix = "run the NvidiaContainerToolkitInstallation step"
    else:  # registered in Docker, but its CLI is gone: a half-removed package
        fix = "sudo apt-get install --reinstall nvidia-container-toolkit-base nvidia-container-toolkit"
    return Check(name, "fail", "nvidia-ctk is not installed or does not answer (`nvidia-ctk --version`)", fix)


def check_disk_space(
    scratch: FreeSpace | None, path: str | None, min_free_gb: float, *, source: str = "--scratch"
) -> Check:
    name = "scratch space"
    if path is None:
        return Check(name, "skip", "no scratch path given (--scratch PATH) and none recorded by MountDisks")
    if scratch is None:
        return Check(
            name, "fail", f"cannot read the free space of {path}", f"check that {path} is reachable: df -h {path}"
        )
    free_gb = scratch.available_bytes / 1e9
    where = path if source == "--scratch" else f"{path}, recorded by {source}"
    detail = f"{free_gb:,.0f} GB free on {scratch.mount_point} (for {where}); need {min_free_gb:,.0f} GB"
    if free_gb >= min_free_gb:
        return Check(name, "pass", detail)
    return Check(name, "fail", detail, "put the scratch path on a bigger disk (FormatDisks/MountDisks steps)")


def check_reboot(reboot: RebootPending) -> Check:
    if not reboot.required:
        return Check("no reboot pending", "pass", "/var/run/reboot-required is absent")
    pkgs = f" (for {', '.join(reboot.packages)})" if reboot.packages else ""
    return Check("no reboot pending", "fail", f"a reboot is pending{pkgs}", "sudo reboot")


def run_checks(
    facts: DoctorFacts, *, min_free_gb: float = DEFAULT_MIN_FREE_GB, admin_managed: bool = False
) -> list[Check]:
    """Every check. ``admin_managed``: the host is not the user's to change (a Slurm node, whose
    ``allows_changes`` is False), so fixes name what to ask the admins for, not an installer step."""
    return [
        check_gpu_visible(facts.gpus),
        check_driver_loaded(facts.gpus, admin_managed=admin_managed),
        check_fabric_manager(facts.gpus, facts.fabric_manager, facts.fm_policies),
        check_docker(facts.docker, admin_managed=admin_managed),
        check_nvidia_runtime(facts.docker),
        check_container_toolkit(facts.ctk_version, facts.docker, admin_managed=admin_managed),
        check_disk_space(facts.scratch, facts.scratch_path, min_free_gb, source=facts.scratch_source),
        check_reboot(facts.reboot),
    ]


def recorded_scratch_path(host: Host, state_path: str | None = None) -> str | None:
    """The MLPERF_SCRATCH_PATH MountDisks recorded in the host's state, if any.

    ``state_path`` defaults to ``$WORKLOAD_STATE_PATH``, else the state's usual place, like ``run``.
    """
    from workload.installers.disks import SCRATCH_EXPORT, STATE_KEY
    from workload.steps import HostState

    state = HostState(host, state_path or os.environ.get("WORKLOAD_STATE_PATH") or None)
    mounted = state.get(STATE_KEY)
    if isinstance(mounted, dict) and isinstance(mounted.get("scratch_path"), str):
        return str(mounted["scratch_path"])
    exports = state.get("exports")
    if isinstance(exports, dict) and isinstance(exports.get(SCRATCH_EXPORT), str):
        return str(exports[SCRATCH_EXPORT])
    return None


def fabric_manager_packages(driver_version: str) -> list[str]:
    """The fabric manager packages of a driver's branch, whose apt offers word the exact fix."""
    branch = driver_version.split(".")[0]
    return [f"cuda-drivers-fabricmanager-{branch}", f"nvidia-fabricmanager-{branch}"]


def _read_fabric_manager_offers(host: Host) -> dict[str, AptPolicy]:
    # Which packages to ask apt about depends on the loaded driver, so the query cannot be known
    # (and batched) ahead; the GPUs are read again, which the host answers from its memory.
    gpus = read_gpus(host)
    if not (gpus.driver_version and gpus.nvswitch):
        return {}
    return read_apt_policy(host, fabric_manager_packages(gpus.driver_version))


#: apt's offers for the fabric manager packages of the loaded driver's branch (where NVSwitches are).
FABRIC_MANAGER_OFFERS: Fact[dict[str, AptPolicy]] = Fact("fabric-manager-offers", _read_fabric_manager_offers)


def doctor_facts(scratch_path: str | None) -> list[Fact[Any]]:
    """Every fact the checks read, declared once: doctor batches their queries and reads only these."""
    facts: list[Fact[Any]] = [GPUS, FABRIC_MANAGER, FABRIC_MANAGER_OFFERS, DOCKER_INFO, REBOOT_PENDING]
    facts.append(NVIDIA_CTK_VERSION)
    if scratch_path:
        facts.append(free_space(scratch_path))
    return facts


def read_doctor_facts(host: Host, *, scratch_path: str | None = None, state_path: str | None = None) -> DoctorFacts:
    """Every fact the checks need (:func:`doctor_facts`); without ``scratch_path``, the one MountDisks
    recorded on the host. Doctor changes nothing, so the facts are read once, their queries in one
    round trip."""
    source = "--scratch"
    if scratch_path is None:
        scratch_path = recorded_scratch_path(host, state_path)
        source = "MountDisks"
    with host.remembering_facts():
        facts = HostFacts(host, doctor_facts(scratch_path), reader="workload doctor")
        facts.prefetch()
        return DoctorFacts(
            gpus=facts[GPUS],
            fabric_manager=facts[FABRIC_MANAGER],
            fm_policies=facts[FABRIC_MANAGER_OFFERS],
            docker=facts[DOCKER_INFO],
            reboot=facts[REBOOT_PENDING],
            scratch=facts[free_space(scratch_path)] if scratch_path else None,
            scratch_path=scratch_path,
            ctk_version=facts[NVIDIA_CTK_VERSION],
            scratch_source=source,
        )
