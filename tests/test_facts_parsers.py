"""Fact parsers on recorded real outputs (tests/fixtures/facts/<kind>/<case>.*).

Adding a recorded output: drop the file into the kind's folder and run
``UPDATE_FACT_SNAPSHOTS=1 pytest tests/test_facts_parsers.py``; review the ``.expected.json`` it
writes, then commit both. A fixture without an expected file fails, so nothing goes unchecked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workload.facts import docker as docker_facts
from workload.facts import nvidia, packages, system
from workload.facts.packages import parse_lists_freshness

FIXTURES = Path(__file__).parent / "fixtures" / "facts"


def _exit_code(path: Path) -> int:
    match = re.search(r"\.exit(\d+)\.", path.name)
    return int(match.group(1)) if match else 0


def _docker_info(path: Path) -> Any:
    stderr = path.with_suffix(".stderr")
    err = stderr.read_text() if stderr.exists() else ""
    return docker_facts.parse_docker_info(1 if err else 0, path.read_text(), err)


PARSERS: dict[str, Callable[[Path], Any]] = {
    "os_release": lambda p: system.parse_os_release(p.read_text()),
    "lscpu": lambda p: system.parse_lscpu(p.read_text()),
    "meminfo": lambda p: system.parse_meminfo(p.read_text()),
    "df": lambda p: system.parse_df(p.read_text(), "/tmp"),
    "dpkg_query": lambda p: packages.parse_dpkg_query(p.read_text()),
    "apt_policy": lambda p: packages.parse_apt_policy(p.read_text()),
    "dpkg_query_holds": lambda p: sorted(packages.held_packages(packages.parse_dpkg_query(p.read_text()))),
    "gpu_csv": lambda p: nvidia.parse_gpu_csv(p.read_text()),
    "smi_failure": lambda p: nvidia.classify_smi(_exit_code(p), p.read_text(), ""),
    "smi_q_fabric": lambda p: nvidia.parse_fabric_states(p.read_text()),
    "fm_version": lambda p: nvidia.parse_fabric_manager_version(p.read_text()),
    "pci_scan": lambda p: nvidia.parse_pci_scan(p.read_text()),
    "docker_info": _docker_info,
    "ctk_version": lambda p: docker_facts.parse_nvidia_ctk_version(p.read_text()),
    "nvcc_version": lambda p: nvidia.parse_nvcc_release(p.read_text()),
    "driver_origin": lambda p: nvidia.parse_driver_origin(p.read_text()),
}


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_jsonable(v) for v in value]
    return value


def _cases() -> list[tuple[str, Path]]:
    cases = []
    for kind_dir in sorted(p for p in FIXTURES.iterdir() if p.is_dir() and p.name[0] not in "._"):
        for path in sorted(kind_dir.iterdir()):
            if path.name.endswith(".expected.json") or path.suffix == ".stderr":
                continue
            cases.append((kind_dir.name, path))
    return cases


@pytest.mark.parametrize(("kind", "path"), _cases(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_recorded_output_parses_to_snapshot(kind: str, path: Path) -> None:
    assert kind in PARSERS, f"no parser registered for fixture folder {kind!r}"
    got = _jsonable(PARSERS[kind](path))
    expected_path = path.with_name(path.name + ".expected.json")
    if os.environ.get("UPDATE_FACT_SNAPSHOTS") and not expected_path.exists():
        expected_path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert expected_path.exists(), f"{expected_path.name} is missing: run with UPDATE_FACT_SNAPSHOTS=1 and review it"
    assert got == json.loads(expected_path.read_text())


# -- explicit checks of the values that matter (snapshots alone could be regenerated blindly) ----
def test_seed_004_fabric_manager_version_is_the_driver_version() -> None:
    fm = (FIXTURES / "fm_version" / "seed004.txt").read_text()
    assert nvidia.parse_fabric_manager_version(fm) == "550.127.05"  # seed 004's driver (its nvidia-smi table)


def test_holds_from_dpkg_query_are_what_apt_mark_showhold_lists() -> None:
    """Recorded on a test-bed VM after `apt-mark hold dkms nvidia-driver-550-server` (neither
    installed) and `apt-mark hold build-essential` (installed); `apt-mark showhold` listed these three."""
    text = (FIXTURES / "dpkg_query_holds" / "debian12-two-held-before-install.txt").read_text()
    installed = packages.parse_dpkg_query(text)
    assert packages.held_packages(installed) == {"build-essential", "dkms", "nvidia-driver-550-server"}
    facts = packages.PackageFacts(installed=installed, holds=packages.held_packages(installed), policies={})
    assert facts.version("build-essential") == "12.9ubuntu3"
    assert facts.version("dkms") is None  # held, not installed
    assert "zsh" not in installed  # "un": known to dpkg by name only


def test_gpu_csv_a100x8() -> None:
    gpus = nvidia.parse_gpu_csv((FIXTURES / "gpu_csv" / "a100-sxm4-40gb-x8.csv").read_text())
    assert len(gpus) == 8
    assert {g.name for g in gpus} == {"NVIDIA A100-SXM4-40GB"}
    assert gpus[4].pci_bus_id == "0000000B:00:00.0" and gpus[4].index == 4
    assert gpus[0].memory_mib == 40960 and gpus[0].compute_cap == "8.0" and gpus[0].driver_version == "550.127.05"


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("no-driver.exit9.txt", "no-driver"),
        ("mismatch.exit18.txt", "mismatch"),
        ("no-devices.exit6.txt", "no-devices"),
        ("not-installed.exit127.txt", "not-installed"),
    ],
)
def test_nvidia_smi_failure_modes_are_told_apart(name: str, status: str) -> None:
    path = FIXTURES / "smi_failure" / name
    result = nvidia.classify_smi(_exit_code(path), path.read_text(), "")
    assert result.status == status
    if status == "mismatch":
        assert result.library_version == "550.144"


def test_nvswitch_from_pci_and_fabric_section() -> None:
    hgx = nvidia.parse_pci_scan((FIXTURES / "pci_scan" / "lspci-hgx-a100-nvswitch.txt").read_text())
    assert sum(d.is_gpu for d in hgx) == 8 and sum(d.is_nvswitch for d in hgx) == 6
    pcie = nvidia.parse_pci_scan((FIXTURES / "pci_scan" / "sysfs-h100-pcie.txt").read_text())
    assert [(d.pci_class, d.device_id) for d in pcie] == [("0302", "2331")]
    states = nvidia.parse_fabric_states((FIXTURES / "smi_q_fabric" / "a100-sxm4-nvswitch.txt").read_text())
    assert states == ["Completed", "In Progress"]
    assert nvidia.GpuInventory(status="ok", fabric_states=tuple(states)).nvswitch
    no = nvidia.parse_fabric_states((FIXTURES / "smi_q_fabric" / "h100-pcie-no-nvswitch.txt").read_text())
    assert no == ["N/A"] and not nvidia.GpuInventory(status="ok", fabric_states=tuple(no)).nvswitch


def test_os_releases() -> None:
    def read(name: str) -> system.OsRelease:
        return system.parse_os_release((FIXTURES / "os_release" / name).read_text())

    assert (read("ubuntu-22.04.txt").id, read("ubuntu-22.04.txt").version_id) == ("ubuntu", "22.04")
    assert read("ubuntu-24.04.txt").codename == "noble"
    debian = read("debian-12.txt")
    assert (debian.id, debian.version_id, debian.codename) == ("debian", "12", "bookworm")
    arch = system.Architecture("x86_64", "amd64")
    assert system.unsupported_platform(debian, arch) is None
    problem = system.unsupported_platform(read("rocky-9.txt"), arch)
    assert problem is not None and "Rocky Linux 9.4" in problem and "Ubuntu 22.04" in problem
    assert "ppc64le" in (system.unsupported_platform(debian, system.Architecture("ppc64le", "ppc64el")) or "")


def test_lscpu_describes_the_mlperf_vm() -> None:
    cpu = system.parse_lscpu((FIXTURES / "lscpu" / "epyc-7v12-nd96asr.txt").read_text())
    assert cpu.model == "AMD EPYC 7V12 64-Core Processor"
    assert (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core, cpu.logical_cpus) == (2, 48, 1, 96)
    assert cpu.numa_nodes == 4


def test_dpkg_query_statuses() -> None:
    pkgs = packages.parse_dpkg_query((FIXTURES / "dpkg_query" / "sample.txt").read_text())
    assert pkgs["nvidia-driver-550-server"].installed  # "hi": held and installed
    assert pkgs["nvidia-dkms-550-server"].broken and not pkgs["nvidia-dkms-550-server"].installed
    assert not pkgs["linux-image-5.15.0-1070-azure"].installed  # "rc": removed, config left
    assert pkgs["libnvidia-compute-550-server"].version == "550.127.05-0ubuntu0.22.04.1"
    assert pkgs["openssh-server"].version == "1:9.2p1-2+deb12u10"


def test_apt_policy_lists_every_offered_version() -> None:
    pol = packages.parse_apt_policy((FIXTURES / "apt_policy" / "ubuntu-driver-550.txt").read_text())
    fm = pol["nvidia-fabricmanager-550"]
    assert fm.installed == fm.candidate == "550.144.03-0ubuntu0.22.04.1"
    dkms = pol["nvidia-dkms-550-server"]
    assert dkms.installed == "550.90.07-0ubuntu0.22.04.1"
    assert "550.90.07-0ubuntu0.22.04.1" not in dkms.available  # only in /var/lib/dpkg/status
    assert pol["nvidia-driver-550-server"].installed is None
    real = packages.parse_apt_policy((FIXTURES / "apt_policy" / "debian-docker-openssh.txt").read_text())
    assert real["openssh-server"].available[0] == "1:9.2p1-2+deb12u10"
    assert len(real["openssh-server"].available) == 3


def test_docker_info_runtimes_and_daemon_down() -> None:
    ok = _docker_info(FIXTURES / "docker_info" / "ok-nvidia.json")
    assert ok.daemon_ok and ok.has_nvidia_runtime and ok.server_version == "20.10.24+dfsg1"
    plain = _docker_info(FIXTURES / "docker_info" / "ok-runc.json")
    assert plain.daemon_ok and not plain.has_nvidia_runtime
    down = _docker_info(FIXTURES / "docker_info" / "daemon-down.json")
    assert not down.daemon_ok and "Cannot connect to the Docker daemon" in down.error
    assert not docker_facts.parse_docker_info(127, "", "sh: 1: docker: not found").installed


@pytest.mark.parametrize(
    ("a", "b", "sign"),
    [
        ("550.127.05-0ubuntu1", "550.144.03-0ubuntu1", -1),
        ("550.144.03-0ubuntu0.22.04.1", "550.127.05-0ubuntu0.22.04.1", 1),
        ("1:1.0", "2.0", 1),
        ("1.0~rc1", "1.0", -1),
        ("5:27.3.1-1~ubuntu.22.04~jammy", "5:27.3.0-1~ubuntu.22.04~jammy", 1),
        ("550.54.15-1", "550.54.15-1", 0),
        ("1.0a", "1.0+", -1),
        ("9.2p1-2+deb12u10", "9.2p1-2+deb12u9", 1),
    ],
)
def test_debian_version_order(a: str, b: str, sign: int) -> None:
    result = packages.compare_versions(a, b)
    assert (result > 0) - (result < 0) == sign


def test_version_order_agrees_with_dpkg() -> None:
    import subprocess

    pairs = [("1.0-1", "1.0-1ubuntu1"), ("2.0~beta", "2.0"), ("1:0.9", "1.1"), ("1.10", "1.9"), ("a", "a+b")]
    for a, b in pairs:
        dpkg_lt = subprocess.run(["dpkg", "--compare-versions", a, "lt", b], check=False).returncode == 0
        assert (packages.compare_versions(a, b) < 0) == dpkg_lt, (a, b)


def test_systemctl_words() -> None:
    state = nvidia.parse_service_state("active\nenabled\n")
    assert state.is_active and state.is_enabled
    missing = nvidia.parse_service_state("inactive\n")
    assert (missing.active, missing.enabled, missing.is_enabled) == ("inactive", "not-found", False)
    assert nvidia.parse_service_state("failed\ndisabled\n").active == "failed"


def test_package_lists_are_fresh_only_when_workload_refreshed_them_recently_after_every_source_change() -> None:
    now = 1_800_000_000
    assert parse_lists_freshness(f"{now} {now - 30} {now - 3600}")  # refreshed 30 s ago, sources older
    assert not parse_lists_freshness(f"{now} {now - 601} {now - 3600}")  # older than 10 minutes
    assert not parse_lists_freshness(f"{now} {now - 30} {now - 10}")  # a source changed since
    assert not parse_lists_freshness(f"{now} none")  # never refreshed by workload
    assert not parse_lists_freshness(f"{now} {now + 60} 0")  # a clock that went back
    assert not parse_lists_freshness("")
    assert parse_lists_freshness(f"{now} {now - 30} {now - 3600}", max_age_s=60)
