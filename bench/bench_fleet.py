"""Benchmark a fleet run: 16 fresh VMs provisioned one after another vs all at once.

Each measurement is one real ``workload run`` subprocess (the controller) over SSH to fresh VMs of
the Docker test bed, with ``tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json``: the real
NvidiaCudaInstallation (driver + CUDA from the stand-in runfile, then a reboot through the engine),
DockerInstallation and NvidiaContainerToolkitInstallation. Every measurement gets VMs of its own,
so each run starts from fresh machines.

Printed: serial (``--parallel 1``) and parallel (``--parallel 16``) wall time and their ratio, and
the controller's peak RSS for 4 and 16 hosts. The peak RSS is the controller process's own
(``VmHWM``; the VMs run in containers, not under it), one fresh process per measurement so peaks
do not mix.

    .venv/bin/python bench/bench_fleet.py [--hosts 16] [--skip-serial]

Needs root, dockerd and debootstrap (the test bed); takes a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_installers_e2e import install_lspci  # noqa: E402
from tests.testbed import acquire_engine, ensure_image  # noqa: E402
from tests.testbed.aptrepo import ensure_repo  # noqa: E402
from tests.testbed.dockerd import DockerEngine  # noqa: E402
from tests.testbed.fileserver import CudaRunfileServer, start_cuda_runfile_server  # noqa: E402
from tests.testbed.freshvm import FreshVM, create_vms  # noqa: E402

PROFILE = ROOT / "tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json"


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores, every process and container)."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def measure(
    engine: DockerEngine,
    image: str,
    repo: Path,
    server: CudaRunfileServer,
    hosts: int,
    parallel: int,
    work: Path,
    runs_dir: Path | None = None,
) -> tuple[float, float, float, str, float]:
    """One ``workload run`` on ``hosts`` fresh VMs.

    Returns (wall s, controller CPU s, controller peak RSS MiB, verdict, machine CPU s): the last
    is what every process and VM container of the machine spent busy during the run.
    """
    vms: list[FreshVM] = create_vms(
        engine, image, repo, hosts, os_release="ubuntu-22.04", gpus=2, gpu_name="NVIDIA H100 PCIe", nvswitch=False
    )
    try:
        for vm in vms:
            install_lspci(vm)
        inventory = work / f"fleet-{hosts}-{parallel}.txt"
        inventory.write_text("".join(f"{vm.host_spec} key={vm.key_path} name=vm-{i:02d}\n" for i, vm in enumerate(vms)))
        known_hosts = work / f"known_hosts-{hosts}-{parallel}"
        known_hosts.write_text("".join(vm.known_hosts_path.read_text() for vm in vms))
        argv = [sys.executable, "-m", "workload", "run", "--profile", str(PROFILE)]
        argv += ["--parameters", f"LinuxLocalRunFile={server.url},,,RunFileSha256={server.sha256}"]
        argv += ["--inventory", str(inventory), "--known-hosts", str(known_hosts), "--parallel", str(parallel)]
        argv += ["--output-dir", str(runs_dir or work / "runs")]
        log = work / f"run-{hosts}-{parallel}.log"
        with log.open("w") as out:
            _cpu_seconds()  # start counting here: VM set-up runs ssh-keygen children too
            busy_before = _machine_busy_s()
            started = time.monotonic()
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
            peak_kib = 0
            while proc.poll() is None:
                peak_kib = max(peak_kib, _high_water_kib(proc.pid))
                time.sleep(0.1)
            wall = time.monotonic() - started
            busy = _machine_busy_s() - busy_before
        verdict = "ok" if proc.returncode == 0 else f"exit {proc.returncode} (see {log})"
        return wall, _cpu_seconds(), peak_kib / 1024, verdict, busy
    finally:
        for vm in vms:
            vm.remove()


def _high_water_kib(pid: int) -> int:
    """The process's peak resident set so far (``VmHWM``), 0 once it is gone.

    Not ``wait4``'s ``ru_maxrss``: on Linux that keeps the forking parent's peak across ``exec``,
    so it would report this (bigger) benchmark process instead of the controller.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


_cpu_before = [0.0]


def _cpu_seconds() -> float:
    """CPU time of the children reaped since the last call (the controller, when called around it)."""
    usage = os.times()
    total = usage.children_user + usage.children_system
    spent, _cpu_before[0] = total - _cpu_before[0], total
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--skip-serial", action="store_true", help="only the parallel and RSS measurements")
    parser.add_argument("--runs-dir", type=Path, help="keep the run folders (logs, run.json) here")
    args = parser.parse_args()
    engine = acquire_engine()
    server = start_cuda_runfile_server()
    try:
        image, repo = ensure_image(engine), ensure_repo()
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
            work = Path(tmp)
            print(f"{args.hosts} fresh VMs per run, profile {PROFILE.name}, {os.cpu_count()} CPU(s)")
            cores = len(os.sched_getaffinity(0))
            parallel_s, cpu, rss_big, verdict, busy = measure(
                engine, image, repo, server, args.hosts, args.hosts, work, args.runs_dir
            )
            print(f"parallel (--parallel {args.hosts}): {parallel_s:7.1f} s  (controller CPU {cpu:.1f} s)  [{verdict}]")
            # The VMs are containers on this machine: together they cannot run faster than their
            # CPU work spread over its cores. That floor says how much of the wall time is ours.
            floor_s = busy / cores
            print(
                f"  machine busy {busy:.1f} CPU-s over {cores} cores: CPU-bound floor {floor_s:.1f} s, "
                f"parallel wall = {parallel_s / floor_s:.2f} x floor"
            )
            if not args.skip_serial:
                serial_s, cpu, _, verdict, _ = measure(engine, image, repo, server, args.hosts, 1, work, args.runs_dir)
                print(f"serial   (--parallel 1):  {serial_s:7.1f} s  (controller CPU {cpu:.1f} s)  [{verdict}]")
                print(
                    f"ratio parallel/serial:    {parallel_s / serial_s:7.3f}  (speed-up {serial_s / parallel_s:.1f}x; "
                    f"goal <= 0.25; this machine's floor {floor_s / serial_s:.3f})"
                )
            _, _, rss_small, verdict, _ = measure(engine, image, repo, server, 4, 4, work)
            print(f"controller peak RSS, 4 hosts:  {rss_small:6.1f} MiB  [{verdict}]")
            print(f"controller peak RSS, {args.hosts} hosts: {rss_big:6.1f} MiB")
    finally:
        server.server.stop()
        engine.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
