"""bench_fleet's Slurm column: one test-bed Slurm cluster, provisioned once, and what its login node spends.

The same machines are driven both ways: the cluster's compute VMs run sshd beside slurmd
(``tests/testbed/slurm.py``), so "N SSH hosts" and "N Slurm nodes" are the very same N containers,
with the very same work (:data:`PROFILE`'s dependency steps re-checked on provisioned nodes: facts
read, nothing to change). They are provisioned once, over SSH, before the rounds (driver + CUDA
with its reboot, Docker, the container toolkit), so that the Slurm runs, verify-only as on a real
cluster, find everything in place.

The login node (``--host`` of the Slurm runs; here also the ``slurmctld`` host, as on small
clusters) does work our process does not see: one ``srun`` process per job step, ``sshd`` for our
connections, ``slurmctld`` creating the steps, ``munged``. :class:`ContainerMeter` reads that from
the container's cgroup (CPU time, peak memory), so the Slurm column's controller side is "our
process + the login node", and the same meter over an SSH run gives the login node's idle
background (``slurmctld``'s own ticks) to set beside it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.test_installers_e2e import install_lspci
from tests.testbed.dockerd import DockerEngine
from tests.testbed.slurm import SlurmCluster, ensure_slurm_image

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json"
GPUS_PER_NODE = 2


@dataclass
class Usage:
    cpu_s: float
    peak_mib: float | None  # None where the cgroup keeps no peak (cgroup v2 before Linux 5.19)


class ContainerMeter:
    """CPU seconds and peak memory of one container, from its cgroup (v1 ``cpuacct``/``memory`` or v2).

    :meth:`start` resets the memory peak (v1 ``memory.max_usage_in_bytes``; v2 ``memory.peak`` is
    reset by writing to it on Linux 6.12+, else the peak since the container started is reported).
    The memory figure is the cgroup's: processes' RSS plus the page cache they touched.
    """

    def __init__(self, pid: int) -> None:
        self.cpu_file, self.peak_file = self._files(pid)
        self._cpu0 = 0.0

    @staticmethod
    def _files(pid: int) -> tuple[Path, Path | None]:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        by_controller = {}
        for line in lines:
            _id, controllers, path = line.split(":", 2)
            for controller in controllers.split(","):
                by_controller[controller] = path
        if "cpuacct" in by_controller:  # cgroup v1
            cpu = Path("/sys/fs/cgroup/cpuacct") / by_controller["cpuacct"].lstrip("/") / "cpuacct.usage"
            peak = (
                Path("/sys/fs/cgroup/memory")
                / by_controller.get("memory", "").lstrip("/")
                / "memory.max_usage_in_bytes"
            )
            return cpu, peak if peak.exists() else None
        base = Path("/sys/fs/cgroup") / by_controller[""].lstrip("/")
        peak = base / "memory.peak"
        return base / "cpu.stat", peak if peak.exists() else None

    def _cpu_s(self) -> float:
        text = self.cpu_file.read_text()
        if self.cpu_file.name == "cpuacct.usage":
            return int(text) / 1e9
        fields = dict(line.split() for line in text.splitlines())
        return int(fields["usage_usec"]) / 1e6

    def start(self) -> None:
        if self.peak_file is not None:
            with contextlib.suppress(OSError):  # a kernel that cannot reset it: the container's peak so far
                self.peak_file.write_text("0")
        self._cpu0 = self._cpu_s()

    def stop(self) -> Usage:
        peak = int(self.peak_file.read_text()) / 2**20 if self.peak_file is not None else None
        return Usage(self._cpu_s() - self._cpu0, peak)


def start_cluster(engine: DockerEngine, repo: Path, nodes: int, max_startups: int | None = None) -> SlurmCluster:
    """A cluster of ``nodes`` compute VMs like the SSH column's VMs (Ubuntu 22.04, 2 H100 PCIe, no NVSwitch)."""
    cluster = SlurmCluster(engine, ensure_slurm_image(engine), repo, nodes=nodes, gpus_per_node=GPUS_PER_NODE)
    for vm in cluster.computes.values():
        # The fleet profile's driver step supports Ubuntu only; the GPUs are the SSH column's. FreshVM
        # reads both when it is created, which has not happened yet.
        vm.os_release = "ubuntu-22.04"
        vm._initial_gpus = ("NVIDIA H100 PCIe", GPUS_PER_NODE, False)
    cluster.start()
    for vm in cluster.computes.values():
        install_lspci(vm)
    if max_startups is not None:
        raise_max_startups(cluster, max_startups)
    return cluster


def raise_max_startups(cluster: SlurmCluster, limit: int) -> None:
    """Let the login node's sshd take ``limit`` connections in their handshake at once (default 10:30:100).

    ``--slurm`` opens one SSH connection to the login node per node, all at the fan-out's start; from
    the 11th on, a default sshd drops some ("Exceeded MaxStartups"), and the run fails for those nodes.
    """
    line = f"MaxStartups {limit}"
    script = (
        f"echo '{line}' > /etc/ssh/sshd_config.d/zz-bench-fleet.conf && kill -HUP \"$(cat /run/sshd.pid)\" && "
        f"sleep 1 && /usr/sbin/sshd -T -o HostKey=/etc/ssh/ssh_host_ed25519_key | grep -i '^maxstartups'"
    )
    code, out = cluster.login.exec(["sh", "-c", script])
    if code != 0 or f"maxstartups {limit}:" not in out.lower():
        raise SystemExit(f"could not raise MaxStartups on the login node (exit {code}): {out}")


def inventory(cluster: SlurmCluster, names: list[str], work: Path, tag: str) -> tuple[Path, Path]:
    """An inventory of the compute VMs ``names`` over SSH (host names = Slurm node names) and its known_hosts."""
    vms = [cluster.computes[name] for name in names]
    path = work / f"inventory-{tag}.txt"
    path.write_text(
        "".join(f"{vm.host_spec} key={vm.key_path} name={name}\n" for name, vm in zip(names, vms, strict=True))
    )
    known = work / f"known_hosts-{tag}"
    known.write_text("".join(vm.known_hosts_path.read_text() for vm in vms))
    return path, known


def provision(cluster: SlurmCluster, parameters: str, work: Path) -> None:
    """Provision every compute node over SSH (not measured), then wait until Slurm has them idle again."""
    names = list(cluster.node_names)
    inv, known = inventory(cluster, names, work, "provision")
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(PROFILE), "--parameters", parameters]
    argv += ["--inventory", str(inv), "--known-hosts", str(known), "--parallel", str(len(names))]
    argv += ["--output-dir", str(work / "provision")]
    log = work / "provision.log"
    with log.open("w") as out:
        code = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise SystemExit(f"provisioning the Slurm nodes over SSH failed (exit {code}): {log}")
    # The driver step rebooted every node (a container restart); slurmd came back with it.
    cluster.wait_idle(timeout=300)


def slurm_argv(cluster: SlurmCluster, names: list[str], parameters: str, work: Path) -> list[str]:
    """``workload run`` of :data:`PROFILE` on the nodes ``names`` through the login node (after ``run``)."""
    login = cluster.login
    argv = ["run", "--profile", str(PROFILE), "--parameters", parameters]
    argv += ["--slurm", cluster.partition, "--nodes", str(len(names)), "--nodelist", ",".join(names)]
    argv += ["--host", login.host_spec, "-i", str(login.key_path), "--known-hosts", str(login.known_hosts_path)]
    argv += ["--parallel", str(len(names)), "--output-dir", str(work / "runs")]
    return argv


def login_meter(cluster: SlurmCluster) -> ContainerMeter:
    container = cluster.login.container
    assert container is not None
    container.reload()
    return ContainerMeter(int(container.attrs["State"]["Pid"]))
