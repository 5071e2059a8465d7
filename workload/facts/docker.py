"""Docker facts: the daemon (``docker info --format '{{json .}}'``) and the NVIDIA container toolkit
(``nvidia-ctk --version``).

``docker info`` prints its JSON even when the daemon is down (``ServerErrors`` says why) and exits
1; both cases are read here. The ``Runtimes`` map tells whether ``nvidia`` is registered.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from workload.commands import Command, cmd
from workload.facts.fact import Fact
from workload.hosts.base import Host


@dataclass(frozen=True)
class DockerInfo:
    """What ``docker info`` says. ``installed`` is False where there is no docker CLI at all."""

    installed: bool
    server_version: str | None = None
    runtimes: tuple[str, ...] = ()
    default_runtime: str | None = None
    error: str = ""  # why the daemon did not answer (empty when it did)

    @property
    def daemon_ok(self) -> bool:
        return self.installed and self.server_version is not None and not self.error

    @property
    def has_nvidia_runtime(self) -> bool:
        return "nvidia" in self.runtimes


def parse_docker_info(returncode: int, stdout: str, stderr: str) -> DockerInfo:
    """Parse ``docker info --format '{{json .}}'`` (pure)."""
    text = (stdout + "\n" + stderr).strip()
    if returncode == 127 or "command not found" in text:
        return DockerInfo(installed=False, error="docker is not installed")
    data: dict[str, Any] = {}
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                loaded = json.loads(line)
            except ValueError:
                continue
            if isinstance(loaded, dict):
                data = loaded
                break
    errors = [str(e) for e in (data.get("ServerErrors") or [])]
    version = data.get("ServerVersion") or None
    if not data:
        return DockerInfo(installed=True, error=_first_line(text) or f"docker info exited {returncode}")
    if errors or not version:
        return DockerInfo(installed=True, error="; ".join(errors) or _first_line(stderr) or "the daemon did not answer")
    runtimes = data.get("Runtimes") or {}
    return DockerInfo(
        installed=True,
        server_version=str(version),
        runtimes=tuple(sorted(runtimes)) if isinstance(runtimes, dict) else (),
        default_runtime=data.get("DefaultRuntime"),
    )


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def docker_info_query(*, sudo: bool = True) -> Command:
    return cmd("docker", "info", "--format", "{{json .}}", sudo=sudo, timeout=120, readonly=True)


def read_docker_info(host: Host, *, sudo: bool = True) -> DockerInfo:
    """``sudo`` because a user not (yet) in the docker group gets "permission denied" on the socket."""
    result = host.run(docker_info_query(sudo=sudo))
    return parse_docker_info(result.returncode, result.stdout, result.stderr)


def parse_nvidia_ctk_version(text: str) -> str | None:
    """``NVIDIA Container Toolkit CLI version 1.17.3`` -> ``1.17.3``."""
    match = re.search(r"NVIDIA Container Toolkit CLI version\s+([^\s]+)", text)
    return match.group(1) if match else None


CTK_VERSION_QUERY = cmd("nvidia-ctk", "--version", timeout=120, readonly=True)


def read_nvidia_ctk_version(host: Host) -> str | None:
    """The NVIDIA container toolkit's CLI version, or None where ``nvidia-ctk`` is missing or fails."""
    result = host.run(CTK_VERSION_QUERY)
    return parse_nvidia_ctk_version(result.stdout) if result.ok else None


# -- the declarations (see workload/facts/fact.py) --------------------------------------------------
DOCKER_INFO: Fact[DockerInfo] = Fact("docker-info", read_docker_info, (docker_info_query(),))
NVIDIA_CTK_VERSION: Fact[str | None] = Fact("nvidia-ctk-version", read_nvidia_ctk_version, (CTK_VERSION_QUERY,))
