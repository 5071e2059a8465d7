"""What a Slurm job step costs per command, beside an SSH command to the same node; and the cluster's start.

    .venv/bin/python bench/bench_slurm_step.py [--rounds 20] [--json]

Starts the test bed's real Slurm cluster (tests/testbed/slurm.py: Debian's slurmctld/slurmd/munge,
a login node and 4 compute nodes in fresh-VM containers; needs root, like the tests) and reports:

* the cluster's start (VMs booted, daemons started, every node idle in ``sinfo``), seconds;
* per command, interleaved A B A B on the same node: ``true`` as a job step (``SlurmHost``: srun
  through an SSH connection to the login node) and ``true`` over SSH straight to the node
  (``SshHost``), wall seconds each, and the step's extra cost (the paired difference per round).
  The extra cost is what every command of a node pays under Slurm: srun asks slurmctld for a step,
  slurmd starts slurmstepd, and the output comes back through srun to the login node.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import Report, add_arguments, figure, interleave, paired_differences

from workload.commands import cmd
from workload.hosts import ConnectOptions, open_host, parse_host_spec
from workload.hosts.slurm import SlurmHost
from workload.hosts.slurm_alloc import SlurmAllocation, SlurmRequest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, rounds=20)
    args = parser.parse_args()
    from tests.testbed import acquire_engine
    from tests.testbed.aptrepo import ensure_repo
    from tests.testbed.slurm import SlurmCluster, ensure_slurm_image

    report = Report("bench_slurm_step", settings={"rounds": args.rounds, "nodes": 4})
    engine = acquire_engine()
    cluster = SlurmCluster(engine, ensure_slurm_image(engine), ensure_repo(), nodes=4)
    try:
        cluster.start()
        report.extra["cluster_start_s"] = round(cluster.start_seconds, 2)
        print(f"cluster started (4 nodes idle) in {cluster.start_seconds:.1f}s", flush=True)
        login_vm = cluster.login
        options = ConnectOptions(key_filename=str(login_vm.key_path), known_hosts=str(login_vm.known_hosts_path))
        login = open_host(parse_host_spec(login_vm.host_spec), options)
        allocation = SlurmAllocation(login, SlurmRequest(cluster.partition, nodes=1), "bench-step")
        (node,) = allocation.allocate(print)
        vm = cluster.computes[node]
        ssh = open_host(
            parse_host_spec(vm.host_spec),
            ConnectOptions(key_filename=str(vm.key_path), known_hosts=str(vm.known_hosts_path)),
        )
        slurm = SlurmHost(node, allocation, login)
        for host in (slurm, ssh):
            host.check(cmd("true"))  # connections open, identity read

        def timed(host: object) -> float:
            started = time.perf_counter()
            host.check(cmd("true"))  # type: ignore[attr-defined]
            return time.perf_counter() - started

        step_s, ssh_s = interleave(args.rounds, [lambda _r: timed(slurm), lambda _r: timed(ssh)])
        report.add(figure("job step (srun via the login node), s", step_s, "s"))
        report.add(figure("ssh to the node, s", ssh_s, "s"))
        report.add(figure("extra per command as a job step, s", paired_differences(step_s, ssh_s), "s"))
        allocation.release()
        login.close()
        ssh.close()
    finally:
        cluster.remove()
        engine.release()
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
