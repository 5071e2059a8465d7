"""Telemetry of remote hosts: fresh VMs of the test bed over real sshd, with the stand-in nvidia-smi
(tests/testbed/standins/packages/nvidia-smi, installed as the nvidia-utils package puts it) on one
and none on the other; a `workload run` on both; a stop that does not wait for a hung nvidia-smi;
the run's cancel token, after which no sampling command starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.output_lines import TimedLines
from tests.test_fleet_steps import FLEET_TYPES
from tests.test_mlperf_exec_guard import wait_for
from tests.test_monitors import DRIVER, gpu
from tests.testbed.aptrepo import standin
from tests.testbed.freshvm import FreshVM
from workload import registry
from workload.cli import invoke
from workload.hosts import ConnectOptions, open_host, parse_host_spec
from workload.hosts.base import Host
from workload.monitors.hostmonitor import NO_NVIDIA_SMI, NOT_REACHED
from workload.monitors.sampler import (
    CANCELLED_GRACE_S,
    STOP_GRACE_S,
    STOP_KILL_WAIT_S,
    MonitorSettings,
    TelemetryMonitor,
    summary_lines,
    wait_for_samples,
)
from workload.rundir import host_folder_name
from workload.steps import CancelToken

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests/fixtures/profiles/fleet/run_with_test_steps.py"


def install_nvidia_smi(vm: FreshVM, gpus: list[dict[str, object]]) -> None:
    """The stand-in nvidia-smi in /usr/bin, its driver "loaded", and these GPUs in the VM."""
    vm.write_file("/usr/bin/nvidia-smi", standin("nvidia-smi", version=DRIVER, branch="550", cuda="12.4"), mode=0o755)
    vm.check(["sh", "-c", f"echo {DRIVER} > /run/nvidia-driver-loaded"])
    vm.write_file("/var/lib/standin/hardware.json", json.dumps({"gpus": gpus, "nvswitch": False}))


def ssh_host(vm: FreshVM) -> Host:
    options = ConnectOptions(
        key_filename=str(vm.key_path),
        known_hosts=str(vm.known_hosts_path),
        use_system_known_hosts=False,
        use_agent=False,
        look_for_keys=False,
    )
    return open_host(parse_host_spec(vm.host_spec), options)


def samples(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "telemetry" / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_each_ssh_host_is_sampled_gpus_where_nvidia_smi_is_host_only_where_not(
    tmp_path: Path, fresh_vms: Callable[..., list[FreshVM]]
) -> None:
    with_gpus, without = fresh_vms(2)
    install_nvidia_smi(
        with_gpus,
        [gpu(0, util=88, power_w=650.5, temp_c=77, sm_mhz=1755, clocks_event_reasons=0x20), gpu(1, util=91)],
    )
    assert without.exec(["sh", "-c", "command -v nvidia-smi"])[0] != 0
    hosts = [ssh_host(with_gpus), ssh_host(without)]
    run = tmp_path / "run"
    monitor = TelemetryMonitor(run, MonitorSettings(interval_s=0.2), hosts).start()
    for host in hosts:
        wait_for_samples(monitor, 3, timeout_s=60, host=host.name)
    whole = monitor.stop()

    a, b = (whole["hosts"][h.name] for h in hosts)
    lines = samples(run)
    assert {r["device"] for r in lines if r["host"] == hosts[0].name} == {"host", "gpu0", "gpu1"}
    assert {r["device"] for r in lines if r["host"] == hosts[1].name} == {"host"}
    # the stand-in's values, as the VM's nvidia-smi printed them
    gpu0 = a["devices"]["gpu0"]["metrics"]
    assert a["gpus"] == 2 and a["devices"]["gpu0"]["name"] == "NVIDIA H100 80GB HBM3"
    assert {k: gpu0[k]["max"] for k in ("gpu_utilization", "power_draw", "temperature", "sm_clock")} == {
        "gpu_utilization": 88,
        "power_draw": 650.5,
        "temperature": 77,
        "sm_clock": 1755,
    }
    assert a["devices"]["gpu1"]["metrics"]["gpu_utilization"]["avg"] == 91
    assert a["throttling"]["devices"] == {"gpu0": ["SW thermal slowdown"]} and whole["throttling_seen"] is True
    assert a["errors"] == [] and a["notes"] == [] and a["failed_samples"] == 0
    raw = run / "telemetry" / host_folder_name(hosts[0].name) / "nvidia-smi.csv"
    assert raw.read_text().count(", NVIDIA H100 80GB HBM3, 88, ") >= 3
    # the host without nvidia-smi: its CPU, memory and load, and a note saying why there is no GPU
    assert b["gpus"] == 0 and b["notes"] == [NO_NVIDIA_SMI] and b["errors"] == []
    metrics = b["devices"]["host"]["metrics"]
    assert metrics["load_1m"]["samples"] >= 3 and 0 <= metrics["cpu_utilization"]["avg"] <= 100
    meminfo = without.check(["cat", "/proc/meminfo"])
    total_kib = int(next(line.split()[1] for line in meminfo.splitlines() if line.startswith("MemTotal:")))
    assert metrics["memory_total"]["max"] == round(total_kib / 1024, 1)
    assert not (run / "telemetry" / host_folder_name(hosts[1].name)).exists()
    console = summary_lines(whole)
    assert f"telemetry {hosts[0].name}: GPU throttling seen: yes (gpu0: SW thermal slowdown)" in console
    assert f"telemetry {hosts[1].name}: {NO_NVIDIA_SMI}" in console
    assert any(line.startswith(f"telemetry {hosts[0].name} min/avg/max: cpu_utilization") for line in console)


@pytest.mark.slow
@pytest.mark.parametrize("cancelled", [False, True], ids=["run-end", "ctrl-c"])
def test_stop_kills_a_hung_nvidia_smi_and_returns_promptly(
    tmp_path: Path, fresh_vm: Callable[..., FreshVM], cancelled: bool
) -> None:
    vm = fresh_vm()
    vm.write_file("/usr/bin/nvidia-smi", "#!/bin/sh\nsleep 297\n", mode=0o755)  # a GPU that does not answer
    host = ssh_host(vm)
    cancel = CancelToken()
    monitor = TelemetryMonitor(tmp_path / "run", MonitorSettings(interval_s=0.2), [host]).start(cancel=cancel)
    deadline = time.monotonic() + 60
    while "sleep 297" not in vm.check(["ps", "-eo", "args"]):
        assert time.monotonic() < deadline, "the sampler never ran nvidia-smi"
        time.sleep(0.2)
    if cancelled:
        cancel.set("interrupted (Ctrl-C)")
    started = time.monotonic()
    summary = monitor.stop()["hosts"][host.name]
    took = time.monotonic() - started
    assert took < (CANCELLED_GRACE_S if cancelled else STOP_GRACE_S) + STOP_KILL_WAIT_S, took
    # The kill reaches the VM as signals; the processes end when a loaded machine gets to them.
    assert wait_for(lambda: "sleep 297" not in vm.check(["ps", "-eo", "args"]), 30), (
        "the hung nvidia-smi survived the stop"
    )
    assert "nvidia-smi had not answered when sampling stopped: killed" in summary["errors"]
    assert summary["devices"]["host"]["metrics"]["load_1m"]["samples"] >= 1  # the host part was sampled


def test_no_sampling_command_starts_after_the_run_is_cancelled(tmp_path: Path) -> None:
    cancel = CancelToken()
    run = tmp_path / "run"
    monitor = TelemetryMonitor(run, MonitorSettings(interval_s=0.05)).start(cancel=cancel)
    wait_for_samples(monitor, 3)
    cancel.set("interrupted (Ctrl-C)")
    cancelled_at = datetime.now(UTC)
    time.sleep(0.5)  # an interval sample now would start a command the cancel forbids
    started = time.monotonic()
    monitor.stop()
    assert time.monotonic() - started < CANCELLED_GRACE_S + STOP_KILL_WAIT_S  # the stop's own bound
    # Neither the interval samples nor the final one after the cancel. A sample's time is taken before
    # it asks the token, so one begun after the cancel has a later time; the sample under way at the
    # cancel may still be written, however late, with its earlier time.
    late = [t for t in sample_times(run) if t > cancelled_at]
    assert late == [], f"samples begun after the cancel at {cancelled_at}: {late}"


@pytest.mark.slow
def test_a_workload_run_on_two_vms_records_each_hosts_telemetry(
    tmp_path: Path,
    fresh_vms: Callable[..., list[FreshVM]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **FLEET_TYPES})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    vms = fresh_vms(2)
    install_nvidia_smi(vms[0], [gpu(0, util=64, power_w=401.25, clocks_event_reasons=0x1)])
    inventory = tmp_path / "fleet.txt"
    inventory.write_text("".join(f"{vm.host_spec} key={vm.key_path} name=vm-{i:02d}\n" for i, vm in enumerate(vms)))
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(vm.known_hosts_path.read_text() for vm in vms))
    profile = tmp_path / "p.json"
    profile.write_text(
        json.dumps(
            {
                "Description": "sleep while the monitors sample",
                "Actions": [{"Type": "SleepStep", "Parameters": {"Scenario": "Work", "Seconds": 2, "Dir": "/root"}}],
                "Monitors": [{"Type": "NvidiaSmiMonitor", "Parameters": {"MonitorFrequency": "00:00:00.3"}}],
            }
        )
    )
    runs = tmp_path / "runs"
    argv = ["run", "--profile", str(profile), "--inventory", str(inventory), "--known-hosts", str(known_hosts)]
    assert invoke([*argv, "--output-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    (folder,) = runs.iterdir()
    summary = json.loads((folder / "telemetry" / "summary.json").read_text())
    assert set(summary["hosts"]) == {"vm-00", "vm-01"} and summary["interval_s"] == 0.3
    first, second = summary["hosts"]["vm-00"], summary["hosts"]["vm-01"]
    assert first["gpus"] == 1 and first["devices"]["gpu0"]["metrics"]["power_draw"]["max"] == 401.25
    assert first["throttling"] == {"seen": False, "devices": {}, "faults": {}, "reasons_seen": {"gpu0": ["GPU idle"]}}
    assert first["devices"]["host"]["metrics"]["load_1m"]["samples"] >= 3  # 2 s of work at 0.3 s
    assert second["gpus"] == 0 and second["notes"] == [NO_NVIDIA_SMI]
    assert "telemetry vm-00 min/avg/max: cpu_utilization" in out and "1 GPU(s) gpu_utilization 64/64/64 %" in out
    assert "telemetry vm-00: GPU throttling seen: no" in out and f"telemetry vm-01: {NO_NVIDIA_SMI}" in out
    page = (folder / "report.html").read_text()
    assert "vm-00: GPU throttling seen" in page and f"vm-01: {NO_NVIDIA_SMI}" in page
    assert (folder / "telemetry" / "vm-00" / "nvidia-smi.csv").is_file()


def test_a_host_the_run_never_reaches_is_not_sampled_and_says_so(tmp_path: Path) -> None:
    from workload.hosts import LocalHost

    monitor = TelemetryMonitor(tmp_path / "run", MonitorSettings(interval_s=0.05), hosts=[]).start()
    monitor.add(LocalHost("far"), ready=lambda: False)  # as an SSH host the engine never connects to
    time.sleep(0.3)
    summary = monitor.stop()["hosts"]["far"]
    assert summary["devices"] == {} and summary["notes"] == [NOT_REACHED] and summary["errors"] == []
    assert not (tmp_path / "run" / "telemetry" / "samples.jsonl").exists()


def sample_times(run: Path) -> list[datetime]:
    """When each sample written began, in order (a sample's records share its time; taken at its start)."""
    stamps = dict.fromkeys(record["time"] for record in samples(run))
    return [datetime.fromisoformat(stamp) for stamp in stamps]


def smi_calls(vm: FreshVM) -> list[float]:
    """When each nvidia-smi call started on the VM (the wrapper's log); none yet: []."""
    code, out = vm.exec(["cat", "/root/smi-calls"])
    return [float(t) for t in out.split()] if code == 0 else []


@pytest.mark.slow
def test_sigterm_stops_the_remote_sampling_with_the_run(tmp_path: Path, fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm()
    install_nvidia_smi(vm, [gpu(0, util=50)])
    # Every nvidia-smi call on the VM logs when it started (the VM shares this machine's clock).
    vm.check(["mv", "/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi.standin"])
    wrapper = '#!/bin/sh\ndate +%s.%N >> /root/smi-calls\nexec /usr/bin/nvidia-smi.standin "$@"\n'
    vm.write_file("/usr/bin/nvidia-smi", wrapper, mode=0o755)
    inventory = tmp_path / "fleet.txt"
    inventory.write_text(f"{vm.host_spec} key={vm.key_path} name=vm-00\n")
    profile = tmp_path / "p.json"
    profile.write_text(
        json.dumps(
            {
                "Description": "a long action",
                "Actions": [{"Type": "SleepStep", "Parameters": {"Scenario": "Work", "Seconds": 287, "Dir": "/root"}}],
                "Monitors": [{"Type": "NvidiaSmiMonitor", "Parameters": {"MonitorFrequency": "00:00:00.2"}}],
            }
        )
    )
    runs = tmp_path / "runs"
    argv = [sys.executable, str(RUNNER), "run", "--profile", str(profile), "--inventory", str(inventory)]
    argv += ["--known-hosts", str(vm.known_hosts_path), "--output-dir", str(runs)]
    env = {**os.environ, "WORKLOAD_STATE_PATH": str(tmp_path / "state.json"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
    lines = TimedLines(proc.stdout)
    try:
        deadline = time.monotonic() + 120
        while vm.exec(["test", "-e", "/root/vm-00.sleeping"])[0] != 0 or len(smi_calls(vm)) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the run never got to its action"
            time.sleep(0.2)
        sent = time.time()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        took = time.time() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = lines.text()
    assert proc.returncode == 130 and took < 15, (took, out)
    # The first line saying "interrupted" is the step's end, printed after the run's cancel was set (the
    # stop kills the step's command, then the step ends); its arrival here is later still. After the cancel
    # no sample begins: a sample's time is taken before it asks the token, so none written may be later
    # than that line. Its nvidia-smi call may reach the VM after the line (a loaded machine starts it
    # late), but only the one under way: the calls' start times are on this machine's clock (the VM's).
    stopped = lines.first_time("interrupted")
    assert stopped is not None, out
    late = [t for t in smi_calls(vm) if t > stopped]
    assert len(late) <= 1, f"nvidia-smi was started {len(late)} times after the run was stopped: {late} > {stopped}"
    (folder,) = runs.iterdir()
    begun = [t for t in sample_times(folder) if t.timestamp() > stopped]
    assert begun == [], f"samples begun after the run was stopped ({stopped}): {begun}"
    summary = json.loads((folder / "telemetry" / "summary.json").read_text())["hosts"]["vm-00"]
    assert summary["devices"]["gpu0"]["metrics"]["gpu_utilization"]["samples"] >= 3
    assert "telemetry gpu0 (NVIDIA H100 80GB HBM3) min/avg/max: gpu_utilization 50/50/50 %" in out, out


@pytest.mark.slow
def test_a_lost_connection_costs_samples_and_sampling_resumes(tmp_path: Path, fresh_vm: Callable[..., FreshVM]) -> None:
    vm = fresh_vm()
    install_nvidia_smi(vm, [gpu(0, util=70)])
    host = ssh_host(vm)
    monitor = TelemetryMonitor(tmp_path / "run", MonitorSettings(interval_s=0.2), [host]).start()
    wait_for_samples(monitor, 3, timeout_s=60, host=host.name)
    sampler = monitor.monitor(host.name)
    assert sampler is not None
    vm.stop_sshd()  # every session dies with sshd: the sampler's connection is cut
    # The host stays unreachable until the sampler has recorded a lost sample, however long a loaded
    # machine takes to get there: the test judges what the sampler decides, not how soon.
    failed = wait_for(lambda: sampler.stats.summary()["failed_samples"] >= 1, 60)
    assert failed, f"no failed sample while sshd was down: {sampler.stats.summary()}"
    during = sampler.stats.count("gpu0", "gpu_utilization")
    vm.start_sshd()
    deadline = time.monotonic() + 60
    while sampler.stats.count("gpu0", "gpu_utilization") < during + 3:
        assert time.monotonic() < deadline, "sampling did not resume after the host came back"
        time.sleep(0.1)
    summary = monitor.stop()["hosts"][host.name]
    assert summary["failed_samples"] >= 1
    assert any(e.startswith("no sample: ") for e in summary["errors"]), summary["errors"]
    assert summary["devices"]["gpu0"]["metrics"]["gpu_utilization"]["avg"] == 70
