"""First run vs second run of the three installers on a fresh test-bed VM (goal: second < 10% of first).

    .venv/bin/python bench/bench_installers_rerun.py [--rounds N]

Creates a fresh Ubuntu 22.04 "VM" (tests/testbed: real sshd, apt, dpkg; stand-in NVIDIA/Docker
packages) and runs ``tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json`` on it through the engine,
as ``workload run`` does (connect, preflight, then per step: plan -> apply -> reboot -> verify):
NvidiaCudaInstallation (with its reboot), DockerInstallation and NvidiaContainerToolkitInstallation.
Then runs the same again on the provisioned host, where every step must plan no change. Prints both
times, the ratio, and where the second run spends its time (per step, and commands sent).
Stand-in packages install in milliseconds, so the ratio here is an upper bound: on a real VM the
first run takes many minutes (driver DKMS build, CUDA toolkit download) and the second stays the same.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_installers_e2e import install_lspci, open_vm
from tests.testbed import FreshVM, acquire_engine, ensure_image
from tests.testbed.aptrepo import ensure_repo
from tests.testbed.fileserver import start_cuda_runfile_server
from workload.engine import Engine, HostOutcome, RunOptions
from workload.hosts.base import Host, HostSpec, parse_host_spec
from workload.hosts.ssh import SshHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

PROFILE = Path(__file__).resolve().parent.parent / "tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json"

#: Round trips (commands) sent to the VM, counted at the transport.
SENT = [0]
_execute = SshHost._execute


def _counting_execute(self: SshHost, *args: object, **kwargs: object) -> tuple[int, bool]:
    SENT[0] += 1
    return _execute(self, *args, **kwargs)  # type: ignore[arg-type]


def run_once(vm: FreshVM, runs: Path, parameters: dict[str, str]) -> tuple[float, HostOutcome, int]:
    """One engine run of the profile on the VM: (wall s, outcome, commands sent)."""
    profile = resolve_profile(load_profile(str(PROFILE)), parameters)

    def factory(spec: HostSpec) -> Host:
        return open_vm(vm)

    engine = Engine(profile, RunFolder.create(runs, profile.name), factory, RunOptions())
    sent = SENT[0]
    started = time.monotonic()
    (outcome,) = engine.run([parse_host_spec(vm.host_spec)])
    elapsed = time.monotonic() - started
    if outcome.status != "ok":
        raise SystemExit(f"the run failed: {outcome.error}")
    return elapsed, outcome, SENT[0] - sent


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="second-run repetitions (the median is reported)")
    args = parser.parse_args()
    SshHost._execute = _counting_execute  # type: ignore[method-assign]
    engine = acquire_engine()
    server = start_cuda_runfile_server()
    vm = FreshVM(engine, ensure_image(engine), ensure_repo(), os_release="ubuntu-22.04", user="azureuser")
    vm = vm.create()
    try:
        install_lspci(vm)
        parameters = {"LinuxLocalRunFile": server.url, "RunFileSha256": server.sha256}
        with tempfile.TemporaryDirectory() as tmp:
            first, outcome, first_sent = run_once(vm, Path(tmp), parameters)
            assert [s.status for s in outcome.steps] == ["changed"] * 3, outcome.steps
            seconds: list[float] = []
            for _ in range(args.rounds):
                second_s, outcome, sent = run_once(vm, Path(tmp), parameters)
                assert [s.status for s in outcome.steps] == ["unchanged"] * 3, outcome.steps
                seconds.append(second_s)
            second = sorted(seconds)[len(seconds) // 2]
    finally:
        vm.remove()
        server.server.stop()
        if not os.environ.get("WORKLOAD_TESTBED_KEEP"):
            engine.release()
    print(f"first run  (fresh VM, incl. reboot):   {first:6.2f} s  ({first_sent} commands)")
    print(f"second run (no changes, median of {args.rounds}): {second:6.2f} s  ({sent} commands)")
    print(f"ratio: {second / first:.1%} (goal < 10%)")
    print("second run, last round (connect, preflight and the first plan are in the first step):")
    for step in outcome.steps:
        print(f"  {step.label:<52} {step.duration_s:5.2f}s  {step.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
