"""The host as the harness sees it: GPU name, memory and count; CPU model, cores and sockets; memory.

:func:`read_host_system` reads it with the shared fact readers (``workload.facts.nvidia.read_gpus``,
``workload.facts.system.read_cpu``/``read_memory``); :func:`parse_system_description` builds the
same value from JSON (the test-only
``SystemDescription`` parameter, for machines without a GPU). Parsers are pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from workload.errors import FactError
from workload.hosts.base import Host


@dataclass(frozen=True)
class HostSystem:
    """What a custom system entry is generated from (all GPUs are assumed alike, as on cloud VMs)."""

    gpu_name: str
    gpu_memory_mib: int
    gpu_count: int
    cpu_model: str
    cpu_cores_per_socket: int
    cpu_sockets: int
    cpu_threads_per_core: int
    memory_bytes: int
    architecture: str = "x86_64"

    def describe(self) -> str:
        """One line for messages: ``8x NVIDIA A100-SXM4-40GB (40960 MiB); 2x AMD EPYC ... (48 cores); 1.82 TB``."""
        gpus = f"{self.gpu_count}x {self.gpu_name} ({self.gpu_memory_mib} MiB)" if self.gpu_count else "no GPU"
        cpu = f"{self.cpu_sockets}x {self.cpu_model} ({self.cpu_cores_per_socket} cores/socket)"
        return f"GPUs: {gpus}; CPU: {cpu}; memory: {self.memory_bytes / 1e12:.2f} TB"

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def parse_system_description(text: str) -> HostSystem:
    """A HostSystem from JSON with the field names of :class:`HostSystem`; ValueError naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError("must be a JSON object")
    fields = HostSystem.__dataclass_fields__
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)} (known: {', '.join(fields)})")
    try:
        return HostSystem(
            gpu_name=str(data["gpu_name"]),
            gpu_memory_mib=int(data["gpu_memory_mib"]),
            gpu_count=int(data["gpu_count"]),
            cpu_model=str(data["cpu_model"]),
            cpu_cores_per_socket=int(data["cpu_cores_per_socket"]),
            cpu_sockets=int(data.get("cpu_sockets", 1)),
            cpu_threads_per_core=int(data.get("cpu_threads_per_core", 1)),
            memory_bytes=int(data["memory_bytes"]),
            architecture=str(data.get("architecture", "x86_64")),
        )
    except KeyError as exc:
        raise ValueError(f"missing field {exc.args[0]}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad value: {exc}") from None


def from_facts(gpus: Sequence[tuple[str, int]], cpu: CpuFacts, memory_bytes: int) -> HostSystem:
    """A HostSystem from fact values: [(GPU name, MiB)], the CPU, total memory; ValueError if GPUs differ."""
    names = sorted({name for name, _ in gpus})
    if len(names) > 1:
        raise ValueError(f"mixed GPU models ({', '.join(names)}) are not supported by a custom system entry")
    return HostSystem(
        gpu_name=gpus[0][0] if gpus else "",
        gpu_memory_mib=gpus[0][1] if gpus else 0,
        gpu_count=len(gpus),
        cpu_model=cpu.model,
        cpu_cores_per_socket=cpu.cores_per_socket,
        cpu_sockets=cpu.sockets,
        cpu_threads_per_core=cpu.threads_per_core,
        memory_bytes=memory_bytes,
        architecture=cpu.architecture,
    )


class CpuFacts(Protocol):
    """The CPU fields used here (``workload.facts.system.CpuInfo`` has them)."""

    @property
    def model(self) -> str: ...
    @property
    def architecture(self) -> str: ...
    @property
    def sockets(self) -> int: ...
    @property
    def cores_per_socket(self) -> int: ...
    @property
    def threads_per_core(self) -> int: ...


def read_host_system(host: Host) -> HostSystem:
    """Read the host's GPUs, CPU and memory with the shared fact readers; FactError when they cannot be read."""
    # Imported here: workload reaches installers lazily (installers imports workload, not the reverse at import).
    from workload.facts.nvidia import read_gpus
    from workload.facts.system import read_cpu, read_memory

    inventory = read_gpus(host)
    if not inventory.driver_loaded:
        raise FactError(
            f"cannot list the GPUs ({inventory.message or inventory.status}); "
            "a custom system entry needs a working NVIDIA driver",
            host=host.name,
        )
    try:
        return from_facts(
            [(g.name, g.memory_mib) for g in inventory.gpus], read_cpu(host), read_memory(host).total_bytes
        )
    except ValueError as exc:
        raise FactError(f"{exc}", host=host.name) from None
