"""The MLPerf action's facts, declared once (:mod:`workload.facts.fact`): what its ``plan`` reads from the host.

Each is a read-only query (or a file read) with its parser; :meth:`MLPerfExecutor.facts
<workload.actions.mlperf_executor.MLPerfExecutor.facts>` names the ones a plan needs, the engine
prefetches their commands in one round trip, and ``gather`` reads them through the step's
:class:`~workload.facts.fact.HostFacts` view (a read it did not declare raises
:class:`~workload.facts.fact.UndeclaredFact`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from workload.commands import cmd
from workload.facts.fact import Fact, command_fact
from workload.hosts.base import Host
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.settings import UserFacts
from workload.mlperf.system import HostSystem, read_host_system


@dataclass(frozen=True)
class CheckoutFacts:
    """The harness checkout (closed/NVIDIA) as the planner sees it."""

    exists: bool
    version: HarnessVersion | None = None
    #: Why the version is unknown although the checkout is there (VERSION missing or unreadable).
    version_problem: str | None = None
    commit: str | None = None
    #: Which of the given round-marker paths exist (:func:`workload.mlperf.rounds.markers`).
    present: frozenset[str] = frozenset()
    build_exists: bool = False


def checkout(nvidia_dir: str, markers: tuple[str, ...]) -> Fact[CheckoutFacts]:
    """``nvidia_dir``'s VERSION, round markers, ``build/`` (file reads) and commit (``git rev-parse HEAD``)."""
    query = cmd("git", "-C", nvidia_dir, "rev-parse", "HEAD", timeout=60, readonly=True)

    def read(host: Host) -> CheckoutFacts:
        if not host.exists(nvidia_dir):
            return CheckoutFacts(exists=False)
        version: HarnessVersion | None = None
        problem: str | None = None
        try:
            version = HarnessVersion.parse(host.read_text(posixpath.join(nvidia_dir, "VERSION")))
        except FileNotFoundError:
            problem = f"{nvidia_dir}/VERSION is missing"
        except ValueError as exc:
            problem = f"{nvidia_dir}/VERSION: {exc}"
        rev = host.run(query)
        return CheckoutFacts(
            exists=True,
            version=version,
            version_problem=problem,
            commit=rev.stdout.strip() if rev.ok else None,
            present=frozenset(m for m in markers if host.exists(posixpath.join(nvidia_dir, m))),
            build_exists=host.exists(posixpath.join(nvidia_dir, "build")),
        )

    return Fact(f"mlperf-checkout({nvidia_dir})", read, (query,))


#: The real user: ``$1`` (the Username parameter), else whoever ran sudo, else the connecting user; then their
#: uid, gid, group name and home (the passwd database's).
USER_SCRIPT = (
    'u=${1:-${SUDO_USER:-$(id -un)}}; printf "%s\\n" "$u"; '
    'id -u "$u" && id -g "$u" && id -gn "$u" && getent passwd "$u" | cut -d: -f6'
)


def parse_user(text: str) -> UserFacts | str:
    """The user's facts from :data:`USER_SCRIPT`'s output, or the name it looked for when the user does not exist."""
    lines = text.split()
    name = lines[0] if lines else ""
    try:
        uid, gid = int(lines[1]), int(lines[2])
        group = lines[3]
    except (IndexError, ValueError):
        return name
    return UserFacts(name, uid, gid, group, lines[4] if len(lines) > 4 else f"/home/{name}")


def harness_user(username: str | None) -> Fact[UserFacts | str]:
    """The user the image and container are made for (:func:`parse_user`)."""
    query = cmd("sh", "-c", USER_SCRIPT, "mlperf-user", username or "", timeout=30, readonly=True)
    return command_fact(f"mlperf-user({username or ''})", query, lambda _host, result: parse_user(result.stdout))


#: The machine (``uname -m``): the container's name and the image's architecture.
MACHINE: Fact[str] = command_fact(
    "machine", cmd("uname", "-m", timeout=30, readonly=True), lambda _host, result: result.stdout.strip() or "x86_64"
)


def listing(folder: str) -> Fact[tuple[str, ...]]:
    """The names in ``folder`` (``ls -1``); () where it does not exist. The run id is chosen from it."""
    query = cmd("ls", "-1", folder, timeout=60, readonly=True)

    def read(host: Host) -> tuple[str, ...]:
        return tuple(host.run(query).stdout.split()) if host.exists(folder) else ()

    return Fact(f"listing({folder})", read, (query,))


def host_system() -> Fact[HostSystem]:
    """The host's GPUs, CPU and memory (:func:`workload.mlperf.system.read_host_system`); reading it raises
    FactError where they cannot be read (no driver, no GPU)."""
    from workload.facts.nvidia import GPUS
    from workload.facts.system import CPU_QUERY

    return Fact("mlperf-host-system", read_host_system, (*GPUS.queries, CPU_QUERY))
