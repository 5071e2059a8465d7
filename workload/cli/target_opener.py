"""The contract between choosing a run's hosts and opening them (its own module so that
:mod:`workload.cli.options` and :mod:`workload.cli.slurm_targets` both name it without importing
each other: issue 28 counted that as an import circle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from workload.commands import Secret
    from workload.hosts.base import Host, HostSpec


class TargetOpener(Protocol):
    """What :func:`workload.cli.options.build_targets` hands the engine: opens a host spec; knows the
    secrets it connects with."""

    def __call__(self, spec: HostSpec) -> Host: ...

    @property
    def secrets(self) -> list[Secret]: ...
