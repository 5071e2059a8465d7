"""pytest fixtures for the fresh-VM test bed; ``from tests.testbed.fixtures import *`` in conftest.py.

Session scope (built once per machine, cached, shared by concurrent sessions):
``testbed_engine``/``docker_engine`` (a private real dockerd), ``standin_repo`` (the apt repo
directory), ``freshvm_image`` (the image tag), ``harness_image`` (the fresh-VM image run the way
NVIDIA's harness containers are), ``cuda_runfile_server``.
Function scope: ``fresh_vm`` (factory: ``fresh_vm(**FreshVM kwargs) -> FreshVM``) and
``fresh_vms`` (factory: ``fresh_vms(n, **kwargs) -> list[FreshVM]``, created in parallel).
Every VM a factory made is removed at the end of the test.

The fixtures skip (with the reason) when the machine cannot host the test bed (not root, no
dockerd or debootstrap); CI installs those, so there the tests run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testbed.aptrepo import ensure_repo
from tests.testbed.dockerd import DockerEngine, acquire_engine
from tests.testbed.fileserver import CudaRunfileServer, start_cuda_runfile_server
from tests.testbed.freshvm import FreshVM, create_vms
from tests.testbed.image import ensure_derived_image, ensure_image
from tests.testbed.slurm import SlurmCluster, ensure_slurm_image

__all__ = [
    "cuda_runfile_server",
    "docker_engine",
    "fresh_vm",
    "fresh_vms",
    "freshvm_image",
    "harness_image",
    "slurm_cluster",
    "slurm_image",
    "standin_repo",
]


def _missing_prerequisite() -> str | None:
    if os.geteuid() != 0:
        return "the fresh-VM test bed needs root (dockerd, debootstrap)"
    for tool in ("dockerd", "docker", "debootstrap", "dpkg-deb", "apt-ftparchive", "ssh-keygen"):
        if shutil.which(tool) is None:
            return (
                f"the fresh-VM test bed needs {tool} (apt-get install docker.io debootstrap apt-utils openssh-client)"
            )
    return None


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerEngine]:
    """A private real Docker Engine (``.client``, ``.socket_path``, ``.base_url``)."""
    reason = _missing_prerequisite()
    if reason:
        pytest.skip(reason)
    engine = acquire_engine()
    try:
        yield engine
    finally:
        engine.release()


@pytest.fixture(scope="session")
def standin_repo() -> Path:
    """Directory of the local apt repository of stand-in NVIDIA/Docker packages."""
    reason = _missing_prerequisite()
    if reason:
        pytest.skip(reason)
    return ensure_repo()


@pytest.fixture(scope="session")
def freshvm_image(docker_engine: DockerEngine) -> str:
    """Tag of the fresh-VM image (debootstrap bookworm + stand-in base tools), built once per machine."""
    return ensure_image(docker_engine)


@pytest.fixture(scope="session")
def harness_image(docker_engine: DockerEngine, freshvm_image: str) -> str:
    """The fresh-VM image as NVIDIA's harness containers are run (launch_docker: an interactive shell kept
    open, no boot): tag ``workload-test/r51-harness:latest``. Session scope (not per module), so the
    tests that use it spread over parallel workers; built only when missing or changed (``ensure_derived_image``
    says why a rebuild would kill other tests' containers)."""
    dockerfile = f'FROM {freshvm_image}\nENTRYPOINT []\nWORKDIR /work\nCMD ["/bin/bash"]\n'
    return ensure_derived_image(docker_engine, "workload-test/r51-harness:latest", dockerfile)


@pytest.fixture
def fresh_vm(docker_engine: DockerEngine, freshvm_image: str, standin_repo: Path) -> Iterator[Callable[..., FreshVM]]:
    """Factory: ``fresh_vm(user="root", os_release="debian-12", gpus=8, gpu_name=..., nvswitch=True)``."""
    made: list[FreshVM] = []

    def make(**kwargs: Any) -> FreshVM:
        vm = FreshVM(docker_engine, freshvm_image, standin_repo, **kwargs)
        made.append(vm)
        return vm.create()

    yield make
    for vm in made:
        vm.remove()


@pytest.fixture
def fresh_vms(
    docker_engine: DockerEngine, freshvm_image: str, standin_repo: Path
) -> Iterator[Callable[..., list[FreshVM]]]:
    """Factory: ``fresh_vms(n, **FreshVM kwargs)`` makes n VMs at once (a fleet)."""
    made: list[FreshVM] = []

    def make(count: int, **kwargs: Any) -> list[FreshVM]:
        vms = create_vms(docker_engine, freshvm_image, standin_repo, count, **kwargs)
        made.extend(vms)
        return vms

    yield make
    for vm in made:
        vm.remove()


@pytest.fixture(scope="session")
def cuda_runfile_server() -> Iterator[CudaRunfileServer]:
    """The stand-in ``cuda_12.4.0_550.54.14_linux.run`` on 127.0.0.1 (``.url``, ``.sha256``, ``.cut_next_download``)."""
    server = start_cuda_runfile_server()
    try:
        yield server
    finally:
        server.server.stop()


@pytest.fixture(scope="session")
def slurm_image(docker_engine: DockerEngine) -> str:
    """Tag of the fresh-VM image with Debian's slurmctld, slurmd, slurm-client and munge (built once per machine)."""
    return ensure_slurm_image(docker_engine)


@pytest.fixture
def slurm_cluster(
    docker_engine: DockerEngine, slurm_image: str, standin_repo: Path
) -> Iterator[Callable[..., SlurmCluster]]:
    """Factory: ``slurm_cluster(nodes=4, gpus_per_node=2, partition="gpu")`` starts a real Slurm cluster
    (controller/login node + compute nodes, all idle); every cluster made is removed after the test."""
    made: list[SlurmCluster] = []

    def make(**kwargs: Any) -> SlurmCluster:
        cluster = SlurmCluster(docker_engine, slurm_image, standin_repo, **kwargs)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.remove()
