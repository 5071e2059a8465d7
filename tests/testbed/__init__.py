"""The fresh-VM test bed: a private real Docker Engine, Debian "VMs" with sshd that reboot, a local
apt repository of stand-in NVIDIA/Docker packages, and a CUDA runfile download server.

See README.md in this folder. Fixtures: :mod:`tests.testbed.fixtures`.
"""

from tests.testbed.aptrepo import DRIVER_BRANCH, DRIVER_VERSIONS, UBUNTU_SUFFIX
from tests.testbed.dockerd import DockerEngine, acquire_engine
from tests.testbed.fileserver import CudaRunfileServer, FileServer, start_cuda_runfile_server
from tests.testbed.freshvm import FreshVM, create_vms
from tests.testbed.image import IMAGE, ensure_image
from tests.testbed.state import TestbedError

__all__ = [
    "DRIVER_BRANCH",
    "DRIVER_VERSIONS",
    "IMAGE",
    "UBUNTU_SUFFIX",
    "CudaRunfileServer",
    "DockerEngine",
    "FileServer",
    "FreshVM",
    "TestbedError",
    "acquire_engine",
    "create_vms",
    "ensure_image",
    "start_cuda_runfile_server",
]
