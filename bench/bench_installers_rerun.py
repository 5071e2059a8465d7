"""First run vs second run of the three installers on a fresh test-bed VM (goal: second < 10% of first).

    .venv/bin/python bench/bench_installers_rerun.py [--rounds 5] [--json]

Creates a fresh Ubuntu 22.04 "VM" (tests/testbed: real sshd, apt, dpkg; stand-in NVIDIA/Docker
packages) and runs ``tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json`` on it through the engine,
as ``workload run`` does (connect, preflight, then per step: plan -> apply -> reboot -> verify):
NvidiaCudaInstallation (with its reboot), DockerInstallation and NvidiaContainerToolkitInstallation.
Then runs the same again on the provisioned host, where every step must plan no change. Each round
(``--rounds``) does both on a VM of its own -- first, second, first, second ... -- and the ratio is
taken per round (see ``_measure.py`` for its interval and the "cannot tell" verdict). Beside wall
time, the controller's CPU time (this process: the engine, paramiko, its threads) for each run and
their ratio: what our side costs whatever the neighbours do. Prints where the last second run spends
its time (per step, and commands sent).
Stand-in packages install in milliseconds, so the ratio here is an upper bound: on a real VM the
first run takes many minutes (driver DKMS build, CUDA toolkit download) and the second stays the same.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import Goal, Report, add_arguments, figure, interleave, paired_ratios

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


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    sent: int
    outcome: HostOutcome


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measured_run(vm: FreshVM, runs: Path, parameters: dict[str, str], expect: str) -> Measured:
    cpu = _cpu_s()
    wall, outcome, sent = run_once(vm, runs, parameters)
    assert [s.status for s in outcome.steps] == [expect] * 3, outcome.steps
    return Measured(wall, _cpu_s() - cpu, sent, outcome)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_arguments(parser, rounds=5)
    args = parser.parse_args()
    report = Report("bench_installers_rerun", settings={"rounds": args.rounds})
    SshHost._execute = _counting_execute  # type: ignore[method-assign]
    engine = acquire_engine()
    server = start_cuda_runfile_server()
    image, repo = ensure_image(engine), ensure_repo()
    parameters = {"LinuxLocalRunFile": server.url, "RunFileSha256": server.sha256}
    vms: list[FreshVM] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:

            def first(r: int) -> Measured:
                vm = FreshVM(engine, image, repo, os_release="ubuntu-22.04", user="azureuser").create()
                vms.append(vm)
                install_lspci(vm)
                return measured_run(vm, Path(tmp), parameters, "changed")

            def second(r: int) -> Measured:
                try:
                    return measured_run(vms[-1], Path(tmp), parameters, "unchanged")
                finally:
                    vms.pop().remove()

            def progress(r: int, got: list[list[Measured]]) -> None:
                a, b = got[0][r], got[1][r]
                print(
                    f"  round {r + 1}: first {a.wall_s:5.2f} s ({a.cpu_s:.2f} CPU-s, {a.sent} commands), "
                    f"second {b.wall_s:5.2f} s ({b.cpu_s:.2f} CPU-s, {b.sent} commands)",
                    flush=True,
                )

            firsts, seconds = interleave(args.rounds, [first, second], progress)
    finally:
        for vm in vms:
            vm.remove()
        server.server.stop()
        if not os.environ.get("WORKLOAD_TESTBED_KEEP"):
            engine.release()
    wall_a, wall_b = [m.wall_s for m in seconds], [m.wall_s for m in firsts]
    cpu_a, cpu_b = [m.cpu_s for m in seconds], [m.cpu_s for m in firsts]
    report.add(figure("ratio second/first wall", paired_ratios(wall_a, wall_b), goal=Goal("<", 0.10)))
    report.add(figure("ratio second/first controller CPU", paired_ratios(cpu_a, cpu_b)))
    report.add(figure("first run wall (fresh VM, incl. reboot)", wall_b, unit="s", digits=2))
    report.add(figure("second run wall (no changes)", wall_a, unit="s", digits=2))
    report.add(figure("first run controller CPU", cpu_b, unit="CPU-s", digits=2))
    report.add(figure("second run controller CPU", cpu_a, unit="CPU-s", digits=2))
    report.extra["commands"] = {"first": firsts[-1].sent, "second": seconds[-1].sent}
    print(f"commands sent: first run {firsts[-1].sent}, second run {seconds[-1].sent}")
    print("second run, last round (connect, preflight and the first plan are in the first step):")
    for step in seconds[-1].outcome.steps:
        print(f"  {step.label:<52} {step.duration_s:5.2f}s  {step.message}")
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
