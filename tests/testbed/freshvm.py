"""Fresh "VMs": containers of the debootstrap image that boot, run sshd and reboot like cloud VMs.

A :class:`FreshVM` is a container (``network_mode="host"``, tmpfs ``/run``, Docker's tini as PID 1,
the stand-in apt repository mounted read-only) whose entrypoint is the stand-in boot script. Its
sshd listens on 127.0.0.1 at a port of its own, with a generated host key (``known_hosts_path``
holds it, for strict host key checking) and the test bed's user key (``key_path``). The login user
is root or, like real cloud VMs, a normal user with passwordless sudo (``user="azureuser"``).

What survives a reboot is what survives on a real machine: the disk (the container's filesystem)
survives; processes and ``/run`` (``/run/reboot-required``, the loaded "driver", unit state) do not.
A reboot comes from the test (:meth:`FreshVM.reboot`) or from inside (``sudo reboot``,
``shutdown -r now``, ``systemctl reboot``): the boot script then exits non-zero and Docker's
``on-failure`` restart policy boots the container again.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker

from tests.testbed.dockerd import LABEL, OWNER_LABEL, DockerEngine
from tests.testbed.dockerexec import exec_output
from tests.testbed.image import REPO_MOUNT, VM_CONFIG_MOUNT, debian_mirror
from tests.testbed.ports import free_port
from tests.testbed.state import TestbedError, file_lock, state_dir

SSH_WAIT_S = 60.0

OS_RELEASES: dict[str, dict[str, str]] = {
    "ubuntu-22.04": {
        "os-release": """PRETTY_NAME="Ubuntu 22.04.5 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.5 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=jammy
""",
        "lsb-release": """DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=22.04
DISTRIB_CODENAME=jammy
DISTRIB_DESCRIPTION="Ubuntu 22.04.5 LTS"
""",
    },
    "ubuntu-24.04": {
        "os-release": """PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
UBUNTU_CODENAME=noble
LOGO=ubuntu-logo
""",
        "lsb-release": """DISTRIB_ID=Ubuntu
DISTRIB_RELEASE=24.04
DISTRIB_CODENAME=noble
DISTRIB_DESCRIPTION="Ubuntu 24.04.1 LTS"
""",
    },
}


@dataclass(frozen=True)
class GpuModel:
    """What nvidia-smi reports for one GPU model (real values)."""

    memory_mib: int
    compute_cap: str
    power_cap_w: int
    pci_device_id: str
    architecture: str


GPU_MODELS: dict[str, GpuModel] = {
    "NVIDIA H100 80GB HBM3": GpuModel(81559, "9.0", 700, "0x233010DE", "Hopper"),
    "NVIDIA H100 PCIe": GpuModel(81559, "9.0", 350, "0x233110DE", "Hopper"),
    "NVIDIA H200": GpuModel(143771, "9.0", 700, "0x233510DE", "Hopper"),
    "NVIDIA A100-SXM4-40GB": GpuModel(40960, "8.0", 400, "0x20B010DE", "Ampere"),
    "NVIDIA A100-SXM4-80GB": GpuModel(81920, "8.0", 400, "0x20B210DE", "Ampere"),
    "NVIDIA A100 80GB PCIe": GpuModel(81920, "8.0", 300, "0x20B510DE", "Ampere"),
}
# Bus ids of an 8-GPU HGX baseboard (DGX H100 layout).
HGX_BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def ssh_banner(port: int, timeout: float = 2.0) -> bytes:
    """The SSH identification line on 127.0.0.1:port, or b"" if nothing answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            return sock.recv(64)
    except OSError:
        return b""


def port_refuses(port: int, timeout: float = 2.0) -> bool:
    """True when a connection to 127.0.0.1:port is refused (nothing listens); False when one is
    accepted, or the connect did not finish in ``timeout`` (a full backlog is a listener too)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def user_key() -> Path:
    """The test bed's SSH user key (ed25519, no passphrase), made once per machine."""
    keys = state_dir() / "keys"
    keys.mkdir(exist_ok=True)
    key = keys / "id_ed25519"
    with file_lock("userkey"):
        if not key.exists():
            _keygen(key, "workload-testbed")
    return key


def _keygen(path: Path, comment: str) -> None:
    if shutil.which("ssh-keygen") is None:
        raise TestbedError("test bed: ssh-keygen is not installed; run `apt-get install -y openssh-client`")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)


class FreshVM:
    """One fresh VM. Create with :meth:`create`; everything else assumes it exists."""

    def __init__(
        self,
        engine: DockerEngine,
        image: str,
        repo: Path,
        *,
        name: str | None = None,
        user: str = "root",
        os_release: str = "debian-12",
        gpus: int = 8,
        gpu_name: str = "NVIDIA H100 80GB HBM3",
        nvswitch: bool = True,
        debian_sources: bool = False,
        hostname: str | None = None,
        shared: Sequence[Path] = (),
        shared_rw: Sequence[Path] = (),
        home: Path | None = None,
    ) -> None:
        if os_release != "debian-12" and os_release not in OS_RELEASES:
            raise TestbedError(
                f"FreshVM: os_release {os_release!r} unknown; use debian-12 or one of {sorted(OS_RELEASES)}"
            )
        self.engine = engine
        self.image = image
        self.repo = repo
        self.name = name or f"freshvm-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.user = user
        self.os_release = os_release
        self.debian_sources = debian_sources
        #: The VM's own host name (a UTS namespace of its own even on the host network); None: Docker's default.
        self.hostname = hostname
        #: Host folders mounted read-only at the same path (a cluster's shared file system, e.g. /home over NFS).
        self.shared = tuple(shared)
        #: The same, writable (a node's work folder that a Docker daemon outside the node also binds).
        self.shared_rw = tuple(shared_rw)
        #: A host folder mounted (writable) as the login user's home, ``/home/<user>``: machines given
        #: the same folder share one home, as cluster nodes do over NFS (the user gets the same uid on
        #: each: the first user ``useradd`` makes on the image). None: the VM's own home.
        self.home = home
        self.port = 0
        self.config_dir = state_dir() / "vms" / self.name
        self.key_path = user_key()
        self.known_hosts_path = self.config_dir / "known_hosts"
        self._initial_gpus = (gpu_name, gpus, nvswitch)
        self.container: docker.models.containers.Container | None = None
        #: When :meth:`create` began and when its sshd first answered (monotonic; 0.0: not yet).
        self.create_began = 0.0
        self.answered_at = 0.0

    # ----------------------------------------------------------------- identity
    @property
    def host_spec(self) -> str:
        """``ssh://USER@127.0.0.1:PORT``, what ``--host`` takes."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    @property
    def host_key_line(self) -> str:
        return (self.config_dir / "ssh_host_ed25519_key.pub").read_text().strip()

    def __repr__(self) -> str:
        return f"FreshVM({self.name!r}, port={self.port}, user={self.user!r})"

    # ----------------------------------------------------------------- lifecycle
    def create(self) -> FreshVM:
        """Write the VM's config (keys, identity overlay, hardware), start it, wait for sshd."""
        self.create_began = time.monotonic()
        shutil.rmtree(self.config_dir, ignore_errors=True)
        self.config_dir.mkdir(parents=True)
        _keygen(self.config_dir / "ssh_host_ed25519_key", f"root@{self.name}")
        shutil.copy(self.key_path.with_suffix(".pub"), self.config_dir / "authorized_keys")
        overlay = self.config_dir / "overlay"
        if self.os_release in OS_RELEASES:
            for fname, text in OS_RELEASES[self.os_release].items():
                (overlay / "etc").mkdir(parents=True, exist_ok=True)
                (overlay / "etc" / fname).write_text(text)
        if self.debian_sources:
            (overlay / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
            (overlay / "etc/apt/sources.list.d/debian.list").write_text(f"deb {debian_mirror()} bookworm main\n")
        gpu_name, count, nvswitch = self._initial_gpus
        (overlay / "var/lib/standin").mkdir(parents=True, exist_ok=True)
        (overlay / "var/lib/standin/hardware.json").write_text(json.dumps(self._hardware(gpu_name, count, nvswitch)))
        last_error = ""
        for _attempt in range(3):
            self.port = free_port()
            (self.config_dir / "vm.env").write_text(f"SSH_PORT={self.port}\nLOGIN_USER={self.user}\n")
            self.known_hosts_path.write_text(f"[127.0.0.1]:{self.port} {self._key_type_and_blob()}\n")
            self._remove_container()
            self.container = self.engine.client.containers.run(
                self.image,
                name=self.name,
                detach=True,
                init=True,
                network_mode="host",
                hostname=self.hostname,
                tmpfs={"/run": "rw,nosuid,nodev,mode=0755,size=64m"},
                volumes={
                    str(self.repo): {"bind": REPO_MOUNT, "mode": "ro"},
                    str(self.config_dir): {"bind": VM_CONFIG_MOUNT, "mode": "ro"},
                    **{str(path): {"bind": str(path), "mode": "ro"} for path in self.shared},
                    **{str(path): {"bind": str(path), "mode": "rw"} for path in self.shared_rw},
                    **({str(self.home): {"bind": f"/home/{self.user}", "mode": "rw"}} if self.home else {}),
                },
                restart_policy={"Name": "on-failure"},
                labels={LABEL: "1", OWNER_LABEL: str(os.getpid())},
            )
            try:
                self.wait_ssh()
                self.answered_at = time.monotonic()
                return self
            except TestbedError as exc:  # most likely the port was taken meanwhile: try another
                last_error = str(exc)
        raise TestbedError(f"FreshVM {self.name}: sshd never came up: {last_error}")

    def _key_type_and_blob(self) -> str:
        kind, blob = self.host_key_line.split()[:2]
        return f"{kind} {blob}"

    def _hardware(self, gpu_name: str, count: int, nvswitch: bool, memory_mib: int | None = None) -> dict[str, object]:
        model = GPU_MODELS.get(gpu_name, GpuModel(memory_mib or 81559, "9.0", 700, "0x233010DE", "Hopper"))
        gpus = []
        for i in range(count):
            bus = HGX_BUS_IDS[i] if i < len(HGX_BUS_IDS) else f"{0x18 + i:02X}"
            gpus.append(
                {
                    "name": gpu_name,
                    "bus_id": f"00000000:{bus}:00.0",
                    "memory_mib": memory_mib or model.memory_mib,
                    "memory_used_mib": 1,
                    "compute_cap": model.compute_cap,
                    "power_cap_w": model.power_cap_w,
                    "pci_device_id": model.pci_device_id,
                    "architecture": model.architecture,
                    "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{self.name}-{i}')}",
                    "serial": f"{1654523007052 + i}",
                    "temp_c": 30 + i % 3,
                    "power_w": 68 + i % 5,
                }
            )
        return {"gpus": gpus, "nvswitch": bool(nvswitch and count > 0)}

    def status(self) -> str:
        assert self.container is not None
        self.container.reload()
        return str(self.container.status)

    def wait_ssh(self, timeout: float = SSH_WAIT_S) -> None:
        """Block until sshd answers with its banner; raise (with the boot log) if the VM died."""
        assert self.container is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ssh_banner(self.port).startswith(b"SSH-2.0-"):
                return
            if self.status() in ("exited", "dead"):
                logs = self.container.logs(tail=30).decode(errors="replace")
                raise TestbedError(f"FreshVM {self.name}: container exited while booting:\n{logs}")
            time.sleep(0.1)
        raise TestbedError(f"FreshVM {self.name}: sshd on 127.0.0.1:{self.port} did not answer in {timeout:.0f}s")

    def wait_down(self, timeout: float = 30.0) -> None:
        """Block until nothing listens on the VM's port any more (a connection is refused).

        A slow banner is not "down": a loaded machine's sshd may take longer than any short read
        timeout to answer, and taking that for a stopped sshd ended a wait while sshd still ran.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if port_refuses(self.port):
                return
            time.sleep(0.1)
        raise TestbedError(f"FreshVM {self.name}: still listening on port {self.port} after {timeout:.0f}s")

    def boot_count(self) -> int:
        """How many times this VM has booted (the boot script counts on disk)."""
        code, out = self.exec(["cat", "/var/lib/standin/boot-count"])
        return int(out.strip()) if code == 0 else 0

    def reboot(self, timeout: float = SSH_WAIT_S) -> None:
        """Restart the container like a reboot: processes and /run are gone, the disk stays."""
        assert self.container is not None
        before = self.boot_count()
        self.container.restart(timeout=5)
        self.wait_ssh(timeout)
        if self.boot_count() <= before:
            raise TestbedError(f"FreshVM {self.name}: reboot did not run the boot script")

    def wait_rebooted(self, boots_before: int, timeout: float = SSH_WAIT_S) -> None:
        """After a reboot asked for inside the VM: wait until it has booted again and sshd answers."""
        deadline = time.monotonic() + timeout
        last_error = ""
        while time.monotonic() < deadline:
            if self.status() == "running" and ssh_banner(self.port).startswith(b"SSH-2.0-"):
                try:
                    if self.boot_count() > boots_before:
                        return
                # The old boot's sshd may still answer while the reboot is under way: the VM then stops
                # under the exec that reads the count (Docker's API fails, or the exec is killed, 137,
                # before its output is whole). The next look is after the reboot.
                except (docker.errors.APIError, TestbedError) as exc:
                    last_error = str(exc)
            time.sleep(0.2)
        last = f" (the last look: {last_error})" if last_error else ""
        raise TestbedError(f"FreshVM {self.name}: did not come back from a reboot in {timeout:.0f}s{last}")

    def stop(self) -> None:
        """Power off (the disk is kept)."""
        assert self.container is not None
        self.container.stop(timeout=5)

    def start(self) -> None:
        """Power on again and wait for sshd."""
        assert self.container is not None
        self.container.start()
        self.wait_ssh()

    def stop_sshd(self, timeout: float = 30.0) -> None:
        """Kill sshd and every session it serves, but keep the machine running (an unreachable host).

        Returns once no sshd process is left in the VM and its port refuses connections, so every
        SSH connection to the VM is cut when this returns, however slowly a loaded machine lets the
        signalled processes end. TERM is sent again while any is left: a session forked while
        pkill read the process table is not in its list.
        """
        code, out = self.exec(["pkill", "-TERM", "-x", "sshd"])
        if code != 0:  # 1: no sshd ran; anything else: pkill itself failed
            raise TestbedError(f"FreshVM {self.name}: pkill -x sshd exited {code}: {out}")
        deadline = time.monotonic() + timeout
        while self.live_processes("sshd"):
            if time.monotonic() >= deadline:
                raise TestbedError(f"FreshVM {self.name}: sshd processes were still running {timeout:.0f}s after TERM")
            time.sleep(0.1)
            self.exec(["pkill", "-TERM", "-x", "sshd"])
        self.wait_down(max(2.0, deadline - time.monotonic()))

    def live_processes(self, name: str) -> int:
        """How many processes named ``name`` run in the VM; zombies (dead, not yet reaped) are not counted."""
        _, out = self.exec(["ps", "-C", name, "-o", "stat="])  # exit 1 when there is none
        return sum(1 for state in out.split() if not state.startswith("Z"))

    def start_sshd(self) -> None:
        """Start sshd again after :meth:`stop_sshd`."""
        assert self.container is not None
        self.container.exec_run(["/usr/lib/standin/start-sshd"], detach=True)
        self.wait_ssh()

    def remove(self) -> None:
        """Delete the VM and its config directory."""
        self._remove_container()
        shutil.rmtree(self.config_dir, ignore_errors=True)

    def _remove_container(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self.engine.client.containers.get(self.name).remove(force=True)
        self.container = None

    # ----------------------------------------------------------------- inside the VM
    def exec(self, argv: Sequence[str], *, user: str = "root", env: dict[str, str] | None = None) -> tuple[int, str]:
        """Run argv in the VM through ``docker exec`` (for test assertions, not the code under test); the output is
        read back whole or the call raises (:mod:`tests.testbed.dockerexec`)."""
        assert self.container is not None
        return exec_output(self.container, argv, user=user, environment=env)

    def check(self, argv: Sequence[str], *, user: str = "root") -> str:
        """:meth:`exec` that raises TestbedError with the output when the exit status is not 0."""
        code, out = self.exec(argv, user=user)
        if code != 0:
            raise TestbedError(f"FreshVM {self.name}: {' '.join(argv)} exited {code}:\n{out}")
        return out

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Write a file in the VM (as root), creating it through the Docker archive API."""
        assert self.container is not None
        payload = data.encode() if isinstance(data, str) else data
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(os.path.basename(path))
            info.size = len(payload)
            info.mode = mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(payload))
        self.check(["mkdir", "-p", os.path.dirname(path)])
        if not self.container.put_archive(os.path.dirname(path), buf.getvalue()):
            raise TestbedError(f"FreshVM {self.name}: could not write {path}")

    def read_file(self, path: str) -> str:
        return self.check(["cat", path])

    def set_gpus(
        self,
        name: str = "NVIDIA H100 80GB HBM3",
        count: int = 8,
        nvswitch: bool = True,
        memory_mib: int | None = None,
    ) -> None:
        """Describe the VM's GPUs (what the stand-in nvidia-smi and fabric manager read). count=0: none."""
        hardware = self._hardware(name, count, nvswitch, memory_mib)
        self.write_file("/var/lib/standin/hardware.json", json.dumps(hardware, indent=1))

    def loaded_driver(self) -> str | None:
        """The driver version the stand-in kernel module loaded at boot, or None (no such file); a TestbedError
        with the output when the ``cat`` fails otherwise, so that a failed exec is not read as "nothing loaded"."""
        code, out = self.exec(["cat", "/run/nvidia-driver-loaded"])
        if code != 0 and "No such file" not in out:
            raise TestbedError(f"FreshVM {self.name}: cat /run/nvidia-driver-loaded exited {code}:\n{out}")
        return out.strip() if code == 0 and out.strip() else None

    def hold_dpkg_lock(self, seconds: float, locks: Sequence[str] = ()) -> int:
        """Start an ``unattended-upgr`` process holding apt/dpkg locks for ``seconds``; return its pid.

        Returns once every lock is held (fcntl locks, what apt and dpkg test): by default
        /var/lib/dpkg/lock-frontend and /var/lib/dpkg/lock, so an ``apt-get install`` started
        afterwards is blocked; ``locks=["/var/lib/apt/lists/lock"]`` is apt-daily's refresh.
        """
        assert self.container is not None
        ready = f"/run/standin/lockholder-{uuid.uuid4().hex[:8]}"
        argv = ["/usr/lib/standin/unattended-upgrade", str(seconds), ready, *locks]
        self.container.exec_run(argv, detach=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            code, out = self.exec(["cat", ready])
            if code == 0 and out.strip():
                return int(out.strip())
            time.sleep(0.1)
        raise TestbedError(f"FreshVM {self.name}: the dpkg lock holder did not take the locks in 15s")


def create_vms(engine: DockerEngine, image: str, repo: Path, count: int, **kwargs: object) -> list[FreshVM]:
    """Create ``count`` VMs in parallel (a fleet); on any failure, remove those that were made."""
    vms = [FreshVM(engine, image, repo, **kwargs) for _ in range(count)]  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=min(count, 8)) as pool:
        futures = [pool.submit(vm.create) for vm in vms]
        errors = [f.exception() for f in futures]
    failed = [e for e in errors if e is not None]
    if failed:
        for vm in vms:
            vm.remove()
        raise TestbedError(f"test bed: {len(failed)} of {count} VMs failed to start: {failed[0]}")
    return vms
