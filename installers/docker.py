"""DockerInstallation: Docker Engine from Docker's apt repository, and the user in the docker group.

Ensures, on Ubuntu 22.04/24.04 or Debian 12:

* ``docker-ce docker-ce-cli containerd.io docker-compose-plugin`` are installed (``Version``:
  docker-ce and docker-ce-cli at the newest build of that version, e.g. ``27.3.1``);
* Docker's apt repository and key are added only where no configured source offers docker-ce
  (``DockerRepository``/``DockerRepositoryKey``, default ``https://download.docker.com/linux/<os>``);
  the key is downloaded to ``/etc/apt/keyrings`` and the source is ``signed-by`` it. Never ``curl | sh``;
* the daemon answers (``docker info``), restarting it if it does not;
* the real user (``Username``, else SUDO_USER, else the connecting user) is in the ``docker`` group.

Idempotency: decided from dpkg, ``docker info`` and ``id``; a provisioned host plans no change.

Example::

    {"Type": "DockerInstallation", "Parameters": {"Scenario": "InstallDocker", "Version": "27.3.1"}}
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from workload.commands import cmd
from workload.facts.docker import DOCKER_INFO, DockerInfo
from workload.facts.fact import Fact, HostFacts
from workload.facts.packages import PackageFacts, package_facts
from workload.facts.system import (
    ARCHITECTURE,
    OS_RELEASE,
    Architecture,
    OsRelease,
    UserHome,
    file_exists,
    user_groups,
    user_home,
)
from workload.installers import apt
from workload.installers.apt import AptRepository
from workload.steps import Change, FactPhase, StepContext, StepParameters, StepPlan

DOCKER_PACKAGES = ("docker-ce", "docker-ce-cli", "containerd.io", "docker-compose-plugin")
VERSIONED = ("docker-ce", "docker-ce-cli")
REPO_NAME = "workload-docker"
#: The apt source file of Docker's repository (its presence: the repository is configured).
REPO_LIST = posixpath.join(apt.SOURCES_DIR, f"{REPO_NAME}.list")


class DockerParameters(StepParameters):
    Version: str | None = None
    Username: str | None = None
    DockerRepository: str | None = None
    DockerRepositoryKey: str | None = None
    DpkgLockTimeout: int = apt.DEFAULT_LOCK_TIMEOUT_S


@dataclass(frozen=True)
class DockerFacts:
    os: OsRelease
    arch: Architecture
    packages: PackageFacts
    docker: DockerInfo
    user: UserHome
    user_groups: frozenset[str]
    repo_configured: bool
    refreshed: bool = False


def docker_repository(params: DockerParameters, os_release: OsRelease, arch: Architecture) -> AptRepository:
    base = (params.DockerRepository or f"https://download.docker.com/linux/{os_release.id}").rstrip("/")
    key = params.DockerRepositoryKey or f"{base}/gpg"
    return AptRepository(REPO_NAME, key, f"{base} {os_release.codename} stable", architecture=arch.dpkg)


def plan_docker(params: DockerParameters, facts: DockerFacts) -> StepPlan:
    """Decide what DockerInstallation must change on a host with these facts (pure)."""
    apt.require_supported(facts.os, facts.arch)
    lock = params.DpkgLockTimeout
    decision = apt.decide_packages(
        DOCKER_PACKAGES,
        facts.packages,
        version=params.Version,
        versioned=VERSIONED,
        refreshed=facts.refreshed,
        repository=docker_repository(params, facts.os, facts.arch),
        repository_configured=facts.repo_configured,
        lock_timeout=lock,
    )
    changes: list[Change] = []
    if decision.pins:
        changes.append(
            Change(
                "install Docker Engine: " + ", ".join(decision.pins),
                (
                    apt.wait_for_dpkg_lock(lock),
                    apt.install(decision.pins, allow_downgrades=bool(params.Version), lock_timeout=lock),
                ),
            )
        )
    installing = bool(decision.pins) or decision.refresh is not None
    if not installing and not facts.docker.daemon_ok:
        changes.append(
            Change(
                f"start the Docker daemon ({facts.docker.error or 'it does not answer'})",
                (
                    cmd("systemctl", "enable", "docker", sudo=True, timeout=120),
                    cmd("systemctl", "restart", "docker", sudo=True, timeout=300),
                ),
            )
        )
    if not facts.user.is_root and "docker" not in facts.user_groups:
        changes.append(
            Change(
                f"add {facts.user.name} to the docker group (effective at their next login)",
                (cmd("usermod", "-aG", "docker", facts.user.name, sudo=True, timeout=60),),
            )
        )
    if decision.refresh is not None:
        preview = tuple(replace(c, summary=f"(preview) {c.summary}") for c in changes)
        notes = (decision.note,) if decision.note else ()
        return StepPlan(
            changes=(decision.refresh, *preview), notes=(*notes, "versions are confirmed after the refresh")
        )
    if not changes:
        version = facts.docker.server_version or facts.packages.version("docker-ce")
        who = "" if facts.user.is_root else f", {facts.user.name} is in the docker group"
        return StepPlan.noop(f"Docker {version} installed and answering{who}")
    return StepPlan(changes=tuple(changes))


def gather_facts(facts: HostFacts, params: DockerParameters, *, refreshed: bool = False) -> DockerFacts:
    """The planner's facts, read through the step's declaration (:meth:`DockerInstallation.facts`)."""
    user = facts[user_home(params.Username)]
    return DockerFacts(
        os=facts[OS_RELEASE],
        arch=facts[ARCHITECTURE],
        packages=facts[package_facts(DOCKER_PACKAGES)],
        docker=facts[DOCKER_INFO],
        user=user,
        user_groups=facts[user_groups(params.Username)],
        repo_configured=facts[file_exists(REPO_LIST)],
        refreshed=refreshed,
    )


class DockerInstallation(apt.AptInstallerStep):
    """Docker Engine from Docker's apt repository; see the module docstring."""

    type_name: ClassVar[str] = "DockerInstallation"
    Parameters: ClassVar[type[StepParameters]] = DockerParameters

    @property
    def p(self) -> DockerParameters:
        assert isinstance(self.params, DockerParameters)
        return self.params

    def plan_from_host(self, ctx: StepContext, facts: HostFacts, *, refreshed: bool) -> StepPlan:
        return plan_docker(self.p, gather_facts(facts, self.p, refreshed=refreshed))

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        if phase == "verify":
            return [DOCKER_INFO]
        mine: list[Fact[Any]] = [user_home(self.p.Username), user_groups(self.p.Username)]
        mine += [package_facts(DOCKER_PACKAGES), DOCKER_INFO]
        mine.append(file_exists(REPO_LIST))
        return [*super().facts(ctx, phase), *mine]

    def verify(self, ctx: StepContext) -> None:
        info = self.read_facts(ctx, "verify")[DOCKER_INFO]
        if not info.daemon_ok:
            raise self.fail(
                f"docker does not work: {info.error or 'docker info gave no server version'}",
                ctx,
                hint="sudo systemctl status docker; sudo journalctl -u docker says why it stopped",
            )
