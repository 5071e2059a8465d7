"""First run vs second run of the three installers on a fresh test-bed VM (goal: second < 10% of first).

    .venv/bin/python bench/bench_installers_rerun.py [--rounds N]

Creates a fresh Ubuntu 22.04 "VM" (tests/testbed: real sshd, apt, dpkg; stand-in NVIDIA/Docker
packages), runs NvidiaCudaInstallation (with its reboot), DockerInstallation and
NvidiaContainerToolkitInstallation like the engine does (plan -> apply -> reboot -> verify), then
runs them again on the provisioned host, where every plan must be a no-op. Prints both times, the
ratio, and where the second run spends its time (plan vs verify per step, commands sent).
Stand-in packages install in milliseconds, so the ratio here is an upper bound: on a real VM the
first run takes many minutes (driver DKMS build, CUDA toolkit) and the second stays the same.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from installers.docker import DockerInstallation
from installers.nvidia_container_toolkit import NvidiaContainerToolkitInstallation
from installers.nvidia_cuda import NvidiaCudaInstallation
from tests.test_installers_e2e import Runner, install_lspci, make_step
from tests.testbed import FreshVM, acquire_engine, ensure_image
from tests.testbed.aptrepo import ensure_repo
from tests.testbed.fileserver import start_cuda_runfile_server
from workload.hosts.base import Host


def count_commands(host: Host) -> list[int]:
    """Wrap the host's transport to count round trips."""
    counter = [0]
    original = host._execute

    def counting(*args: object, **kwargs: object) -> tuple[int, bool]:
        counter[0] += 1
        return original(*args, **kwargs)  # type: ignore[arg-type]

    host._execute = counting  # type: ignore[method-assign]
    return counter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="second-run repetitions (the median is reported)")
    parser.add_argument(
        "--tcp-nodelay",
        action="store_true",
        help="set TCP_NODELAY on the SSH socket (what SshHost does not do yet; removes ~40 ms per command)",
    )
    args = parser.parse_args()
    engine = acquire_engine()
    server = start_cuda_runfile_server()
    vm = FreshVM(engine, ensure_image(engine), ensure_repo(), os_release="ubuntu-22.04", user="azureuser").create()
    try:
        install_lspci(vm)
        with tempfile.TemporaryDirectory() as tmp:
            runner = Runner(vm, Path(tmp))
            steps = [
                make_step(
                    NvidiaCudaInstallation, 1, LinuxCudaVersion="12.4", LinuxDriverVersion="550",
                    LinuxDriverPackageVersion="550.127.05", LinuxLocalRunFile=server.url, RunFileSha256=server.sha256,
                ),
                make_step(DockerInstallation, 2),
                make_step(NvidiaContainerToolkitInstallation, 3),
            ]  # fmt: skip
            started = time.monotonic()
            for step in steps:
                runner.run(step)
            first = time.monotonic() - started
            if args.tcp_nodelay:
                import socket

                transport = runner.host._ensure().get_transport()  # type: ignore[attr-defined]
                transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            seconds: list[float] = []
            detail: list[str] = []
            for _ in range(args.rounds):
                counter = count_commands(runner.host)
                detail = []
                started = time.monotonic()
                for step in steps:
                    ctx = runner.context(step)
                    t0, n0 = time.monotonic(), counter[0]
                    plan = step.plan(ctx)
                    t1, n1 = time.monotonic(), counter[0]
                    assert not plan.changed and not plan.reboot_required, (step.type_name, plan)
                    step.verify(ctx)
                    t2, n2 = time.monotonic(), counter[0]
                    detail.append(
                        f"  {step.type_name:<36} plan {t1 - t0:5.2f}s ({n1 - n0:2d} commands)"
                        f"  verify {t2 - t1:5.2f}s ({n2 - n1:2d} commands)"
                    )
                seconds.append(time.monotonic() - started)
            second = sorted(seconds)[len(seconds) // 2]
    finally:
        vm.remove()
        server.server.stop()
        if not os.environ.get("WORKLOAD_TESTBED_KEEP"):
            engine.release()
    print(f"SSH TCP_NODELAY on the second run: {'yes' if args.tcp_nodelay else 'no'}")
    print(f"first run  (fresh VM, incl. reboot): {first:6.2f} s")
    print(f"second run (no changes, median of {args.rounds}): {second:6.2f} s")
    print(f"ratio: {second / first:.1%} (goal < 10%)")
    print("second run, last round:")
    print("\n".join(detail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
