"""Fact readers against this real machine (Debian 12, no GPU) through LocalHost.

Each value is checked against an independent source (a second command, a file the test wrote),
so a reader that returned a constant would fail.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import pytest

from workload.facts import docker as docker_facts
from workload.facts import nvidia, packages, system
from workload.hosts.local import LocalHost

NVCC_12_4 = (Path(__file__).parent / "fixtures" / "facts" / "nvcc_version" / "cuda-12.4.0.txt").read_text()


@pytest.fixture(scope="module")
def host() -> LocalHost:
    return LocalHost()


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def test_system_facts(host: LocalHost) -> None:
    os_release = system.read_os_release(host)
    arch = system.read_architecture(host)
    assert os_release == system.parse_os_release(Path("/etc/os-release").read_text())
    assert arch.machine == platform.machine() and arch.dpkg == sh("dpkg", "--print-architecture").strip()
    cpu = system.read_cpu(host)
    assert cpu.logical_cpus == os.cpu_count() and cpu.model
    mem = system.read_memory(host)
    assert mem.total_bytes > 2**28 and 0 < mem.available_bytes <= mem.total_bytes
    free = system.read_free_space(host, "/tmp/does/not/exist/yet")
    assert free is not None and free.available_bytes > 0
    root = system.read_user_home(host, "root")
    assert root == system.UserHome("root", "/root")


def test_reboot_flag_and_its_package_list(host: LocalHost, tmp_path: Path) -> None:
    flag = tmp_path / "reboot-required"
    assert system.read_reboot_pending(host, str(flag)) == system.RebootPending(required=False)
    flag.write_text("*** System restart required ***\n")
    assert system.read_reboot_pending(host, str(flag)) == system.RebootPending(required=True)
    (tmp_path / "reboot-required.pkgs").write_text("nvidia-dkms-550-server\nlinux-base\nnvidia-dkms-550-server\n")
    pending = system.read_reboot_pending(host, str(flag))
    assert pending == system.RebootPending(required=True, packages=("nvidia-dkms-550-server", "linux-base"))


def test_unknown_user_is_a_fact_error(host: LocalHost) -> None:
    from workload.errors import FactError

    with pytest.raises(FactError, match="user 'no-such-user-xyz' does not exist"):
        system.read_user_home(host, "no-such-user-xyz")


def test_package_facts(host: LocalHost) -> None:
    facts = packages.read_package_facts(host, ["dpkg", "no-such-package-xyz"])
    assert facts.version("dpkg") == sh("dpkg-query", "-W", "-f", "${Version}", "dpkg")
    assert "dpkg" in facts.policies and "no-such-package-xyz" not in facts.policies
    assert facts.policies["dpkg"].installed == facts.version("dpkg")
    # Holds, from dpkg's own selection states (what `apt-mark hold` sets), not from apt-mark.
    states = sh("dpkg-query", "-W", "-f", "${Package} ${db:Status-Want}\n").splitlines()
    held = frozenset(line.split()[0] for line in states if line.endswith(" hold"))
    assert facts.holds == held


def test_gpu_facts_without_a_gpu(host: LocalHost) -> None:
    inv = nvidia.read_gpus(host)
    assert inv.status == "not-installed" and inv.count == 0 and not inv.nvswitch
    fm = nvidia.read_fabric_manager(host)
    assert fm.version is None
    assert nvidia.read_driver_origin(host) == nvidia.DriverOrigin()  # no nvidia-smi at all
    assert docker_facts.read_nvidia_ctk_version(host) is None  # no NVIDIA container toolkit here


def test_driver_origin_asks_dpkg_who_owns_nvidia_smi(host: LocalHost, tmp_path: Path) -> None:
    """The origin script on this machine, with stand-in nvidia-smi files first on the PATH."""
    from workload.commands import cmd

    def origin(bin_dir: Path) -> nvidia.DriverOrigin:
        path = f"{bin_dir}:{os.environ['PATH']}"
        result = host.check(cmd("sh", "-c", nvidia.DRIVER_ORIGIN_SCRIPT, env={"PATH": path}))
        return nvidia.parse_driver_origin(result.stdout)

    runfile = tmp_path / "runfile"
    runfile.mkdir()
    (runfile / "nvidia-smi").write_text("#!/bin/sh\n")
    (runfile / "nvidia-smi").chmod(0o755)
    (runfile / "nvidia-uninstall").write_text("#!/bin/sh\n")
    (runfile / "nvidia-uninstall").chmod(0o755)
    found = origin(runfile)
    assert found == nvidia.DriverOrigin(f"{runfile}/nvidia-smi", None, f"{runfile}/nvidia-uninstall")
    assert found.from_runfile
    # A path that resolves to a file a package installed (here dpkg's own binary) is packaged.
    packaged = tmp_path / "packaged"
    packaged.mkdir()
    (packaged / "nvidia-smi").symlink_to("/usr/bin/dpkg")
    assert origin(packaged) == nvidia.DriverOrigin(f"{packaged}/nvidia-smi", "dpkg", None)


def test_cuda_toolkit_is_what_its_nvcc_says(host: LocalHost, tmp_path: Path) -> None:
    home = tmp_path / "cuda-12.4"
    missing = nvidia.read_cuda_toolkit(host, str(home))
    assert missing == nvidia.CudaToolkit(str(home), problem=f"{home}/bin/nvcc does not exist")
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'nvcc: error while loading shared libraries: libcudart.so.12' >&2\nexit 127\n")
    nvcc.chmod(0o755)
    broken = nvidia.read_cuda_toolkit(host, str(home))
    assert broken.release is None and not broken.provides("12.4")
    assert (
        broken.problem == f"`{nvcc} --version` exited 127: nvcc: error while loading shared libraries: libcudart.so.12"
    )
    nvcc.write_text("#!/bin/sh\necho 'nvcc: error while loading shared libraries: libcudart.so.12' >&2\nexit 1\n")
    assert nvidia.read_cuda_toolkit(host, str(home)).problem == (
        f"`{nvcc} --version` exited 1: nvcc: error while loading shared libraries: libcudart.so.12"
    )
    nvcc.write_text(f"#!/bin/sh\ncat <<'EOF'\n{NVCC_12_4}EOF\n")
    working = nvidia.read_cuda_toolkit(host, str(home))
    assert working == nvidia.CudaToolkit(str(home), release="12.4") and working.provides("12.4")


def test_docker_info_is_read_whatever_the_daemon_state(host: LocalHost) -> None:
    info = docker_facts.read_docker_info(host)
    assert info.installed  # docker.io is installed on the CI machine
    answers = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if answers.returncode == 0 and answers.stdout.strip():
        assert info.daemon_ok and info.server_version == answers.stdout.strip()
    else:
        assert not info.daemon_ok and info.error
