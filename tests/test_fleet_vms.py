"""Fleets of fresh VMs over SSH (the Docker test bed): provisioning many at once, a host lost
mid-run, the re-run that finishes it, and Ctrl-C that leaves no remote command behind.

The profile ``tests/fixtures/profiles/fleet/FLEET-PROVISION.json`` does real ``apt-get install``s
of the stand-in packages from the VMs' local apt repository.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.steptypes import TEST_TYPES
from tests.test_fleet_steps import FLEET_TYPES
from tests.test_installers_e2e import install_lspci
from tests.testbed.freshvm import FreshVM
from workload import registry
from workload.cli import invoke
from workload.engine import Engine, HostOutcome, RunOptions
from workload.hosts import ConnectOptions, open_host
from workload.hosts.base import ConnectionLost, Host, HostSpec
from workload.inventory import load_inventory
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "tests/fixtures/profiles/fleet/FLEET-PROVISION.json"
GPU_PROFILE = ROOT / "tests/fixtures/profiles/fleet/FLEET-GPU-SETUP.json"
RUNNER = ROOT / "tests/fixtures/profiles/fleet/run_with_test_steps.py"


@pytest.fixture(autouse=True)
def test_step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES, **FLEET_TYPES})


def fleet_files(tmp_path: Path, vms: list[FreshVM]) -> tuple[Path, Path]:
    """An inventory (``vm-NN``, with a rack label) and one known_hosts file for all the VMs."""
    inventory = tmp_path / "fleet.txt"
    inventory.write_text(
        "".join(f"{vm.host_spec} key={vm.key_path} name=vm-{i:02d} rack=r{i % 2}\n" for i, vm in enumerate(vms))
    )
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(vm.known_hosts_path.read_text() for vm in vms))
    return inventory, known_hosts


def cli_args(inventory: Path, known_hosts: Path, runs: Path) -> list[str]:
    return ["--inventory", str(inventory), "--known-hosts", str(known_hosts), "--output-dir", str(runs)]


def last_run(runs: Path) -> dict[str, Any]:
    folder = sorted(runs.iterdir())[-1]
    data: dict[str, Any] = json.loads((folder / "run.json").read_text())
    return data


def installed(vm: FreshVM, package: str) -> bool:
    code, out = vm.exec(["dpkg-query", "-W", "-f", "${Status}", package])
    return code == 0 and out.strip() == "install ok installed"


def gpu_fleet(fresh_vms: Callable[..., list[FreshVM]], count: int) -> list[FreshVM]:
    """Fresh Ubuntu 22.04 VMs with two PCIe H100s each (no NVSwitch, so no fabric manager)."""
    vms = fresh_vms(count, os_release="ubuntu-22.04", gpus=2, gpu_name="NVIDIA H100 PCIe", nvswitch=False)
    for vm in vms:
        install_lspci(vm)
    return vms


@pytest.mark.heavy(seconds=40)  # 16 VMs
def test_sixteen_fresh_vms_get_driver_cuda_docker_and_toolkit_in_one_run_and_a_rerun_changes_nothing(
    tmp_path: Path,
    fresh_vms: Callable[..., list[FreshVM]],
    cuda_runfile_server: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vms = gpu_fleet(fresh_vms, 16)
    inventory, known_hosts = fleet_files(tmp_path, vms)
    parameters = f"LinuxLocalRunFile={cuda_runfile_server.url},,,RunFileSha256={cuda_runfile_server.sha256}"
    args = ["run", "--profile", str(GPU_PROFILE), "--parameters", parameters, "--parallel", "16"]
    args += cli_args(inventory, known_hosts, tmp_path / "runs")

    started = time.monotonic()
    code = invoke(args)
    first_s = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == 0, out
    run = last_run(tmp_path / "runs")
    assert [o["status"] for o in run["outcomes"]] == ["ok"] * 16
    for outcome in run["outcomes"]:
        assert [s["status"] for s in outcome["steps"]] == ["changed"] * 3, outcome
    for vm in vms:  # the engine rebooted each VM into the new driver, then installed Docker and the toolkit
        assert vm.loaded_driver() == "550.144.03"
        assert installed(vm, "docker-ce") and installed(vm, "nvidia-container-toolkit")
    assert "16 of 16 host(s) ok" in out

    started = time.monotonic()
    assert invoke(args) == 0
    second_s = time.monotonic() - started
    rerun = last_run(tmp_path / "runs")
    for outcome in rerun["outcomes"]:
        assert [s["status"] for s in outcome["steps"]] == ["unchanged"] * 3, outcome
    assert second_s < first_s, (first_s, second_s)


def run_engine(inventory: Path, known_hosts: Path, runs: Path, **parameters: Any) -> tuple[Engine, list[HostSpec]]:
    profile = resolve_profile(load_profile(str(PROFILE)), {k: str(v) for k, v in parameters.items()})
    options = ConnectOptions(known_hosts=str(known_hosts), use_system_known_hosts=False, use_agent=False)

    def factory(spec: HostSpec) -> Host:
        return open_host(spec, options)

    folder = RunFolder.create(runs, profile.name)
    return Engine(profile, folder, factory, RunOptions(parallel=8)), load_inventory(inventory)


def test_a_host_lost_mid_run_fails_with_the_reason_the_others_finish_and_a_rerun_finishes_it(
    tmp_path: Path, fresh_vms: Callable[..., list[FreshVM]]
) -> None:
    vms = fresh_vms(16)
    others = [i for i in range(16) if i != 1]
    inventory, known_hosts = fleet_files(tmp_path, vms)
    engine, specs = run_engine(inventory, known_hosts, tmp_path / "runs", SettleSeconds=4)
    outcomes: list[HostOutcome] = []
    runner = threading.Thread(target=lambda: outcomes.extend(engine.run(specs)))
    runner.start()
    victim = vms[1]
    deadline = time.monotonic() + 180
    while victim.exec(["test", "-e", "/root/vm-01.sleeping"])[0] != 0:  # vm-01 is in its 4 s "Settle" step
        assert runner.is_alive() and time.monotonic() < deadline, "vm-01 never reached the Settle step"
        time.sleep(0.1)
    victim.stop_sshd()
    runner.join(300)
    assert not runner.is_alive()

    assert [o.status for o in outcomes] == ["ok", "failed"] + ["ok"] * 14
    lost = outcomes[1]
    assert isinstance(lost.error, ConnectionLost), lost.error
    assert "the connection was lost" in str(lost.error) and "[vm-01]" in str(lost.error)
    assert lost.reason.startswith("Dependencies[1] SleepStep (Settle): [vm-01] the connection was lost")
    assert [s.status for s in lost.steps] == ["changed", "failed"]
    assert "the connection was lost" in (engine.folder.root / "vm-01" / "host.log").read_text()
    assert not installed(victim, "docker-ce")
    assert all(installed(vms[i], "docker-ce") for i in others)

    # The operator brings vm-01 back and runs the same thing again: only vm-01 has work left.
    victim.start_sshd()
    engine, specs = run_engine(inventory, known_hosts, tmp_path / "runs", SettleSeconds=4)
    again = engine.run(specs)
    assert [o.status for o in again] == ["ok"] * 16, [str(o.error) for o in again]
    for i in others:
        assert [s.status for s in again[i].steps] == ["unchanged"] * 3
    assert again[1].steps[0].status == "unchanged" and again[1].steps[2].status == "changed"
    assert installed(victim, "docker-ce")


def test_ctrl_c_kills_the_remote_commands_and_every_host_reports_interrupted(
    tmp_path: Path, fresh_vms: Callable[..., list[FreshVM]]
) -> None:
    vms = fresh_vms(2)
    inventory, known_hosts = fleet_files(tmp_path, vms)
    argv = [sys.executable, str(RUNNER), "run", "--profile", str(PROFILE), "--parameters", "SettleSeconds=287.5"]
    argv += cli_args(inventory, known_hosts, tmp_path / "runs")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while not all(vm.exec(["test", "-e", f"/root/vm-{i:02d}.sleeping"])[0] == 0 for i, vm in enumerate(vms)):
            assert proc.poll() is None and time.monotonic() < deadline, "the VMs never reached the Settle step"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    for vm in vms:
        _, ps = vm.exec(["ps", "-eo", "args"])
        assert "sleep 287.5" not in ps, f"{vm.name}: the remote command survived Ctrl-C:\n{ps}"
    run = last_run(tmp_path / "runs")
    assert [o["status"] for o in run["outcomes"]] == ["interrupted", "interrupted"]
    for outcome in run["outcomes"]:
        assert [s["status"] for s in outcome["steps"]] == ["changed", "interrupted"]
