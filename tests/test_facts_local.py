"""Fact readers against this real machine (Debian 12, no GPU) through LocalHost."""

from __future__ import annotations

import pytest

from installers.facts import docker as docker_facts
from installers.facts import nvidia, packages, system
from workload.hosts.local import LocalHost


@pytest.fixture(scope="module")
def host() -> LocalHost:
    return LocalHost()


def test_system_facts(host: LocalHost) -> None:
    os_release = system.read_os_release(host)
    arch = system.read_architecture(host)
    assert os_release.id and os_release.version_id
    assert arch.machine in ("x86_64", "aarch64") and arch.dpkg in ("amd64", "arm64")
    assert system.read_kernel(host)
    cpu = system.read_cpu(host)
    assert cpu.logical_cpus >= 1 and cpu.model
    mem = system.read_memory(host)
    assert mem.total_bytes > 2**28 and 0 < mem.available_bytes <= mem.total_bytes
    free = system.read_free_space(host, "/tmp/does/not/exist/yet")
    assert free is not None and free.available_bytes > 0
    assert system.read_reboot_pending(host).required in (True, False)
    root = system.read_user_home(host, "root")
    assert root == system.UserHome("root", "/root")


def test_unknown_user_is_a_fact_error(host: LocalHost) -> None:
    from workload.errors import FactError

    with pytest.raises(FactError, match="user 'no-such-user-xyz' does not exist"):
        system.read_user_home(host, "no-such-user-xyz")


def test_package_facts(host: LocalHost) -> None:
    facts = packages.read_package_facts(host, ["dpkg", "no-such-package-xyz"])
    assert facts.version("dpkg") is not None
    assert "dpkg" in facts.policies and "no-such-package-xyz" not in facts.policies
    assert facts.policies["dpkg"].installed == facts.version("dpkg")
    assert isinstance(facts.holds, frozenset)


def test_gpu_facts_without_a_gpu(host: LocalHost) -> None:
    inv = nvidia.read_gpus(host)
    assert inv.status == "not-installed" and inv.count == 0 and not inv.nvswitch
    fm = nvidia.read_fabric_manager(host)
    assert fm.version is None


def test_docker_info_is_read_whatever_the_daemon_state(host: LocalHost) -> None:
    info = docker_facts.read_docker_info(host)
    assert info.installed  # docker.io is installed on the CI machine
    assert info.daemon_ok or info.error
