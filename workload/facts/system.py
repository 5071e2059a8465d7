"""System facts: OS release, architecture, kernel, CPU, memory, free disk space, pending reboot.

Each fact is a read-only query (an argv or a file) plus a pure parser that tests feed recorded
outputs (``tests/fixtures/facts/``). ``read_*`` functions run the query on a host and parse it;
they never cache: callers re-read before every step.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from workload.commands import Command, cmd
from workload.errors import FactError
from workload.facts.fact import Fact, command_fact
from workload.hosts.base import CommandResult, Host

#: (ID, VERSION_ID) pairs the installers support. Anything else is refused at plan time.
SUPPORTED_RELEASES: tuple[tuple[str, str], ...] = (("ubuntu", "22.04"), ("ubuntu", "24.04"), ("debian", "12"))
#: ``uname -m`` values the installers support, with their dpkg names.
SUPPORTED_MACHINES: dict[str, str] = {"x86_64": "amd64", "aarch64": "arm64"}


# -- OS release --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OsRelease:
    """The parts of ``/etc/os-release`` installers decide on."""

    id: str  # "ubuntu", "debian"
    version_id: str  # "22.04", "12"
    codename: str  # "jammy", "bookworm" ("" if the file has none)
    pretty_name: str
    id_like: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.pretty_name or f"{self.id} {self.version_id}"

    @property
    def is_debian_family(self) -> bool:
        return self.id in ("debian", "ubuntu") or "debian" in self.id_like


def parse_os_release(text: str) -> OsRelease:
    """Parse os-release(5) text (``KEY=value`` lines, values optionally quoted)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip()] = value.replace('\\"', '"')
    os_id = values.get("ID", "").lower()
    if not os_id:
        raise FactError("/etc/os-release has no ID= line")
    codename = values.get("VERSION_CODENAME") or values.get("UBUNTU_CODENAME") or ""
    return OsRelease(
        id=os_id,
        version_id=values.get("VERSION_ID", ""),
        codename=codename,
        pretty_name=values.get("PRETTY_NAME", ""),
        id_like=tuple(values.get("ID_LIKE", "").lower().split()),
    )


def read_os_release(host: Host) -> OsRelease:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            return parse_os_release(host.read_text(path))
        except FileNotFoundError:
            continue
    raise FactError("neither /etc/os-release nor /usr/lib/os-release exists: cannot tell the OS", host=host.name)


# -- architecture and kernel -------------------------------------------------------------------------
@dataclass(frozen=True)
class Architecture:
    machine: str  # uname -m: x86_64, aarch64
    dpkg: str  # dpkg --print-architecture: amd64, arm64 ("" where dpkg is missing)


def parse_architecture(uname_m: str, dpkg_arch: str) -> Architecture:
    machine = uname_m.strip()
    if not machine:
        raise FactError("`uname -m` printed nothing")
    return Architecture(machine=machine, dpkg=dpkg_arch.strip())


# One round trip for both: facts are re-read before every step, so their cost adds up.
ARCHITECTURE_QUERY = cmd(
    "sh", "-c", "uname -m; dpkg --print-architecture 2>/dev/null || true", timeout=60, readonly=True
)


def read_architecture(host: Host) -> Architecture:
    result = host.run(ARCHITECTURE_QUERY)
    lines = result.stdout.splitlines()
    if not result.ok or not lines:
        raise FactError(f"`uname -m` failed: {result.stderr.strip()}", host=host.name)
    return parse_architecture(lines[0], lines[1] if len(lines) > 1 else "")


def unsupported_platform(os_release: OsRelease, arch: Architecture) -> str | None:
    """Why this OS/architecture is not supported, or None when it is."""
    if (os_release.id, os_release.version_id) not in SUPPORTED_RELEASES:
        supported = ", ".join(f"{i.capitalize()} {v}" for i, v in SUPPORTED_RELEASES)
        return f"{os_release.label} is not supported (supported: {supported})"
    if arch.machine not in SUPPORTED_MACHINES:
        return f"architecture {arch.machine} is not supported (supported: {', '.join(SUPPORTED_MACHINES)})"
    return None


# -- CPU and memory ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CpuInfo:
    """What ``lscpu`` says about the processors (used to describe the system under test)."""

    model: str
    architecture: str
    logical_cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    numa_nodes: int


def _int(value: str | None, default: int = 0) -> int:
    match = re.match(r"\s*(\d+)", value or "")
    return int(match.group(1)) if match else default


def parse_lscpu(text: str) -> CpuInfo:
    """Parse plain ``lscpu`` output (``Key:   value`` lines; LC_ALL=C)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            # First occurrence wins: lscpu repeats keys like "Model name" per cluster on some ARM systems.
            values.setdefault(key.strip(), value.strip())
    logical = _int(values.get("CPU(s)"))
    if logical <= 0:
        raise FactError("lscpu output has no 'CPU(s):' line")
    sockets = _int(values.get("Socket(s)"), 1) or 1
    cores = _int(values.get("Core(s) per socket") or values.get("Core(s) per cluster"), 0)
    threads = _int(values.get("Thread(s) per core"), 1) or 1
    if cores <= 0:
        cores = max(1, logical // (sockets * threads))
    return CpuInfo(
        model=values.get("Model name", "unknown"),
        architecture=values.get("Architecture", ""),
        logical_cpus=logical,
        sockets=sockets,
        cores_per_socket=cores,
        threads_per_core=threads,
        numa_nodes=_int(values.get("NUMA node(s)"), 1) or 1,
    )


#: ``lscpu`` in the C locale (its field names are parsed).
CPU_QUERY = cmd("lscpu", env={"LC_ALL": "C"}, timeout=60, readonly=True)


def read_cpu(host: Host) -> CpuInfo:
    result = host.run(CPU_QUERY)
    if not result.ok:
        raise FactError(f"`lscpu` failed (exit {result.returncode}): {result.stderr.strip()}", host=host.name)
    return parse_lscpu(result.stdout)


@dataclass(frozen=True)
class MemoryInfo:
    total_bytes: int
    available_bytes: int

    @property
    def total_gib(self) -> float:
        return self.total_bytes / 2**30


def parse_meminfo(text: str) -> MemoryInfo:
    """Parse ``/proc/meminfo`` (values in kB, which the kernel means as KiB)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"(\w+):\s+(\d+)(?:\s+kB)?", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    if "MemTotal" not in values:
        raise FactError("/proc/meminfo has no MemTotal line")
    available = values.get("MemAvailable", values.get("MemFree", 0))
    return MemoryInfo(total_bytes=values["MemTotal"], available_bytes=available)


def read_memory(host: Host) -> MemoryInfo:
    return parse_meminfo(host.read_text("/proc/meminfo"))


# -- disk space and reboot ---------------------------------------------------------------------------
@dataclass(frozen=True)
class FreeSpace:
    path: str  # the path asked about
    mount_point: str
    available_bytes: int


def parse_df(text: str, path: str) -> FreeSpace:
    """Parse ``df -P -B1 PATH`` (POSIX format: a header line, then one line per file system)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise FactError(f"df printed no file system for {path}")
    fields = lines[-1].split()
    if len(fields) < 6 or not fields[3].isdigit():
        raise FactError(f"cannot read df output for {path}: {lines[-1]!r}")
    return FreeSpace(path=path, mount_point=fields[5], available_bytes=int(fields[3]))


def free_space_query(path: str) -> Command:
    # df needs an existing path: walk up to the nearest existing parent of a not-yet-created folder.
    script = 'p=$1; while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done; exec df -P -B1 "$p"'
    return cmd("sh", "-c", script, "df-path", path, timeout=60, readonly=True)


def read_free_space(host: Host, path: str) -> FreeSpace | None:
    """Free space of the file system holding ``path`` (the nearest existing parent); None if unknown."""
    result = host.run(free_space_query(path))
    if not result.ok:
        return None
    return parse_df(result.stdout, path)


@dataclass(frozen=True)
class RebootPending:
    required: bool
    packages: tuple[str, ...] = ()


REBOOT_REQUIRED_FLAG = "/var/run/reboot-required"


def read_reboot_pending(host: Host, flag: str = REBOOT_REQUIRED_FLAG) -> RebootPending:
    """Debian/Ubuntu's flag file: packages write ``/var/run/reboot-required`` when a reboot is due,
    and their names to ``<flag>.pkgs`` (``flag`` is a parameter so tests need not touch the real one)."""
    if not host.exists(flag):
        return RebootPending(required=False)
    try:
        pkgs = host.read_text(f"{flag}.pkgs")
    except FileNotFoundError:
        pkgs = ""
    names = tuple(dict.fromkeys(p.strip() for p in pkgs.splitlines() if p.strip()))
    return RebootPending(required=True, packages=names)


# -- the user a setup is for -------------------------------------------------------------------------
@dataclass(frozen=True)
class UserHome:
    name: str
    home: str

    @property
    def is_root(self) -> bool:
        return self.name == "root"


# The real user: the Username parameter, else whoever ran sudo, else the connecting user. Homes
# come from the passwd database (root's is /root, never /home/root).
USER_SCRIPT = 'u=${1:-${SUDO_USER:-$(id -un)}}; printf "%s\\n" "$u"; getent passwd "$u" | cut -d: -f6'


def parse_user_home(text: str) -> UserHome | None:
    lines = [line.strip() for line in text.splitlines()]
    if len(lines) < 2 or not lines[0] or not lines[1]:
        return None
    return UserHome(name=lines[0], home=lines[1])


def user_home_query(username: str | None) -> Command:
    return cmd("sh", "-c", USER_SCRIPT, "user-home", username or "", timeout=60, readonly=True)


def read_user_home(host: Host, username: str | None) -> UserHome:
    result = host.run(user_home_query(username))
    user = parse_user_home(result.stdout)
    if user is None:
        who = username or result.stdout.strip() or "the current user"
        raise FactError(f"user {who!r} does not exist on this host (no passwd entry)", host=host.name)
    return user


# -- the declarations (see workload/facts/fact.py) --------------------------------------------------
OS_RELEASE: Fact[OsRelease] = Fact("os-release", read_os_release)  # a file read: nothing to batch
ARCHITECTURE: Fact[Architecture] = Fact("architecture", read_architecture, (ARCHITECTURE_QUERY,))
REBOOT_PENDING: Fact[RebootPending] = Fact("reboot-pending", read_reboot_pending)  # file reads


def user_home(username: str | None) -> Fact[UserHome]:
    """The user a setup is for (:func:`read_user_home`): ``username``, else the sudo caller, else us."""
    return Fact(
        f"user-home({username or ''})", lambda host: read_user_home(host, username), (user_home_query(username),)
    )


def user_groups(username: str | None) -> Fact[frozenset[str]]:
    """The groups of the user :func:`user_home` finds (``id -nG``; empty where that fails): read after the user,
    since the name comes from its answer."""

    def read(host: Host) -> frozenset[str]:
        user = read_user_home(host, username)
        groups = host.run(cmd("id", "-nG", user.name, timeout=60, readonly=True))
        return frozenset(groups.stdout.split()) if groups.ok else frozenset()

    return Fact(f"user-groups({username or ''})", read, (user_home_query(username),))


def user_file_has_line(username: str | None, name: str, line: str) -> Fact[bool]:
    """Whether ``name`` in the home of the user :func:`user_home` finds has exactly the line ``line`` (``grep
    -qxF`` as root: the file may be the user's alone); read after the user, since the home comes from its answer."""

    def read(host: Host) -> bool:
        path = posixpath.join(read_user_home(host, username).home, name)
        return host.run(cmd("grep", "-qxF", line, path, sudo=True, timeout=60, readonly=True)).returncode == 0

    return Fact(f"user-file-line({username or ''},{name},{line})", read, (user_home_query(username),))


def python_runs(python: str, code: str) -> Fact[CommandResult]:
    """Whether (and what it printed when not) ``python -c code`` runs on the host: an interpreter's modules and
    what they see (``import mlperf_loadgen``, a CUDA device)."""
    query = cmd(python, "-c", code, timeout=120, readonly=True)
    return command_fact(f"python-runs({python},{code})", query, lambda _host, result: result)


def free_space(path: str) -> Fact[FreeSpace | None]:
    """Free space of the file system holding ``path`` (:func:`read_free_space`)."""
    return Fact(f"free-space({path})", lambda host: read_free_space(host, path), (free_space_query(path),))


def file_exists(path: str) -> Fact[bool]:
    """Whether ``path`` exists on the host (a file-system question, not a command)."""
    return Fact(f"exists({path})", lambda host: host.exists(path))


def file_text(path: str) -> Fact[str | None]:
    """The text of ``path`` on the host, None where it does not exist."""

    def read(host: Host) -> str | None:
        try:
            return host.read_text(path)
        except FileNotFoundError:
            return None

    return Fact(f"text({path})", read)
