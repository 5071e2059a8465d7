"""Telemetry (workload.monitors): the nvidia-smi query against the test bed's stand-in nvidia-smi, the host
sampler, the summary (min/avg/max, throttling seen), and NvidiaSmiMonitor in a profile's Monitors.

The stand-in (tests/testbed/standins/packages/nvidia-smi) is run as it is installed in the test-bed
VMs, with its hardware and driver-loaded paths pointed at this test's folder instead of /var/lib and /run.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from workload.errors import ProfileError
from workload.monitors.nvsmi import (
    EVENT_FIELD,
    THROTTLE_MASK,
    describe_reasons,
    invalid_field,
    parse_query,
    query_argv,
)
from workload.monitors.sampler import (
    MonitorSettings,
    TelemetryMonitor,
    summary_lines,
    wait_for_samples,
)
from workload.monitors.step import settings_from_monitors
from workload.profile import LoadedProfile, ProfileDocument, resolve_profile

STANDIN = Path(__file__).resolve().parent / "testbed" / "standins" / "packages" / "nvidia-smi"
DRIVER = "550.127.05"


def install_standin(tmp_path: Path, gpus: list[dict[str, object]]) -> Path:
    """The stand-in nvidia-smi in tmp_path/bin, reading tmp_path's hardware.json and driver file."""
    hardware = tmp_path / "hardware.json"
    hardware.write_text(json.dumps({"gpus": gpus, "nvswitch": False}))
    loaded = tmp_path / "driver-loaded"
    loaded.write_text(DRIVER)
    text = STANDIN.read_text()
    text = text.replace("@VERSION@", DRIVER).replace("@CUDA@", "12.4")
    text = text.replace('LOADED = "/run/nvidia-driver-loaded"', f'LOADED = "{loaded}"')
    text = text.replace('HARDWARE = "/var/lib/standin/hardware.json"', f'HARDWARE = "{hardware}"')
    text = text.replace('cache="/run/standin/hardware.marshal"', f'cache="{tmp_path}/hardware.marshal"')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text(text)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def gpu(index: int, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "NVIDIA H100 80GB HBM3",
        "bus_id": f"00000000:{index + 0x18:02X}:00.0",
        "uuid": f"GPU-{index:08d}-0000-0000-0000-000000000000",
        "serial": str(1650000000 + index),
        "memory_mib": 81559,
        "power_cap_w": 700,
        "compute_cap": "9.0",
    }
    return base | extra


def test_the_query_parses_what_the_stand_in_prints(tmp_path: Path) -> None:
    exe = install_standin(
        tmp_path,
        [
            gpu(0, util=97, power_w=612.5, temp_c=71, sm_mhz=1755, clocks_event_reasons=0x4),
            gpu(1, ecc="Off"),
        ],
    )
    out = subprocess.run(query_argv(str(exe)), capture_output=True, text=True, check=True).stdout
    first, second = parse_query(out)
    assert first.index == 0 and first.name == "NVIDIA H100 80GB HBM3"
    assert first.values["gpu_utilization"] == 97 and first.values["power_draw"] == 612.5
    assert first.values["temperature"] == 71 and first.values["sm_clock"] == 1755
    assert first.event_reasons == 0x4 and describe_reasons(0x4) == ["SW power cap"]
    assert first.values["ecc_uncorrected_volatile"] == 0
    assert second.values["ecc_uncorrected_volatile"] is None  # "[N/A]" with ECC off
    # The header the stand-in prints for the same query (as the real tool: clocks.sm -> clocks.current.sm [MHz])
    argv = query_argv(str(exe))
    argv[-1] = "--format=csv"
    header = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()[0]
    assert header.startswith("timestamp, index, name, utilization.gpu [%], utilization.memory [%], memory.used [MiB]")
    assert "clocks.current.sm [MHz], clocks.current.memory [MHz], clocks_event_reasons.active" in header


def test_unavailable_values_and_malformed_rows() -> None:
    row = (
        "2026/11/23 13:40:18.123, 0, NVIDIA A100-SXM4-40GB, [N/A], 3, 100, 40960, [Not Supported], 400.00, 30, "
        "1410, 1215, 0x0000000000000041, 0, 0"
    )
    (sample,) = parse_query(row + "\ngarbage line\n")
    assert sample.values["gpu_utilization"] is None and sample.values["power_draw"] is None
    assert sample.event_reasons == 0x41 and describe_reasons(0x41 & THROTTLE_MASK) == ["HW thermal slowdown"]
    assert invalid_field('Field "clocks_event_reasons.active" is not a valid field to query.\n') == EVENT_FIELD


def test_the_sampler_writes_samples_and_a_summary_that_sees_throttling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = install_standin(tmp_path, [gpu(0, clocks_event_reasons=0x40, temp_c=88), gpu(1, clocks_event_reasons=0x1)])
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    run = tmp_path / "run"
    monitor = TelemetryMonitor(run, MonitorSettings(interval_s=0.1)).start()
    wait_for_samples(monitor, 3)
    whole = monitor.stop()
    summary = whole["hosts"]["local"]
    lines = [json.loads(line) for line in (run / "telemetry" / "samples.jsonl").read_text().splitlines()]
    assert {line["device"] for line in lines} == {"host", "gpu0", "gpu1"}
    assert {line["host"] for line in lines} == {"local"}
    assert summary["gpus"] == 2 and summary["nvidia_smi"] == "nvidia-smi" and whole["gpus"] == 2
    temperature = summary["devices"]["gpu0"]["metrics"]["temperature"]
    assert temperature["samples"] >= 3
    assert {k: temperature[k] for k in ("min", "avg", "max", "unit")} == {"min": 88, "avg": 88, "max": 88, "unit": "C"}
    # gpu1 was only idle (0x1): not throttling; gpu0 had HW thermal slowdown
    assert summary["throttling"] == {
        "seen": True,
        "devices": {"gpu0": ["HW thermal slowdown"]},
        "faults": {"gpu0": ["HW thermal slowdown"]},
        "reasons_seen": {"gpu0": ["HW thermal slowdown"], "gpu1": ["GPU idle"]},
    }
    assert whole["throttling_seen"] is True
    assert json.loads((run / "telemetry" / "summary.json").read_text()) == whole
    assert "telemetry: GPU throttling seen: yes (gpu0: HW thermal slowdown)" in summary_lines(whole)
    raw = (run / "telemetry" / "local" / "nvidia-smi.csv").read_text()
    assert raw.startswith("# nvidia-smi --query-gpu=timestamp,") and ", NVIDIA H100 80GB HBM3, " in raw


def test_without_nvidia_smi_only_the_host_is_sampled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = f"{tmp_path / 'empty'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    assert shutil.which("nvidia-smi", path=path) is None
    monkeypatch.setenv("PATH", path)
    monitor = TelemetryMonitor(tmp_path, MonitorSettings(interval_s=0.05)).start()
    wait_for_samples(monitor, 3)
    whole = monitor.stop()
    summary = whole["hosts"]["local"]
    assert summary["gpus"] == 0 and summary["nvidia_smi"] is None and list(summary["devices"]) == ["host"]
    assert summary["notes"] == ["no nvidia-smi on this host: host telemetry only"] and summary["errors"] == []
    cpu = summary["devices"]["host"]["metrics"]["cpu_utilization"]
    assert 0 <= cpu["min"] <= cpu["avg"] <= cpu["max"] <= 100
    memory = summary["devices"]["host"]["metrics"]["memory_used"]
    assert 0 < memory["max"] <= summary["devices"]["host"]["metrics"]["memory_total"]["max"]
    lines = summary_lines(whole)
    assert not any("throttling" in line for line in lines)
    assert "telemetry: no nvidia-smi on this host: host telemetry only" in lines


def test_a_broken_nvidia_smi_is_recorded_and_sampling_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = install_standin(tmp_path, [gpu(0)])
    (tmp_path / "driver-loaded").write_text("")  # the driver is not loaded: exit 9
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monitor = TelemetryMonitor(tmp_path / "run", MonitorSettings(interval_s=0.05)).start()
    wait_for_samples(monitor, 2)
    summary = monitor.stop()["hosts"]["local"]
    assert summary["gpus"] == 0 and "host" in summary["devices"]
    assert any("exit 9" in e and "couldn't communicate" in e for e in summary["errors"])


def profile_with(monitors: list[dict[str, object]]) -> LoadedProfile:
    doc = ProfileDocument.model_validate({"Description": "x", "Monitors": monitors})
    return LoadedProfile(name="p", path=Path("p.json"), document=doc)


def test_profiles_declare_monitors_as_virtualclient_does() -> None:
    resolved = resolve_profile(
        profile_with([{"Type": "NvidiaSmiMonitor", "Parameters": {"Scenario": "gpu", "MonitorFrequency": "00:00:05"}}])
    )
    assert resolved.steps == [] and [m.type_name for m in resolved.monitors] == ["NvidiaSmiMonitor"]
    assert settings_from_monitors(resolved.monitors).interval_s == 5.0
    assert resolved.to_json()["Monitors"][0]["Parameters"]["MonitorFrequency"] == "00:00:05"
    assert settings_from_monitors([]).interval_s == 2.0
    with pytest.raises(ProfileError, match=r"Monitors\[0\]\.Parameters\.MonitorFrequency"):
        resolve_profile(profile_with([{"Type": "NvidiaSmiMonitor", "Parameters": {"MonitorFrequency": "5s"}}]))
    with pytest.raises(ProfileError, match=r"NvidiaSmiMonitor is a monitor: it belongs under Monitors"):
        doc = ProfileDocument.model_validate({"Description": "x", "Actions": [{"Type": "NvidiaSmiMonitor"}]})
        resolve_profile(LoadedProfile(name="p", path=Path("p.json"), document=doc))


def test_the_proc_parsers_read_their_lines_out_of_one_cat() -> None:
    from workload.monitors.hostsample import HostSampler

    text = (
        "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 100 0 50 800 50 0 0 0 0 0\nintr 12 0\n"  # /proc/stat
        "MemTotal:       16384000 kB\nMemFree:         1024000 kB\nMemAvailable:    8192000 kB\n"  # /proc/meminfo
        "0.42 0.35 0.30 2/345 6789\n"  # /proc/loadavg
    )
    sampler = HostSampler()
    first = sampler.sample(text)
    assert first == {"cpu_utilization": None, "memory_used": 8000.0, "memory_total": 16000.0, "load_1m": 0.42}
    later = text.replace("cpu  100 0 50 800 50", "cpu  200 0 100 850 50")  # busy +150 of +200 jiffies
    assert sampler.sample(later)["cpu_utilization"] == 75.0
    missing = sampler.sample("cat: /proc/loadavg: No such file or directory\n")
    assert missing == {"cpu_utilization": None, "load_1m": None}


def test_with_several_hosts_the_console_has_one_line_per_host_its_gpus_together() -> None:
    from workload.monitors.stats import HostStats

    stamp = "2026-11-23T15:00:00.000+00:00"
    busy, idle = HostStats("vm-01"), HostStats("vm-02")
    for util, power in ((90, 600.0), (100, 700.0)):
        busy.add(
            [
                {"device": "host", "name": "host", "values": {"cpu_utilization": 50.0, "memory_used": 1000.0}},
                {"device": "gpu0", "name": "H100", "values": {"gpu_utilization": util, "power_draw": power}},
                {"device": "gpu1", "name": "H100", "values": {"gpu_utilization": 0, "clocks_event_reasons": 0x4}},
            ],
            stamp,
        )
    idle.add([{"device": "host", "name": "host", "values": {"cpu_utilization": 5.0}}], stamp)
    idle.note("no nvidia-smi on this host: host telemetry only")
    lines = summary_lines({"hosts": {"vm-01": busy.summary(), "vm-02": idle.summary()}})
    assert lines == [
        "telemetry vm-01 min/avg/max: cpu_utilization 50/50/50 %, memory_used 1000/1000/1000 MiB, "
        "2 GPU(s) gpu_utilization 0/47.5/100 %, power_draw 600/650/700 W",
        "telemetry vm-01: GPU throttling seen: yes (gpu1: SW power cap); the power limit only, no fault",
        "telemetry vm-02 min/avg/max: cpu_utilization 5/5/5 %",
        "telemetry vm-02: no nvidia-smi on this host: host telemetry only",
    ]


def test_the_report_reads_per_host_summaries_and_the_older_one_host_summary(tmp_path: Path) -> None:
    from workload.report.data import load_run
    from workload.report.html import render

    old = {  # telemetry/summary.json as run folders written before per-host sampling hold it
        "host": "local",
        "gpus": 1,
        "devices": {"gpu0": {"name": "H100", "metrics": {"power_draw": {"min": 1, "avg": 2, "max": 3, "unit": "W"}}}},
        "throttling": {"seen": True, "devices": {"gpu0": ["HW slowdown"]}},
        "errors": [],
    }
    new = {"interval_s": 2.0, "hosts": {"vm-01": {**old, "host": "vm-01", "notes": ["nvidia-smi appeared"]}}}
    pages = []
    for name, summary in (("old", old), ("new", new)):
        run = tmp_path / name
        (run / "telemetry").mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({"run_id": name, "profile": "P"}))
        (run / "telemetry" / "summary.json").write_text(json.dumps(summary))
        pages.append(render([load_run(run)]))
    assert "GPU throttling seen: " in pages[0] and "gpu0 HW slowdown" in pages[0]
    assert '<span class="bad">yes: gpu0 HW slowdown</span>' in pages[0]  # an older summary: no "faults" to go by
    assert "vm-01: GPU throttling seen: " in pages[1] and "vm-01: nvidia-smi appeared" in pages[1]
    assert all('<td class="num">2</td>' in page for page in pages)


def test_planted_links_cost_the_telemetry_files_not_the_sampling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = install_standin(tmp_path, [gpu(0, util=42)])
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    run = tmp_path / "run"
    (run / "telemetry" / "local").mkdir(parents=True)
    (run / "telemetry" / "samples.jsonl").symlink_to(victim)
    (run / "telemetry" / "local" / "nvidia-smi.csv").symlink_to(victim)
    monitor = TelemetryMonitor(run, MonitorSettings(interval_s=0.05)).start()
    wait_for_samples(monitor, 3)
    summary = monitor.stop()["hosts"]["local"]
    assert victim.read_text() == "keep\n"
    assert summary["devices"]["gpu0"]["metrics"]["gpu_utilization"]["avg"] == 42  # the values still count
    assert any(e.startswith("samples.jsonl not written: ") for e in summary["errors"])
    assert any(e.startswith("nvidia-smi.csv not written: ") for e in summary["errors"])


def test_the_power_cap_alone_is_told_apart_from_a_fault_in_console_and_report(tmp_path: Path) -> None:
    """A healthy GPU under full load sits at its power limit (the SW power cap: a real H200 at 693 of 700 W,
    tests/fixtures/qualify/h200-torch-encoder/); a thermal slowdown beside it is a fault and is shown as one."""
    from workload.monitors.stats import HostStats
    from workload.report.data import load_run
    from workload.report.html import render

    stamp = "2026-11-29T18:50:55.000+00:00"
    capped, faulty = HostStats("vm-01"), HostStats("vm-02")
    capped.add(
        [{"device": "gpu0", "name": "H200", "values": {"power_draw": 693.0, "clocks_event_reasons": 0x4}}], stamp
    )
    faulty.add([{"device": "gpu0", "name": "H200", "values": {"clocks_event_reasons": 0x4 | 0x20}}], stamp)
    hosts = {"vm-01": capped.summary(), "vm-02": faulty.summary()}
    assert hosts["vm-01"]["throttling"]["faults"] == {} and hosts["vm-01"]["throttling"]["seen"] is True
    assert hosts["vm-02"]["throttling"]["faults"] == {"gpu0": ["SW thermal slowdown"]}
    lines = summary_lines({"hosts": hosts})
    assert "telemetry vm-01: GPU throttling seen: yes (gpu0: SW power cap); the power limit only, no fault" in lines
    assert "telemetry vm-02: GPU throttling seen: yes (gpu0: SW power cap, SW thermal slowdown)" in lines
    run = tmp_path / "run"
    (run / "telemetry").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": "r", "profile": "P"}))
    (run / "telemetry" / "summary.json").write_text(json.dumps({"interval_s": 1.0, "hosts": hosts}))
    page = render([load_run(run)])
    assert '<span class="warn">yes: gpu0 SW power cap; the power limit only, no fault</span>' in page
    assert '<span class="bad">yes: gpu0 SW power cap, SW thermal slowdown</span>' in page
