"""NvidiaContainerToolkitInstallation: lets Docker containers use the GPUs.

Ensures, on Ubuntu 22.04/24.04 or Debian 12:

* ``nvidia-container-toolkit`` is installed (``Version`` to pin it), from NVIDIA's repository
  (``ToolkitRepository``/``ToolkitRepositoryKey``) only where no configured source offers it;
* the ``nvidia`` runtime is in ``/etc/docker/daemon.json`` (``nvidia-ctk runtime configure
  --runtime=docker``, the step users most often miss: "unknown or invalid runtime name: nvidia");
* the Docker daemon has loaded it (``docker info`` lists ``nvidia`` among its runtimes; restarted
  when not);
* ``nvidia-ctk --version`` answers (reinstalled when the package is there but the tool is not).

Verify: ``nvidia-ctk`` answers, the ``nvidia`` runtime is registered, and where GPUs are on the
PCI bus, a container sees them: ``docker run --rm --gpus all <Image> nvidia-smi -L``. GPUs whose
driver is not loaded fail verify (with the fix: NvidiaCudaInstallation, or the reboot it needs):
the toolkit is only useful once containers can reach them.

Example::

    {"Type": "NvidiaContainerToolkitInstallation", "Parameters": {"Scenario": "InstallNvidiaContainerToolkit"}}
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from workload.commands import cmd
from workload.facts.docker import DOCKER_INFO, NVIDIA_CTK_VERSION, DockerInfo
from workload.facts.fact import Fact, HostFacts, command_fact
from workload.facts.nvidia import GPUS, GpuInventory
from workload.facts.packages import PackageFacts, package_facts
from workload.facts.system import ARCHITECTURE, OS_RELEASE, Architecture, OsRelease, file_exists
from workload.installers import apt
from workload.installers.apt import AptRepository, PlanRefused
from workload.steps import Change, FactPhase, StepContext, StepParameters, StepPlan

PACKAGE = "nvidia-container-toolkit"
#: Holds ``nvidia-ctk`` since toolkit 1.13 (the main package depends on it at the same version).
BASE_PACKAGE = "nvidia-container-toolkit-base"
REPO_NAME = "workload-nvidia-container-toolkit"
DAEMON_JSON = "/etc/docker/daemon.json"
#: Through sudo (the file may be root's alone) and read-only, so it goes to the host with the
#: step's other fact queries; a missing file reads as "no runtime registered".
DAEMON_JSON_QUERY = cmd("cat", DAEMON_JSON, sudo=True, timeout=60, readonly=True)
#: Docker's daemon.json, None where it is missing or unreadable.
DAEMON_JSON_TEXT: Fact[str | None] = command_fact(
    "docker-daemon-json", DAEMON_JSON_QUERY, lambda _host, result: result.stdout if result.ok else None
)
#: The apt source file of the toolkit's repository (its presence: the repository is configured).
REPO_LIST = posixpath.join(apt.SOURCES_DIR, f"{REPO_NAME}.list")


class ToolkitParameters(StepParameters):
    Version: str | None = None
    #: Image for the "a container sees the GPU" check (must be present or pullable on the host).
    Image: str = "ubuntu:22.04"
    ToolkitRepository: str = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /"
    ToolkitRepositoryKey: str = "https://nvidia.github.io/libnvidia-container/gpgkey"
    DpkgLockTimeout: int = apt.DEFAULT_LOCK_TIMEOUT_S


@dataclass(frozen=True)
class ToolkitFacts:
    os: OsRelease
    arch: Architecture
    packages: PackageFacts
    docker: DockerInfo
    #: ``runtimes.nvidia`` is present in /etc/docker/daemon.json.
    daemon_json_has_nvidia: bool
    repo_configured: bool
    refreshed: bool = False
    #: ``nvidia-ctk --version`` (None: the tool is missing or does not answer).
    ctk_version: str | None = None


def daemon_json_has_nvidia(text: str | None) -> bool:
    if not text:
        return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("runtimes"), dict) and "nvidia" in data["runtimes"]


def toolkit_repository(params: ToolkitParameters) -> AptRepository:
    # NVIDIA's list uses apt's own $(ARCH) substitution, so the line is the same on every architecture.
    return AptRepository(REPO_NAME, params.ToolkitRepositoryKey, params.ToolkitRepository)


def plan_toolkit(params: ToolkitParameters, facts: ToolkitFacts) -> StepPlan:
    """Decide what NvidiaContainerToolkitInstallation must change (pure)."""
    apt.require_supported(facts.os, facts.arch)
    if not facts.docker.installed:
        raise PlanRefused("docker is not installed", hint="put DockerInstallation before this step in the profile")
    lock = params.DpkgLockTimeout
    decision = apt.decide_packages(
        (PACKAGE,),
        facts.packages,
        version=params.Version,
        versioned=(PACKAGE,),
        refreshed=facts.refreshed,
        repository=toolkit_repository(params),
        repository_configured=facts.repo_configured,
        lock_timeout=lock,
    )
    changes: list[Change] = []
    installing = bool(decision.pins) or decision.refresh is not None
    installed = facts.packages.version(PACKAGE)
    refresh = decision.refresh
    if not installing and installed is not None and facts.ctk_version is None:
        # The package says installed but its tool is gone (deleted, or a half-removed base package).
        changes.append(
            Change(
                f"reinstall the NVIDIA container toolkit: {PACKAGE} {installed} is installed but nvidia-ctk "
                "does not answer",
                (
                    apt.wait_for_dpkg_lock(lock),
                    apt.apt_get("install", "--reinstall", BASE_PACKAGE, PACKAGE, lock_timeout=lock),
                ),
            )
        )
        installing = True
        if not facts.refreshed:
            refresh = apt.refresh_change(lock_timeout=lock)
    if decision.pins:
        changes.append(
            Change(
                "install the NVIDIA container toolkit: " + ", ".join(decision.pins),
                (
                    apt.wait_for_dpkg_lock(lock),
                    apt.install(decision.pins, allow_downgrades=bool(params.Version), lock_timeout=lock),
                ),
            )
        )
    configure = installing or not facts.daemon_json_has_nvidia
    if configure:
        changes.append(
            Change(
                f"register the nvidia runtime in {DAEMON_JSON}",
                (cmd("nvidia-ctk", "runtime", "configure", "--runtime=docker", sudo=True, timeout=120),),
            )
        )
    if configure or not facts.docker.has_nvidia_runtime:
        changes.append(
            Change(
                "restart Docker so it loads the nvidia runtime",
                (cmd("systemctl", "restart", "docker", sudo=True, timeout=300),),
            )
        )
    if refresh is not None:
        preview = tuple(replace(c, summary=f"(preview) {c.summary}") for c in changes)
        notes = (decision.note,) if decision.note else ()
        return StepPlan(changes=(refresh, *preview), notes=notes)
    if not changes:
        return StepPlan.noop(
            f"{PACKAGE} {installed} installed (nvidia-ctk {facts.ctk_version}) and the nvidia runtime "
            "is registered in Docker"
        )
    return StepPlan(changes=tuple(changes))


def gather_facts(facts: HostFacts, *, refreshed: bool = False) -> ToolkitFacts:
    """The planner's facts, read through the step's declaration (:meth:`NvidiaContainerToolkitInstallation.facts`)."""
    return ToolkitFacts(
        os=facts[OS_RELEASE],
        arch=facts[ARCHITECTURE],
        packages=facts[package_facts((PACKAGE,))],
        docker=facts[DOCKER_INFO],
        daemon_json_has_nvidia=daemon_json_has_nvidia(facts[DAEMON_JSON_TEXT]),
        repo_configured=facts[file_exists(REPO_LIST)],
        refreshed=refreshed,
        ctk_version=facts[NVIDIA_CTK_VERSION],
    )


def undriven_gpus_problem(gpus: GpuInventory) -> tuple[str, str] | None:
    """(problem, fix) where GPUs are on the PCI bus but their driver does not answer (pure).

    No GPU on the bus: nothing to check. GPUs without a working driver: containers cannot use
    them, so the toolkit's promise does not hold yet.
    """
    if gpus.driver_loaded or gpus.count == 0:
        return None
    fixes = {
        "not-installed": "run NvidiaCudaInstallation before this step",
        "no-driver": "reboot to load the installed driver (NvidiaCudaInstallation does with RebootRequired: true)",
        "mismatch": "reboot: the loaded driver is older than the installed one",
    }
    fix = fixes.get(gpus.status, "run NvidiaCudaInstallation, then check `nvidia-smi` and `dmesg | grep -i nvrm`")
    state = gpus.message or gpus.status
    return f"{gpus.count} NVIDIA GPU(s) on the PCI bus, but their driver does not answer ({state})", fix


def gpu_container_problem(gpus: GpuInventory, returncode: int, output: str) -> str | None:
    """Why ``docker run --gpus all IMAGE nvidia-smi -L`` did not show the host's GPUs (None: it did)."""
    listed = [line for line in output.splitlines() if line.startswith("GPU ")]
    if returncode != 0:
        tail = " ".join(output.strip().splitlines()[-2:])
        return f"a container could not use the GPUs (exit {returncode}): {tail}"
    if len(listed) < len(gpus.gpus):
        return f"a container sees {len(listed)} GPU(s), the host has {len(gpus.gpus)}"
    return None


class NvidiaContainerToolkitInstallation(apt.AptInstallerStep):
    """NVIDIA container toolkit + the nvidia runtime in Docker; see the module docstring."""

    type_name: ClassVar[str] = "NvidiaContainerToolkitInstallation"
    Parameters: ClassVar[type[StepParameters]] = ToolkitParameters

    @property
    def p(self) -> ToolkitParameters:
        assert isinstance(self.params, ToolkitParameters)
        return self.params

    def plan_from_host(self, ctx: StepContext, facts: HostFacts, *, refreshed: bool) -> StepPlan:
        return plan_toolkit(self.p, gather_facts(facts, refreshed=refreshed))

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        checks: list[Fact[Any]] = [NVIDIA_CTK_VERSION, DOCKER_INFO]
        if phase == "verify":
            return [*checks, GPUS]
        mine: list[Fact[Any]] = [package_facts((PACKAGE,)), *checks, DAEMON_JSON_TEXT, file_exists(REPO_LIST)]
        return [*super().facts(ctx, phase), *mine]

    def verify(self, ctx: StepContext) -> None:
        facts = self.read_facts(ctx, "verify")
        if facts[NVIDIA_CTK_VERSION] is None:
            raise self.fail(
                "nvidia-ctk does not answer (`nvidia-ctk --version`)",
                ctx,
                hint=f"sudo apt-get install --reinstall {BASE_PACKAGE} {PACKAGE}",
            )
        info = facts[DOCKER_INFO]
        if not info.has_nvidia_runtime:
            raise self.fail(
                f"Docker does not list the nvidia runtime (runtimes: {', '.join(info.runtimes) or info.error})",
                ctx,
                hint="sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker",
            )
        gpus = facts[GPUS]
        undriven = undriven_gpus_problem(gpus)
        if undriven is not None:
            raise self.fail(undriven[0], ctx, hint=undriven[1])
        if gpus.count == 0:
            ctx.log("no NVIDIA GPU on this host: no GPU check in a container")
            return
        probe = cmd("docker", "run", "--rm", "--gpus", "all", self.p.Image, "nvidia-smi", "-L", sudo=True, timeout=600)
        result = ctx.run(probe)
        problem = gpu_container_problem(gpus, result.returncode, result.stdout + result.stderr)
        if problem:
            raise self.fail(
                problem,
                ctx,
                hint=f"try: sudo {probe.display()}; check `nvidia-ctk --version` and {DAEMON_JSON}",
            )
