"""The local apt repository of stand-in packages (real names, real version strings).

Built with ``dpkg-deb`` and indexed with ``apt-ftparchive`` into ``<state>/repos/<content hash>``,
so it is rebuilt only when a stand-in script or a package definition changes. The VMs mount it
read-only and list it as their only apt source (``deb [trusted=yes] file:/srv/standin-repo ./``).

The versions encode the traps installers must handle: two driver versions (an unpinned install
gets the newer one), and ``cuda-drivers-fabricmanager-550`` depending on the *exact* matching
``nvidia-fabricmanager-550``, as NVIDIA's meta-package does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.testbed.state import STANDINS_DIR, TestbedError, digest, file_lock, state_dir

DRIVER_BRANCH = "550"
DRIVER_VERSIONS = ("550.127.05", "550.144.03")
"""Upstream driver versions in the repo, oldest first; the last one is what an unpinned install gets."""
UBUNTU_SUFFIX = "-0ubuntu0.22.04.1"
CUDA_FOR_BRANCH = {"550": "12.4"}
DOCKER_VERSIONS = ("26.1.4", "27.3.1")
TOOLKIT_VERSION = "1.17.3"


@dataclass(frozen=True)
class Package:
    """One stand-in .deb: control fields plus files (destination path, content, mode)."""

    name: str
    version: str
    description: str
    depends: str = ""
    files: tuple[tuple[str, bytes, int], ...] = ()
    postinst: bytes | None = None
    extra_control: tuple[tuple[str, str], ...] = field(default=())

    def control(self) -> str:
        lines = [
            f"Package: {self.name}",
            f"Version: {self.version}",
            "Architecture: amd64",
            "Maintainer: workload test bed <testbed@localhost>",
            "Section: misc",
            "Priority: optional",
        ]
        if self.depends:
            lines.append(f"Depends: {self.depends}")
        lines += [f"{k}: {v}" for k, v in self.extra_control]
        lines.append(f"Description: {self.description} (test-bed stand-in)")
        return "\n".join(lines) + "\n"

    def key(self) -> bytes:
        parts = [self.control().encode(), self.postinst or b""]
        for path, content, mode in self.files:
            parts += [path.encode(), content, str(mode).encode()]
        return digest(*parts).encode()


def standin(name: str, **subst: str) -> bytes:
    """A stand-in source from ``standins/packages`` with ``@KEY@`` placeholders filled in."""
    text = (STANDINS_DIR / "packages" / name).read_text()
    for key, value in subst.items():
        text = text.replace(f"@{key.upper()}@", value)
    return text.encode()


def _driver_packages(version: str) -> list[Package]:
    b = DRIVER_BRANCH
    deb_version = version + UBUNTU_SUFFIX
    fm_version = version + "-1"
    sub = {"version": version, "branch": b, "cuda": CUDA_FOR_BRANCH[b]}
    return [
        Package(
            f"nvidia-utils-{b}-server",
            deb_version,
            f"NVIDIA driver support binaries (nvidia-smi) {version}",
            files=(("/usr/bin/nvidia-smi", standin("nvidia-smi", **sub), 0o755),),
        ),
        Package(
            f"nvidia-dkms-{b}-server",
            deb_version,
            f"NVIDIA DKMS package (stand-in kernel module {version})",
            depends="dkms",
            files=(
                ("/usr/lib/standin/modules/nvidia.version", f"{version}\n".encode(), 0o644),
                ("/usr/lib/standin/boot.d/10-nvidia-module", standin("10-nvidia-module", **sub), 0o755),
            ),
            postinst=standin("dkms.postinst", **sub),
        ),
        Package(
            f"nvidia-driver-{b}-server",
            deb_version,
            f"NVIDIA Server Driver metapackage {version}",
            depends=f"nvidia-dkms-{b}-server (= {deb_version}), nvidia-utils-{b}-server (= {deb_version})",
            files=((f"/usr/share/doc/nvidia-driver-{b}-server/VERSION", f"{version}\n".encode(), 0o644),),
            postinst=standin("driver.postinst", package=f"nvidia-driver-{b}-server", **sub),
        ),
        Package(
            f"nvidia-fabricmanager-{b}",
            fm_version,
            f"Fabric Manager for NVSwitch based systems {version}",
            files=(
                ("/usr/bin/nv-fabricmanager", standin("nv-fabricmanager", **sub), 0o755),
                ("/lib/systemd/system/nvidia-fabricmanager.service", standin("nvidia-fabricmanager.service"), 0o644),
                (
                    "/usr/share/nvidia/nvswitch/fabricmanager.cfg",
                    b"LOG_LEVEL=4\nLOG_FILE_NAME=/var/log/fabricmanager.log\n",
                    0o644,
                ),
            ),
            postinst=standin("fabricmanager.postinst"),
        ),
        Package(
            f"cuda-drivers-fabricmanager-{b}",
            fm_version,
            f"Meta-package for Fabric Manager {version} (NVIDIA CUDA repository)",
            depends=f"nvidia-fabricmanager-{b} (= {fm_version})",
        ),
    ]


def _docker_packages(upstream: str) -> list[Package]:
    version = f"5:{upstream}-1~ubuntu.22.04~jammy"
    sub = {"version": version, "upstream": upstream}
    return [
        Package(
            "docker-ce-cli",
            version,
            f"Docker CLI {upstream}",
            files=(("/usr/bin/docker", standin("docker", **sub), 0o755),),
        ),
        Package(
            "docker-ce",
            version,
            f"Docker Engine {upstream}",
            depends="containerd.io (>= 1.6.24), docker-ce-cli",
            files=(
                ("/usr/bin/dockerd", standin("dockerd", **sub), 0o755),
                ("/lib/systemd/system/docker.service", standin("docker.service"), 0o644),
            ),
            postinst=standin("docker-ce.postinst"),
        ),
    ]


def packages() -> list[Package]:
    """Every package in the stand-in repository."""
    pkgs: list[Package] = []
    for version in DRIVER_VERSIONS:
        pkgs += _driver_packages(version)
    for upstream in DOCKER_VERSIONS:
        pkgs += _docker_packages(upstream)
    containerd = {"version": "1.7.22", "upstream": "1.7.22"}
    compose = {"version": "2.29.7", "upstream": "2.29.7"}
    tk = {"version": TOOLKIT_VERSION, "upstream": TOOLKIT_VERSION}
    pkgs += [
        Package(
            "containerd.io",
            "1.7.22-1",
            "An open and reliable container runtime",
            files=(
                ("/usr/bin/containerd", standin("containerd", **containerd), 0o755),
                ("/lib/systemd/system/containerd.service", standin("containerd.service"), 0o644),
            ),
            postinst=standin("containerd.postinst"),
        ),
        Package(
            "docker-compose-plugin",
            "2.29.7-1~ubuntu.22.04~jammy",
            "Docker Compose (V2) plugin for the Docker CLI",
            files=(("/usr/libexec/docker/cli-plugins/docker-compose", standin("docker-compose", **compose), 0o755),),
        ),
        Package(
            "nvidia-container-toolkit-base",
            f"{TOOLKIT_VERSION}-1",
            "NVIDIA Container Toolkit Base",
            files=(
                ("/usr/bin/nvidia-ctk", standin("nvidia-ctk", **tk), 0o755),
                ("/usr/bin/nvidia-container-runtime", standin("nvidia-container-runtime", **tk), 0o755),
            ),
        ),
        Package(
            "nvidia-container-toolkit",
            f"{TOOLKIT_VERSION}-1",
            "NVIDIA Container toolkit",
            depends=f"nvidia-container-toolkit-base (= {TOOLKIT_VERSION}-1)",
            files=(("/usr/bin/nvidia-container-runtime-hook", standin("nvidia-container-runtime-hook", **tk), 0o755),),
        ),
        Package("build-essential", "12.9ubuntu3", "Informational list of build-essential packages"),
        Package(
            "dkms",
            "2.8.7-2ubuntu2.2",
            "Dynamic Kernel Module Support Framework",
            files=(("/usr/sbin/dkms", standin("dkms", version="2.8.7", upstream="2.8.7"), 0o755),),
        ),
        Package("linux-headers-generic", "5.15.0.127.125", "Generic Linux kernel headers"),
    ]
    return pkgs


def _build_deb(pkg: Package, work: Path, out: Path) -> None:
    root = work / f"{pkg.name}_{pkg.version.replace(':', '%3a')}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(pkg.control())
    if pkg.postinst is not None:
        (root / "DEBIAN" / "postinst").write_bytes(pkg.postinst)
        (root / "DEBIAN" / "postinst").chmod(0o755)
    for path, content, mode in pkg.files:
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(content)
        dest.chmod(mode)
    file_version = pkg.version.split(":", 1)[-1]
    deb = out / f"{pkg.name}_{file_version}_amd64.deb"
    argv = ["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "-b", str(root), str(deb)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TestbedError(f"test bed: dpkg-deb failed for {pkg.name} {pkg.version}: {proc.stderr.strip()}")


def ensure_repo() -> Path:
    """Return the directory of the (cached) stand-in apt repository, building it if needed."""
    pkgs = packages()
    key = digest(*(p.key() for p in pkgs))
    repos = state_dir() / "repos"
    repos.mkdir(exist_ok=True)
    final = repos / key
    if (final / "Packages").exists():
        return final
    for tool in ("dpkg-deb", "apt-ftparchive"):
        if shutil.which(tool) is None:
            raise TestbedError(f"test bed: {tool} is not installed; run `apt-get install -y apt-utils dpkg-dev`")
    with file_lock("aptrepo"):
        if (final / "Packages").exists():
            return final
        tmp = repos / f".build-{key}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        out = tmp / "repo"
        out.mkdir(parents=True)
        for pkg in pkgs:
            _build_deb(pkg, tmp / "src", out)
        for index, argv in (
            ("Packages", ["apt-ftparchive", "packages", "."]),
            ("Release", ["apt-ftparchive", "release", "."]),
        ):
            proc = subprocess.run(argv, cwd=out, capture_output=True, check=False)
            if proc.returncode != 0:
                raise TestbedError(f"test bed: apt-ftparchive {argv[1]} failed: {proc.stderr.decode(errors='replace')}")
            (out / index).write_bytes(proc.stdout)
        shutil.rmtree(final, ignore_errors=True)
        out.rename(final)
        shutil.rmtree(tmp, ignore_errors=True)
    return final
