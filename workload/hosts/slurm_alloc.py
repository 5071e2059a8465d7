"""A Slurm allocation for a run: ask the cluster's own scheduler for N nodes, watch it, give it back.

Everything goes through Slurm's command-line tools on a *login host* (local, or SSH to a login
node: any :class:`~workload.hosts.base.Host`); there is no scheduling of ours.

Why one allocation plus one job step per node (and not an ``sbatch`` array):

- ``salloc --no-shell`` makes one job that owns the nodes for the whole run: dependencies, every
  action round and the monitors run as job steps on nodes that stay ours between steps (an array
  task ends with its script, so a profile's steps could land on different nodes, and a node's
  later steps could wait in the queue behind other users' jobs);
- each step (``srun --jobid J --nodes=1 --nodelist NODE``) is one command of one host, so per-host
  logs, outcomes, failure isolation and ``--only-failed`` are exactly those of SSH hosts;
- ``--no-kill`` keeps the job alive when one node fails: Slurm takes the node out of the job and
  the other nodes' steps go on (an ``sbatch`` job dies with its batch host; ``salloc --no-shell``
  has none);
- ``--exclusive``: a benchmark wants whole nodes.

While the request is pending, :meth:`SlurmAllocation.allocate` reports the job's state and
``squeue`` reason (``Resources``, ``Priority``, ``ReqNodeNotAvail``...) each time it changes.
:meth:`SlurmAllocation.release` cancels the job (``scancel``) and waits until ``squeue`` no longer
lists it as running, so nothing keeps running after the run, a Ctrl-C or a SIGTERM.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from workload.commands import cmd
from workload.errors import ConnectError, Interrupted, UsageError
from workload.hosts.base import CommandResult, Host

#: Slurm's time formats (``--time``): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
#: days-hours:minutes, days-hours:minutes:seconds; or UNLIMITED/INFINITE (sbatch(1), "-t, --time").
_TIME = re.compile(r"\d+(?::\d+){0,2}|\d+-\d+(?::\d+){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)
#: A partition, account, reservation or feature name (Slurm allows more; these are what clusters use).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")
#: A node list as Slurm's hostlist expressions write it (``gpu[001-004,010],login1``).
_NODELIST = re.compile(r"[A-Za-z0-9_.,\[\]-]{1,4096}")
#: ``--constraint``: features joined by Slurm's operators (``a100&ib``, ``[rack1|rack2]``, ``h100*4``).
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.&|,*\[\]()!-]{1,1024}")
#: ``--gres gpu:N`` or ``gpu:TYPE:N`` (per node).
_GRES = re.compile(r"gpu(?::[A-Za-z0-9_.-]+)?:\d+")
#: How long a request may stay pending before it is given up (salloc is killed; the release cancels
#: the job). A day: queues on busy clusters run to hours; nothing waits without bound.
ALLOCATION_WAIT_S = 24 * 3600.0

_JOB_ID = re.compile(r"(?:Pending|Granted) job allocation (\d+)")

#: Job states in which the job still holds (or waits for) resources (squeue(1), JOB STATE CODES).
ACTIVE_STATES = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT"}
)


@dataclass(frozen=True)
class SlurmRequest:
    """What ``--slurm PARTITION`` and its options ask the scheduler for (values checked on creation)."""

    partition: str
    nodes: int | None = None
    nodelist: str | None = None
    constraint: str | None = None
    gres: str | None = None
    account: str | None = None
    time: str | None = None
    reservation: str | None = None
    #: Installers may change the nodes (off by default: on a cluster, the admins provision them).
    allow_changes: bool = False
    #: Work of a node that failed may run again on another node of the partition.
    requeue: bool = False
    #: Excluded nodes (``--exclude``), e.g. the nodes a requeue replaces.
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        checks = [
            ("--slurm", self.partition, _NAME, "a partition name (see `sinfo -s`)"),
            ("--nodelist", self.nodelist, _NODELIST, "node names or a Slurm host list such as gpu[01-04]"),
            ("--constraint", self.constraint, _CONSTRAINT, "node features, e.g. h100 or 'h100&ib'"),
            ("--gres", self.gres, _GRES, "gpu:N or gpu:TYPE:N (per node)"),
            ("--account", self.account, _NAME, "an account name (see `sacctmgr show assoc user=$USER`)"),
            ("--time", self.time, _TIME, "minutes, HH:MM:SS or D-HH:MM:SS (Slurm's formats)"),
            ("--reservation", self.reservation, _NAME, "a reservation name (see `scontrol show res`)"),
        ]
        for option, value, pattern, what in checks:
            if value is not None and not pattern.fullmatch(value):
                raise UsageError(f"{option} {value!r}: not {what}")
        if self.nodes is not None and self.nodes < 1:
            raise UsageError(f"--nodes {self.nodes}: at least 1")
        for node in self.exclude:
            if not _NODELIST.fullmatch(node):
                raise UsageError(f"excluded node {node!r}: not a node name")

    def salloc_argv(self, job_name: str) -> tuple[str, ...]:
        """The ``salloc`` command that asks for the nodes (it returns once they are granted)."""
        argv = ["salloc", "--no-shell", "--no-kill", "--exclusive", f"--job-name={job_name}"]
        argv.append(f"--partition={self.partition}")
        if self.nodes is not None:
            argv.append(f"--nodes={self.nodes}")
        elif self.nodelist is None:
            argv.append("--nodes=1")
        optional = [
            ("--nodelist", self.nodelist),
            ("--constraint", self.constraint),
            ("--gres", self.gres),
            ("--account", self.account),
            ("--time", self.time),
            ("--reservation", self.reservation),
        ]
        argv += [f"{option}={value}" for option, value in optional if value is not None]
        if self.exclude:
            argv.append("--exclude=" + ",".join(self.exclude))
        return tuple(argv)


@dataclass(frozen=True)
class JobStatus:
    """One ``squeue`` line of the job: state, reason, nodes (a host list) and time left (seconds, None: unlimited)."""

    state: str
    reason: str
    nodelist: str
    time_left_s: float | None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


SQUEUE_FORMAT = "%T|%r|%N|%L"


def parse_time_left(text: str) -> float | None:
    """squeue's ``%L`` (time left): ``[days-]hours:minutes:seconds`` or ``minutes:seconds``; None when unlimited.

    squeue prints ``UNLIMITED`` for no limit and ``NOT_SET``/``INVALID`` when there is none yet.
    """
    text = text.strip()
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        if not head.isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return float(days * 86400 + seconds)


def parse_job_status(line: str) -> JobStatus | None:
    """A :data:`SQUEUE_FORMAT` line, or None for an empty or malformed one."""
    fields = line.strip().split("|")
    if len(fields) != 4 or not fields[0]:
        return None
    state, reason, nodelist, left = fields
    return JobStatus(state, reason, nodelist if nodelist != "(null)" else "", parse_time_left(left))


@dataclass
class SlurmAllocation:
    """The run's job on the cluster. :meth:`allocate`, use :attr:`nodes`, then :meth:`release`."""

    login: Host
    request: SlurmRequest
    job_name: str
    job_id: str | None = None
    nodes: list[str] = field(default_factory=list)
    #: How often the job's state is polled while pending.
    poll_s: float = 2.0

    # -- asking ------------------------------------------------------------------------------------
    def allocate(self, say: Callable[[str], None]) -> list[str]:
        """Ask for the nodes and wait until they are granted; return their names.

        ``say`` gets a line for every change of the pending job's state or reason. Raises
        :class:`~workload.errors.UsageError` when the scheduler refuses the request (its own
        message, e.g. an unknown partition), :class:`~workload.errors.ConnectError` when the
        controller cannot be reached. A KeyboardInterrupt while waiting cancels the request.
        """
        box: dict[str, CommandResult | BaseException] = {}
        seen = threading.Event()

        def sink(_stream: str, line: str) -> None:
            match = _JOB_ID.search(line)
            if match and self.job_id is None:
                self.job_id = match.group(1)
                seen.set()

        def ask() -> None:
            try:
                salloc = cmd(*self.request.salloc_argv(self.job_name), timeout=ALLOCATION_WAIT_S)
                box["result"] = self.login.run(salloc, on_line=sink)
            except BaseException as exc:  # handed to the waiting thread
                box["result"] = exc

        worker = threading.Thread(target=ask, name="salloc", daemon=True)
        worker.start()
        shown = ""
        try:
            while worker.is_alive():
                worker.join(self.poll_s)
                if worker.is_alive() and self.job_id is not None:
                    status = self.status()
                    line = f"{status.state} ({status.reason})" if status else ""
                    if status and line != shown:
                        shown = line
                        say(f"slurm job {self.job_id} {self.job_name}: {line}")
        except KeyboardInterrupt:
            self.release()
            self.login.interrupt()
            raise
        result = box.get("result")
        if isinstance(result, BaseException):
            raise result
        assert result is not None
        if not result.ok:
            self.release()
            raise self._refused(result)
        status = self.status()
        if status is None or status.state != "RUNNING" or not status.nodelist:
            self.release()
            why = f"{status.state} ({status.reason})" if status else "no longer in squeue"
            raise ConnectError(self.login.name, f"slurm job {self.job_id}: granted but then {why}")
        self.nodes = self.expand(status.nodelist)
        say(f"slurm job {self.job_id} {self.job_name}: RUNNING on {len(self.nodes)} node(s): {status.nodelist}")
        return self.nodes

    def _refused(self, result: CommandResult) -> Exception:
        message = " ".join(line.removeprefix("salloc: ") for line in result.stderr.strip().splitlines()[-3:])
        message = message or f"salloc exited {result.returncode}"
        if "Unable to contact slurm controller" in message or result.returncode == 127:
            return ConnectError(
                self.login.name,
                f"the Slurm controller cannot be reached from here: {message}",
                hint="run from a login node of the cluster (--host ssh://user@login-node), where sinfo works",
            )
        return UsageError(
            f"--slurm {self.request.partition}: the scheduler refused the request: {message}",
            hint="see `sinfo -s` for partitions and `scontrol show node` for their features and GRES",
        )

    # -- watching ----------------------------------------------------------------------------------
    def status(self) -> JobStatus | None:
        """The job's squeue line now, or None when squeue no longer lists it."""
        if self.job_id is None:
            return None
        result = self.login.run(cmd("squeue", "-h", "-j", self.job_id, "-o", SQUEUE_FORMAT, timeout=60))
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        return parse_job_status(lines[0]) if result.ok and lines else None

    def time_left_s(self) -> float | None:
        """Seconds before the job's time limit ends it (None: no limit, or unknown)."""
        status = self.status()
        return status.time_left_s if status is not None else None

    def expand(self, nodelist: str) -> list[str]:
        """Node names of a Slurm host list, expanded by Slurm itself (``scontrol show hostnames``)."""
        result = self.login.run(cmd("scontrol", "show", "hostnames", nodelist, timeout=60))
        names = [n.strip() for n in result.stdout.splitlines() if n.strip()]
        if not result.ok or not names:
            raise ConnectError(self.login.name, f"scontrol show hostnames {nodelist} failed: {result.stderr.strip()}")
        return names

    def node_state(self, node: str) -> tuple[str, str]:
        """``sinfo``'s state and reason of one node (``("down*", "Not responding")``); ("", "") if unknown."""
        result = self.login.run(cmd("sinfo", "-h", "-N", "-n", node, "-o", "%t|%E", timeout=60))
        state, _, reason = (result.stdout.strip().splitlines() or [""])[0].partition("|")
        return state.strip(), reason.strip() if reason.strip() != "none" else ""

    def cancel_step(self, step_name: str) -> None:
        """Cancel the job's step named ``step_name`` (``squeue -s``, then ``scancel JOB.STEP``); quiet."""
        if self.job_id is None:
            return
        try:
            steps = self.login.run(cmd("squeue", "-h", "-s", "-j", self.job_id, "-o", "%i|%j", timeout=60))
            for line in steps.stdout.splitlines():
                step_id, _, name = line.strip().partition("|")
                if name == step_name and step_id.startswith(f"{self.job_id}."):
                    self.login.run(cmd("scancel", step_id, timeout=60))
        except (ConnectError, Interrupted):
            return

    # -- giving back -------------------------------------------------------------------------------
    def release(self, wait_s: float = 30.0) -> None:
        """Cancel the job (by id, or by name while its id is not known yet) and wait until it is gone.

        Safe to call more than once; never raises (a run's end must not fail for it). After it,
        no step of the job runs: scancel ends every step of the job on every node.
        """
        try:
            if self.job_id is not None:
                self.login.run(cmd("scancel", self.job_id, timeout=60))
            else:
                self.login.run(cmd("scancel", f"--name={self.job_name}", "--me", timeout=60))
            deadline = time.monotonic() + wait_s
            while self.job_id is not None and time.monotonic() < deadline:
                status = self.status()
                if status is None or status.state not in ACTIVE_STATES:
                    return
                time.sleep(0.5)
        except (ConnectError, Interrupted):
            return
