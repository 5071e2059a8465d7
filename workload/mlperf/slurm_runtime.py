"""Which container runtime runs the harness on a node: Docker, or the cluster's enroot + pyxis.

Chosen by facts, never by a guess:

- not a Slurm node: Docker (as everywhere else in this project);
- a Slurm node of a cluster with pyxis (``srun --help`` lists ``--container-image``, the option the
  pyxis SPANK plugin adds; NVIDIA/pyxis wiki "Usage") and enroot on the node (``enroot version``):
  **pyxis**, the cluster's convention (unprivileged containers started by srun itself, images
  cached by enroot; Docker on such nodes usually needs root or the docker group);
- a Slurm node without pyxis where ``docker info`` answers for this user: Docker;
- neither: a clear error with what to ask the admins.

``ContainerRuntime=docker|pyxis`` (a profile parameter) overrides ``auto``, and is refused when
its runtime is not there. With pyxis the harness command is one job step with
:func:`pyxis_srun_options` (image as an enroot URI, mounts, working directory, a container name so
that the steps of one job reuse the imported image).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from workload.commands import cmd
from workload.errors import StepError
from workload.hosts.base import Host

Runtime = Literal["docker", "pyxis"]


@dataclass(frozen=True)
class RuntimeFacts:
    """What decides the runtime on one node."""

    slurm_node: bool
    #: ``srun --help`` on the login host lists ``--container-image`` (pyxis is loaded).
    pyxis: bool
    #: ``enroot version`` answers on the node.
    enroot: bool
    #: ``docker info`` answers on the node for the user the job runs as.
    docker: bool


def read_runtime_facts(host: Host) -> RuntimeFacts:
    """Read the facts with read-only commands (the login host's srun for pyxis, the node for the rest)."""
    from workload.hosts.slurm import SlurmHost

    docker = host.run(cmd("docker", "info", "--format", "{{.ServerVersion}}", timeout=60, readonly=True)).ok
    if not isinstance(host, SlurmHost):
        return RuntimeFacts(slurm_node=False, pyxis=False, enroot=False, docker=docker)
    help_text = host.login.run(cmd("srun", "--help", timeout=60, readonly=True)).stdout
    enroot = host.run(cmd("enroot", "version", timeout=60, readonly=True)).ok
    return RuntimeFacts(slurm_node=True, pyxis="--container-image" in help_text, enroot=enroot, docker=docker)


def choose_runtime(facts: RuntimeFacts, wanted: str = "auto", *, node: str = "") -> Runtime:
    """The runtime for these facts (see the module docstring); StepError when none can run the harness."""
    where = f"[{node}] " if node else ""
    pyxis_ok = facts.slurm_node and facts.pyxis and facts.enroot
    if wanted not in ("auto", "docker", "pyxis"):
        raise StepError("ContainerRuntime", f"{where}{wanted!r} is not auto, docker or pyxis")
    if wanted == "pyxis" and not pyxis_ok:
        missing = [
            what
            for what, ok in (("a Slurm node", facts.slurm_node), ("pyxis", facts.pyxis), ("enroot", facts.enroot))
            if not ok
        ]
        raise StepError(
            "ContainerRuntime", f"{where}pyxis was asked for but there is no {', no '.join(missing)}", hint=_ADMIN_HINT
        )
    if wanted == "docker" and not facts.docker:
        raise StepError("ContainerRuntime", f"{where}Docker was asked for but `docker info` fails", hint=_ADMIN_HINT)
    if wanted != "auto":
        return "pyxis" if wanted == "pyxis" else "docker"
    if pyxis_ok:
        return "pyxis"
    if facts.docker:
        return "docker"
    if not facts.slurm_node:
        raise StepError("ContainerRuntime", f"{where}Docker does not answer (`docker info`)", hint=_ADMIN_HINT)
    found = "pyxis without enroot on the node" if facts.pyxis else "no pyxis in srun"
    raise StepError(
        "ContainerRuntime",
        f"{where}no container runtime for the harness: `docker info` fails and {found}",
        hint=_ADMIN_HINT,
    )


_ADMIN_HINT = (
    "on a Slurm cluster ask the admins for enroot + pyxis (NVIDIA's convention for GPU clusters) or Docker "
    "for your user on the nodes; elsewhere run the DockerInstallation step"
)


def enroot_uri(image: str) -> str:
    """A Docker image reference as an enroot URI: the registry host is separated by ``#``.

    ``nvcr.io/nvidia/pytorch:24.01-py3`` -> ``nvcr.io#nvidia/pytorch:24.01-py3``; Docker Hub names
    (no registry host: no ``.``/``:`` in the first part, and not ``localhost``) stay as they are.
    """
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def pyxis_srun_options(image: str, mounts: dict[str, str], workdir: str, name: str) -> tuple[str, ...]:
    """The srun options that run a step inside ``image`` with pyxis (mounts: host path -> container path)."""
    options = [f"--container-image={enroot_uri(image)}", f"--container-name={name}"]
    if mounts:
        options.append("--container-mounts=" + ",".join(f"{src}:{dst}" for src, dst in mounts.items()))
    options.append(f"--container-workdir={workdir}")
    return tuple(options)
