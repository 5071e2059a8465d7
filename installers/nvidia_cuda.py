"""NvidiaCudaInstallation: NVIDIA driver, fabric manager and CUDA toolkit, pinned exactly.

Ensures, on Ubuntu 22.04/24.04 (x86_64/aarch64):

* ``build-essential`` (the driver's DKMS build and the MLPerf harness need a compiler);
* the driver packages of the branch (``nvidia-driver-550-server``, ``nvidia-dkms-550-server``;
  ``-open`` with ``OpenSourceDriver``) at ONE exact version, held with ``apt-mark hold``;
* where wanted (``InstallFabricManager``: ``auto`` = only where NVSwitches are on the PCI bus),
  the fabric manager at EXACTLY the driver's version, even when the repository offers a newer
  one, held too, its service enabled and running. NVIDIA's fabric manager refuses to start unless
  its version equals the loaded driver's, and an ``apt upgrade`` of one without the other is the
  most common way MLPerf machines break;
* the CUDA toolkit from the run file (``LinuxLocalRunFile``), downloaded resumably into a cache
  and checked against ``RunFileSha256`` when given, installed ``--silent --toolkit`` only where
  ``/usr/local/cuda-<LinuxCudaVersion>`` is missing;
* ``PATH``/``LD_LIBRARY_PATH`` lines in the real user's ``~/.bashrc``, once (marker comments).

Refused before anything changes (:func:`check_possible`, the step's preflight): Debian, whose
archive and NVIDIA's Debian repository do not ship Ubuntu's ``nvidia-driver-<branch>-server``
packages this step pins; any other OS or architecture; a host with no NVIDIA GPU on its PCI bus
(the test bed's hosts pass the option ``allow_no_gpu``); and a driver installed from NVIDIA's ``.run`` file
(``nvidia-smi`` that no package owns), which packages installed over it would break.

The exact version is ``LinuxDriverPackageVersion`` when given (``550.127.05`` or apt's full
``550.127.05-0ubuntu1``); otherwise the installed version of the branch package, or, on a host
without it, the newest version apt offers after refreshing its lists. That one version is used
for the driver and the fabric manager alike.

Installing or changing the driver needs a reboot (``RebootRequired``, default true): the plan
says so, the engine reboots, and the re-plan afterwards is a no-op; verify then checks that
``nvidia-smi`` reports the planned version and ``nv-fabricmanager --version`` the same.

Idempotency: everything is decided from the host's facts (dpkg, apt-mark, nvidia-smi,
nv-fabricmanager, ``nvcc --version``, files), so a provisioned host plans no change.

The code lives by job: parameters, facts shapes and derived names in
:mod:`workload.installers.nvidia_cuda_params`; the pure planner, preflight check and verify in
:mod:`workload.installers.nvidia_cuda_plan`; the step (reading facts, applying) here, which re-exports
every moved name.

Example::

    {"Type": "NvidiaCudaInstallation", "Parameters": {
        "LinuxCudaVersion": "12.4", "LinuxDriverVersion": "550",
        "LinuxLocalRunFile": "https://developer.download.nvidia.com/compute/cuda/12.4.0/local_installers/cuda_12.4.0_550.54.14_linux.run",
        "LinuxDriverPackageVersion": "550.127.05", "InstallFabricManager": "auto"}}
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from workload.facts.fact import Fact, HostFacts
from workload.facts.nvidia import (
    DRIVER_ORIGIN,
    FABRIC_MANAGER,
    GPUS,
    CudaToolkit,
    cuda_toolkit,
    read_gpus,
)
from workload.facts.packages import (
    PackageFacts,
    package_facts,
    read_package_facts,
    upstream_version,
)
from workload.facts.system import (
    ARCHITECTURE,
    OS_RELEASE,
    file_exists,
    file_text,
    user_file_has_line,
    user_home,
)
from workload.hosts.base import Host
from workload.installers import apt
from workload.installers.apt import PlanRefused
from workload.installers.download import SHA256_RE, DownloadState, download_state, file_name

# Moved by job (issue 14); re-exported so that every name stays importable from here.
from workload.installers.nvidia_cuda_params import (
    BUILD_PACKAGES,
    CUDA_REPO_DEFAULT,
    CUDA_REPO_KEY_DEFAULT,
    CUDA_REPO_LIST,
    CUDA_REPO_NAME,
    PREFERENCES_DIR,
    RUNFILE_TIMEOUT_S,
    SUPPORTED_UBUNTU,
    CudaFacts,
    NvidiaCudaParameters,
    PreflightFacts,
    VerifyFacts,
    apt_pin_path,
    apt_pin_text,
    bashrc_block,
    bashrc_markers,
    cuda_home,
    cuda_repository,
    driver_packages,
    fabric_manager_packages,
    planned_packages,
    runfile_path,
)
from workload.installers.nvidia_cuda_plan import _installs as _installs
from workload.installers.nvidia_cuda_plan import _put_lock_wait_first as _put_lock_wait_first
from workload.installers.nvidia_cuda_plan import check_possible, plan_nvidia_cuda, verify_problems, wants_fabric_manager
from workload.steps import FactPhase, StepContext, StepParameters, StepPlan

__all__ = [
    "BUILD_PACKAGES",
    "CUDA_REPO_DEFAULT",
    "CUDA_REPO_KEY_DEFAULT",
    "CUDA_REPO_LIST",
    "CUDA_REPO_NAME",
    "PREFERENCES_DIR",
    "RUNFILE_TIMEOUT_S",
    "SUPPORTED_UBUNTU",
    "CudaFacts",
    "NvidiaCudaInstallation",
    "NvidiaCudaParameters",
    "PreflightFacts",
    "VerifyFacts",
    "apt_pin_path",
    "apt_pin_text",
    "bashrc_block",
    "bashrc_markers",
    "check_possible",
    "cuda_home",
    "cuda_repository",
    "driver_packages",
    "fabric_manager_packages",
    "gather_facts",
    "plan_nvidia_cuda",
    "planned_packages",
    "runfile_path",
    "verify_problems",
    "wants_fabric_manager",
]


# -- the step ----------------------------------------------------------------------------------------
def bashrc_has_block(params: NvidiaCudaParameters) -> Fact[bool]:
    """Whether the real user's ``~/.bashrc`` already has this CUDA's block (its begin marker line)."""
    begin, _ = bashrc_markers(params)
    return user_file_has_line(params.Username, ".bashrc", begin)


def driver_offers(params: NvidiaCudaParameters) -> Fact[PackageFacts]:
    """apt's offers of the driver's packages, and of fabric manager's where the GPUs want it: which packages
    depends on the GPUs, so they are read first (the same query as :data:`GPUS`, nothing more to prefetch)."""

    def read(host: Host) -> PackageFacts:
        fm = fabric_manager_packages(params) if wants_fabric_manager(params, read_gpus(host)) else ()
        return read_package_facts(host, [*driver_packages(params), *fm])

    return Fact(f"driver-offers({params.LinuxDriverVersion})", read, GPUS.queries)


def gather_facts(
    ctx: StepContext, facts: HostFacts, params: NvidiaCudaParameters, *, refreshed: bool = False
) -> CudaFacts:
    """The planner's facts, read through the step's declaration (:meth:`NvidiaCudaInstallation.facts`)."""
    user = facts[user_home(params.Username)]
    toolkit = facts[cuda_toolkit(cuda_home(params))] if params.LinuxCudaVersion else None
    runfile = (
        facts[download_state(runfile_path(params))]
        if params.CudaRequired and params.LinuxLocalRunFile
        else DownloadState(complete=True, partial_bytes=0, tool=None)
    )
    return CudaFacts(
        os=facts[OS_RELEASE],
        arch=facts[ARCHITECTURE],
        packages=facts[package_facts(planned_packages(params))],
        gpus=facts[GPUS],
        fabric_manager=facts[FABRIC_MANAGER],
        user=user,
        toolkit_installed=toolkit is not None and toolkit.provides(params.LinuxCudaVersion or ""),
        runfile=runfile,
        bashrc_has_block=facts[bashrc_has_block(params)],
        cuda_repo_configured=facts[file_exists(CUDA_REPO_LIST)],
        apt_pin=facts[file_text(apt_pin_path(params))],
        refreshed=refreshed,
        allow_no_gpu=bool(ctx.options.get("allow_no_gpu", False)),
        driver_origin=facts[DRIVER_ORIGIN],
    )


def _toolkit_problem(params: NvidiaCudaParameters, toolkit: CudaToolkit | None) -> str:
    if toolkit is None or toolkit.provides(params.LinuxCudaVersion or ""):
        return ""
    return toolkit.problem or f"{toolkit.home}/bin/nvcc reports CUDA {toolkit.release}, not {params.LinuxCudaVersion}"


class NvidiaCudaInstallation(apt.AptInstallerStep):
    """NVIDIA driver + fabric manager (same exact version, held) + CUDA toolkit; see the module docstring."""

    type_name: ClassVar[str] = "NvidiaCudaInstallation"
    Parameters: ClassVar[type[StepParameters]] = NvidiaCudaParameters

    @property
    def p(self) -> NvidiaCudaParameters:
        assert isinstance(self.params, NvidiaCudaParameters)
        return self.params

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, NvidiaCudaParameters)
        if not re.fullmatch(r"\d{3,4}", params.LinuxDriverVersion.strip()):
            raise ValueError(f"LinuxDriverVersion: {params.LinuxDriverVersion!r} is not a driver branch like '550'")
        exact = params.LinuxDriverPackageVersion
        if exact and not upstream_version(exact).startswith(params.LinuxDriverVersion + "."):
            raise ValueError(
                f"LinuxDriverPackageVersion: {exact!r} is not a version of driver branch {params.LinuxDriverVersion}"
            )
        if params.CudaRequired:
            if not params.LinuxCudaVersion or not re.fullmatch(r"\d+\.\d+", params.LinuxCudaVersion):
                raise ValueError(
                    f"LinuxCudaVersion: {params.LinuxCudaVersion!r} is not a CUDA version like '12.4' "
                    "(set CudaRequired to false to skip CUDA)"
                )
            if not params.LinuxLocalRunFile:
                raise ValueError("LinuxLocalRunFile: the CUDA run file URL is required when CudaRequired is true")
            try:
                file_name(params.LinuxLocalRunFile)
            except ValueError as exc:
                raise ValueError(f"LinuxLocalRunFile: {exc}") from None
        if params.RunFileSha256 and not SHA256_RE.match(params.RunFileSha256):
            raise ValueError("RunFileSha256: expected 64 hexadecimal digits")

    def plan_from_host(self, ctx: StepContext, facts: HostFacts, *, refreshed: bool) -> StepPlan:
        return plan_nvidia_cuda(self.p, gather_facts(ctx, facts, self.p, refreshed=refreshed))

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        params = self.p
        if phase == "verify":
            toolkit = [cuda_toolkit(cuda_home(params))] if params.CudaRequired else []
            return [GPUS, FABRIC_MANAGER, package_facts(()), driver_offers(params), *toolkit]
        mine: list[Fact[Any]] = [GPUS, DRIVER_ORIGIN, FABRIC_MANAGER, package_facts(planned_packages(params))]
        mine += [user_home(params.Username), bashrc_has_block(params)]
        mine += [file_exists(CUDA_REPO_LIST), file_text(apt_pin_path(params))]
        if params.LinuxCudaVersion:
            mine.append(cuda_toolkit(cuda_home(params)))
        if params.CudaRequired and params.LinuxLocalRunFile:
            mine.append(download_state(runfile_path(params)))
        return [*super().facts(ctx, phase), *mine]

    def needs_nvidia_gpu(self) -> bool:
        return True  # the driver's kernel module has nothing to drive (its preflight refuses such a host)

    def preflight(self, ctx: StepContext) -> None:
        read = self.read_facts(ctx, "plan")
        facts = PreflightFacts(
            os=read[OS_RELEASE],
            arch=read[ARCHITECTURE],
            gpus=read[GPUS],
            driver_origin=read[DRIVER_ORIGIN],
            allow_no_gpu=bool(ctx.options.get("allow_no_gpu", False)),
        )
        try:
            check_possible(self.p, facts)
        except PlanRefused as exc:
            raise self.fail(exc.problem, ctx, hint=exc.hint) from None

    def verify(self, ctx: StepContext) -> None:
        params = self.p
        read = self.read_facts(ctx, "verify")
        gpus = read[GPUS]
        toolkit = read[cuda_toolkit(cuda_home(params))] if params.CudaRequired else None
        facts = VerifyFacts(
            packages=read[package_facts(())],
            gpus=gpus,
            fabric_manager=read[FABRIC_MANAGER],
            toolkit_installed=toolkit is not None and toolkit.provides(params.LinuxCudaVersion or ""),
            allow_no_gpu=bool(ctx.options.get("allow_no_gpu", False)),
            toolkit_problem=_toolkit_problem(params, toolkit),
        )
        problems = verify_problems(params, facts)
        if problems:
            # apt's offers word the exact fixes (full versions): read only when there is something to fix.
            problems = verify_problems(params, replace(facts, packages=read[driver_offers(params)]))
        if problems:
            problem, hint = problems[0]
            raise self.fail(problem, ctx, hint=hint)
