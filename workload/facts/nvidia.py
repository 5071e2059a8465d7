"""NVIDIA facts: GPUs and driver (``nvidia-smi``), NVSwitches (PCI and the ``-q`` Fabric section),
and the fabric manager (``nv-fabricmanager --version`` and its systemd unit).

``nvidia-smi`` fails in two ways that matter and are told apart here:

* exit 9, "couldn't communicate with the NVIDIA driver": no kernel module is loaded (fresh install
  before its reboot, or a module that failed to build);
* exit 18, "Driver/library version mismatch": the user-space libraries were upgraded but the old
  module is still loaded (an unattended upgrade; fixed by a reboot).

The PCI scan works without any driver, so a fresh host can be asked "are there NVIDIA GPUs and
NVSwitches?" before anything is installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from workload.commands import Command, cmd
from workload.facts.fact import Fact
from workload.hosts.base import Host

GPU_QUERY_FIELDS = "name,driver_version,memory.total,pci.bus_id,compute_cap,uuid"
GPU_QUERY_ARGV = ("nvidia-smi", f"--query-gpu={GPU_QUERY_FIELDS}", "--format=csv,noheader,nounits")

NVIDIA_VENDOR = "10de"
NVSWITCH_CLASS = "0680"  # PCI "bridge, other": how NVSwitches enumerate
GPU_CLASSES = ("0300", "0302")  # VGA controller, 3D controller

SmiStatus = Literal["ok", "not-installed", "no-driver", "mismatch", "no-devices", "error"]

# Prints NVIDIA PCI functions: lspci where installed, else the same facts from sysfs (always there).
PCI_SCAN_SCRIPT = r"""
if command -v lspci >/dev/null 2>&1; then echo '# lspci'; exec lspci -n -D -d 10de:; fi
echo '# sysfs'
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/vendor" ] || continue
  [ "$(cat "$d/vendor")" = 0x10de ] || continue
  printf '%s %s %s\n' "${d##*/}" "$(cat "$d/class")" "$(cat "$d/device")"
done
"""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver_version: str
    memory_mib: int
    pci_bus_id: str
    compute_cap: str
    uuid: str


@dataclass(frozen=True)
class SmiQuery:
    """The result of the ``--query-gpu`` call: the GPUs, or why none could be read."""

    status: SmiStatus
    gpus: tuple[Gpu, ...] = ()
    message: str = ""
    #: For a mismatch: the NVML library's version as nvidia-smi prints it (e.g. "550.127").
    library_version: str = ""


def parse_gpu_csv(text: str) -> tuple[Gpu, ...]:
    """Parse ``nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,compute_cap,uuid
    --format=csv,noheader,nounits``."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 6:
            raise ValueError(f"expected 6 comma-separated fields, got {len(fields)}: {line!r}")
        name, driver, memory, bus_id, cap, uuid = fields
        mem = re.match(r"\d+", memory)
        gpus.append(Gpu(len(gpus), name, driver, int(mem.group(0)) if mem else 0, bus_id, cap, uuid))
    return tuple(gpus)


def classify_smi(returncode: int, stdout: str, stderr: str) -> SmiQuery:
    """Turn an ``nvidia-smi --query-gpu`` run into a :class:`SmiQuery` (pure)."""
    text = (stdout + "\n" + stderr).strip()
    if returncode == 0:
        try:
            return SmiQuery("ok", parse_gpu_csv(stdout))
        except ValueError as exc:
            return SmiQuery("error", message=f"cannot read nvidia-smi output: {exc}")
    if returncode == 127 or "command not found" in text or "No such file" in text:
        return SmiQuery("not-installed", message="nvidia-smi is not installed")
    if "Driver/library version mismatch" in text:
        lib = re.search(r"NVML library version:\s*([\d.]+)", text)
        return SmiQuery("mismatch", message=_first_line(text), library_version=lib.group(1) if lib else "")
    if returncode == 9 or "couldn't communicate with the NVIDIA driver" in text:
        return SmiQuery("no-driver", message=_first_line(text))
    if returncode == 6 or "No devices were found" in text:
        return SmiQuery("no-devices", message=_first_line(text))
    return SmiQuery("error", message=f"nvidia-smi exited {returncode}: {_first_line(text)}")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def parse_fabric_states(text: str) -> list[str]:
    """The ``Fabric`` → ``State`` value of each GPU in ``nvidia-smi -q`` output.

    NVSwitch-attached GPUs say ``Completed``/``In Progress``/``Not Started``; others ``N/A``.
    """
    states: list[str] = []
    in_fabric = False
    fabric_indent = 0
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if stripped == "Fabric":
            in_fabric, fabric_indent = True, indent
            continue
        if in_fabric:
            if stripped and indent <= fabric_indent:
                in_fabric = False
            elif stripped.startswith("State") and ":" in stripped:
                states.append(stripped.split(":", 1)[1].strip())
                in_fabric = False
    return states


@dataclass(frozen=True)
class PciDevice:
    address: str
    pci_class: str  # 4 hex digits, e.g. "0302"
    device_id: str  # 4 hex digits

    @property
    def is_nvswitch(self) -> bool:
        return self.pci_class == NVSWITCH_CLASS

    @property
    def is_gpu(self) -> bool:
        return self.pci_class in GPU_CLASSES


def parse_pci_scan(text: str) -> tuple[PciDevice, ...]:
    """Parse the output of :data:`PCI_SCAN_SCRIPT` (``lspci -n -D -d 10de:`` or the sysfs lines)."""
    devices: list[PciDevice] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        lspci = re.match(r"(\S+)\s+([0-9a-fA-F]{4}):\s+10de:([0-9a-fA-F]{4})", line)
        if lspci:
            devices.append(PciDevice(lspci.group(1), lspci.group(2).lower(), lspci.group(3).lower()))
            continue
        sysfs = re.match(r"(\S+)\s+0x([0-9a-fA-F]{4})[0-9a-fA-F]{2}\s+0x([0-9a-fA-F]{4})", line)
        if sysfs:
            devices.append(PciDevice(sysfs.group(1), sysfs.group(2).lower(), sysfs.group(3).lower()))
    return tuple(devices)


@dataclass(frozen=True)
class GpuInventory:
    """The NVIDIA GPUs of a host and the state of their driver.

    ``gpus`` is filled only when the driver works (``status == "ok"``); ``pci_gpus`` and
    ``nvswitch`` come from the PCI bus and are known even with no driver installed.
    """

    status: SmiStatus
    gpus: tuple[Gpu, ...] = ()
    message: str = ""
    pci_gpus: int = 0
    nvswitch_count: int = 0
    #: Fabric states from ``nvidia-smi -q`` (empty when the driver does not answer).
    fabric_states: tuple[str, ...] = ()
    library_version: str = ""

    @property
    def count(self) -> int:
        return len(self.gpus) if self.gpus else self.pci_gpus

    @property
    def driver_loaded(self) -> bool:
        return self.status == "ok"

    @property
    def driver_version(self) -> str | None:
        """The loaded kernel driver's version, as nvidia-smi reports it (None when it does not answer)."""
        return self.gpus[0].driver_version if self.gpus else None

    @property
    def nvswitch(self) -> bool:
        """NVSwitches present: seen on the PCI bus, or GPUs reporting a fabric state."""
        return self.nvswitch_count > 0 or any(s not in ("", "N/A") for s in self.fabric_states)

    @property
    def has_gpu(self) -> bool:
        return self.count > 0

    def describe(self) -> str:
        """One line for system descriptions: ``8x NVIDIA A100-SXM4-40GB (40960 MiB), driver 550.127.05``."""
        if not self.gpus:
            return f"{self.pci_gpus} NVIDIA GPU(s) on PCI; driver: {self.message or self.status}"
        names = sorted({g.name for g in self.gpus})
        return f"{len(self.gpus)}x {', '.join(names)} ({self.gpus[0].memory_mib} MiB), driver {self.driver_version}"


SMI_QUERY = cmd(*GPU_QUERY_ARGV, timeout=120, readonly=True)
PCI_SCAN = cmd("sh", "-c", PCI_SCAN_SCRIPT, timeout=60, readonly=True)


def read_smi_query(host: Host) -> SmiQuery:
    result = host.run(SMI_QUERY)
    return classify_smi(result.returncode, result.stdout, result.stderr)


def read_pci(host: Host) -> tuple[PciDevice, ...]:
    result = host.run(PCI_SCAN)
    return parse_pci_scan(result.stdout) if result.ok else ()


def read_gpus(host: Host) -> GpuInventory:
    """GPU inventory of a host (read fresh on every call): driver state, GPUs, NVSwitches."""
    smi = read_smi_query(host)
    pci = read_pci(host)
    fabric: tuple[str, ...] = ()
    if smi.status == "ok":
        q = host.run(cmd("nvidia-smi", "-q", timeout=120, readonly=True))
        if q.ok:
            fabric = tuple(parse_fabric_states(q.stdout))
    return GpuInventory(
        status=smi.status,
        gpus=smi.gpus,
        message=smi.message,
        pci_gpus=sum(1 for d in pci if d.is_gpu),
        nvswitch_count=sum(1 for d in pci if d.is_nvswitch),
        fabric_states=fabric,
        library_version=smi.library_version,
    )


# -- fabric manager ----------------------------------------------------------------------------------
FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"


def parse_fabric_manager_version(text: str) -> str | None:
    """``Fabric Manager version is : 550.127.05`` -> ``550.127.05``."""
    match = re.search(r"Fabric\s*Manager\s+version\s+is\s*:\s*([\d.]+)", text, re.I)
    return match.group(1) if match else None


@dataclass(frozen=True)
class ServiceState:
    active: str  # "active", "inactive", "failed", "activating", "unknown"
    enabled: str  # "enabled", "disabled", "not-found", "unknown"

    @property
    def is_active(self) -> bool:
        return self.active == "active"

    @property
    def is_enabled(self) -> bool:
        return self.enabled in ("enabled", "enabled-runtime", "static", "alias")


def parse_service_state(text: str) -> ServiceState:
    """Parse the two lines of ``systemctl is-active UNIT; systemctl is-enabled UNIT`` (stdout only).

    A unit that does not exist prints ``inactive`` and then nothing (older systemd: the error goes
    to stderr) or ``not-found``.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    active = lines[0].split()[0] if lines else "unknown"
    enabled = lines[1].split()[0] if len(lines) > 1 else "not-found"
    return ServiceState(active=active, enabled=enabled)


def service_query(unit: str) -> Command:
    # Both questions in one round trip; their exit codes are not the answer, their words are.
    script = 'systemctl is-active "$1" 2>/dev/null; systemctl is-enabled "$1" 2>/dev/null; true'
    return cmd("sh", "-c", script, "service-state", unit, timeout=60, readonly=True)


def read_service(host: Host, unit: str) -> ServiceState:
    return parse_service_state(host.run(service_query(unit)).stdout)


@dataclass(frozen=True)
class FabricManagerFacts:
    version: str | None  # None: nv-fabricmanager is not installed
    service: ServiceState


FABRIC_MANAGER_VERSION_QUERY = cmd("nv-fabricmanager", "--version", timeout=120, readonly=True)


def read_fabric_manager(host: Host) -> FabricManagerFacts:
    result = host.run(FABRIC_MANAGER_VERSION_QUERY)
    version = parse_fabric_manager_version(result.stdout + result.stderr) if result.ok else None
    return FabricManagerFacts(version=version, service=read_service(host, FABRIC_MANAGER_UNIT))


# -- where the driver came from ----------------------------------------------------------------------
# NVIDIA's .run installer puts nvidia-smi in /usr/bin without telling dpkg, and leaves its
# uninstaller next to it. Ownership is read from dpkg's file lists directly (what `dpkg-query -S`
# searches, at a tenth of its cost: facts are read on every run), for the path and its resolved
# path (/bin is /usr/bin on merged-/usr systems, and dpkg knows only one of the two names).
DRIVER_ORIGIN_SCRIPT = r"""
p=$(command -v nvidia-smi) || exit 0
echo "nvidia-smi $p"
o=$(grep -lxF -e "$p" -e "$(readlink -f "$p")" /var/lib/dpkg/info/*.list 2>/dev/null | head -n 1)
if [ -n "$o" ]; then o=${o##*/}; o=${o%.list}; echo "package ${o%%:*}"; fi
u=$(command -v nvidia-uninstall) && echo "uninstaller $u"
exit 0
"""


@dataclass(frozen=True)
class DriverOrigin:
    """Who installed the ``nvidia-smi`` on the PATH: a Debian package, or nobody dpkg knows."""

    smi_path: str | None = None  # None: no nvidia-smi at all
    package: str | None = None  # the dpkg package that owns it
    uninstaller: str | None = None  # nvidia-uninstall, which only NVIDIA's .run installer leaves

    @property
    def from_runfile(self) -> bool:
        """A driver installed from NVIDIA's .run file (or by hand): nvidia-smi that no package owns."""
        return self.smi_path is not None and self.package is None


def parse_driver_origin(text: str) -> DriverOrigin:
    """Parse the output of :data:`DRIVER_ORIGIN_SCRIPT` (``key value`` lines)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key in ("nvidia-smi", "package", "uninstaller") and value.strip():
            values.setdefault(key, value.strip())
    return DriverOrigin(values.get("nvidia-smi"), values.get("package"), values.get("uninstaller"))


DRIVER_ORIGIN_QUERY = cmd("sh", "-c", DRIVER_ORIGIN_SCRIPT, timeout=60, readonly=True)


def read_driver_origin(host: Host) -> DriverOrigin:
    result = host.run(DRIVER_ORIGIN_QUERY)
    return parse_driver_origin(result.stdout)


# -- CUDA toolkit ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CudaToolkit:
    """What ``<home>/bin/nvcc --version`` says: the toolkit's release, or why it does not answer."""

    home: str
    release: str | None = None  # "12.4"
    problem: str = ""

    def provides(self, version: str) -> bool:
        return self.release == version


def parse_nvcc_release(text: str) -> str | None:
    """``Cuda compilation tools, release 12.4, V12.4.99`` -> ``12.4``."""
    match = re.search(r"Cuda compilation tools, release (\d+\.\d+)", text)
    return match.group(1) if match else None


def cuda_toolkit_query(home: str) -> Command:
    return cmd(f"{home}/bin/nvcc", "--version", timeout=60, readonly=True)


def read_cuda_toolkit(host: Host, home: str) -> CudaToolkit:
    """Run the toolkit's own nvcc: a folder that exists is not a toolkit that works."""
    nvcc = f"{home}/bin/nvcc"
    result = host.run(cuda_toolkit_query(home))
    release = parse_nvcc_release(result.stdout) if result.ok else None
    if release is not None:
        return CudaToolkit(home, release)
    if not result.ok and not host.exists(nvcc):
        return CudaToolkit(home, problem=f"{nvcc} does not exist")
    said = _first_line(result.stdout + "\n" + result.stderr) or "no output"
    if result.ok:
        return CudaToolkit(home, problem=f"`{nvcc} --version` names no CUDA release: {said}")
    return CudaToolkit(home, problem=f"`{nvcc} --version` exited {result.returncode}: {said}")


# -- the declarations (see workload/facts/fact.py) --------------------------------------------------
GPUS: Fact[GpuInventory] = Fact("gpus", read_gpus, (SMI_QUERY, PCI_SCAN))
FABRIC_MANAGER: Fact[FabricManagerFacts] = Fact(
    "fabric-manager", read_fabric_manager, (FABRIC_MANAGER_VERSION_QUERY, service_query(FABRIC_MANAGER_UNIT))
)
DRIVER_ORIGIN: Fact[DriverOrigin] = Fact("driver-origin", read_driver_origin, (DRIVER_ORIGIN_QUERY,))


def cuda_toolkit(home: str) -> Fact[CudaToolkit]:
    """The CUDA toolkit installed at ``home``, as its own nvcc reports it (:func:`read_cuda_toolkit`)."""
    return Fact(f"cuda-toolkit({home})", lambda host: read_cuda_toolkit(host, home), (cuda_toolkit_query(home),))
