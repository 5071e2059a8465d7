"""On a real NVIDIA GPU machine only (marked gpu; skipped where nvidia-smi is missing).

These check our facts and custom-system description against the real tools, where the rest of
the suite uses recorded outputs and stand-ins.
"""

from __future__ import annotations

import subprocess

import pytest

from workload.doctor import read_doctor_facts, run_checks
from workload.facts.nvidia import read_gpus
from workload.hosts.local import LocalHost

pytestmark = pytest.mark.gpu


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], check=True, capture_output=True, text=True).stdout


def test_gpu_facts_match_nvidia_smi() -> None:
    inventory = read_gpus(LocalHost())
    names = [line.strip() for line in smi("--query-gpu=name", "--format=csv,noheader").splitlines() if line.strip()]
    driver = smi("--query-gpu=driver_version", "--format=csv,noheader").splitlines()[0].strip()
    assert inventory.status == "ok", inventory.message
    assert inventory.count == len(names) >= 1
    assert [g.name for g in inventory.gpus] == names
    assert inventory.driver_version == driver
    assert all(g.memory_mib > 1024 for g in inventory.gpus)


def test_doctor_sees_the_gpu_and_its_driver() -> None:
    checks = {c.name: c for c in run_checks(read_doctor_facts(LocalHost()))}
    assert checks["GPU visible"].status == "pass", checks["GPU visible"].detail
    assert checks["driver loaded"].status == "pass", checks["driver loaded"].detail


def test_custom_system_description_from_the_real_host() -> None:
    from workload.mlperf.system import read_host_system

    system = read_host_system(LocalHost())
    names = [line.strip() for line in smi("--query-gpu=name", "--format=csv,noheader").splitlines() if line.strip()]
    assert system.gpu_count == len(names)
    assert system.gpu_name == names[0]
