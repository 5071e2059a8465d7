"""One host's sampler: a thread that reads the host's GPUs and ``/proc`` every interval.

Everything goes through a :class:`~workload.hosts.Host` of its own (:func:`own_connection`): the
engine's Host object of the same machine is not shared, because its remembered facts
(``Host.remembering_facts``) are neither thread-safe nor meant for values that change every second,
and its ``interrupt()`` (Ctrl-C) must not depend on a sampler. Commands are argv values; the
transport quotes them.

Per interval: ``cat /proc/stat /proc/meminfo /proc/loadavg`` (the host part) and, while the host
has nvidia-smi, ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``. A host without
nvidia-smi (exit 127) is sampled for the host part and asked again every :data:`NVIDIA_SMI_RECHECK_S`
(a run's dependencies may install the driver). A failing command or a lost connection is recorded
(``errors``, ``failed_samples``) and the next interval tries again (reconnecting once, never
retrying for long): a monitor never fails a run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from workload.commands import Command
from workload.errors import WorkloadError
from workload.hosts.base import Host
from workload.hosts.local import LocalHost
from workload.monitors.hostsample import PROC_ARGV, HostSampler
from workload.monitors.nvsmi import EVENT_FIELD, LEGACY_EVENT_FIELD, invalid_field, parse_query, query_argv
from workload.monitors.stats import HostStats
from workload.safefile import append_text

NVIDIA_SMI_TIMEOUT_S = 20.0
PROC_TIMEOUT_S = 20.0
#: How often a host without nvidia-smi is asked again.
NVIDIA_SMI_RECHECK_S = 30.0
#: How often a sampler waiting or sleeping looks at the run's cancel token.
_TICK_S = 0.2
NO_NVIDIA_SMI = "no nvidia-smi on this host: host telemetry only"
NOT_REACHED = "not sampled: the run never reached this host"


class Cancel(Protocol):
    """The run-wide stop (:class:`workload.steps.CancelToken`): no new sampling command after it is set."""

    def is_set(self) -> bool: ...


def own_connection(host: Host) -> Host | None:
    """A new Host object for the same machine as ``host``, with a connection of its own.

    SSH: the same user, port and credentials; host keys only as already recorded (the engine's
    connection records a new one when ``--accept-new-host-key`` says so; a sampler never does),
    and one connect attempt per use, so a host that is down costs one connect timeout per interval
    at most. None for a transport this module does not know.
    """
    if isinstance(host, LocalHost):
        return LocalHost(host.name)
    from workload.hosts.ssh import SshHost  # loaded already when host is one

    if isinstance(host, SshHost):
        options = replace(host.options, accept_new_host_keys=False, connect_attempts=1, sudo_password=None)
        return SshHost(host.hostname, port=host.port, user=host.user, options=options, name=host.name)
    from workload.hosts.slurm import SlurmHost

    if isinstance(host, SlurmHost):  # samples are job steps of the same allocation, through a login of their own
        login = own_connection(host.login)
        return None if login is None else SlurmHost(host.node, host.allocation, login)
    return None


class HostMonitor:
    """Samples one host on a thread from :meth:`start` to :meth:`stop`; ``write`` receives each sample's records.

    ``ready`` (polled) holds sampling back until the engine has reached the host, so the sampler's
    first connect neither races the engine's (host key recording) nor reports a host the engine
    cannot reach either.
    """

    def __init__(
        self,
        name: str,
        host: Host | None,
        *,
        interval_s: float,
        warmup_s: float = 0.0,
        gpus: bool = True,
        host_part: bool = True,
        raw_path: Path,
        write: Callable[[list[dict[str, Any]]], None],
        ready: Callable[[], bool] = lambda: True,
        cancel: Cancel | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.interval_s = interval_s
        self.warmup_s = warmup_s
        self.raw_path = raw_path
        self.stats = HostStats(name)
        self._write = write
        self._ready = ready
        self._cancel = cancel
        self._want_gpus = gpus
        self._host_part = HostSampler() if host_part else None
        self._event_field = EVENT_FIELD
        self._nvidia_smi_next = 0.0  # monotonic time of the next nvidia-smi try
        self._stop = threading.Event()
        self._final = True
        self._thread: threading.Thread | None = None
        if host is None:
            self.stats.error("this kind of host cannot be sampled")

    # -- life ------------------------------------------------------------------------------------
    def start(self) -> HostMonitor:
        if self.host is not None:
            self._thread = threading.Thread(target=self._guarded, name=f"telemetry-{self.name}", daemon=True)
            self._thread.start()
        return self

    def request_stop(self, *, final_sample: bool = True) -> None:
        """Ask the thread to end (after one last sample unless the run was cancelled); returns at once."""
        self._final = final_sample
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the thread; True when it ended."""
        if self._thread is not None:
            self._thread.join(max(0.0, timeout_s))
            return not self._thread.is_alive()
        return True

    def abort(self) -> None:
        """Kill the sampling command running now (a hung nvidia-smi) so the thread can end; start no other."""
        self._aborted = True
        self._final = False
        if self.host is not None:
            with contextlib.suppress(Exception):  # a broken connection: nothing left to kill
                self.host.interrupt(grace_s=0.5)

    def close(self) -> None:
        if self.host is not None:
            with contextlib.suppress(Exception):
                self.host.close()

    _aborted = False

    def _cancelled(self) -> bool:
        return self._aborted or (self._cancel is not None and self._cancel.is_set())

    def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds``; True as soon as the sampler must stop (stop asked or run cancelled)."""
        end = time.monotonic() + seconds
        while True:
            if self._cancelled():
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            if self._stop.wait(min(left, _TICK_S)):
                return True

    def _guarded(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # a bug here must not end the run: the summary names it
            self.stats.error(f"the sampler stopped: internal error {type(exc).__name__}: {exc}")
        finally:
            self.close()  # a fleet's finished hosts do not keep a connection each until the run ends

    def _loop(self) -> None:
        while not self._ready():
            if self._sleep(_TICK_S):
                self.stats.note(NOT_REACHED)
                return
        if self.warmup_s and self._sleep(self.warmup_s):
            return
        while True:
            self.sample_once()
            if self._sleep(self.interval_s):
                if self._final and not self._cancelled():
                    self.sample_once()  # the state at the end of the run
                return

    # -- one sample ------------------------------------------------------------------------------
    def sample_once(self) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
        records: list[dict[str, Any]] = []
        try:
            if self._host_part is not None and not self._cancelled():
                values = self._proc_values()
                if values is not None:
                    records.append({"time": stamp, "host": self.name, "device": "host", "name": "host",
                                    "values": values})  # fmt: skip
            if self._want_gpus and time.monotonic() >= self._nvidia_smi_next and not self._cancelled():
                records.extend(self._gpu_records(stamp))
        except WorkloadError as exc:  # the host cannot be reached: this sample is lost, the next tries again
            self.stats.failed()
            self.stats.error(f"no sample: {exc.message.splitlines()[0]}")
        self.stats.add(records, stamp)
        if records:
            try:
                self._write(records)
            except OSError as exc:
                self.stats.error(f"samples.jsonl not written: {exc.strerror or exc}")

    def _run(self, argv: list[str] | tuple[str, ...], timeout: float) -> Any:
        assert self.host is not None
        return self.host.run(Command(tuple(argv), timeout=timeout, readonly=True))

    def _proc_values(self) -> dict[str, float | None] | None:
        assert self._host_part is not None
        result = self._run(PROC_ARGV, PROC_TIMEOUT_S)
        values = self._host_part.sample(result.stdout)
        if not result.ok:
            self.stats.error(f"{result.command}: exit {result.returncode}: {result.stderr.strip()[:200]}")
        return values if any(v is not None for v in values.values()) else None

    def _gpu_records(self, stamp: str) -> list[dict[str, Any]]:
        output = self._query()
        if output is None:
            return []
        try:  # appends never follow a link someone planted in the run folder (workload.safefile)
            if not self.raw_path.exists():
                self.raw_path.parent.mkdir(parents=True, exist_ok=True)
                append_text(self.raw_path, f"# {' '.join(query_argv('nvidia-smi', self._event_field))}\n")
            append_text(self.raw_path, output if output.endswith("\n") else output + "\n")
        except OSError as exc:  # disk full, a link: the samples and the summary still get the values
            self.stats.error(f"{self.raw_path.name} not written: {exc.strerror or exc}")
        records = []
        for sample in parse_query(output):
            device = f"gpu{sample.index}"
            records.append({"time": stamp, "gpu_time": sample.timestamp, "host": self.name,
                            "device": device, "name": sample.name, "values": dict(sample.values)})  # fmt: skip
        if not records:
            self.stats.error(f"nvidia-smi printed no GPU rows: {output.strip()[:200]!r}")
        return records

    def _query(self) -> str | None:
        for _ in range(2):
            result = self._run(query_argv("nvidia-smi", self._event_field), NVIDIA_SMI_TIMEOUT_S)
            if result.ok:
                self.stats.nvidia_smi = "nvidia-smi"
                return str(result.stdout)
            if self._aborted:
                self.stats.error("nvidia-smi had not answered when sampling stopped: killed")
                return None
            text = f"{result.stdout}{result.stderr}"
            # The same rule as the facts' reading of nvidia-smi (installers/facts/nvidia.py): 127 is "not installed".
            if result.returncode == 127 or "command not found" in text:
                self.stats.note(NO_NVIDIA_SMI)
                self._nvidia_smi_next = time.monotonic() + NVIDIA_SMI_RECHECK_S
                return None
            rejected = invalid_field(text)
            if rejected == EVENT_FIELD and self._event_field == EVENT_FIELD:
                self._event_field = LEGACY_EVENT_FIELD  # a driver before R535
                continue
            what = "timed out" if result.timed_out else f"exit {result.returncode}"
            self.stats.error(f"nvidia-smi {what}: {text.strip()[:200]}")
            return None
        return None
