"""A real Slurm cluster in the test bed: Debian's ``slurmctld``/``slurmd``/``munge`` in fresh-VM containers.

Layout (everything on the host network, 127.0.0.1 only):

- one **controller** VM (also the login node): ``slurmctld`` on a port of its own, ``munged``, the
  client tools (``sbatch``/``salloc``/``srun``/``squeue``/``scancel``/``sinfo``/``scontrol``) and sshd,
  so ``workload`` reaches the scheduler the way a user does, over SSH to a login node;
- N **compute** VMs, each with its own host name (a UTS namespace of its own; the network is shared),
  ``munged`` and ``slurmd`` on a port of its own (``NodeName=... NodeAddr=127.0.0.1 Port=...`` in
  ``slurm.conf``; the Debian build has no ``--enable-multiple-slurmd``, so one slurmd per container,
  which is what a real cluster has anyway), sshd too (so the same machines can be driven over SSH
  for comparisons).

One munge key, made per cluster (two clusters started by concurrent sessions cannot authenticate
to each other). No cgroups: ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``.
GPUs are generic resources (``Gres=gpu:h100:N``, ``gres.conf`` ``File=/dev/nvidia[0-N]``) backed by
stand-in character devices made at boot (major 195, the NVIDIA driver's), and the stand-in
``nvidia-smi`` hardware file lists the same count.

The image ``local/freshvm-slurm:bookworm`` adds the packages (``apt-get install`` from the Debian
mirror of this machine's apt sources, the build's only network use) to the fresh-VM image; it is
built once per machine and rebuilt only when the fresh-VM image or this recipe changes.
"""

from __future__ import annotations

import io
import os
import secrets
import tarfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker

from tests.testbed.dockerd import DockerEngine
from tests.testbed.freshvm import FreshVM, free_port
from tests.testbed.image import RECIPE_LABEL, debian_mirror, ensure_image
from tests.testbed.state import TestbedError, digest, file_lock

SLURM_IMAGE = "local/freshvm-slurm:bookworm"
#: Debian bookworm's packages (22.05.8-4+deb12u3 and munge 0.5.15-2+deb12u1 at the time of writing).
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
START_TIMEOUT_S = 90.0

SLURM_DOCKERFILE = """\
FROM {base}
RUN set -e; \\
    echo 'deb {mirror} bookworm main' > /tmp/debian.list; \\
    opts='-o Dir::Etc::SourceList=/tmp/debian.list -o Dir::Etc::SourceParts=/nonexistent -q'; \\
    apt-get $opts update; \\
    DEBIAN_FRONTEND=noninteractive apt-get $opts install -y --no-install-recommends {packages}; \\
    rm -f /tmp/debian.list /etc/munge/munge.key; \\
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
LABEL {label}={recipe}
"""

#: Runs at every boot (the fresh-VM boot script runs /usr/lib/standin/boot.d/*): what systemd's
#: munge.service and slurmd.service/slurmctld.service would start on a real node.
BOOT_HOOK = """\
#!/bin/sh
set -u
. /etc/slurm/testbed-role   # ROLE=controller|compute, GPUS=N
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 0755 /run/munge
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged
if [ "$ROLE" = controller ]; then
    /usr/sbin/slurmctld
else
    i=0
    while [ "$i" -lt "$GPUS" ]; do
        # Stand-in GPU device nodes (the NVIDIA driver's character major 195); a plain file where
        # the sandbox refuses mknod, which slurmd accepts too (it only stats the path).
        [ -e /dev/nvidia$i ] || mknod -m 0666 /dev/nvidia$i c 195 $i 2>/dev/null || touch /dev/nvidia$i
        i=$((i + 1))
    done
    /usr/sbin/slurmd
fi
"""


def ensure_slurm_image(engine: DockerEngine) -> str:
    """Return the Slurm fresh-VM image tag, building it once per machine (concurrency-safe)."""
    base = ensure_image(engine)
    with file_lock("slurm-image"):
        base_id = engine.client.images.get(base).id
        mirror = debian_mirror()
        recipe = digest(base_id, SLURM_DOCKERFILE, mirror, *PACKAGES)
        try:
            if (engine.client.images.get(SLURM_IMAGE).labels or {}).get(RECIPE_LABEL) == recipe:
                return SLURM_IMAGE
        except docker.errors.ImageNotFound:
            pass
        text = SLURM_DOCKERFILE.format(
            base=base, mirror=mirror, packages=" ".join(PACKAGES), label=RECIPE_LABEL, recipe=recipe
        ).encode()
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
        context.seek(0)
        try:
            # The daemon has no bridge: the build reaches the Debian mirror over the host network.
            engine.client.images.build(
                fileobj=context, custom_context=True, tag=SLURM_IMAGE, rm=True, forcerm=True, network_mode="host"
            )
        except docker.errors.BuildError as exc:
            log = "".join(str(chunk.get("stream", chunk)) for chunk in exc.build_log)
            raise TestbedError(f"test bed: building {SLURM_IMAGE} failed: {exc}\n{log[-3000:]}") from None
        return SLURM_IMAGE


class SlurmCluster:
    """A controller (login node) and ``nodes`` compute nodes; :meth:`start`, then :meth:`remove`.

    ``login`` is the controller's :class:`FreshVM` (``login.host_spec`` is what ``--host`` takes).
    Node names are ``<prefix>n1`` ... (unique per cluster, so a squeue of one test cannot be
    confused with another's); the partition is :attr:`partition`.
    """

    def __init__(
        self,
        engine: DockerEngine,
        image: str,
        repo: Path,
        *,
        nodes: int = 4,
        gpus_per_node: int = 2,
        partition: str = "gpu",
        cpus_per_node: int = 2,
        shared: tuple[Path, ...] = (),
        shared_rw: tuple[Path, ...] = (),
        user: str = "root",
        shared_home: Path | None = None,
    ) -> None:
        """``user``: who logs in to the login node (and exists on every node, as Slurm needs);
        ``shared_home``: a host folder that is that user's home on every machine (the usual HPC
        setup: one ``$HOME`` over NFS); it must belong to uid 1000, the user's uid on the VMs."""
        if nodes < 1:
            raise TestbedError("SlurmCluster: at least one compute node")
        self.engine = engine
        self.image = image
        self.repo = repo
        self.partition = partition
        self.gpus_per_node = gpus_per_node
        self.cpus_per_node = cpus_per_node
        self.user = user
        self.shared = shared
        tag = uuid.uuid4().hex[:5]
        self.cluster_name = f"tb{tag}"
        self.node_names = [f"tb{tag}n{i + 1}" for i in range(nodes)]
        self.controller_name = f"tb{tag}ctl"
        self.munge_key = secrets.token_bytes(1024)
        self.ctld_port = 0
        self.node_ports: dict[str, int] = {}
        self.login = FreshVM(
            engine,
            image,
            repo,
            name=f"slurm-{os.getpid()}-{self.controller_name}",
            hostname=self.controller_name,
            shared=shared,
            user=user,
            home=shared_home,
        )
        self.computes = {
            name: FreshVM(
                engine,
                image,
                repo,
                name=f"slurm-{os.getpid()}-{name}",
                hostname=name,
                gpus=gpus_per_node,
                shared=shared,
                shared_rw=shared_rw,
                user=user,
                home=shared_home,
            )
            for name in self.node_names
        }
        #: Seconds :meth:`start` took until every node was idle (reported by the tests).
        self.start_seconds = 0.0

    # ----------------------------------------------------------------- configuration
    def slurm_conf(self) -> str:
        """The cluster's ``slurm.conf`` (the same file on every machine, as Slurm requires)."""
        lines = [
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={self.controller_name}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=slurm",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "StateSaveLocation=/var/lib/slurm/slurmctld",
            "SlurmdSpoolDir=/var/lib/slurm/slurmd",
            "SlurmctldPidFile=/run/slurmctld.pid",
            "SlurmdPidFile=/run/slurmd.pid",
            "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
            "SlurmdLogFile=/var/log/slurm/slurmd.log",
            # No cgroups in the test bed (and none needed): processes tracked by parentage.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            # The nodes share this machine's CPUs and memory: trust the configured sizes.
            "SlurmdParameters=config_overrides",
            # A node set DOWN by the admin (scontrol) stays down until resumed, as with the usual setting.
            "ReturnToService=1",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=2",
            "SchedulerParameters=sched_interval=2",
        ]
        for name in self.node_names:
            lines.append(
                f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname={name} Port={self.node_ports[name]} "
                f"CPUs={self.cpus_per_node} RealMemory=1000 Gres=gpu:h100:{self.gpus_per_node} State=UNKNOWN"
            )
        nodes = ",".join(self.node_names)
        lines.append(f"PartitionName={self.partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def gres_conf(self) -> str:
        last = self.gpus_per_node - 1
        files = "/dev/nvidia0" if last == 0 else f"/dev/nvidia[0-{last}]"
        return f"Name=gpu Type=h100 File={files}\n" if self.gpus_per_node else ""

    # ----------------------------------------------------------------- lifecycle
    def start(self, timeout: float = START_TIMEOUT_S) -> SlurmCluster:
        """Boot every VM, configure and start the daemons, wait until every node is idle."""
        started = time.monotonic()
        self.ctld_port = free_port()
        self.node_ports = {name: free_port() for name in self.node_names}
        vms = [self.login, *self.computes.values()]
        with ThreadPoolExecutor(max_workers=min(len(vms), 8)) as pool:
            errors = [f.exception() for f in [pool.submit(vm.create) for vm in vms]]
        failed = [e for e in errors if e is not None]
        if failed:
            self.remove()
            raise TestbedError(f"SlurmCluster: {len(failed)} of {len(vms)} VMs failed to start: {failed[0]}")
        try:
            with ThreadPoolExecutor(max_workers=min(len(vms), 8)) as pool:
                roles = [(self.login, "controller")] + [(vm, "compute") for vm in self.computes.values()]
                for future in [pool.submit(self._configure, vm, role) for vm, role in roles]:
                    future.result()
            self.wait_idle(timeout)
        except BaseException:
            self.remove()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _configure(self, vm: FreshVM, role: str) -> None:
        if self.user != "root":
            # the login user reaches what the machines share (a Python under /root, the repository)
            # through folders the VM made root-only
            for path in self.shared:
                for parent in reversed(path.parents):
                    vm.exec(["chmod", "o+x", str(parent)])
        vm.write_file("/etc/slurm/slurm.conf", self.slurm_conf())
        vm.write_file("/etc/slurm/gres.conf", self.gres_conf())
        vm.write_file("/etc/slurm/testbed-role", f"ROLE={role}\nGPUS={self.gpus_per_node}\n")
        vm.write_file("/etc/munge/munge.key", self.munge_key, mode=0o400)
        vm.write_file("/usr/lib/standin/boot.d/50-slurm", BOOT_HOOK, mode=0o755)
        code, out = vm.exec(["/usr/lib/standin/boot.d/50-slurm"])
        if code != 0:
            raise TestbedError(f"SlurmCluster: starting the {role} daemons on {vm.name} failed (exit {code}):\n{out}")

    def wait_idle(self, timeout: float = START_TIMEOUT_S) -> None:
        """Block until ``sinfo`` shows every node idle (raise with the daemon logs if not)."""
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self.node_states()
            if len(states) == len(self.node_names) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.5)
        raise TestbedError(f"SlurmCluster: nodes not idle after {timeout:.0f}s: {states}\n{self.logs()}")

    def remove(self) -> None:
        """Delete every VM of the cluster."""
        for vm in [self.login, *self.computes.values()]:
            vm.remove()

    # ----------------------------------------------------------------- observation and control (for assertions)
    def login_exec(self, *argv: str) -> tuple[int, str]:
        """Run a command on the login node (``docker exec``; test assertions, not the code under test)."""
        return self.login.exec(list(argv))

    def node_states(self) -> dict[str, str]:
        """``sinfo`` per node: name -> state (``idle``, ``alloc``, ``down*``...)."""
        code, out = self.login_exec("sinfo", "-h", "-N", "-o", "%N %t")
        if code != 0:
            return {}
        return dict(line.split(None, 1) for line in out.splitlines() if len(line.split()) == 2)

    def queue(self) -> list[str]:
        """``squeue`` lines (``JOBID STATE NAME``) of every job still known to the controller."""
        code, out = self.login_exec("squeue", "-h", "-o", "%i %T %j")
        if code != 0:
            raise TestbedError(f"SlurmCluster: squeue failed: {out}")
        return [line for line in out.splitlines() if line.strip()]

    def queue_once_completed(self, timeout_s: float = 30.0) -> list[str]:
        """:meth:`queue` once no job is left COMPLETING, waiting at most ``timeout_s`` (0.25 s between looks).

        A job whose steps have all ended is COMPLETING until every node has reported its cleanup (``KillWait`` is 5
        s here); beside a busy core that report comes after ``srun`` or ``scancel`` has returned (seen once:
        ``1 COMPLETING hostname``). The job has been given back then, which is what a test asserts, so only that
        state is waited out: a job RUNNING or PENDING is returned at once.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.queue()
            if not left or any(line.split()[1:2] != ["COMPLETING"] for line in left) or time.monotonic() > deadline:
                return left
            time.sleep(0.25)

    def scontrol(self, *args: str) -> str:
        code, out = self.login_exec("scontrol", *args)
        if code != 0:
            raise TestbedError(f"SlurmCluster: scontrol {' '.join(args)} failed (exit {code}): {out}")
        return out

    def logs(self, tail: int = 30) -> str:
        """The last ``tail`` lines of slurmctld's and each slurmd's log, and of the login node's console (its
        sshd logs there: ``sshd -e``), for a failed test's message."""
        parts = []
        if self.login.container is not None:
            console = self.login.container.logs(tail=tail).decode(errors="replace")
            parts.append(f"--- {self.login.name}: console (sshd)\n{console}")
        for vm, path in [(self.login, "/var/log/slurm/slurmctld.log")] + [
            (vm, "/var/log/slurm/slurmd.log") for vm in self.computes.values()
        ]:
            _code, out = vm.exec(["tail", f"-n{tail}", path])
            parts.append(f"--- {vm.name}:{path}\n{out}")
        return "\n".join(parts)
