"""Benchmark a fleet run: 16 fresh VMs provisioned one after another vs all at once.

Each measurement is one real ``workload run`` subprocess (the controller) over SSH to fresh VMs of
the Docker test bed, with ``tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json``: the real
NvidiaCudaInstallation (driver + CUDA from the stand-in runfile, then a reboot through the engine),
DockerInstallation and NvidiaContainerToolkitInstallation. Every measurement gets VMs of its own,
so each run starts from fresh machines.

Rounds (``--rounds``) interleave parallel (``--parallel 16``) and serial (``--parallel 1``) runs;
the ratio parallel/serial is taken per round (goal <= 0.25 for 16 hosts or more; interval and verdict:
see ``_measure.py``). Beside wall time: the controller's CPU seconds per host (user + system of the
``workload run`` process, its threads and children: what our side costs whatever the 16 VM
containers and the neighbours do to the wall clock), the machine's CPU-bound floor (every process's
busy CPU during the parallel run spread over the cores) and, after the rounds, the controller's peak
RSS for 4 hosts beside the parallel runs' for 16. The peak RSS is the controller process's own
(``VmHWM``; the VMs run in containers, not under it), one fresh process per measurement so peaks
do not mix.

    .venv/bin/python bench/bench_fleet.py [--hosts 16] [--rounds 3] [--skip-serial] [--json]

Needs root, dockerd and debootstrap (the test bed); about 3 minutes a round on 2 idle cores (use
``--hosts 8`` for a quicker look; the goal is stated for 16).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _measure import Goal, Report, add_arguments, figure, interleave, paired_ratios, run_process  # noqa: E402

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


@dataclass
class FleetRun:
    wall_s: float
    controller_cpu_s: float
    peak_rss_mib: float
    busy_s: float  # CPU seconds every process and VM container of the machine spent busy meanwhile


def measure(
    engine: DockerEngine,
    image: str,
    repo: Path,
    server: CudaRunfileServer,
    hosts: int,
    parallel: int,
    work: Path,
    runs_dir: Path | None = None,
) -> FleetRun:
    """One ``workload run`` (the controller, a subprocess) on ``hosts`` fresh VMs; fails loudly if it fails."""
    vms: list[FreshVM] = create_vms(
        engine, image, repo, hosts, os_release="ubuntu-22.04", gpus=2, gpu_name="NVIDIA H100 PCIe", nvswitch=False
    )
    try:
        for vm in vms:
            install_lspci(vm)
        tag = f"{hosts}-{parallel}-{next(_COUNT)}"
        inventory = work / f"fleet-{tag}.txt"
        inventory.write_text("".join(f"{vm.host_spec} key={vm.key_path} name=vm-{i:02d}\n" for i, vm in enumerate(vms)))
        known_hosts = work / f"known_hosts-{tag}"
        known_hosts.write_text("".join(vm.known_hosts_path.read_text() for vm in vms))
        argv = [sys.executable, "-m", "workload", "run", "--profile", str(PROFILE)]
        argv += ["--parameters", f"LinuxLocalRunFile={server.url},,,RunFileSha256={server.sha256}"]
        argv += ["--inventory", str(inventory), "--known-hosts", str(known_hosts), "--parallel", str(parallel)]
        argv += ["--output-dir", str(runs_dir or work / "runs")]
        log = work / f"run-{tag}.log"
        with log.open("w") as out:
            busy_before = _machine_busy_s()
            run = run_process(argv, cwd=ROOT, stdout=out, check=False, poll_s=0.1)
            busy = _machine_busy_s() - busy_before
        if run.returncode != 0:
            raise SystemExit(f"workload run exited {run.returncode} ({hosts} hosts, --parallel {parallel}): {log}")
        return FleetRun(run.wall_s, run.cpu_s, run.peak_rss_mib, busy)
    finally:
        for vm in vms:
            vm.remove()


_COUNT = itertools.count()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser, rounds=3)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--skip-serial", action="store_true", help="only the parallel and RSS measurements")
    parser.add_argument("--runs-dir", type=Path, help="keep the run folders (logs, run.json) here")
    args = parser.parse_args()
    report = Report("bench_fleet", settings={k: str(v) for k, v in vars(args).items() if k != "json"})
    engine = acquire_engine()
    server = start_cuda_runfile_server()
    n = args.hosts
    try:
        image, repo = ensure_image(engine), ensure_repo()
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
            work = Path(tmp)
            print(f"{n} fresh VMs per run, profile {PROFILE.name}", flush=True)

            def parallel(r: int) -> FleetRun:
                return measure(engine, image, repo, server, n, n, work, args.runs_dir)

            def serial(r: int) -> FleetRun:
                return measure(engine, image, repo, server, n, 1, work, args.runs_dir)

            def progress(r: int, got: list[list[FleetRun]]) -> None:
                line = "; ".join(
                    f"{name} {g[r].wall_s:6.1f} s (controller {g[r].controller_cpu_s / n:.2f} CPU-s/host)"
                    for name, g in zip(("parallel", "serial"), got, strict=False)
                )
                print(f"  round {r + 1}: {line}", flush=True)

            variants = [parallel] if args.skip_serial else [parallel, serial]
            got = interleave(args.rounds, variants, progress)
            small = measure(engine, image, repo, server, 4, 4, work)
    finally:
        server.server.stop()
        engine.release()
    par = got[0]
    cores = len(os.sched_getaffinity(0))
    if not args.skip_serial:
        ratio = paired_ratios([g.wall_s for g in par], [g.wall_s for g in got[1]])
        # The goal is stated for 16 hosts; with 4, even a perfect parallel run is 0.25.
        report.add(figure("ratio parallel/serial wall", ratio, goal=Goal("<=", 0.25) if n >= 16 else None))
        # The VMs are containers on this machine: together they cannot run faster than their CPU work
        # spread over its cores. That floor, over the serial time, is the best ratio this machine allows.
        floor = paired_ratios([g.busy_s / cores for g in par], [g.wall_s for g in got[1]])
        report.add(figure("this machine's floor (CPU-bound parallel / serial)", floor))
        report.add(figure("serial wall", [g.wall_s for g in got[1]], unit="s", digits=1))
        report.add(figure("serial controller CPU per host", [g.controller_cpu_s / n for g in got[1]], unit="CPU-s"))
    report.add(figure("parallel wall", [g.wall_s for g in par], unit="s", digits=1))
    report.add(figure("parallel controller CPU per host", [g.controller_cpu_s / n for g in par], unit="CPU-s"))
    report.add(figure("parallel wall / CPU-bound floor", [g.wall_s * cores / g.busy_s for g in par], digits=2))
    report.add(figure(f"controller peak RSS, {n} hosts", [g.peak_rss_mib for g in par], unit="MiB", digits=1))
    report.extra["controller_peak_rss_4_hosts_mib"] = round(small.peak_rss_mib, 1)
    print(f"controller peak RSS, 4 hosts (one run): {small.peak_rss_mib:.1f} MiB")
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
