"""NvidiaCudaInstallation's parameters, the facts its phases read, and the names derived from them.

Moved out of :mod:`workload.installers.nvidia_cuda` (which re-exports every name and states the contract):
constants, :class:`NvidiaCudaParameters`, the facts shapes and the packages/paths/repository
that follow from the parameters.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Literal

from pydantic import field_validator

from workload.facts.nvidia import (
    DriverOrigin,
    FabricManagerFacts,
    GpuInventory,
)
from workload.facts.packages import (
    PackageFacts,
)
from workload.facts.system import (
    Architecture,
    OsRelease,
    UserHome,
)
from workload.installers import apt
from workload.installers.apt import AptRepository
from workload.installers.download import DownloadState, file_name
from workload.steps import StepParameters

CUDA_REPO_NAME = "workload-nvidia-cuda"
#: The apt source file of NVIDIA's CUDA repository (its presence: the repository is configured).
CUDA_REPO_LIST = posixpath.join(apt.SOURCES_DIR, f"{CUDA_REPO_NAME}.list")
CUDA_REPO_DEFAULT = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/"
CUDA_REPO_KEY_DEFAULT = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/3bf863cc.pub"
BUILD_PACKAGES = ("build-essential",)
PREFERENCES_DIR = "/etc/apt/preferences.d"
RUNFILE_TIMEOUT_S = 3600.0
#: The Ubuntu releases whose archive (and NVIDIA's repository for them) ship the packages pinned here.
SUPPORTED_UBUNTU = ("22.04", "24.04")


class NvidiaCudaParameters(StepParameters):
    """Parameters of NvidiaCudaInstallation (VirtualClient's names, plus exact-pinning extras)."""

    LinuxDriverVersion: str
    LinuxCudaVersion: str | None = None
    LinuxLocalRunFile: str | None = None
    Username: str | None = None
    LinuxDriverPackageVersion: str | None = None
    RunFileSha256: str | None = None
    InstallFabricManager: Literal["auto", "true", "false"] = "auto"
    CudaRequired: bool = True
    RebootRequired: bool = True
    OpenSourceDriver: bool = False
    #: NVIDIA's CUDA apt repository, added only where no configured source offers the driver.
    CudaRepository: str | None = None
    CudaRepositoryKey: str | None = None
    #: Where the run file is kept between runs.
    CacheDir: str = "/var/cache/workload"
    DpkgLockTimeout: int = apt.DEFAULT_LOCK_TIMEOUT_S

    @field_validator("InstallFabricManager", mode="before")
    @classmethod
    def _fm_word(cls, value: object) -> object:
        if isinstance(value, bool):
            return "true" if value else "false"
        return value.strip().lower() if isinstance(value, str) else value


# -- facts -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CudaFacts:
    """Everything the planner decides on, read fresh from the host."""

    os: OsRelease
    arch: Architecture
    packages: PackageFacts
    gpus: GpuInventory
    fabric_manager: FabricManagerFacts
    user: UserHome
    #: ``<cuda home>/bin/nvcc --version`` reports LinuxCudaVersion.
    toolkit_installed: bool
    runfile: DownloadState
    bashrc_has_block: bool
    cuda_repo_configured: bool
    #: Content of this branch's apt preferences pin file (None: absent).
    apt_pin: str | None = None
    #: The apt lists were refreshed by this step just now (so a missing version is really missing).
    refreshed: bool = False
    #: Test option: plan for a host with no NVIDIA GPU (the driver cannot load there).
    allow_no_gpu: bool = False
    #: Who installed the nvidia-smi on the PATH (a package, or NVIDIA's .run file).
    driver_origin: DriverOrigin = field(default_factory=DriverOrigin)


@dataclass(frozen=True)
class PreflightFacts:
    """What decides whether this step can work on a host at all (read before any step runs)."""

    os: OsRelease
    arch: Architecture
    gpus: GpuInventory
    driver_origin: DriverOrigin = field(default_factory=DriverOrigin)
    allow_no_gpu: bool = False

    @classmethod
    def of(cls, facts: CudaFacts) -> PreflightFacts:
        return cls(facts.os, facts.arch, facts.gpus, facts.driver_origin, facts.allow_no_gpu)


@dataclass(frozen=True)
class VerifyFacts:
    """The facts verify needs (fewer than planning: verify runs on every run, so it stays cheap)."""

    packages: PackageFacts
    gpus: GpuInventory
    fabric_manager: FabricManagerFacts
    toolkit_installed: bool
    allow_no_gpu: bool = False
    #: Why the toolkit does not work (from ``nvcc --version``), when it does not.
    toolkit_problem: str = ""

    @classmethod
    def of(cls, facts: CudaFacts) -> VerifyFacts:
        return cls(facts.packages, facts.gpus, facts.fabric_manager, facts.toolkit_installed, facts.allow_no_gpu)


def driver_packages(params: NvidiaCudaParameters) -> tuple[str, ...]:
    branch = params.LinuxDriverVersion
    flavour = "open" if params.OpenSourceDriver else "server"
    return (f"nvidia-driver-{branch}-{flavour}", f"nvidia-dkms-{branch}-{flavour}")


def fabric_manager_packages(params: NvidiaCudaParameters) -> tuple[str, ...]:
    """NVIDIA's CUDA repo: the meta package ``cuda-drivers-fabricmanager-B`` (depends on the next);
    Ubuntu's archive and NVIDIA's repo: ``nvidia-fabricmanager-B`` (the binary)."""
    branch = params.LinuxDriverVersion
    return (f"cuda-drivers-fabricmanager-{branch}", f"nvidia-fabricmanager-{branch}")


def planned_packages(params: NvidiaCudaParameters) -> list[str]:
    """Every package the plan may install (whose installed versions and apt offers it reads)."""
    return [*BUILD_PACKAGES, *driver_packages(params), *fabric_manager_packages(params)]


def apt_pin_path(params: NvidiaCudaParameters) -> str:
    return posixpath.join(PREFERENCES_DIR, f"workload-nvidia-{params.LinuxDriverVersion}")


def apt_pin_text(params: NvidiaCudaParameters, upstream: str) -> str:
    """apt preferences that make ``upstream`` the candidate of every package of the branch.

    The driver depends on utils, dkms, libnvidia-* of exactly its own version; pinning only the
    top packages would leave apt choosing the newest dependencies and failing. Priority 1001 also
    keeps ``apt upgrade`` from moving any of them (the holds say the same for the main packages).
    """
    branch = params.LinuxDriverVersion
    return (
        f"# Written by workload (NvidiaCudaInstallation): every NVIDIA branch-{branch} package at {upstream},\n"
        "# so the driver, its libraries and the fabric manager always have the same version.\n"
        f"Package: *-{branch} *-{branch}-server *-{branch}-open\n"
        f"Pin: version {upstream}-*\n"
        "Pin-Priority: 1001\n"
    )


def cuda_home(params: NvidiaCudaParameters) -> str:
    return f"/usr/local/cuda-{params.LinuxCudaVersion}"


def runfile_path(params: NvidiaCudaParameters) -> str:
    assert params.LinuxLocalRunFile is not None
    return posixpath.join(params.CacheDir, file_name(params.LinuxLocalRunFile))


def bashrc_markers(params: NvidiaCudaParameters) -> tuple[str, str]:
    return (
        f"# >>> workload: CUDA {params.LinuxCudaVersion} >>>",
        f"# <<< workload: CUDA {params.LinuxCudaVersion} <<<",
    )


def bashrc_block(params: NvidiaCudaParameters) -> str:
    begin, end = bashrc_markers(params)
    home = cuda_home(params)
    return (
        f"{begin}\n"
        f"export PATH={home}/bin${{PATH:+:${{PATH}}}}\n"
        f"export LD_LIBRARY_PATH={home}/lib64${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}\n"
        f"{end}\n"
    )


def cuda_repository(params: NvidiaCudaParameters, os_release: OsRelease, arch: Architecture) -> AptRepository:
    distro = f"{os_release.id}{os_release.version_id.replace('.', '')}"
    repo_arch = "sbsa" if arch.machine == "aarch64" else arch.machine
    url = params.CudaRepository or CUDA_REPO_DEFAULT.format(distro=distro, arch=repo_arch)
    key = params.CudaRepositoryKey or CUDA_REPO_KEY_DEFAULT.format(distro=distro, arch=repo_arch)
    # NVIDIA's CUDA repositories are flat ("URL /"), not suites.
    return AptRepository(CUDA_REPO_NAME, key, f"{url} /", architecture=arch.dpkg)
