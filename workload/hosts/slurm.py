"""``SlurmHost``: one node of a Slurm allocation, where every command runs as a job step.

A run with ``--slurm PARTITION`` gets one allocation (:mod:`workload.hosts.slurm_alloc`); each of
its nodes is a host of the run. A command on the node is a job step of that allocation, started
on the *login host* (local, or an SSH connection to a login node)::

    srun --jobid=J --nodes=1 --ntasks=1 --nodelist=NODE --overlap --quiet --kill-on-bad-exit=1 \
         --chdir=/ -- /bin/sh -c LINE

``--overlap`` lets a node run several steps at once (the benchmark and its telemetry sampler);
``--chdir=/`` because the login node's working directory need not exist on the node. srun
forwards stdin (files are written through it), output and the exit status; killing srun (the
login host's :meth:`~workload.hosts.base.Host.interrupt`, at Ctrl-C) makes it signal the step's
tasks, and the run's end cancels the whole job anyway (:meth:`SlurmAllocation.release`).

A node that fails mid-run (set DOWN or drained by the admin or by slurmctld, or gone from the
job): its next or running step fails, and the host raises :class:`NodeLost` (a
:class:`~workload.errors.ConnectError` naming the node, its state and reason), so that node's
outcome says what happened while the other nodes go on (the allocation is ``--no-kill``).

Dependencies are the cluster admins' business: :attr:`SlurmHost.allows_changes` is False unless
the user allows changes (``--slurm-allow-changes``), and the engine then runs installers verify-only.
"""

from __future__ import annotations

import shlex
import uuid
from typing import Any

from workload.commands import cmd
from workload.errors import ConnectError
from workload.hosts.base import ConnectionLost, Host, OutputCollector, joined_stdin
from workload.hosts.guard import DETACHED, guarded_argv
from workload.hosts.shellfiles import FilesThroughCommands
from workload.hosts.slurm_alloc import SlurmAllocation

#: srun's own error lines that mean the step could not run on the node (not the command's failure).
NODE_TROUBLE = (
    "Node failure",
    "Unable to create step",
    "Job step aborted",
    "launch failed",
    "Unable to confirm allocation",
    "Nodes required for job are DOWN",
    "is not part of job",
    "Task launch for StepId",
)
#: sinfo state words of a node that cannot run work (a trailing ``*`` means "not responding").
BAD_NODE_STATES = ("down", "drain", "drng", "fail", "failg", "maint", "boot", "unk", "npc", "inval")


class NodeLost(ConnectError):
    """The node left the run: DOWN, drained, failed, or no longer part of the job."""


class SlurmHost(FilesThroughCommands):
    """One node of ``allocation``; commands run as job steps through ``login`` (its own connection)."""

    def __init__(self, node: str, allocation: SlurmAllocation, login: Host, *, allows_changes: bool = False) -> None:
        self.name = node
        self.node = node
        self.allocation = allocation
        self.login = login
        #: Whether steps may change the node (install packages); False: verify-only.
        self.allows_changes = allows_changes
        #: Extra srun options of every step of this object (e.g. pyxis's ``--container-image``).
        self.step_options: tuple[str, ...] = ()

    @property
    def scheduler_login(self) -> Host:
        return self.login

    def launch_argv(self, shell_line: str) -> list[str]:
        return self.srun_argv(shell_line, step_name=f"workload-{uuid.uuid4().hex[:12]}")

    def sampling_copy(self) -> Host | None:
        """Samples are job steps of the same allocation, through a login connection of their own."""
        login = self.login.sampling_copy()
        return None if login is None else SlurmHost(self.node, self.allocation, login)

    def with_step_options(self, *options: str) -> SlurmHost:
        """The same node, with ``options`` added to every job step (through the same login connection)."""
        view = SlurmHost(self.node, self.allocation, self.login, allows_changes=self.allows_changes)
        view.step_options = self.step_options + options
        return view

    # -- a raw channel to the node (the Docker API's dial-stdio), through the login's connection ----
    @property
    def can_open_channels(self) -> bool:  # type: ignore[override]  # a class-wide flag elsewhere; the login's here
        """A node opens channels where its login host does: the channel runs a job step on the node."""
        return self.login.can_open_channels

    def exec_channel(self, shell_line: str, *, timeout: float | None = None) -> Any:
        """A raw channel running ``shell_line`` on the node: the login's channel of the job step that runs it.

        srun passes the step's stdin and stdout through untouched (no ``--pty``, so bytes are not
        rewritten by a terminal), which is all ``docker system dial-stdio`` needs; its stderr
        carries srun's own messages and the command's. ``--unbuffered``: without it slurmstepd
        forwards the task's output a line at a time, and a reply that does not end in a newline
        (``/_ping``'s ``OK``, an exec stream's frames) would wait for the step's end (measured with
        Slurm 22.05 in tests/test_slurm_mlperf.py). The step ends when the channel closes (srun
        loses its stdin and the login's sshd ends srun) or when the job ends.
        """
        step = f"workload-{uuid.uuid4().hex[:12]}"
        argv = self.srun_argv(shell_line, step_name=step)
        argv.insert(argv.index("--"), "--unbuffered")
        try:
            return self.login.exec_channel(shlex.join(argv), timeout=timeout)
        finally:
            self.connection_generation = self.login.connection_generation

    # -- the job step ------------------------------------------------------------------------------
    def srun_argv(self, shell_line: str, *, step_name: str = "workload") -> list[str]:
        """The srun command that runs ``shell_line`` on this node, inside the run's allocation."""
        return [
            "srun",
            f"--jobid={self.allocation.job_id}",
            f"--job-name={step_name}",
            "--nodes=1",
            "--ntasks=1",
            f"--nodelist={self.node}",
            "--overlap",
            "--quiet",
            "--kill-on-bad-exit=1",
            "--chdir=/",
            *self.step_options,
            "--",
            "/bin/sh",
            "-c",
            shell_line,
        ]

    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        return self._step(shell_line, None, stdin=stdin, timeout=timeout, stdout=stdout, stderr=stderr)

    def _execute_guarded(
        self,
        argv: list[str],
        stop_argv: list[str],
        *,
        sudo: bool,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        """The guard runs on the login host, around srun; its stop is a job step of its own on the node.

        srun answers the login watchdog's SIGTERM by SIGKILLing its step's tasks (``forcing job
        termination``), so a trap inside the step may never run. The stop is started in a session
        of its own (:data:`~workload.hosts.guard.DETACHED`): the watchdog KILLs the guard's group
        5 s after its TERM, and a job step may take longer to start on a busy cluster. It uses
        ``sudo -n`` where sudo is needed: nobody could type a password into it.
        """
        line, prefix = self.wrap(cmd(*argv, sudo=sudo, timeout=timeout))
        stop = shlex.join((["sudo", "-n", "--"] if sudo and not self.is_root else []) + stop_argv)
        trap = shlex.join(["sh", "-c", DETACHED, "workload-stop", shlex.join(self.launch_argv(stop))])
        return self._step(line, trap, stdin=joined_stdin(prefix, stdin), timeout=timeout, stdout=stdout, stderr=stderr)

    def _step(
        self,
        shell_line: str,
        trap_line: str | None,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        """Run ``shell_line`` as a job step (its srun under the guard with ``trap_line`` when given)."""
        step_name = f"workload-{uuid.uuid4().hex[:12]}"
        argv = self.srun_argv(shell_line, step_name=step_name)
        try:
            code, timed_out = self.login._execute(
                shlex.join(argv if trap_line is None else guarded_argv(trap_line, argv)),
                stdin=stdin,
                timeout=timeout,
                stdout=stdout,
                stderr=stderr,
            )
        except ConnectionLost as lost:
            problem = f"the login host {self.login.name}: {lost.problem}"
            raise ConnectionLost(self.name, problem, hint=lost.hint) from lost
        finally:
            self.connection_generation = self.login.connection_generation  # the telemetry waits for it
        if timed_out:
            # srun was killed at the timeout (SIGKILL: it could not pass anything on): end the step itself.
            self.allocation.cancel_step(step_name)
        elif code != 0:
            self._raise_if_node_lost(stderr.text())
        return code, timed_out

    def _raise_if_node_lost(self, stderr: str) -> None:
        """After a failed step: raise :class:`NodeLost` when the node (not the command) is the reason.

        Only when srun itself reported an error: its lines (``Node failure on NODE``, ``Unable to
        create step``...) or then sinfo's state of the node (down, drained, failing, not responding ``*``).
        """
        srun_said = [line for line in stderr.splitlines() if line.startswith(("srun: error:", "srun: Job step"))]
        if not srun_said:
            return  # srun itself had nothing to say: the command failed, not the node (no extra round trip)
        trouble = [line for line in srun_said if any(mark in line for mark in NODE_TROUBLE)]
        state, reason = self.allocation.node_state(self.node)
        bad_state = state.rstrip("*~#!%$@^-").lower() in BAD_NODE_STATES or state.endswith("*")
        if not trouble and not bad_state:
            return
        job = f"slurm job {self.allocation.job_id}"
        status = self.allocation.status()
        if status is None or not status.active:
            ended = f" ({status.state}: {status.reason})" if status else ""
            raise NodeLost(self.name, f"{job} has ended{ended}", hint="a longer --time may be needed")
        said = trouble[0].removeprefix("srun: error: ") if trouble else f"a step failed on {self.node}"
        shown = f"; sinfo: {state.upper()}" + (f" ({reason})" if reason else "") if state else ""
        raise NodeLost(
            self.name,
            f"node {self.node} failed in {job}: {said}{shown}",
            hint="the other nodes went on; `sinfo -R` on the login node says why, "
            "and --only-failed RUN_FOLDER runs this node's work again",
        )

    def connect(self, *, attempts: int | None = None) -> None:
        self.login.connect(attempts=attempts)

    def close(self) -> None:
        self.login.close()

    @property
    def is_connected(self) -> bool:
        """The node is reached through the login host's connection."""
        return self.login.is_connected

    def interrupt(self, *, grace_s: float = 2.0) -> None:
        """Kill this node's running srun commands (srun then signals the step's tasks on the node)."""
        self.login.interrupt(grace_s=grace_s)

    def time_left_s(self) -> float | None:
        """Seconds before the allocation's time limit ends every step (None: no limit)."""
        return self.allocation.time_left_s()
