"""DockerInstallation and NvidiaContainerToolkitInstallation planners (pure) and their apt helpers."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.fixtures.facts.builders import AZUREUSER, DEBIAN_12, ROCKY_9, ROOT, UBUNTU_22, UBUNTU_24, X86, inventory
from tests.test_installers_nvidia_cuda import LOCK_WAIT, short
from workload.facts.docker import DockerInfo
from workload.facts.packages import APT_LISTS_STAMP, AptPolicy, InstalledPackage, PackageFacts
from workload.installers.apt import AptRefresh, PlanRefused
from workload.installers.docker import DOCKER_PACKAGES, DockerFacts, DockerParameters, plan_docker
from workload.installers.nvidia_container_toolkit import (
    ToolkitFacts,
    ToolkitParameters,
    daemon_json_has_nvidia,
    gpu_container_problem,
    plan_toolkit,
    undriven_gpus_problem,
)

DOCKER_VERSIONS = ("5:27.3.1-1~ubuntu.22.04~jammy", "5:27.3.0-1~ubuntu.22.04~jammy", "5:26.1.4-1~ubuntu.22.04~jammy")
RUNNING = DockerInfo(installed=True, server_version="27.3.1", runtimes=("io.containerd.runc.v2", "runc"))


def pkgs(installed: dict[str, str] | None = None, offered: dict[str, tuple[str, ...]] | None = None) -> PackageFacts:
    installed = installed or {}
    policies = {n: AptPolicy(n, installed.get(n), vs[0] if vs else None, vs, vs) for n, vs in (offered or {}).items()}
    return PackageFacts({n: InstalledPackage(n, v, "ii ") for n, v in installed.items()}, frozenset(), policies)


ALL_OFFERED = {
    "docker-ce": DOCKER_VERSIONS,
    "docker-ce-cli": DOCKER_VERSIONS,
    "containerd.io": ("1.7.22-1",),
    "docker-compose-plugin": ("2.29.7-1~ubuntu.22.04~jammy",),
}


def dfacts(**kw: Any) -> DockerFacts:
    base: dict[str, Any] = {
        "os": UBUNTU_22,
        "arch": X86,
        "packages": pkgs(offered=ALL_OFFERED),
        "docker": DockerInfo(installed=False, error="docker is not installed"),
        "user": AZUREUSER,
        "user_groups": frozenset({"azureuser", "sudo"}),
        "repo_configured": False,
        "refreshed": True,
    }
    base.update(kw)
    return DockerFacts(**base)


def test_fresh_host_installs_docker_and_adds_the_user_to_the_group() -> None:
    plan = plan_docker(DockerParameters(), dfacts())
    assert [(c.summary, [short(x) for x in c.commands]) for c in plan.changes] == [
        (
            "install Docker Engine: docker-ce, docker-ce-cli, containerd.io, docker-compose-plugin",
            [
                LOCK_WAIT,
                "apt-get install docker-ce docker-ce-cli containerd.io docker-compose-plugin",
            ],
        ),
        (
            "add azureuser to the docker group (effective at their next login)",
            ["usermod -aG docker azureuser"],
        ),
    ]


def test_version_pins_docker_ce_and_cli_to_the_newest_build_of_that_version() -> None:
    plan = plan_docker(DockerParameters(Version="27.3.0"), dfacts(user=ROOT))
    install = plan.changes[0].commands[1]
    assert short(install) == (
        "apt-get install --allow-downgrades docker-ce=5:27.3.0-1~ubuntu.22.04~jammy "
        "docker-ce-cli=5:27.3.0-1~ubuntu.22.04~jammy containerd.io docker-compose-plugin"
    )
    assert len(plan.changes) == 1  # root needs no docker group


def test_no_candidate_adds_dockers_repository_only_then() -> None:
    first = plan_docker(DockerParameters(), dfacts(packages=pkgs(), refreshed=False))
    assert isinstance(first.changes[0], AptRefresh)
    _wait, refresh, stamp = first.changes[0].commands  # the lock wait, apt-get update, then the freshness stamp
    assert "apt-get" in refresh.argv and "update" in refresh.argv
    assert stamp.argv[-1] == APT_LISTS_STAMP
    second = plan_docker(DockerParameters(), dfacts(packages=pkgs()))
    line = next(c.input for c in second.changes[0].commands if c.argv[0] == "tee")
    assert line == (
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/workload-docker.asc] "
        "https://download.docker.com/linux/ubuntu jammy stable\n"
    )
    assert any(
        short(c).startswith("retry 4 5 curl -fsSL") and "https://download.docker.com/linux/ubuntu/gpg" in short(c)
        for c in second.commands
    )
    debian = plan_docker(DockerParameters(), dfacts(os=DEBIAN_12, packages=pkgs()))
    assert "https://download.docker.com/linux/debian bookworm stable" in str(
        next(c.input for c in debian.commands if c.argv[0] == "tee")
    )
    mirror = plan_docker(
        DockerParameters(DockerRepository="http://127.0.0.1:8080/docker"), dfacts(os=UBUNTU_24, packages=pkgs())
    )
    assert "http://127.0.0.1:8080/docker noble stable" in str(
        next(c.input for c in mirror.commands if c.argv[0] == "tee")
    )
    with pytest.raises(PlanRefused, match="no configured apt source offers docker-ce, docker-ce-cli"):
        plan_docker(DockerParameters(), dfacts(packages=pkgs(), repo_configured=True))


def test_provisioned_docker_host_is_a_noop() -> None:
    installed = {n: "1" for n in DOCKER_PACKAGES} | {
        "docker-ce": DOCKER_VERSIONS[0],
        "docker-ce-cli": DOCKER_VERSIONS[0],
    }
    plan = plan_docker(
        DockerParameters(Version="27.3.1"),
        dfacts(
            packages=pkgs(installed, ALL_OFFERED), docker=RUNNING, user_groups=frozenset({"docker"}), refreshed=False
        ),
    )
    assert not plan.changed
    assert plan.noop_reason == "Docker 27.3.1 installed and answering, azureuser is in the docker group"
    stopped = plan_docker(
        DockerParameters(),
        dfacts(
            packages=pkgs(installed, ALL_OFFERED),
            docker=DockerInfo(installed=True, error="Cannot connect"),
            user_groups=frozenset({"docker"}),
        ),
    )
    assert [short(c) for c in stopped.commands] == ["systemctl enable docker", "systemctl restart docker"]


def test_docker_refuses_unsupported_os() -> None:
    with pytest.raises(PlanRefused, match="Rocky Linux"):
        plan_docker(DockerParameters(), dfacts(os=ROCKY_9))


# -- NVIDIA container toolkit ------------------------------------------------------------------------
def tfacts(**kw: Any) -> ToolkitFacts:
    base: dict[str, Any] = {
        "os": UBUNTU_22,
        "arch": X86,
        "packages": pkgs(offered={"nvidia-container-toolkit": ("1.17.3-1", "1.16.2-1")}),
        "docker": RUNNING,
        "daemon_json_has_nvidia": False,
        "repo_configured": False,
        "refreshed": True,
        "ctk_version": "1.17.3",
    }
    base.update(kw)
    return ToolkitFacts(**base)


def test_toolkit_fresh_install_configures_and_restarts_docker() -> None:
    plan = plan_toolkit(ToolkitParameters(), tfacts())
    assert [[short(x) for x in c.commands] for c in plan.changes] == [
        [
            LOCK_WAIT,
            "apt-get install nvidia-container-toolkit",
        ],
        ["nvidia-ctk runtime configure --runtime=docker"],
        ["systemctl restart docker"],
    ]


def test_toolkit_installed_but_runtime_not_loaded_only_restarts() -> None:
    installed = pkgs({"nvidia-container-toolkit": "1.17.3-1"}, {"nvidia-container-toolkit": ("1.17.3-1",)})
    plan = plan_toolkit(ToolkitParameters(), tfacts(packages=installed, daemon_json_has_nvidia=True, refreshed=False))
    assert [short(c) for c in plan.commands] == ["systemctl restart docker"]
    done = plan_toolkit(
        ToolkitParameters(),
        tfacts(
            packages=installed,
            daemon_json_has_nvidia=True,
            docker=DockerInfo(installed=True, server_version="27.3.1", runtimes=("nvidia", "runc")),
        ),
    )
    assert not done.changed and "1.17.3-1 installed" in str(done.noop_reason)


def test_toolkit_repo_line_uses_apts_arch_substitution() -> None:
    plan = plan_toolkit(ToolkitParameters(), tfacts(packages=pkgs()))
    line = next(c.input for c in plan.commands if c.argv[0] == "tee")
    assert line == (
        "deb [signed-by=/etc/apt/keyrings/workload-nvidia-container-toolkit.asc] "
        "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    )


def test_toolkit_needs_docker_first() -> None:
    with pytest.raises(PlanRefused, match="docker is not installed"):
        plan_toolkit(ToolkitParameters(), tfacts(docker=DockerInfo(installed=False)))


def test_daemon_json_and_gpu_container_checks() -> None:
    assert daemon_json_has_nvidia('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}')
    assert not daemon_json_has_nvidia('{"data-root": "/mnt/docker"}')
    assert not daemon_json_has_nvidia("not json") and not daemon_json_has_nvidia(None)
    gpus = inventory(loaded="550.127.05", gpus=2)
    ok = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-0)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\n"
    assert gpu_container_problem(gpus, 0, ok) is None
    assert gpu_container_problem(gpus, 0, ok.splitlines()[0]) == "a container sees 1 GPU(s), the host has 2"
    err = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
    assert "could not select device driver" in str(gpu_container_problem(gpus, 125, err))


def test_toolkit_whose_nvidia_ctk_is_gone_is_reinstalled() -> None:
    installed = pkgs({"nvidia-container-toolkit": "1.17.3-1"}, {"nvidia-container-toolkit": ("1.17.3-1",)})
    registered = DockerInfo(installed=True, server_version="27.3.1", runtimes=("nvidia", "runc"))
    ok = plan_toolkit(ToolkitParameters(), tfacts(packages=installed, docker=registered, daemon_json_has_nvidia=True))
    assert not ok.changed
    assert ok.noop_reason == (
        "nvidia-container-toolkit 1.17.3-1 installed (nvidia-ctk 1.17.3) and the nvidia runtime is registered in Docker"
    )
    gone = tfacts(packages=installed, docker=registered, daemon_json_has_nvidia=True, ctk_version=None)
    plan = plan_toolkit(ToolkitParameters(), gone)
    assert [[short(x) for x in c.commands] for c in plan.changes] == [
        [LOCK_WAIT, "apt-get install --reinstall nvidia-container-toolkit-base nvidia-container-toolkit"],
        ["nvidia-ctk runtime configure --runtime=docker"],
        ["systemctl restart docker"],
    ]
    stale = plan_toolkit(ToolkitParameters(), dataclasses.replace(gone, refreshed=False))
    assert isinstance(stale.changes[0], AptRefresh)


def test_gpus_without_a_driver_fail_the_toolkit_check_with_the_fix() -> None:
    """GPUs on the PCI bus whose driver does not answer: no container can use them."""
    assert undriven_gpus_problem(inventory(loaded="550.127.05", gpus=2)) is None
    assert undriven_gpus_problem(inventory(loaded=None, gpus=0, nvswitches=0)) is None  # no GPU: nothing to check
    problem = undriven_gpus_problem(inventory(loaded=None, gpus=2, status="no-driver"))
    assert problem is not None
    assert problem[0].startswith("2 NVIDIA GPU(s) on the PCI bus, but their driver does not answer")
    assert "reboot" in problem[1]
    missing = undriven_gpus_problem(inventory(loaded=None, gpus=2, status="not-installed"))
    assert missing is not None and missing[1] == "run NvidiaCudaInstallation before this step"
